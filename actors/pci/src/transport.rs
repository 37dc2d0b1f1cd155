use crate::capabilities::Capabilities;
use crate::error::PciError;
use macuda_hw::pci::{offset, Command, Width};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One BAR as the transport sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BarInfo {
    pub index: u8,
    pub bytes: u64,
}

/// Names one DMA region within the transport that allocated it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DmaId(pub u32);

/// One bus-contiguous run of a DMA region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DmaSegment {
    pub bus_addr: u64,
    pub bytes: u64,
}

/// Host memory the GPU can reach by DMA: the CPU reaches it through the
/// transport (`dma_read`/`dma_write`), the GPU through the bus addresses of
/// its segments, which describe the region's prefix in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DmaRegion {
    pub id: DmaId,
    /// Bytes the CPU can reach (at least what was asked for).
    pub bytes: u64,
    pub segments: Vec<DmaSegment>,
}

/// The CPU's own view of a DMA mapping, where the platform gives one
/// (TinyGPU's shared memory on a unix socket): its start and length. The
/// mapping stays mapped while any clone of the view lives, whatever
/// becomes of the transport. The card and other views may write the same
/// bytes at any time, so every access goes through raw pointers.
#[derive(Clone)]
pub struct DmaView {
    _keep: std::sync::Arc<dyn std::any::Any + Send + Sync>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the pointer is into a mapping `keep` holds alive; the view
// hands out only raw pointers, which callers access with raw copies.
unsafe impl Send for DmaView {}
// SAFETY: as for Send; shared views never hand out references.
unsafe impl Sync for DmaView {}

impl DmaView {
    /// A view of `len` bytes at `ptr`, kept mapped by `keep`.
    ///
    /// # Safety
    /// `ptr..ptr + len` must stay mapped, readable and writable for as
    /// long as `keep` lives.
    pub unsafe fn new(
        keep: std::sync::Arc<dyn std::any::Any + Send + Sync>,
        ptr: *mut u8,
        len: usize,
    ) -> DmaView {
        DmaView {
            _keep: keep,
            ptr,
            len,
        }
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for DmaView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DmaView({} bytes)", self.len)
    }
}

impl DmaRegion {
    /// Bytes the GPU can reach: the sum of the segments. Less than `bytes`
    /// when the platform truncated the scatter list (macOS stops at 32
    /// segments); only this prefix may be handed to the GPU.
    pub fn covered(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// The bus address of byte `offset` of the region, if the GPU can reach it.
    pub fn bus_addr(&self, offset: u64) -> Option<u64> {
        let mut base = 0;
        for s in &self.segments {
            if offset < base + s.bytes {
                return Some(s.bus_addr + (offset - base));
            }
            base += s.bytes;
        }
        None
    }
}

/// One connection to a card: null, TinyGPU (unix socket or TCP), sysfs, and
/// the recorder and replay that wrap or stand in for any of them.
pub trait Transport: Send {
    /// The backend's name, e.g. `null` or `tinygpu`.
    fn backend(&self) -> &'static str;
    /// What the card takes (memory access, DMA, submission): every real
    /// card all of it.
    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }
    /// Whether this transport owns the PCI function (config space, bus
    /// mastering, reset). Not on the kernel-module path, where NVIDIA's
    /// module does, and recovery leaves PCI alone.
    fn owns_function(&self) -> bool {
        true
    }
    /// # Errors
    /// Out-of-range offsets and transport failures.
    fn config_read(&mut self, offset: u16, width: Width) -> Result<u32, PciError>;
    /// # Errors
    /// Out-of-range offsets and transport failures.
    fn config_write(&mut self, offset: u16, width: Width, value: u32) -> Result<(), PciError>;
    /// The BARs the function exposes, with their sizes.
    /// # Errors
    /// Transport failures.
    fn bars(&mut self) -> Result<Vec<BarInfo>, PciError>;
    /// Read `out.len()` bytes at BAR0 + `offset`. Posted writes issued
    /// before it reach the card first.
    /// # Errors
    /// Transport failures; the null device refuses registers it does not model.
    fn mmio_read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), PciError>;
    /// Write `data` at BAR0 + `offset`. The write may be posted (returned
    /// from before the card has it); [`Transport::flush`] or any read orders it.
    /// # Errors
    /// Transport failures.
    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), PciError>;
    /// Push out posted writes.
    /// # Errors
    /// Transport failures.
    fn flush(&mut self) -> Result<(), PciError> {
        Ok(())
    }
    /// Ring a channel's doorbell: the moment work is handed to the GPU.
    /// # Errors
    /// The null device refuses submission.
    fn doorbell(&mut self, token: u32) -> Result<(), PciError>;
    /// # Errors
    /// The null device refuses DMA.
    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError>;
    /// CPU read of a DMA region.
    /// # Errors
    /// Unknown region or out-of-range access.
    fn dma_read(&mut self, id: DmaId, offset: u64, out: &mut [u8]) -> Result<(), PciError>;
    /// CPU write of a DMA region.
    /// # Errors
    /// Unknown region or out-of-range access.
    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError>;
    /// The CPU's own view of a DMA region, where the platform maps it into
    /// this process; `None` where it is reached only through
    /// [`Transport::dma_read`]/[`Transport::dma_write`] (over TCP, and
    /// under the recorder, which must see every access).
    /// # Errors
    /// Unknown region.
    fn dma_view(&mut self, id: DmaId) -> Result<Option<DmaView>, PciError> {
        let _ = id;
        Ok(None)
    }
    /// CPU read of video memory at a VRAM offset: over TinyGPU, BAR1 in
    /// physical mode (as our boot leaves it), inside its window; the null
    /// card keeps video memory for tests that play the GPU; others refuse
    /// by default.
    /// # Errors
    /// Refused, or outside video memory.
    fn vram_read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        let _ = (offset, out);
        Err(PciError::Unsupported {
            backend: self.backend(),
            what: "video memory access (the BAR1 window lands with the MMU)",
        })
    }
    /// CPU write of video memory at a VRAM offset; see [`Transport::vram_read`].
    /// # Errors
    /// Refused, or outside video memory.
    fn vram_write(&mut self, offset: u64, data: &[u8]) -> Result<(), PciError> {
        let _ = (offset, data);
        Err(PciError::Unsupported {
            backend: self.backend(),
            what: "video memory access (the BAR1 window lands with the MMU)",
        })
    }
    /// PCIe function-level reset.
    /// # Errors
    /// Transport failures.
    fn function_reset(&mut self) -> Result<(), PciError>;

    /// A 32-bit register read at BAR0 + `offset`.
    /// # Errors
    /// As [`Transport::mmio_read`].
    fn mmio_read32(&mut self, offset: u64) -> Result<u32, PciError> {
        let mut b = [0u8; 4];
        self.mmio_read(offset, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    /// A 32-bit register write at BAR0 + `offset`.
    /// # Errors
    /// As [`Transport::mmio_write`].
    fn mmio_write32(&mut self, offset: u64, value: u32) -> Result<(), PciError> {
        self.mmio_write(offset, &value.to_le_bytes())
    }
}

/// A boxed transport (what an [`Opener`] hands out) is a transport itself,
/// every call forwarded, so code generic over `Transport` (the gsp actor's
/// bare-metal boot among it) takes an opener's connection as it is.
impl<T: Transport + ?Sized> Transport for Box<T> {
    fn backend(&self) -> &'static str {
        (**self).backend()
    }
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    fn owns_function(&self) -> bool {
        (**self).owns_function()
    }
    fn config_read(&mut self, offset: u16, width: Width) -> Result<u32, PciError> {
        (**self).config_read(offset, width)
    }
    fn config_write(&mut self, offset: u16, width: Width, value: u32) -> Result<(), PciError> {
        (**self).config_write(offset, width, value)
    }
    fn bars(&mut self) -> Result<Vec<BarInfo>, PciError> {
        (**self).bars()
    }
    fn mmio_read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        (**self).mmio_read(offset, out)
    }
    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), PciError> {
        (**self).mmio_write(offset, data)
    }
    fn flush(&mut self) -> Result<(), PciError> {
        (**self).flush()
    }
    fn doorbell(&mut self, token: u32) -> Result<(), PciError> {
        (**self).doorbell(token)
    }
    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        (**self).alloc_dma(bytes)
    }
    fn dma_read(&mut self, id: DmaId, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        (**self).dma_read(id, offset, out)
    }
    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        (**self).dma_write(id, offset, data)
    }
    fn dma_view(&mut self, id: DmaId) -> Result<Option<DmaView>, PciError> {
        (**self).dma_view(id)
    }
    fn vram_read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        (**self).vram_read(offset, out)
    }
    fn vram_write(&mut self, offset: u64, data: &[u8]) -> Result<(), PciError> {
        (**self).vram_write(offset, data)
    }
    fn function_reset(&mut self) -> Result<(), PciError> {
        (**self).function_reset()
    }
    fn mmio_read32(&mut self, offset: u64) -> Result<u32, PciError> {
        (**self).mmio_read32(offset)
    }
    fn mmio_write32(&mut self, offset: u64, value: u32) -> Result<(), PciError> {
        (**self).mmio_write32(offset, value)
    }
}

