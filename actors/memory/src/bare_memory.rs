//! The card's memory on bare metal, where nobody but us keeps it: video
//! memory from the segregated-fit allocator, GPU virtual addresses from
//! the TLSF allocator, both mapped in our MMU v3 tables, and the TLB
//! flushed after every map and unmap before the call returns. It is also
//! the memory the golden context is placed in ([`ContextMemory`]).
//!
//! Small-BAR placement: the CPU reaches video memory only through the
//! BAR1 window (256 MiB on a GB202), so the window is kept for what the
//! CPU must touch. Our tables' pool lies at its bottom, the rest of it is
//! an allocator of its own that only [`Placement::CpuVisible`] requests
//! take from first, and everything else is placed above the window, in
//! the window only once the card above it is full.

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

/// Where each part lies: the tables' pool, the video memory the CPU can
/// reach (inside the BAR1 window) and the rest (all physical), and the
/// VAs handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BareLayout {
    pub table_pool: Range<u64>,
    pub cpu_visible: Range<u64>,
    pub vram: Range<u64>,
    pub va: Range<u64>,
}

/// Where an allocation's video memory may lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Inside the BAR1 window: the CPU writes it (rings, USERD, push
    /// buffers, staging pages).
    CpuVisible,
    /// Above the window while there is room, else in it.
    Anywhere,
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
    /// Video memory inside the BAR1 window, and above it.
    window: SegregatedFitAllocator,
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
        let vram = |r: &Range<u64>| {
            SegregatedFitAllocator::new(r.start, span(r), page::SMALL)
                .map_err(BareMemoryError::Vram)
        };
        Ok(BareMemory {
            tables: PageTables::new(memory, layout.table_pool)?,
            bar0,
            window: vram(&layout.cpu_visible)?,
            vram: vram(&layout.vram)?,
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

    /// Video memory the allocators manage, in the window and above it.
    pub fn vram_capacity(&self) -> u64 {
        self.window.capacity() + self.vram.capacity()
    }

    /// Video memory handed out, mapped or not.
    pub fn vram_handed_out(&self) -> u64 {
        self.vram_capacity()
            - self.window.free_space().free_bytes
            - self.vram.free_space().free_bytes
    }

    /// Video memory of `size` bytes aligned to `align`, where `placement`
    /// allows.
    fn take_vram(
        &mut self,
        size: u64,
        align: u64,
        placement: Placement,
    ) -> Result<u64, BareMemoryError> {
        match placement {
            Placement::CpuVisible => self.window.alloc(size, align),
            Placement::Anywhere => match self.vram.alloc(size, align) {
                Err(AllocError::OutOfSpace { .. }) => self.window.alloc(size, align),
                r => r,
            },
        }
        .map_err(BareMemoryError::Vram)
    }

    fn give_back_vram(&mut self, phys: u64) -> Result<u64, BareMemoryError> {
        let w = &self.window;
        let in_window = phys >= w.base() && phys - w.base() < w.capacity();
        if in_window {
            self.window.free(phys)
        } else {
            self.vram.free(phys)
        }
        .map_err(BareMemoryError::Vram)
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

    /// `bytes` of video memory mapped at fresh VA, flushed, placed above
    /// the BAR1 window while there is room. Nothing is kept when any step
    /// fails.
    ///
    /// # Errors
    /// No room in video memory, VA or the tables' pool; a flush failure.
    pub fn alloc(&mut self, bytes: u64) -> Result<Piece, BareMemoryError> {
        self.alloc_placed(bytes, Placement::Anywhere)
    }

    /// As [`BareMemory::alloc`], inside the BAR1 window: memory the CPU
    /// writes.
    ///
    /// # Errors
    /// As [`BareMemory::alloc`]; no room left in the window.
    pub fn alloc_visible(&mut self, bytes: u64) -> Result<Piece, BareMemoryError> {
        self.alloc_placed(bytes, Placement::CpuVisible)
    }

    fn alloc_placed(&mut self, bytes: u64, placement: Placement) -> Result<Piece, BareMemoryError> {
        let page = Self::page_for(bytes);
        let size = bytes.max(1).next_multiple_of(page.bytes());
        let phys = self.take_vram(size, page.bytes(), placement)?;
        let va = match self.va.alloc(size, page.bytes()) {
            Ok(va) => va,
            Err(e) => {
                let _ = self.give_back_vram(phys);
                return Err(BareMemoryError::Va(e));
            }
        };
        if let Err(e) = self.map_pages(va, phys, size, page) {
            let _ = self.give_back_vram(phys);
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
        self.give_back_vram(piece.phys)?;
        self.va.free(va).map_err(BareMemoryError::Va)?;
        Ok(piece.bytes)
    }

    /// Video memory placed as asked and left unmapped (a channel's USERD,
    /// which the CPU writes and only the host engine reads by address).
    ///
    /// # Errors
    /// No room where `placement` allows.
    pub fn video_placed(
        &mut self,
        bytes: u64,
        align: u64,
        placement: Placement,
    ) -> Result<u64, BareMemoryError> {
        let phys = self.take_vram(bytes, align, placement)?;
        self.unmapped_bytes += bytes;
        Ok(phys)
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
        self.video_placed(bytes, align, Placement::Anywhere)
            .map_err(|e| e.to_string())
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
                cpu_visible: 6 * MIB..8 * MIB,
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
        // The window's 2 MiB still take what fits once the rest is full.
        assert_eq!(m.alloc(MIB).unwrap().phys, 6 * MIB);
        assert!(m.alloc(2 * MIB).unwrap_err().is_full());
    }

    #[test]
    fn cpu_visible_memory_comes_from_the_window_and_the_rest_from_above_it() {
        let mut m = memory(GIB);
        let ring = m.alloc_visible(page::SMALL).unwrap();
        assert!((6 * MIB..8 * MIB).contains(&ring.phys));
        let big = m.alloc(16 * MIB).unwrap();
        assert!(big.phys >= 8 * MIB);
        // The window is kept: 2 MiB of it, and no more.
        assert!(m.alloc_visible(2 * MIB).unwrap_err().is_full());
        m.free(ring.va).unwrap();
        m.free(big.va).unwrap();
        assert_eq!(m.vram_handed_out(), 0);
        assert_eq!(m.alloc_visible(2 * MIB).unwrap().phys, 6 * MIB);
    }
}
