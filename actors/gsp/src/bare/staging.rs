//! Host memory for the boot structures. The card reads everything the
//! boot hands it by DMA from host memory, at bus addresses; a transport's
//! mapping is scattered over the bus in segments, and the TinyGPU
//! transport lists at most 32 of them and keeps its segment table in the
//! mapping's first pages. So the boot asks for bounded mappings, uses only
//! the part the card reaches, never the table's pages, and places each
//! piece on page boundaries inside one segment, where its bus addresses
//! are contiguous. Every mapping is kept, because the firmware reads
//! (and writes) these pieces long after they were staged.

use super::error::{BareError, Context};
use super::CardBus;
use macuda_hw::gsp_boot::radix3::PAGE_BYTES;
use macuda_pci::tinygpu::wire::SEGMENT_TABLE_BYTES;
use macuda_pci::{DmaId, DmaRegion};

/// How the boot uses a transport's mappings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagingLimits {
    /// Bytes asked for in each mapping (more when one piece needs more).
    pub mapping_bytes: u64,
    /// Segments of a mapping the card is trusted to reach; a transport
    /// that lists more than the platform maps is cut to this many.
    pub max_segments: usize,
    /// Bytes at each mapping's start that belong to the transport.
    pub reserved_head: u64,
}

/// macOS's DriverKit extension lists at most this many segments a mapping.
pub const TINYGPU_MAX_SEGMENTS: usize = macuda_hw::pci::DMA_MAPPING_MAX_SEGMENTS;
/// What the boot asks for at once: large enough that the 63.5 MB GSP-RM
/// image takes a handful of mappings, small enough to stay well inside
/// 32 segments of the sim's (and the extension's) segment sizes.
pub const DEFAULT_MAPPING_BYTES: u64 = 16 << 20;

impl StagingLimits {
    /// The TinyGPU transport (and any transport whose mappings start with
    /// a segment table of that size).
    pub const TINYGPU: StagingLimits = StagingLimits {
        mapping_bytes: DEFAULT_MAPPING_BYTES,
        max_segments: TINYGPU_MAX_SEGMENTS,
        reserved_head: SEGMENT_TABLE_BYTES as u64,
    };
}

impl Default for StagingLimits {
    fn default() -> StagingLimits {
        StagingLimits::TINYGPU
    }
}

/// A page-aligned, bus-contiguous piece of a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub mapping: DmaId,
    /// Where the piece starts in its mapping (CPU side).
    pub offset: u64,
    /// Where the card sees it.
    pub bus: u64,
    pub bytes: u64,
}

impl Piece {
    /// The bus address `at` bytes into the piece.
    pub fn bus_at(&self, at: u64) -> u64 {
        self.bus + at
    }
}

/// A bus-contiguous run of a mapping, page-aligned on both sides.
#[derive(Debug, Clone, Copy)]
struct Run {
    offset: u64,
    bus: u64,
    bytes: u64,
}

/// The runs of `region` the boot may use under `limits`.
fn usable_runs(region: &DmaRegion, limits: &StagingLimits) -> Vec<Run> {
    let mut runs = Vec::new();
    let mut offset = 0u64;
    for s in region.segments.iter().take(limits.max_segments) {
        let (start, end) = (offset, offset + s.bytes);
        offset = end;
        let first = start.max(limits.reserved_head).next_multiple_of(PAGE_BYTES);
        let last = end.min(region.bytes) / PAGE_BYTES * PAGE_BYTES;
        if first >= last {
            continue;
        }
        let bus = s.bus_addr + (first - start);
        // A segment whose bus pages do not line up with its CPU pages
        // cannot hold a page-aligned piece.
        if bus % PAGE_BYTES != 0 {
            continue;
        }
        runs.push(Run {
            offset: first,
            bus,
            bytes: last - first,
        });
    }
    runs
}

struct Mapping {
    region: DmaRegion,
    runs: Vec<Run>,
    /// The first byte not yet handed out.
    next: u64,
}