/// Opens connections to one card. The supervisor keeps the opener so that
/// recovery always runs over a fresh connection, never through an actor that
/// may have failed.
pub trait Opener: Send + Sync {
    fn describe(&self) -> String;
    /// Whether the transports it opens own the PCI function; see
    /// [`Transport::owns_function`].
    fn owns_function(&self) -> bool {
        true
    }
    /// # Errors
    /// When the card cannot be reached.
    fn open(&self) -> Result<Box<dyn Transport>, PciError>;

    /// The session is over: a recorder flushes its trace, a replay checks
    /// that every recorded op was made. Returns a line for the user, if the
    /// opener has something to say.
    ///
    /// # Errors
    /// A trace that cannot be flushed, or a replay that did not finish.
    fn end_session(&self) -> Result<Option<String>, PciError> {
        Ok(None)
    }
}

/// How long a transport waits for any one reply before calling the
/// connection dead. The slowest legitimate operation is a function-level
/// reset (about 1.5 s on the 5090).
pub const TRANSPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The command register before and after a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BusMasterChange {
    pub before: Command,
    pub after: Command,
}

fn set_bus_master(t: &mut dyn Transport, on: bool) -> Result<BusMasterChange, PciError> {
    let before = Command(read_command(t)?);
    let wanted = if on {
        before.with_memory_space().with_bus_master(true)
    } else {
        before.with_bus_master(false)
    };
    t.config_write(offset::COMMAND, Width::U16, u32::from(wanted.0))?;
    // Read back: it both flushes the posted write and proves it took.
    let after = Command(read_command(t)?);
    Ok(BusMasterChange { before, after })
}

