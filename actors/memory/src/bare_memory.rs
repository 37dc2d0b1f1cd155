//! The card's memory on bare metal, where nobody but us keeps it: video
//! memory from the segregated-fit allocator, GPU virtual addresses from
//! the TLSF allocator, both mapped in our MMU v3 tables (which live in
//! low video memory the CPU writes through the BAR1 window), and the TLB
//! flushed after every map and unmap before the call returns. It is also
//! the memory the golden context is placed in ([`ContextMemory`]).

use crate::allocation::AllocError;
use crate::page_mapping::{Aperture, PageFlags, PageSize, PageTableError};
use crate::page_tables::PageTables;
use crate::table_memory::TableMemory;
use crate::tlb_flush::{flush_tlb, Bar0, FlushLimit, TlbFlushError};
use crate::va_tlsf::TlsfAllocator;
use crate::vram_segregated::SegregatedFitAllocator;
use macuda_gsp::bare::golden::ContextMemory;
use macuda_hw::page;
use std::collections::BTreeMap;
use std::ops::Range;

/// Where each part lies: the tables' pool and the video memory handed
/// out (both physical), and the VAs handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BareLayout {
    pub table_pool: Range<u64>,
    pub vram: Range<u64>,
    pub va: Range<u64>,
}

/// One allocation: video memory mapped at a VA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub va: u64,
    pub phys: u64,
    /// What was mapped: the request rounded up to `page`.
    pub bytes: u64,
    pub page: PageSize,
}

