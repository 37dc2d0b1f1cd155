use crate::capabilities::Capabilities;
use crate::error::PciError;
use crate::transport::{
    clear_bus_master, enable_bus_master, enable_memory_space, reset_function, BarInfo, DmaId,
    DmaRegion, DmaView, Opener, Transport,
};
use macuda_core::{actor_protocol, ActorConfig, ActorJoin};
use macuda_hw::pci::{offset, Width, VENDOR_NVIDIA};
use macuda_hw::regs::{
    NV_HUBMMU_PRI_MMU_WPR2_ADDR_HI, NV_PFB_PRI_MMU_WPR2_ADDR_HI, NV_PMC_BOOT_0, NV_PMC_BOOT_42,
};
use macuda_hw::ChipIdentity;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What the card says it is, read without booting it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciIdentity {
    pub backend: String,
    pub vendor: u16,
    pub device: u16,
    pub revision_and_class: u32,
    pub bars: Vec<BarInfo>,
    pub chip: ChipIdentity,
    /// WPR2 is up: GSP firmware already ran on this power cycle.
    pub firmware_resident: bool,
}

/// BAR1 of this size means CPU-visible VRAM is scarce (Thunderbolt).
const SMALL_BAR1_BYTES: u64 = 256 << 20;

impl PciIdentity {
    pub fn small_bar(&self) -> bool {
        self.bars
            .iter()
            .any(|b| b.index == 1 && b.bytes <= SMALL_BAR1_BYTES)
    }
}

/// Counts of what went through the actor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciStats {
    pub config_reads: u64,
    pub config_writes: u64,
    pub mmio_reads: u64,
    pub mmio_writes: u64,
    pub doorbells: u64,
    pub dma_allocations: u64,
    pub refusals: u64,
}

actor_protocol! {
    /// The PCI actor's handle.
    pub handle PciHandle;
    request PciRequest;
    service PciService;
    error PciError;
    Identify => fn identify() -> PciIdentity;
    ConfigRead => fn config_read(offset: u16, width: Width) -> u32;
    ConfigWrite => fn config_write(offset: u16, width: Width, value: u32) -> ();
    MmioRead32 => fn mmio_read32(offset: u64) -> u32;
    MmioWrite32 => fn mmio_write32(offset: u64, value: u32) -> ();
    MmioRead => fn mmio_read(offset: u64, len: u64) -> Vec<u8>;
    MmioWrite => fn mmio_write(offset: u64, data: Vec<u8>) -> ();
    /// Push out posted writes.
    Flush => fn flush() -> ();
    Doorbell => fn doorbell(token: u32) -> ();
    AllocDma => fn alloc_dma(bytes: u64) -> DmaRegion;
    DmaRead => fn dma_read(id: DmaId, offset: u64, len: u64) -> Vec<u8>;
    DmaWrite => fn dma_write(id: DmaId, offset: u64, data: Vec<u8>) -> ();
    /// The CPU's own view of a DMA region, where the platform maps it
    /// into this process (see [`crate::Transport::dma_view`]).
    DmaView => fn dma_view(id: DmaId) -> Option<DmaView>;
    /// CPU access to video memory by VRAM offset.
    VramRead => fn vram_read(offset: u64, len: u64) -> Vec<u8>;
    VramWrite => fn vram_write(offset: u64, data: Vec<u8>) -> ();
    /// Bus mastering off, a function-level reset, bus mastering on
    /// ([`reset_function`]).
    ResetFunction => fn reset_function() -> ();
    /// Bus mastering off ([`clear_bus_master`]): every exit path of a boot.
    ClearBusMaster => fn clear_bus_master() -> ();
    Stats => fn stats() -> PciStats;
    /// What the card takes; see [`Transport::capabilities`].
    Capabilities => fn capabilities() -> Capabilities;
}

struct PciActor {
    transport: Box<dyn Transport>,
    stats: PciStats,
}

impl PciActor {
    fn count_refusal<T>(&mut self, r: Result<T, PciError>) -> Result<T, PciError> {
        if matches!(&r, Err(e) if e.is_refusal()) {
            self.stats.refusals += 1;
        }
        r
    }
}

/// Reads through the actor are bounded so a bad length cannot make it
/// allocate without limit.
const MAX_READ_BYTES: u64 = 64 << 20;

fn checked_len(len: u64) -> Result<usize, PciError> {
    if len > MAX_READ_BYTES {
        return Err(PciError::OutOfRange {
            what: "one read through the pci actor".to_string(),
            offset: 0,
            len,
            size: MAX_READ_BYTES,
        });
    }
    // CAST: at most 64 MiB.
    Ok(len as usize)
}

