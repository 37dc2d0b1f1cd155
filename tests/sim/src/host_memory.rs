//! Host memory the card may reach by DMA, as the TinyGPU servers hand it
//! out: shared mappings (MAP_SYSMEM_FD: a memfd the client maps, scattered
//! on the bus in segments listed at the mapping's start, at most
//! [`MAX_SEGMENTS`] of them, as the macOS extension lists) and server-side
//! allocations (MAP_SYSMEM: a page list, read and written by RPC). The
//! card's DMA engines read and write both by bus address.

use macuda_pci::tinygpu::wire::{
    encode_segment_table, MIN_SYSMEM_FD_BYTES, SEGMENT_TABLE_BYTES, SYSMEM_PAGE_BYTES,
};
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;

/// Segments one shared mapping may have: the macOS extension lists no more
/// (and truncates the rest silently); the sim refuses a mapping that would
/// need more, so a driver learns it must map in pieces.
pub const MAX_SEGMENTS: usize = macuda_hw::pci::DMA_MAPPING_MAX_SEGMENTS;
/// Bus addresses of MAP_SYSMEM allocations start here, each allocation
/// 16 GiB of bus apart; shared mappings start at `SHARED_BUS_BASE`, 4 GiB
/// apart. Both lie above every BAR a simulated chip places (the BARs end
/// below 0x70_0000_0000): a DMA to a BAR's bus address reaches the card's
/// own memory, so host memory there would be shadowed.
pub const HOST_BUS_BASE: u64 = 0x100_0000_0000;
const REMOTE_BUS_BASE: u64 = HOST_BUS_BASE;
const REMOTE_HANDLE_SPAN: u64 = 1 << 34;
const SHARED_BUS_BASE: u64 = 0x800_0000_0000;
/// Segments of one mapping lie this far apart on the bus (scattered, so a
/// driver that assumes one run is caught).
const SEGMENT_STRIDE_GAP: u64 = 1 << 20;
/// The largest MAP_SYSMEM allocation the sim makes.
const MAX_REMOTE_BYTES: u64 = 4 << 30;
/// MAP_SYSMEM hands out memory in runs of this size, each a contiguous
/// stretch of bus addresses, the runs scattered (as a server backed by
/// huge pages does): a buffer of up to 2 MiB is contiguous, larger ones
/// are not unless asked to be. Drivers count on the first: tinygrad gives
/// the FSP its FMC image's first page alone, without asking for
/// contiguous memory, and the FSP reads the image linearly.
pub const REMOTE_RUN_BYTES: u64 = 2 << 20;
/// Runs of one allocation start this far apart on the bus (a 2 MiB gap
/// after each, so a driver that reads past a run is caught).
const REMOTE_RUN_STRIDE: u64 = 2 * REMOTE_RUN_BYTES;

/// Why host memory refused an allocation or a DMA access.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostMemoryError {
    #[error("a mapping of {size} bytes needs {needed} segments of {segment} bytes; the extension lists at most {MAX_SEGMENTS}")]
    TooManySegments {
        size: u64,
        segment: u64,
        needed: u64,
    },
    #[error(
        "an allocation of {size} bytes is larger than the {max} bytes the sim hands out at once"
    )]
    TooLarge { size: u64, max: u64 },
    #[error("shared memory could not be made: {0}")]
    Os(String),
    #[error("no host memory at bus address {address:#x} (+{len} bytes)")]
    Unmapped { address: u64, len: usize },
    #[error("no allocation with handle {0}")]
    NoHandle(u32),
    #[error("{offset:#x}+{len} lies outside allocation {handle} of {size} bytes")]
    OutOfRange {
        handle: u32,
        offset: u64,
        len: usize,
        size: u64,
    },
}

/// One run of bus addresses, and where its bytes live.
#[derive(Debug, Clone, Copy)]
struct Run {
    len: u64,
    backing: Backing,
    offset: u64,
}

#[derive(Debug, Clone, Copy)]
enum Backing {
    Shared(usize),
    Remote(usize),
}

