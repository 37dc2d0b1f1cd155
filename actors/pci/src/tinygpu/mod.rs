//! The TinyGPU transport: the card behind tinygrad's signed TinyGPU app and
//! DriverKit extension (a unix socket on macOS), or the same protocol over
//! TCP (`remote:HOST:PORT`, tinygrad's remote server).

mod connection;
pub mod wire;

pub use connection::{Connection, Endpoint, DEFAULT_BATCH_BYTES, POSTED_HEADER_BYTES};

use crate::error::PciError;
use crate::transport::{BarInfo, DmaId, DmaRegion, DmaSegment, DmaView, Opener, Transport};
use connection::Socket;
use macuda_hw::pci::{Width, CONFIG_SPACE_BYTES};
use macuda_hw::regs::NV_VIRTUAL_FUNCTION_DOORBELL;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Weak;
use std::time::Duration;
use wire::{parse_segment_table, SEGMENT_TABLE_BYTES, SYSMEM_PAGE_BYTES};

/// PCI functions have at most six BARs.
const MAX_BARS: u32 = 6;
/// The BAR all register access goes through.
const REGISTER_BAR: u32 = 0;
/// The FB aperture: in physical mode (as our boot leaves it) BAR1 offset
/// N is video memory address N, for the window's size.
const FB_BAR: u32 = 1;

/// Opens connections to one TinyGPU server.
///
/// The servers serve one client at a time (the macOS server closes a second
/// connection at once; the TCP server serves connections in turn), so a
/// fresh connection can only begin after the previous one ends. `open`
/// therefore severs any connection this opener made that is still alive:
/// that is how recovery reaches the card through a connection of its own
/// even when the actor holding the old one is stuck on it.
pub struct TinyGpuOpener {
    endpoint: Endpoint,
    dev_id: u32,
    timeout: Duration,
    live: Mutex<Vec<Weak<Socket>>>,
    /// The handshake's timeout, once a server answered neither the
    /// connection's first exchange nor BAR0's mapping in time: every later
    /// connection is refused at once with it, so a silent peer costs one
    /// bounded wait, not one per connection (recovery's included).
    silent: Mutex<Option<PciError>>,
}

impl TinyGpuOpener {
    /// `timeout` bounds the connect and every wait for a reply.
    pub fn new(endpoint: Endpoint, timeout: Duration) -> TinyGpuOpener {
        TinyGpuOpener {
            endpoint,
            dev_id: 0,
            timeout,
            live: Mutex::new(Vec::new()),
            silent: Mutex::new(None),
        }
    }

    /// Open a connection as its concrete type (benchmarks and tests use the
    /// client directly).
    ///
    /// # Errors
    /// The server cannot be reached or refuses BAR0.
    pub fn connect(&self) -> Result<TinyGpuTransport, PciError> {
        {
            let mut live = self.live.lock();
            for w in live.drain(..) {
                if let Some(s) = w.upgrade() {
                    tracing::info!(endpoint = %self.endpoint, "severing the previous connection");
                    s.sever();
                }
            }
        }
        if let Some(PciError::Timeout { command, after_ms }) = &*self.silent.lock() {
            return Err(PciError::PeerSilent {
                endpoint: self.endpoint.to_string(),
                command,
                after_ms: *after_ms,
            });
        }
        let handshake =
            Connection::connect(&self.endpoint, self.dev_id, self.timeout).and_then(|mut conn| {
                self.live.lock().push(conn.weak_socket());
                // The server validates every register access against a mapped BAR.
                let (_, bar0_bytes) = conn.map_bar(REGISTER_BAR)?;
                Ok((conn, bar0_bytes))
            });
        let (conn, bar0_bytes) = match handshake {
            Ok(h) => h,
            Err(e) => {
                if let PciError::Timeout { command, after_ms } = &e {
                    *self.silent.lock() = Some(PciError::Timeout {
                        command,
                        after_ms: *after_ms,
                    });
                }
                return Err(e);
            }
        };
        Ok(TinyGpuTransport {
            conn,
            bar0_bytes,
            bars: None,
            dma: BTreeMap::new(),
            next_dma: 0,
        })
    }
}