/// Read the identification of a card over any transport, without booting it.
///
/// # Errors
/// Transport failures, or a vendor other than NVIDIA.
pub fn read_identity(t: &mut dyn Transport) -> Result<PciIdentity, PciError> {
    // CAST: 16-bit config reads fit in u16.
    let vendor = (t.config_read(offset::VENDOR_ID, Width::U16)? & 0xFFFF) as u16;
    let device = (t.config_read(offset::DEVICE_ID, Width::U16)? & 0xFFFF) as u16;
    // No function answers a configuration read with all ones (a card off
    // the bus): say so, rather than "not NVIDIA's".
    if (vendor, device) == (u16::MAX, u16::MAX) {
        return Err(PciError::OffTheBus {
            what: "configuration space",
        });
    }
    if vendor != VENDOR_NVIDIA {
        return Err(PciError::NotNvidia { vendor, device });
    }
    let revision_and_class = t.config_read(offset::REVISION_AND_CLASS, Width::U32)?;
    let bars = t.bars()?;
    let boot_0 = t.mmio_read32(u64::from(NV_PMC_BOOT_0::ADDR))?;
    if boot_0 == u32::MAX {
        return Err(PciError::OffTheBus {
            what: "NV_PMC_BOOT_0",
        });
    }
    let boot_42 = t.mmio_read32(u64::from(NV_PMC_BOOT_42::ADDR))?;
    // Either copy of WPR2 being up means firmware ran on this power cycle.
    let wpr2 =
        NV_PFB_PRI_MMU_WPR2_ADDR_HI(t.mmio_read32(u64::from(NV_PFB_PRI_MMU_WPR2_ADDR_HI::ADDR))?);
    let wpr2_hub =
        NV_PFB_PRI_MMU_WPR2_ADDR_HI(t.mmio_read32(u64::from(NV_HUBMMU_PRI_MMU_WPR2_ADDR_HI))?);
    Ok(PciIdentity {
        backend: t.backend().to_string(),
        vendor,
        device,
        revision_and_class,
        bars,
        chip: ChipIdentity::decode(boot_0, boot_42),
        firmware_resident: wpr2.val() != 0 || wpr2_hub.val() != 0,
    })
}

impl PciService for PciActor {
    fn identify(&mut self) -> Result<PciIdentity, PciError> {
        self.stats.config_reads += 3;
        self.stats.mmio_reads += 3;
        read_identity(self.transport.as_mut())
    }

    fn config_read(&mut self, offset: u16, width: Width) -> Result<u32, PciError> {
        self.stats.config_reads += 1;
        self.transport.config_read(offset, width)
    }

    fn config_write(&mut self, offset: u16, width: Width, value: u32) -> Result<(), PciError> {
        self.stats.config_writes += 1;
        self.transport.config_write(offset, width, value)
    }

    fn mmio_read32(&mut self, offset: u64) -> Result<u32, PciError> {
        self.stats.mmio_reads += 1;
        self.transport.mmio_read32(offset)
    }

    fn mmio_write32(&mut self, offset: u64, value: u32) -> Result<(), PciError> {
        self.stats.mmio_writes += 1;
        self.transport.mmio_write32(offset, value)
    }

    fn mmio_read(&mut self, offset: u64, len: u64) -> Result<Vec<u8>, PciError> {
        self.stats.mmio_reads += 1;
        let mut out = vec![0u8; checked_len(len)?];
        self.transport.mmio_read(offset, &mut out)?;
        Ok(out)
    }

    fn mmio_write(&mut self, offset: u64, data: Vec<u8>) -> Result<(), PciError> {
        self.stats.mmio_writes += 1;
        self.transport.mmio_write(offset, &data)
    }

    fn flush(&mut self) -> Result<(), PciError> {
        self.transport.flush()
    }

    fn dma_read(&mut self, id: DmaId, offset: u64, len: u64) -> Result<Vec<u8>, PciError> {
        let mut out = vec![0u8; checked_len(len)?];
        self.transport.dma_read(id, offset, &mut out)?;
        Ok(out)
    }

    fn dma_write(&mut self, id: DmaId, offset: u64, data: Vec<u8>) -> Result<(), PciError> {
        self.transport.dma_write(id, offset, &data)
    }

    fn dma_view(&mut self, id: DmaId) -> Result<Option<DmaView>, PciError> {
        self.transport.dma_view(id)
    }

    fn vram_read(&mut self, offset: u64, len: u64) -> Result<Vec<u8>, PciError> {
        let mut out = vec![0u8; checked_len(len)?];
        let r = self.transport.vram_read(offset, &mut out);
        self.count_refusal(r)?;
        Ok(out)
    }

    fn vram_write(&mut self, offset: u64, data: Vec<u8>) -> Result<(), PciError> {
        let r = self.transport.vram_write(offset, &data);
        self.count_refusal(r)
    }

    fn doorbell(&mut self, token: u32) -> Result<(), PciError> {
        self.stats.doorbells += 1;
        let r = self.transport.doorbell(token);
        self.count_refusal(r)
    }

    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        self.stats.dma_allocations += 1;
        let r = self.transport.alloc_dma(bytes);
        self.count_refusal(r)
    }

    fn reset_function(&mut self) -> Result<(), PciError> {
        self.stats.config_writes += 2;
        reset_function(self.transport.as_mut()).map(|_| ())
    }

    fn clear_bus_master(&mut self) -> Result<(), PciError> {
        self.stats.config_writes += 1;
        clear_bus_master(self.transport.as_mut()).map(|_| ())
    }

    fn stats(&mut self) -> Result<PciStats, PciError> {
        Ok(self.stats)
    }

    fn capabilities(&mut self) -> Result<Capabilities, PciError> {
        Ok(self.transport.capabilities())
    }
}

/// Open a connection through `opener`, turn on memory decoding and bus
/// mastering (every boot starts so), and start the actor that owns it.
///
/// # Errors
/// When the card cannot be opened, is not NVIDIA's, or the thread cannot start.
pub fn spawn(
    config: ActorConfig,
    opener: &Arc<dyn Opener>,
) -> Result<(PciHandle, ActorJoin), PciError> {
    let mut transport = opener.open()?;
    // Registers answer only with memory decoding on; bus mastering waits
    // until the card is known to be NVIDIA's. Where the kernel module owns
    // the function, none of it is ours to touch.
    if transport.owns_function() {
        enable_memory_space(transport.as_mut())?;
        read_identity(transport.as_mut())?;
        enable_bus_master(transport.as_mut())?;
    }
    let actor = PciActor {
        transport,
        stats: PciStats::default(),
    };
    PciHandle::spawn(config, actor).map_err(PciError::Io)
}