impl Mapping {
    /// The first run past `next` with `bytes` free, as a piece.
    fn take(&mut self, bytes: u64) -> Option<Piece> {
        for r in &self.runs {
            let start = self.next.max(r.offset);
            let end = r.offset + r.bytes;
            if start < end && end - start >= bytes {
                self.next = start + bytes;
                return Some(Piece {
                    mapping: self.region.id,
                    offset: start,
                    bus: r.bus + (start - r.offset),
                    bytes,
                });
            }
        }
        None
    }

    /// Up to `bytes` (whole pages) from the next free run.
    fn take_some(&mut self, bytes: u64) -> Option<Piece> {
        for r in &self.runs {
            let start = self.next.max(r.offset);
            let end = r.offset + r.bytes;
            if start < end {
                let n = bytes.min(end - start);
                self.next = start + n;
                return Some(Piece {
                    mapping: self.region.id,
                    offset: start,
                    bus: r.bus + (start - r.offset),
                    bytes: n,
                });
            }
        }
        None
    }

    fn largest_run(&self) -> u64 {
        self.runs.iter().map(|r| r.bytes).max().unwrap_or(0)
    }
}

/// The boot's host memory: mappings asked of the transport, handed out
/// in pieces.
pub struct HostStaging {
    limits: StagingLimits,
    mappings: Vec<Mapping>,
}

/// Bytes rounded up to whole pages (at least one).
fn pages_for(bytes: u64) -> u64 {
    bytes.max(1).next_multiple_of(PAGE_BYTES)
}

impl HostStaging {
    pub fn new(limits: StagingLimits) -> HostStaging {
        HostStaging {
            limits,
            mappings: Vec::new(),
        }
    }

    /// A fresh mapping of at least `at_least` usable bytes, made current.
    /// A mapping the platform declines (too many segments for it) is
    /// asked again at half the size, down to what the piece needs, and
    /// the smaller size is kept for the mappings after it.
    fn map(
        &mut self,
        bus: &mut dyn CardBus,
        at_least: u64,
        what: &str,
    ) -> Result<&mut Mapping, BareError> {
        let need = at_least + self.limits.reserved_head;
        let mut bytes = self.limits.mapping_bytes.max(need);
        let region = loop {
            match bus.alloc_dma(bytes) {
                Ok(r) => break r,
                Err(e) if e.is_declined() && bytes > need => {
                    bytes = (bytes / 2).next_multiple_of(PAGE_BYTES).max(need);
                    self.limits.mapping_bytes = bytes;
                }
                Err(e) => {
                    return Err(e)
                        .context(|| format!("mapping {bytes} bytes of host memory for {what}"))
                }
            }
        };
        let runs = usable_runs(&region, &self.limits);
        self.mappings.push(Mapping {
            region,
            runs,
            next: 0,
        });
        let last = self.mappings.len() - 1;
        Ok(&mut self.mappings[last])
    }

    /// `bytes` (rounded up to pages) the card reads at contiguous bus
    /// addresses.
    ///
    /// # Errors
    /// The transport's, or [`BareError::NoContiguousRun`] when even a
    /// fresh mapping has no run that long.
    pub fn place(
        &mut self,
        bus: &mut dyn CardBus,
        bytes: u64,
        what: &str,
    ) -> Result<Piece, BareError> {
        let bytes = pages_for(bytes);
        if let Some(p) = self.mappings.last_mut().and_then(|m| m.take(bytes)) {
            return Ok(p);
        }
        let m = self.map(bus, bytes, what)?;
        m.take(bytes).ok_or_else(|| BareError::NoContiguousRun {
            what: what.to_string(),
            bytes,
            largest: m.largest_run(),
        })
    }

    /// A piece holding `data` (the rest of its last page zeroed).
    ///
    /// # Errors
    /// As [`HostStaging::place`], and the transport's on the copy.
    pub fn place_bytes(
        &mut self,
        bus: &mut dyn CardBus,
        data: &[u8],
        what: &str,
    ) -> Result<Piece, BareError> {
        let p = self.place(bus, data.len() as u64, what)?;
        let mut padded = data.to_vec();
        padded.resize(p.bytes as usize, 0);
        bus.dma_write(p.mapping, p.offset, &padded)
            .context(|| format!("writing {what} into host memory"))?;
        Ok(p)
    }