impl Opener for TinyGpuOpener {
    fn describe(&self) -> String {
        self.endpoint.to_string()
    }

    fn open(&self) -> Result<Box<dyn Transport>, PciError> {
        Ok(Box::new(self.connect()?))
    }
}

/// Shared DMA memory: the mapping (kept alive by the views handed out
/// too) and its start, taken once while the mapping was ours alone.
struct SharedDma {
    map: std::sync::Arc<memmap2::MmapMut>,
    ptr: *mut u8,
}

// SAFETY: the pointer is into the mapping `map` keeps alive, and is only
// used for raw copies (the card writes the same bytes concurrently).
unsafe impl Send for SharedDma {}

impl SharedDma {
    fn len(&self) -> usize {
        self.map.len()
    }
}

enum DmaBacking {
    /// macOS: shared memory mapped here and in the server.
    Shared(SharedDma),
    /// TCP: memory on the server's host, reached by SYSMEM_READ/WRITE.
    Remote { handle: u32, bytes: u64 },
}

pub struct TinyGpuTransport {
    conn: Connection,
    bar0_bytes: u64,
    bars: Option<Vec<BarInfo>>,
    dma: BTreeMap<DmaId, DmaBacking>,
    next_dma: u32,
}

fn check_span(what: &str, offset: u64, len: usize, size: u64) -> Result<(), PciError> {
    let len = len as u64;
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(PciError::OutOfRange {
            what: what.to_string(),
            offset,
            len,
            size,
        });
    }
    Ok(())
}

impl TinyGpuTransport {
    /// BAR1's size, as the server maps it.
    fn fb_window(&mut self) -> Result<u64, PciError> {
        self.bars()?
            .iter()
            .find(|b| u32::from(b.index) == FB_BAR)
            .map(|b| b.bytes)
            .ok_or(PciError::Unsupported {
                backend: "tinygpu",
                what: "video memory access (the card maps no BAR1)",
            })
    }