/// Everything the server handed out, and the bus map over it.
pub struct HostMemory {
    segment_bytes: u64,
    shared: Vec<memmap2::MmapMut>,
    remote: Vec<Vec<u8>>,
    /// Bus address of each run's start -> the run.
    bus: BTreeMap<u64, Run>,
}

impl HostMemory {
    /// Shared mappings are scattered in segments of `segment_bytes` (a
    /// multiple of the 4 KiB page).
    pub fn new(segment_bytes: u64) -> HostMemory {
        HostMemory {
            segment_bytes: segment_bytes
                .next_multiple_of(SYSMEM_PAGE_BYTES)
                .max(SYSMEM_PAGE_BYTES),
            shared: Vec::new(),
            remote: Vec::new(),
            bus: BTreeMap::new(),
        }
    }

    pub fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    /// MAP_SYSMEM_FD: a fresh memfd of at least `size` bytes (the macOS
    /// server's floor of 16 KiB), its segment table written at its start.
    pub fn map_shared(&mut self, size: u64) -> Result<(OwnedFd, u64, u64), HostMemoryError> {
        let alloc = size
            .next_multiple_of(SYSMEM_PAGE_BYTES)
            .max(MIN_SYSMEM_FD_BYTES);
        let needed = alloc.div_ceil(self.segment_bytes);
        if needed > MAX_SEGMENTS as u64 {
            return Err(HostMemoryError::TooManySegments {
                size,
                segment: self.segment_bytes,
                needed,
            });
        }
        let (fd, mut map) = memfd(alloc).map_err(|e| HostMemoryError::Os(e.to_string()))?;
        let index = self.shared.len();
        let base = SHARED_BUS_BASE + (index as u64) * (1 << 32);
        let mut segments = Vec::new();
        for i in 0..needed {
            let offset = i * self.segment_bytes;
            let len = self.segment_bytes.min(alloc - offset);
            let address = base + i * (self.segment_bytes + SEGMENT_STRIDE_GAP);
            segments.push((address, len));
            self.bus.insert(
                address,
                Run {
                    len,
                    backing: Backing::Shared(index),
                    offset,
                },
            );
        }
        let table = SEGMENT_TABLE_BYTES.min(map.len());
        encode_segment_table(&segments, &mut map[..table]);
        self.shared.push(map);
        Ok((fd, alloc, index as u64))
    }

    /// MAP_SYSMEM: `size` bytes on the server; one bus address per page.
    /// The pages come in runs of [`REMOTE_RUN_BYTES`] scattered on the bus,
    /// or in one run when the client asks for contiguous memory.
    pub fn map_remote(
        &mut self,
        size: u64,
        contiguous: bool,
    ) -> Result<(Vec<u64>, u64), HostMemoryError> {
        if size > MAX_REMOTE_BYTES {
            return Err(HostMemoryError::TooLarge {
                size,
                max: MAX_REMOTE_BYTES,
            });
        }
        let bytes = size.div_ceil(SYSMEM_PAGE_BYTES).max(1) * SYSMEM_PAGE_BYTES;
        let handle = self.remote.len();
        self.remote.push(vec![0u8; bytes as usize]);
        let base = REMOTE_BUS_BASE + (handle as u64) * REMOTE_HANDLE_SPAN;
        let run = if contiguous { bytes } else { REMOTE_RUN_BYTES };
        let mut list = Vec::with_capacity((bytes / SYSMEM_PAGE_BYTES) as usize);
        for (i, offset) in (0..bytes).step_by(run as usize).enumerate() {
            let len = run.min(bytes - offset);
            let address = base + i as u64 * REMOTE_RUN_STRIDE;
            self.bus.insert(
                address,
                Run {
                    len,
                    backing: Backing::Remote(handle),
                    offset,
                },
            );
            list.extend((0..len / SYSMEM_PAGE_BYTES).map(|p| address + p * SYSMEM_PAGE_BYTES));
        }
        Ok((list, handle as u64))
    }