    /// A piece of `bytes` written with zeros, whatever the mapping held.
    ///
    /// # Errors
    /// As [`HostStaging::place_bytes`].
    pub fn place_zeroed(
        &mut self,
        bus: &mut dyn CardBus,
        bytes: u64,
        what: &str,
    ) -> Result<Piece, BareError> {
        let len = usize::try_from(pages_for(bytes)).map_err(|_| BareError::TooLarge {
            what: "a zeroed buffer",
            bytes,
            limit: usize::MAX as u64,
        })?;
        self.place_bytes(bus, &vec![0; len], what)
    }

    /// `pages` pages that need not be contiguous with each other, as runs
    /// of whole pages (each run bus-contiguous), in order.
    ///
    /// # Errors
    /// The transport's, or [`BareError::NoContiguousRun`] when a fresh
    /// mapping offers no page at all.
    pub fn place_pages(
        &mut self,
        bus: &mut dyn CardBus,
        pages: u64,
        what: &str,
    ) -> Result<Vec<Piece>, BareError> {
        let mut left = pages * PAGE_BYTES;
        let mut runs = Vec::new();
        while left > 0 {
            let got = self.mappings.last_mut().and_then(|m| m.take_some(left));
            let piece = match got {
                Some(p) => p,
                None => {
                    let ask = left.min(self.limits.mapping_bytes);
                    let m = self.map(bus, ask, what)?;
                    m.take_some(left)
                        .ok_or_else(|| BareError::NoContiguousRun {
                            what: what.to_string(),
                            bytes: PAGE_BYTES,
                            largest: 0,
                        })?
                }
            };
            left -= piece.bytes;
            runs.push(piece);
        }
        Ok(runs)
    }

    /// Every mapping asked for, in order; they must outlive the firmware's
    /// use of them.
    pub fn mappings(&self) -> impl Iterator<Item = &DmaRegion> {
        self.mappings.iter().map(|m| &m.region)
    }