fn read_command(t: &mut dyn Transport) -> Result<u16, PciError> {
    let v = t.config_read(offset::COMMAND, Width::U16)?;
    // CAST: a 16-bit config read returns at most 0xFFFF.
    Ok((v & 0xFFFF) as u16)
}

/// The command register as the card reports it; reads only.
///
/// # Errors
/// Transport failures.
pub fn command_register(t: &mut dyn Transport) -> Result<Command, PciError> {
    Ok(Command(read_command(t)?))
}

/// Clear bus mastering (command register bit 2), read-modify-write, then
/// read back.
///
/// # Errors
/// Transport failures.
pub fn clear_bus_master(t: &mut dyn Transport) -> Result<BusMasterChange, PciError> {
    let change = set_bus_master(t, false)?;
    // What every exit reports is the read-back: a card (or a trace) that
    // still shows the bit set has not stopped mastering the bus.
    if change.after.bus_master() {
        return Err(PciError::BusMasterStillOn {
            before: change.before.0,
            after: change.after.0,
        });
    }
    Ok(change)
}

/// Enable memory decoding only: enough to read registers without letting
/// the card master the bus (what `macuda info` needs).
///
/// # Errors
/// Transport failures.
pub fn enable_memory_space(t: &mut dyn Transport) -> Result<BusMasterChange, PciError> {
    let before = Command(read_command(t)?);
    t.config_write(
        offset::COMMAND,
        Width::U16,
        u32::from(before.with_memory_space().0),
    )?;
    let after = Command(read_command(t)?);
    Ok(BusMasterChange { before, after })
}

/// Enable memory decoding and bus mastering, as every boot does first.
///
/// # Errors
/// Transport failures.
pub fn enable_bus_master(t: &mut dyn Transport) -> Result<BusMasterChange, PciError> {
    set_bus_master(t, true)
}

/// Reset the function as a boot must when firmware is already resident:
/// bus mastering off first (the card must not write host memory while it
/// goes down), the FLR, then memory decoding and bus mastering back on.
/// The card's own boot after the reset is the caller's to wait for.
///
/// # Errors
/// Transport failures, naming the step.
pub fn reset_function(t: &mut dyn Transport) -> Result<BusMasterChange, PciError> {
    clear_bus_master(t)?;
    t.function_reset()?;
    set_bus_master(t, true)
}