    /// SYSMEM_READ from allocation `handle`.
    pub fn read_remote(
        &self,
        handle: u32,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), HostMemoryError> {
        let mem = self
            .remote
            .get(handle as usize)
            .ok_or(HostMemoryError::NoHandle(handle))?;
        let range = remote_range(handle, mem.len(), offset, out.len())?;
        out.copy_from_slice(&mem[range]);
        Ok(())
    }

    /// SYSMEM_WRITE into allocation `handle`.
    pub fn write_remote(
        &mut self,
        handle: u32,
        offset: u64,
        data: &[u8],
    ) -> Result<(), HostMemoryError> {
        let mem = self
            .remote
            .get_mut(handle as usize)
            .ok_or(HostMemoryError::NoHandle(handle))?;
        let range = remote_range(handle, mem.len(), offset, data.len())?;
        mem[range].copy_from_slice(data);
        Ok(())
    }

    /// Bytes of shared mapping `index`, as the server sees them.
    pub fn shared_bytes(&self, index: usize) -> Option<&[u8]> {
        self.shared.get(index).map(|m| &m[..])
    }

    /// Shared mapping `index`, writable (a test's fault injection).
    pub fn shared_bytes_mut(&mut self, index: usize) -> Option<&mut [u8]> {
        self.shared.get_mut(index).map(|m| &mut m[..])
    }

    /// Bytes of MAP_SYSMEM allocation `handle`.
    pub fn remote_bytes(&self, handle: usize) -> Option<&[u8]> {
        self.remote.get(handle).map(|m| &m[..])
    }

    /// The card reads host memory at `address` (it may span runs only
    /// where they are adjacent on the bus, as on a real bus).
    pub fn dma_read(&self, address: u64, out: &mut [u8]) -> Result<(), HostMemoryError> {
        let mut done = 0;
        while done < out.len() {
            let (bytes, at) = self.locate(address + done as u64, out.len() - done)?;
            let n = bytes.min(out.len() - done);
            out[done..done + n].copy_from_slice(&self.backing(at)[at.offset as usize..][..n]);
            done += n;
        }
        Ok(())
    }

    /// The card writes host memory at `address`.
    pub fn dma_write(&mut self, address: u64, data: &[u8]) -> Result<(), HostMemoryError> {
        let mut done = 0;
        while done < data.len() {
            let (bytes, at) = self.locate(address + done as u64, data.len() - done)?;
            let n = bytes.min(data.len() - done);
            let dst = &mut self.backing_mut(at)[at.offset as usize..][..n];
            dst.copy_from_slice(&data[done..done + n]);
            done += n;
        }
        Ok(())
    }

    /// The run holding `address`: bytes left in it from there, and the
    /// backing with the offset moved to `address`.
    fn locate(&self, address: u64, len: usize) -> Result<(usize, Run), HostMemoryError> {
        let unmapped = HostMemoryError::Unmapped { address, len };
        let (&start, run) = self
            .bus
            .range(..=address)
            .next_back()
            .ok_or(unmapped.clone())?;
        let into = address - start;
        if into >= run.len {
            return Err(unmapped);
        }
        let left = usize::try_from(run.len - into).unwrap_or(usize::MAX);
        Ok((
            left,
            Run {
                offset: run.offset + into,
                ..*run
            },
        ))
    }

    fn backing(&self, run: Run) -> &[u8] {
        match run.backing {
            Backing::Shared(i) => &self.shared[i][..],
            Backing::Remote(i) => &self.remote[i][..],
        }
    }

    fn backing_mut(&mut self, run: Run) -> &mut [u8] {
        match run.backing {
            Backing::Shared(i) => &mut self.shared[i][..],
            Backing::Remote(i) => &mut self.remote[i][..],
        }
    }
}

fn remote_range(
    handle: u32,
    size: usize,
    offset: u64,
    len: usize,
) -> Result<std::ops::Range<usize>, HostMemoryError> {
    let out_of_range = HostMemoryError::OutOfRange {
        handle,
        offset,
        len,
        size: size as u64,
    };
    let start = usize::try_from(offset).map_err(|_| out_of_range.clone())?;
    let end = start.checked_add(len).ok_or(out_of_range.clone())?;
    if end > size {
        return Err(out_of_range);
    }
    Ok(start..end)
}