    /// The client underneath (the benchmark switches batching off on it).
    pub fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }

    fn config_span(offset: u16, width: Width) -> Result<(), PciError> {
        let w = width.bytes();
        if usize::from(offset) + w > CONFIG_SPACE_BYTES || usize::from(offset) % w != 0 {
            return Err(PciError::ConfigOutOfRange { offset, width: w });
        }
        Ok(())
    }

    fn alloc_shared(&mut self, bytes: u64) -> Result<(DmaBacking, u64, Vec<DmaSegment>), PciError> {
        let (fd, mapped, _index) = self.conn.map_sysmem_fd(bytes, false)?;
        let bad = |what: String| PciError::Protocol {
            command: wire::Command::MapSysmemFd.name(),
            what,
        };
        if mapped < bytes || mapped < SEGMENT_TABLE_BYTES as u64 {
            return Err(bad(format!(
                "mapped {mapped} bytes for a {bytes}-byte request"
            )));
        }
        let len = usize::try_from(mapped)
            .map_err(|_| bad(format!("mapped size {mapped} does not fit in memory")))?;
        let file = std::fs::File::from(fd);
        // SAFETY: the mapping is of a shared-memory object created for us;
        // its size was set by the server before the fd was sent and is
        // checked against the file below. Bytes in it may change under us
        // (the GPU writes DMA memory), so it is only ever copied from and
        // to through raw pointers, never borrowed as a Rust slice across
        // such changes.
        let size_on_disk = file.metadata().map(|m| m.len()).map_err(|e| PciError::Os {
            what: "stat of the shared DMA memory".to_string(),
            source: e,
        })?;
        if size_on_disk < mapped {
            return Err(bad(format!(
                "shared memory is {size_on_disk} bytes, the reply claims {mapped}"
            )));
        }
        let mut map =
            unsafe { memmap2::MmapOptions::new().len(len).map_mut(&file) }.map_err(|e| {
                PciError::Os {
                    what: "mapping the shared DMA memory".to_string(),
                    source: e,
                }
            })?;
        let table = &map[..SEGMENT_TABLE_BYTES];
        let pairs = parse_segment_table(table)
            .ok_or_else(|| bad("segment table has no terminating entry".into()))?;
        if pairs.is_empty() {
            return Err(bad("segment table lists no memory".into()));
        }
        // The table is the server's bookkeeping, not the caller's data.
        map[..SEGMENT_TABLE_BYTES].fill(0);
        let segments = pairs
            .into_iter()
            .map(|(bus_addr, bytes)| DmaSegment { bus_addr, bytes })
            .collect();
        let ptr = map.as_mut_ptr();
        let shared = SharedDma {
            map: std::sync::Arc::new(map),
            ptr,
        };
        Ok((DmaBacking::Shared(shared), mapped, segments))
    }

    fn alloc_remote(&mut self, bytes: u64) -> Result<(DmaBacking, u64, Vec<DmaSegment>), PciError> {
        let (handle, pages) = self.conn.map_sysmem(bytes, false)?;
        let mut segments: Vec<DmaSegment> = Vec::new();
        for (i, p) in pages.into_iter().enumerate() {
            // The server's list is not trusted: a page must end inside the
            // bus address space before segments are measured by its end.
            if p.checked_add(SYSMEM_PAGE_BYTES).is_none() {
                return Err(PciError::Protocol {
                    command: wire::Command::MapSysmem.name(),
                    what: format!("page {i} at {p:#x} runs past the end of the bus address space"),
                });
            }
            match segments.last_mut() {
                // The segment's end is its last page's, checked above.
                Some(s) if s.bus_addr + s.bytes == p => s.bytes += SYSMEM_PAGE_BYTES,
                _ => segments.push(DmaSegment {
                    bus_addr: p,
                    bytes: SYSMEM_PAGE_BYTES,
                }),
            }
        }
        if segments.is_empty() {
            return Err(PciError::Protocol {
                command: wire::Command::MapSysmem.name(),
                what: "page list is empty".to_string(),
            });
        }
        Ok((DmaBacking::Remote { handle, bytes }, bytes, segments))
    }

    fn backing(&mut self, id: DmaId) -> Result<&mut DmaBacking, PciError> {
        self.dma.get_mut(&id).ok_or(PciError::OutOfRange {
            what: format!("DMA region {} (not allocated)", id.0),
            offset: 0,
            len: 0,
            size: 0,
        })
    }
}