    /// The mappings, for the caller to keep.
    pub fn into_mappings(self) -> Vec<DmaRegion> {
        self.mappings.into_iter().map(|m| m.region).collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use macuda_pci::{DmaSegment, PciError};
    use std::collections::BTreeMap;

    /// A card of host memory only: mappings scattered in segments of
    /// `segment_bytes`, each mapping's first page unusable, like TinyGPU's.
    pub(crate) struct FakeBus {
        pub segment_bytes: u64,
        pub max_segments: usize,
        pub memory: BTreeMap<u32, Vec<u8>>,
        pub regions: Vec<DmaRegion>,
        pub regs: BTreeMap<u32, u32>,
    }

    impl FakeBus {
        pub(crate) fn new(segment_bytes: u64) -> FakeBus {
            FakeBus {
                segment_bytes,
                max_segments: 64,
                memory: BTreeMap::new(),
                regions: Vec::new(),
                regs: BTreeMap::new(),
            }
        }

        /// What the card reads at `bus`.
        pub(crate) fn read_bus(&self, bus: u64, len: usize) -> Vec<u8> {
            for r in &self.regions {
                let mut base = 0;
                for s in &r.segments {
                    if bus >= s.bus_addr && bus + len as u64 <= s.bus_addr + s.bytes {
                        let at = (base + bus - s.bus_addr) as usize;
                        return self.memory[&r.id.0][at..at + len].to_vec();
                    }
                    base += s.bytes;
                }
            }
            panic!("nothing at {bus:#x}+{len}")
        }
    }

    impl CardBus for FakeBus {
        fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
            Ok(self.regs.get(&reg).copied().unwrap_or(0))
        }
        fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
            self.regs.insert(reg, value);
            Ok(())
        }
        fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
            let id = self.regions.len() as u32 + 1;
            let n = bytes.div_ceil(self.segment_bytes) as usize;
            let segments: Vec<DmaSegment> = (0..n.min(self.max_segments))
                .map(|i| DmaSegment {
                    // Far apart, so a run never crosses into the next.
                    bus_addr: (u64::from(id) << 40) + (i as u64) * (self.segment_bytes * 3),
                    bytes: self.segment_bytes,
                })
                .collect();
            let region = DmaRegion {
                id: DmaId(id),
                bytes: n as u64 * self.segment_bytes,
                segments,
            };
            self.memory.insert(id, vec![0xEE; region.bytes as usize]);
            self.regions.push(region.clone());
            Ok(region)
        }
        fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
            let m = self.memory.get_mut(&id.0).unwrap();
            m[offset as usize..][..data.len()].copy_from_slice(data);
            Ok(())
        }
        fn dma_read(&mut self, id: DmaId, offset: u64, len: u64) -> Result<Vec<u8>, PciError> {
            Ok(self.memory[&id.0][offset as usize..][..len as usize].to_vec())
        }

        fn config_read32(&mut self, _: u16) -> Result<u32, macuda_pci::PciError> {
            Ok(0)
        }

        fn reset_function(&mut self) -> Result<(), macuda_pci::PciError> {
            Ok(())
        }

        fn clear_bus_master(&mut self) -> Result<(), macuda_pci::PciError> {
            Ok(())
        }
    }

    fn limits() -> StagingLimits {
        StagingLimits {
            mapping_bytes: 64 << 10,
            max_segments: 32,
            reserved_head: 8192,
        }
    }

    #[test]
    fn pieces_skip_the_segment_table_and_stay_inside_one_segment() {
        let mut bus = FakeBus::new(16 << 10);
        let mut s = HostStaging::new(limits());
        let a = s.place(&mut bus, 100, "a").unwrap();
        assert_eq!((a.offset, a.bytes), (8192, 4096));
        // 8 KiB fit before the first segment ends; 12 KiB do not.
        let b = s.place(&mut bus, 12 << 10, "b").unwrap();
        assert_eq!(b.offset, 16 << 10);
        assert_eq!(b.bus, bus.regions[0].segments[1].bus_addr);
        let c = s.place_bytes(&mut bus, b"hello", "c").unwrap();
        assert_eq!(bus.read_bus(c.bus, 6), b"hello\0");
        assert_eq!(s.mappings().count(), 1);
    }

    #[test]
    fn a_piece_larger_than_a_segment_is_a_typed_error() {
        let mut bus = FakeBus::new(16 << 10);
        let mut s = HostStaging::new(limits());
        match s.place(&mut bus, 20 << 10, "the FMC image") {
            Err(BareError::NoContiguousRun {
                what,
                bytes,
                largest,
            }) => {
                assert_eq!(what, "the FMC image");
                assert_eq!((bytes, largest), (20 << 10, 16 << 10));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pages_spill_into_new_mappings_and_segments_past_the_limit_are_unused() {
        let mut bus = FakeBus::new(16 << 10);
        bus.max_segments = 64;
        let mut lim = limits();
        lim.max_segments = 2;
        let mut s = HostStaging::new(lim);
        let runs = s.place_pages(&mut bus, 20, "image").unwrap();
        assert_eq!(runs.iter().map(|r| r.bytes).sum::<u64>(), 20 * PAGE_BYTES);
        for r in &runs {
            let region = bus.regions.iter().find(|g| g.id == r.mapping).unwrap();
            // Only the first two segments of each mapping, never the head.
            assert!(r.offset >= 8192 && r.offset + r.bytes <= 32 << 10, "{r:?}");
            assert_eq!(region.bus_addr(r.offset), Some(r.bus));
        }
        assert!(s.into_mappings().len() >= 3);
    }

    #[test]
    fn zeroed_pieces_are_written_with_zeros() {
        let mut bus = FakeBus::new(64 << 10);
        let mut s = HostStaging::new(limits());
        let p = s.place_zeroed(&mut bus, 8192, "log").unwrap();
        assert!(bus.read_bus(p.bus, 8192).iter().all(|&b| b == 0));
    }
}