/// A memfd of `bytes` and the server's own mapping of it.
pub fn memfd(bytes: u64) -> std::io::Result<(OwnedFd, memmap2::MmapMut)> {
    use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
    let fd =
        memfd_create(c"macuda-sim", MemFdCreateFlag::MFD_CLOEXEC).map_err(std::io::Error::from)?;
    let file = std::fs::File::from(fd);
    file.set_len(bytes)?;
    // SAFETY: a fresh memfd of `bytes` bytes that only this server and the
    // client it is passed to map; both see one memory, which is the point.
    let map = unsafe {
        memmap2::MmapOptions::new()
            .len(bytes as usize)
            .map_mut(&file)?
    };
    Ok((OwnedFd::from(file), map))
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_pci::tinygpu::wire::parse_segment_table;

    #[test]
    fn a_shared_mapping_lists_its_scattered_segments_and_dma_reaches_them() {
        let mut h = HostMemory::new(64 << 10);
        let (_fd, size, index) = h.map_shared(200 << 10).unwrap();
        assert_eq!(size, 200 << 10);
        let segs = parse_segment_table(h.shared_bytes(index as usize).unwrap()).unwrap();
        assert_eq!(segs.len(), 4);
        assert_eq!(segs.iter().map(|s| s.1).sum::<u64>(), size);
        assert!(
            segs.windows(2).all(|w| w[0].0 + w[0].1 < w[1].0),
            "scattered"
        );
        // A write the card makes lands at the mapping's offset.
        let (second, _) = segs[1];
        h.dma_write(second + 8, b"card").unwrap();
        assert_eq!(&h.shared_bytes(0).unwrap()[(64 << 10) + 8..][..4], b"card");
        let mut back = [0u8; 4];
        h.dma_read(second + 8, &mut back).unwrap();
        assert_eq!(&back, b"card");
        // Past a segment's end is the gap: nothing there.
        let (last, len) = segs[3];
        assert!(h.dma_read(last + len, &mut back).is_err());
    }

    #[test]
    fn a_mapping_that_needs_more_than_32_segments_is_refused() {
        let mut h = HostMemory::new(64 << 10);
        assert!(h.map_shared(32 * (64 << 10)).is_ok());
        let e = h.map_shared(32 * (64 << 10) + 1).err().unwrap();
        assert!(
            matches!(e, HostMemoryError::TooManySegments { needed: 33, .. }),
            "{e}"
        );
    }

    #[test]
    fn remote_allocations_come_in_2_mib_runs_unless_asked_for_one_and_are_checked() {
        let mut h = HostMemory::new(1 << 20);
        let (small, handle) = h.map_remote(5 * 4096, false).unwrap();
        assert_eq!(small.len(), 5);
        assert!(small.windows(2).all(|w| w[0] + 4096 == w[1]), "one run");
        h.write_remote(handle as u32, 4096, b"page").unwrap();
        let mut b = [0u8; 4];
        h.dma_read(small[1], &mut b).unwrap();
        assert_eq!(&b, b"page");
        // A read across the allocation's one run reaches every page.
        let mut whole = vec![0u8; 5 * 4096];
        h.dma_read(small[0], &mut whole).unwrap();
        assert!(h.read_remote(handle as u32, 5 * 4096 - 2, &mut b).is_err());
        assert!(h.read_remote(7, 0, &mut b).is_err());
        let per_run = (REMOTE_RUN_BYTES / 4096) as usize;
        let (big, _) = h.map_remote(REMOTE_RUN_BYTES + 4096, false).unwrap();
        assert_ne!(
            big[per_run - 1] + 4096,
            big[per_run],
            "scattered past 2 MiB"
        );
        let (asked, _) = h.map_remote(REMOTE_RUN_BYTES + 4096, true).unwrap();
        assert_eq!(
            asked[per_run - 1] + 4096,
            asked[per_run],
            "contiguous when asked"
        );
        assert!(h.map_remote(MAX_REMOTE_BYTES + 1, false).is_err());
    }
}