impl Transport for TinyGpuTransport {
    fn backend(&self) -> &'static str {
        match self.conn.endpoint() {
            Endpoint::Unix(_) => "tinygpu",
            Endpoint::Tcp { .. } => "remote",
        }
    }

    fn config_read(&mut self, offset: u16, width: Width) -> Result<u32, PciError> {
        Self::config_span(offset, width)?;
        let v = self.conn.cfg_read(offset, width.bytes())?;
        let max = (1u64 << (8 * width.bytes())) - 1;
        if v > max {
            return Err(PciError::Protocol {
                command: wire::Command::CfgRead.name(),
                what: format!("{v:#x} does not fit a {}-byte read", width.bytes()),
            });
        }
        // CAST: checked above to fit the width, at most 32 bits.
        Ok(v as u32)
    }

    fn config_write(&mut self, offset: u16, width: Width, value: u32) -> Result<(), PciError> {
        Self::config_span(offset, width)?;
        self.conn.cfg_write(offset, width.bytes(), u64::from(value))
    }

    fn bars(&mut self) -> Result<Vec<BarInfo>, PciError> {
        if let Some(b) = &self.bars {
            return Ok(b.clone());
        }
        let mut bars = Vec::new();
        for index in 0..MAX_BARS {
            match self.conn.map_bar(index) {
                Ok((_, bytes)) if bytes > 0 => bars.push(BarInfo {
                    // CAST: index < 6.
                    index: index as u8,
                    bytes,
                }),
                Ok(_) | Err(PciError::Server { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        self.bars = Some(bars.clone());
        Ok(bars)
    }

    fn mmio_read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        check_span("BAR0", offset, out.len(), self.bar0_bytes)?;
        self.conn.mmio_read(REGISTER_BAR, offset, out)
    }

    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), PciError> {
        check_span("BAR0", offset, data.len(), self.bar0_bytes)?;
        self.conn.mmio_write(REGISTER_BAR, offset, data)
    }

    fn flush(&mut self) -> Result<(), PciError> {
        self.conn.flush()
    }

    /// Video memory through BAR1 in physical mode: only the window's first
    /// bytes (256 MiB on a GB202), where page tables and the CPU-visible
    /// buffers are placed; anything past it is refused, never wrapped.
    fn vram_read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        let window = self.fb_window()?;
        check_span("the BAR1 window", offset, out.len(), window)?;
        self.conn.mmio_read(FB_BAR, offset, out)
    }

    fn vram_write(&mut self, offset: u64, data: &[u8]) -> Result<(), PciError> {
        let window = self.fb_window()?;
        check_span("the BAR1 window", offset, data.len(), window)?;
        self.conn.mmio_write(FB_BAR, offset, data)
    }

    fn doorbell(&mut self, token: u32) -> Result<(), PciError> {
        self.mmio_write32(u64::from(NV_VIRTUAL_FUNCTION_DOORBELL::ADDR), token)?;
        // The doorbell is the point of handing work over: send it now.
        self.conn.flush()
    }

    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        let (backing, size, segments) = match self.conn.endpoint() {
            Endpoint::Unix(_) => self.alloc_shared(bytes)?,
            Endpoint::Tcp { .. } => self.alloc_remote(bytes)?,
        };
        self.next_dma += 1;
        let id = DmaId(self.next_dma);
        self.dma.insert(id, backing);
        Ok(DmaRegion {
            id,
            bytes: size,
            segments,
        })
    }

    fn dma_read(&mut self, id: DmaId, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        let region = format!("DMA region {}", id.0);
        match self.backing(id)? {
            DmaBacking::Shared(map) => {
                check_span(&region, offset, out.len(), map.len() as u64)?;
                // SAFETY: bounds checked above; a raw copy because the GPU
                // may write this memory concurrently (see alloc_shared).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        map.ptr.add(offset as usize),
                        out.as_mut_ptr(),
                        out.len(),
                    )
                };
                Ok(())
            }
            DmaBacking::Remote { handle, bytes } => {
                let (handle, bytes) = (*handle, *bytes);
                check_span(&region, offset, out.len(), bytes)?;
                self.conn.sysmem_read(handle, offset, out)
            }
        }
    }

    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        let region = format!("DMA region {}", id.0);
        match self.backing(id)? {
            DmaBacking::Shared(map) => {
                check_span(&region, offset, data.len(), map.len() as u64)?;
                // SAFETY: bounds checked above; see dma_read.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr(),
                        map.ptr.add(offset as usize),
                        data.len(),
                    )
                };
                Ok(())
            }
            DmaBacking::Remote { handle, bytes } => {
                let (handle, bytes) = (*handle, *bytes);
                check_span(&region, offset, data.len(), bytes)?;
                self.conn.sysmem_write(handle, offset, data)
            }
        }
    }

    fn dma_view(&mut self, id: DmaId) -> Result<Option<DmaView>, PciError> {
        Ok(match self.backing(id)? {
            DmaBacking::Shared(shared) => {
                let keep: std::sync::Arc<dyn std::any::Any + Send + Sync> = shared.map.clone();
                // SAFETY: `keep` holds the mapping of `len` bytes at `ptr`.
                Some(unsafe { DmaView::new(keep, shared.ptr, shared.len()) })
            }
            DmaBacking::Remote { .. } => None,
        })
    }

    fn function_reset(&mut self) -> Result<(), PciError> {
        self.conn.reset()
    }
}
