//! The memory actor's backing on a card GSP-RM runs: allocations from our
//! own tables ([`SharedCardMemory`]), video memory placed above the BAR1
//! window unless the CPU must write it, pinned host memory from the
//! transport's mappings, and CPU access to video memory only inside the
//! window (the CPU has no other way in; what lies above is reached by the
//! copy engine, as CUDA runtimes stage it).

use crate::bare_memory::{BareMemoryError, Piece, Placement};
use crate::card_memory::SharedCardMemory;
use crate::error::MemoryError;
use crate::pinned_pool::{PinnedBuffer, PinnedPool};
use macuda_gsp::bare::OverActor;
use macuda_gsp::CpuView;
use macuda_pci::{DmaRegion, PciHandle};
use std::collections::BTreeMap;

/// Pinned host memory as handed out: its GPU address and size, the CPU's
/// view where the transport shares it with this process, and the first
/// of its mappings.
pub(crate) struct CardPinned {
    pub va: u64,
    pub bytes: u64,
    pub view: Option<CpuView>,
    pub dma: Option<DmaRegion>,
}

pub(crate) struct CardBacking {
    card: SharedCardMemory,
    pci: PciHandle,
    pool: PinnedPool,
    /// Live pinned buffers, by GPU address.
    pinned: BTreeMap<u64, PinnedBuffer>,
}

impl CardBacking {
    pub(crate) fn new(card: SharedCardMemory, pci: PciHandle) -> CardBacking {
        CardBacking {
            card,
            pci,
            pool: PinnedPool::default(),
            pinned: BTreeMap::new(),
        }
    }

    /// What the allocators can hand out in all.
    pub(crate) fn allocatable(&self) -> u64 {
        self.card.lock().vram_capacity()
    }

    /// What is handed out now, tables and channels included.
    pub(crate) fn handed_out(&self) -> u64 {
        self.card.lock().vram_handed_out()
    }

    /// Video memory mapped at fresh VA, where `placement` allows.
    pub(crate) fn alloc(&mut self, bytes: u64, placement: Placement) -> Result<Piece, MemoryError> {
        let mut card = self.card.lock();
        match placement {
            Placement::CpuVisible => card.alloc_visible(bytes),
            Placement::Anywhere => card.alloc(bytes),
        }
        .map_err(MemoryError::from)
    }

    pub(crate) fn free(&mut self, va: u64) -> Result<u64, MemoryError> {
        self.card.lock().free(va).map_err(MemoryError::from)
    }

    /// Pinned host memory mapped for the GPU; the CPU's view of it where
    /// it lies in one mapping the transport shares with this process.
    pub(crate) fn alloc_host(&mut self, bytes: u64) -> Result<CardPinned, MemoryError> {
        let buffer = self
            .card
            .lock()
            .alloc_pinned(&mut self.pool, &mut OverActor(&self.pci), bytes)
            .map_err(MemoryError::from)?;
        let view = match buffer.mappings.as_slice() {
            [one] => self
                .pci
                .dma_view(one.region.id)
                .map_err(MemoryError::Pci)?
                .map(CpuView::of_shared_dma),
            _ => None,
        };
        let host = CardPinned {
            va: buffer.va,
            bytes: buffer.bytes,
            view,
            dma: buffer.mappings.first().map(|m| m.region.clone()),
        };
        self.pinned.insert(buffer.va, buffer);
        Ok(host)
    }

    /// Unmap a pinned buffer; its bytes. The host memory stays with the
    /// transport, whose protocol has no way to give it back.
    pub(crate) fn free_host(&mut self, va: u64) -> Result<u64, MemoryError> {
        let buffer = self
            .pinned
            .get(&va)
            .ok_or(MemoryError::NotAllocated { va, len: 0 })?;
        self.card
            .lock()
            .free_pinned(buffer)
            .map_err(MemoryError::from)?;
        let bytes = buffer.bytes;
        self.pinned.remove(&va);
        Ok(bytes)
    }

    /// Write pinned host memory at GPU address `va` through the
    /// transport (where this process has no view of it: TinyGPU over
    /// TCP), mapping by mapping.
    pub(crate) fn write_pinned(&self, base: u64, va: u64, data: &[u8]) -> Result<(), MemoryError> {
        let buffer = self
            .pinned
            .get(&base)
            .ok_or(MemoryError::NotAllocated { va, len: 0 })?;
        let mut done = 0;
        while done < data.len() {
            let at = va - base + done as u64;
            let (mapping, offset) = buffer.locate(at).ok_or(MemoryError::NotAllocated {
                va: va + done as u64,
                len: (data.len() - done) as u64,
            })?;
            // CAST: what is left of one mapping, bounded by the data.
            let n = ((mapping.bytes - offset) as usize).min(data.len() - done);
            self.pci
                .dma_write(mapping.region.id, offset, data[done..done + n].to_vec())
                .map_err(MemoryError::Pci)?;
            done += n;
        }
        Ok(())
    }

    /// Read pinned host memory as [`CardBacking::write_pinned`] writes it.
    pub(crate) fn read_pinned(&self, base: u64, va: u64, len: u64) -> Result<Vec<u8>, MemoryError> {
        let buffer = self
            .pinned
            .get(&base)
            .ok_or(MemoryError::NotAllocated { va, len })?;
        let mut out = Vec::new();
        while (out.len() as u64) < len {
            let at = va - base + out.len() as u64;
            let (mapping, offset) = buffer.locate(at).ok_or(MemoryError::NotAllocated {
                va: va + out.len() as u64,
                len: len - out.len() as u64,
            })?;
            let n = (mapping.bytes - offset).min(len - out.len() as u64);
            out.extend(
                self.pci
                    .dma_read(mapping.region.id, offset, n)
                    .map_err(MemoryError::Pci)?,
            );
        }
        Ok(out)
    }

    /// `len` bytes of video memory at `phys` (the piece at `va`), if the
    /// CPU reaches them.
    pub(crate) fn read(&self, va: u64, phys: u64, len: u64) -> Result<Vec<u8>, MemoryError> {
        self.reachable(va, phys, len)?;
        self.pci.vram_read(phys, len).map_err(MemoryError::Pci)
    }

    pub(crate) fn write(&self, va: u64, phys: u64, data: Vec<u8>) -> Result<(), MemoryError> {
        self.reachable(va, phys, data.len() as u64)?;
        self.pci.vram_write(phys, data).map_err(MemoryError::Pci)
    }

    fn reachable(&self, va: u64, phys: u64, len: u64) -> Result<(), MemoryError> {
        if self.card.cpu_reaches(phys, len) {
            Ok(())
        } else {
            Err(MemoryError::NotCpuVisible { va, len })
        }
    }
}

impl From<BareMemoryError> for MemoryError {
    fn from(e: BareMemoryError) -> MemoryError {
        MemoryError::Card(Box::new(e))
    }
}