/// Why the card's memory refused.
#[derive(Debug, thiserror::Error)]
pub enum BareMemoryError {
    #[error("video memory: {0}")]
    Vram(AllocError),
    #[error("GPU virtual addresses: {0}")]
    Va(AllocError),
    #[error("the page tables: {0}")]
    Tables(#[from] PageTableError),
    #[error("the TLB flush: {0}")]
    Flush(#[from] TlbFlushError),
    #[error("no allocation at {va:#x}")]
    NotAllocated { va: u64 },
    #[error("host memory for the GPU: {0}")]
    Dma(macuda_pci::PciError),
    #[error("a host mapping of {bytes} bytes gave no page the card can reach")]
    Unreachable { bytes: u64 },
}

impl BareMemoryError {
    /// Whether the card is full (as opposed to broken).
    pub fn is_full(&self) -> bool {
        matches!(
            self,
            BareMemoryError::Vram(AllocError::OutOfSpace { .. })
                | BareMemoryError::Va(AllocError::OutOfSpace { .. })
        )
    }
}

/// Our memory on one card: the tables, the register file the flush goes
/// through, the two allocators, and what is live.
pub struct BareMemory<M: TableMemory, B: Bar0> {
    tables: PageTables<M>,
    bar0: B,
    vram: SegregatedFitAllocator,
    va: TlsfAllocator,
    live: BTreeMap<u64, Piece>,
    /// Video memory taken unmapped (context buffers, instance blocks).
    unmapped_bytes: u64,
    limit: FlushLimit,
}

impl<M: TableMemory, B: Bar0> BareMemory<M, B> {
    /// Empty tables in `layout.table_pool` (the root written), and the
    /// allocators over `layout.vram` and `layout.va`.
    ///
    /// # Errors
    /// A range that is not whole pages, or the root not written.
    pub fn new(memory: M, bar0: B, layout: BareLayout) -> Result<Self, BareMemoryError> {
        let span = |r: &Range<u64>| r.end.saturating_sub(r.start);
        Ok(BareMemory {
            tables: PageTables::new(memory, layout.table_pool)?,
            bar0,
            vram: SegregatedFitAllocator::new(layout.vram.start, span(&layout.vram), page::SMALL)
                .map_err(BareMemoryError::Vram)?,
            va: TlsfAllocator::new(layout.va.start, span(&layout.va), page::SMALL)
                .map_err(BareMemoryError::Va)?,
            live: BTreeMap::new(),
            unmapped_bytes: 0,
            limit: FlushLimit::default(),
        })
    }

    /// The root of the tables: what GSP-RM is told, and what the flush
    /// names.
    pub fn root(&self) -> u64 {
        self.tables.pdb().address
    }

    /// The tables, for checks.
    pub fn tables(&self) -> &PageTables<M> {
        &self.tables
    }

    /// Video memory the allocator manages.
    pub fn vram_capacity(&self) -> u64 {
        self.vram.capacity()
    }

    /// Video memory handed out, mapped or not.
    pub fn vram_handed_out(&self) -> u64 {
        self.vram.capacity() - self.vram.free_space().free_bytes
    }

    /// Video memory mapped for callers (not counting what was taken
    /// unmapped).
    pub fn mapped_bytes(&self) -> u64 {
        self.live.values().map(|p| p.bytes).sum()
    }

    /// The page an allocation of `bytes` is mapped with: huge pages from
    /// one huge page up, so the tables stay small.
    pub fn page_for(bytes: u64) -> PageSize {
        if bytes >= page::HUGE {
            PageSize::Huge
        } else {
            PageSize::Small
        }
    }

    /// `bytes` of video memory mapped at fresh VA, flushed. Nothing is
    /// kept when any step fails.
    ///
    /// # Errors
    /// No room in video memory, VA or the tables' pool; a flush failure.
    pub fn alloc(&mut self, bytes: u64) -> Result<Piece, BareMemoryError> {
        let page = Self::page_for(bytes);
        let size = bytes.max(1).next_multiple_of(page.bytes());
        let phys = self
            .vram
            .alloc(size, page.bytes())
            .map_err(BareMemoryError::Vram)?;
        let va = match self.va.alloc(size, page.bytes()) {
            Ok(va) => va,
            Err(e) => {
                let _ = self.vram.free(phys);
                return Err(BareMemoryError::Va(e));
            }
        };
        if let Err(e) = self.map_pages(va, phys, size, page) {
            let _ = self.vram.free(phys);
            let _ = self.va.free(va);
            return Err(e);
        }
        let piece = Piece {
            va,
            phys,
            bytes: size,
            page,
        };
        self.live.insert(va, piece);
        Ok(piece)
    }

    /// Unmap and free the allocation at `va`; its size.
    ///
    /// # Errors
    /// Nothing allocated there; the tables or the flush failing (then
    /// the memory stays taken, as the card may still reach it).
    pub fn free(&mut self, va: u64) -> Result<u64, BareMemoryError> {
        let piece = *self
            .live
            .get(&va)
            .ok_or(BareMemoryError::NotAllocated { va })?;
        self.unmap_range(va, piece.bytes)?;
        self.live.remove(&va);
        self.vram.free(piece.phys).map_err(BareMemoryError::Vram)?;
        self.va.free(va).map_err(BareMemoryError::Va)?;
        Ok(piece.bytes)
    }

    /// The live allocation holding `va`, if any.
    pub fn piece_at(&self, va: u64) -> Option<Piece> {
        self.live
            .range(..=va)
            .next_back()
            .map(|(_, p)| *p)
            .filter(|p| va < p.va + p.bytes)
    }

    fn map_pages(
        &mut self,
        va: u64,
        phys: u64,
        size: u64,
        page: PageSize,
    ) -> Result<(), BareMemoryError> {
        self.map_with(va, phys, size, page, Aperture::Video, PageFlags::default())
    }

    /// Map and flush: the one way anything enters the tables.
    pub(crate) fn map_with(
        &mut self,
        va: u64,
        pa: u64,
        size: u64,
        page: PageSize,
        aperture: Aperture,
        flags: PageFlags,
    ) -> Result<(), BareMemoryError> {
        let inv = self.tables.map(va, pa, size, page, aperture, flags)?;
        flush_tlb(&mut self.bar0, &inv, self.limit)?;
        self.tables.invalidated(inv)?;
        Ok(())
    }

    /// Unmap and flush: the one way anything leaves the tables.
    pub(crate) fn unmap_range(&mut self, va: u64, bytes: u64) -> Result<(), BareMemoryError> {
        let inv = self.tables.unmap(va, bytes)?;
        flush_tlb(&mut self.bar0, &inv, self.limit)?;
        self.tables.invalidated(inv)?;
        Ok(())
    }

    /// Fresh VA of `size` bytes (small-page aligned) for a caller that
    /// maps it itself.
    pub(crate) fn take_va(&mut self, size: u64) -> Result<u64, BareMemoryError> {
        self.va
            .alloc(size, page::SMALL)
            .map_err(BareMemoryError::Va)
    }

    pub(crate) fn give_back_va(&mut self, va: u64) {
        let _ = self.va.free(va);
    }

    /// Unmap a pinned buffer and give its VA back (the host memory stays
    /// with the transport).
    ///
    /// # Errors
    /// The tables or the flush.
    pub fn free_pinned(&mut self, buffer: &crate::PinnedBuffer) -> Result<(), BareMemoryError> {
        let mapped: u64 = buffer.mappings.iter().map(|m| m.bytes).sum();
        self.unmap_range(buffer.va, mapped)?;
        self.va.free(buffer.va).map_err(BareMemoryError::Va)?;
        Ok(())
    }
}

impl<M: TableMemory, B: Bar0> ContextMemory for BareMemory<M, B> {
    fn video(&mut self, bytes: u64, align: u64) -> Result<u64, String> {
        let phys = self.vram.alloc(bytes, align).map_err(|e| e.to_string())?;
        self.unmapped_bytes += bytes;
        Ok(phys)
    }

    fn map(&mut self, va: u64, phys: u64, bytes: u64) -> Result<(), String> {
        let size = bytes.next_multiple_of(page::SMALL);
        self.map_pages(va, phys, size, PageSize::Small)
            .map_err(|e| e.to_string())
    }

    fn directories_of(&self, va: u64) -> Vec<u64> {
        self.tables.directories_of(va)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table_memory::TableMemoryError;
    use macuda_pci::PciError;
    use std::collections::HashMap;

    /// Video memory as a sparse map of pages.
    #[derive(Default)]
    struct Sparse(HashMap<u64, Vec<u8>>);

    impl TableMemory for Sparse {
        fn read(&self, address: u64, out: &mut [u8]) -> Result<(), TableMemoryError> {
            for (i, b) in out.iter_mut().enumerate() {
                let a = address + i as u64;
                *b = self
                    .0
                    .get(&(a & !0xFFF))
                    .map_or(0, |p| p[(a & 0xFFF) as usize]);
            }
            Ok(())
        }
        fn write(&mut self, address: u64, data: &[u8]) -> Result<(), TableMemoryError> {
            for (i, b) in data.iter().enumerate() {
                let a = address + i as u64;
                self.0.entry(a & !0xFFF).or_insert_with(|| vec![0; 0x1000])[(a & 0xFFF) as usize] =
                    *b;
            }
            Ok(())
        }
    }

    /// Registers whose invalidate completes at once (reads back 0).
    #[derive(Default)]
    struct Instant(u32);

    impl Bar0 for Instant {
        fn read32(&mut self, _reg: u32) -> Result<u32, PciError> {
            Ok(0)
        }
        fn write32(&mut self, _reg: u32, _value: u32) -> Result<(), PciError> {
            self.0 += 1;
            Ok(())
        }
    }

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn memory(vram: u64) -> BareMemory<Sparse, Instant> {
        BareMemory::new(
            Sparse::default(),
            Instant::default(),
            BareLayout {
                table_pool: 2 * MIB..6 * MIB,
                vram: 8 * MIB..vram,
                va: 4 * GIB..1 << 40,
            },
        )
        .unwrap()
    }

    #[test]
    fn allocations_map_flush_and_free_leaving_nothing_behind() {
        let mut m = memory(GIB);
        let flushes = m.bar0.0;
        let a = m.alloc(3 * MIB).unwrap();
        assert_eq!((a.page, a.bytes), (PageSize::Huge, 4 * MIB));
        assert!(m.bar0.0 > flushes, "a map is flushed");
        let b = m.alloc(100).unwrap();
        assert_eq!((b.page, b.bytes), (PageSize::Small, page::SMALL));
        let looked = m.tables().lookup(a.va + 0x1234).unwrap().unwrap();
        assert_eq!(looked.pa + (a.va + 0x1234 - looked.va), a.phys + 0x1234);
        assert_eq!(m.piece_at(b.va + 5), Some(b));
        assert_eq!(m.mapped_bytes(), 4 * MIB + page::SMALL);
        assert_eq!(m.free(a.va).unwrap(), 4 * MIB);
        assert!(m.tables().lookup(a.va).unwrap().is_none());
        m.free(b.va).unwrap();
        assert_eq!(m.vram_handed_out(), 0);
        assert!(matches!(
            m.free(b.va),
            Err(BareMemoryError::NotAllocated { .. })
        ));
    }

    #[test]
    fn a_full_card_says_so_and_keeps_nothing_of_the_refused_request() {
        let mut m = memory(8 * MIB + 64 * MIB);
        let mut n = 0;
        let err = loop {
            match m.alloc(16 * MIB) {
                Ok(_) => n += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(n, 4);
        assert!(err.is_full(), "{err}");
        assert_eq!(m.vram_handed_out(), 64 * MIB);
    }
}
