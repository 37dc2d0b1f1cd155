//! Pinned host memory for the GPU on bare metal: host memory the card
//! reaches by DMA, mapped at GPU virtual addresses with the system
//! aperture. A platform hands host memory out in mappings of at most
//! [`DMA_MAPPING_MAX_SEGMENTS`] scattered segments (TinyGPU's macOS
//! extension drops the rest silently), so one request is filled from as
//! many mappings as it takes, each kept within that bound: the pool
//! learns the segment size from the first mapping, asks for at most 32
//! segments' worth after that, uses only what a mapping really covers,
//! and halves its request when the platform refuses one. The mappings are
//! laid end to end in one VA range, so the GPU sees one buffer.

use crate::bare_memory::{BareMemory, BareMemoryError};
use crate::page_mapping::{Aperture, PageFlags, PageSize};
use crate::table_memory::TableMemory;
use crate::tlb_flush::Bar0;
use macuda_gsp::bare::CardBus;
use macuda_hw::page;
use macuda_hw::pci::DMA_MAPPING_MAX_SEGMENTS;
use macuda_pci::DmaRegion;

/// What the pool asks for before it knows the platform's segment size.
pub const FIRST_MAPPING_BYTES: u64 = 32 << 20;

/// One platform mapping inside a pinned buffer.
#[derive(Debug, Clone)]
pub struct PinnedMapping {
    pub region: DmaRegion,
    /// Where in the GPU's VA it starts, and how much of it is used.
    pub va: u64,
    pub bytes: u64,
}

/// Pinned host memory mapped for the GPU as one VA range.
#[derive(Debug, Clone)]
pub struct PinnedBuffer {
    pub va: u64,
    pub bytes: u64,
    pub mappings: Vec<PinnedMapping>,
}

impl PinnedBuffer {
    /// The mapping holding byte `offset` of the buffer, and the offset in
    /// it: where the CPU writes that byte (`dma_write`).
    pub fn locate(&self, offset: u64) -> Option<(&PinnedMapping, u64)> {
        let va = self.va.checked_add(offset)?;
        self.mappings
            .iter()
            .find(|m| va >= m.va && va < m.va + m.bytes)
            .map(|m| (m, va - m.va))
    }
}

/// How large a mapping the pool asks the platform for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedPool {
    largest_mapping: u64,
}

impl Default for PinnedPool {
    fn default() -> Self {
        PinnedPool {
            largest_mapping: FIRST_MAPPING_BYTES,
        }
    }
}

impl PinnedPool {
    /// The largest mapping it asks for now.
    pub fn largest_mapping(&self) -> u64 {
        self.largest_mapping
    }

    /// Learn from a mapping the platform gave: at most the bound's worth
    /// of its segments from now on.
    fn learn(&mut self, region: &DmaRegion) {
        let segment = region.segments.iter().map(|s| s.bytes).max().unwrap_or(0);
        // CAST: a small count.
        let bound = (segment * DMA_MAPPING_MAX_SEGMENTS as u64) / page::SMALL * page::SMALL;
        if bound >= page::SMALL {
            self.largest_mapping = bound;
        }
    }
}

/// The part of `region` the card really reaches within the segment
/// bound, at most `want` bytes, as (bus address, bytes) runs of whole
/// pages.
fn usable_runs(region: &DmaRegion, want: u64) -> Vec<(u64, u64)> {
    let mut left = want;
    let mut runs = Vec::new();
    for s in region.segments.iter().take(DMA_MAPPING_MAX_SEGMENTS) {
        let take = s.bytes.min(left) / page::SMALL * page::SMALL;
        if take == 0 || !s.bus_addr.is_multiple_of(page::SMALL) {
            break;
        }
        runs.push((s.bus_addr, take));
        left -= take;
        if take < s.bytes || left == 0 {
            break;
        }
    }
    runs
}

impl<M: TableMemory, B: Bar0> BareMemory<M, B> {
    /// `bytes` of pinned host memory from `bus`, mapped at one fresh VA
    /// range with the coherent system aperture, flushed.
    ///
    /// # Errors
    /// No VA, a platform that refuses even a page or gives nothing the
    /// card can reach, the tables or the flush. What was mapped is
    /// unmapped again; the host memory itself stays with the transport,
    /// which has no way to give it back.
    pub fn alloc_pinned(
        &mut self,
        pool: &mut PinnedPool,
        bus: &mut dyn CardBus,
        bytes: u64,
    ) -> Result<PinnedBuffer, BareMemoryError> {
        let size = bytes.max(1).next_multiple_of(page::SMALL);
        let va = self.take_va(size)?;
        let mut mappings: Vec<PinnedMapping> = Vec::new();
        let mut filled = 0;
        let result = (|| {
            while filled < size {
                let want = (size - filled).min(pool.largest_mapping);
                let region = match bus.alloc_dma(want) {
                    Ok(r) => r,
                    Err(e) if e.is_declined() && want > page::SMALL => {
                        pool.largest_mapping = (want / 2).next_multiple_of(page::SMALL);
                        continue;
                    }
                    Err(e) => return Err(BareMemoryError::Dma(e)),
                };
                pool.learn(&region);
                let runs = usable_runs(&region, want);
                let usable: u64 = runs.iter().map(|(_, b)| b).sum();
                if usable == 0 {
                    return Err(BareMemoryError::Unreachable { bytes: want });
                }
                let at = va + filled;
                let mut run_va = at;
                for (bus_addr, run) in &runs {
                    self.map_system(run_va, *bus_addr, *run)?;
                    run_va += run;
                }
                mappings.push(PinnedMapping {
                    region,
                    va: at,
                    bytes: usable,
                });
                filled += usable;
            }
            Ok(())
        })();
        match result {
            Ok(()) => Ok(PinnedBuffer {
                va,
                bytes: size,
                mappings,
            }),
            Err(e) => {
                if filled > 0 {
                    let _ = self.unmap_range(va, filled);
                }
                self.give_back_va(va);
                Err(e)
            }
        }
    }

    fn map_system(&mut self, va: u64, bus_addr: u64, bytes: u64) -> Result<(), BareMemoryError> {
        self.map_with(
            va,
            bus_addr,
            bytes,
            PageSize::Small,
            Aperture::SystemCoherent,
            PageFlags::default(),
        )
    }
}
