use crate::card_tables::TablesFactory;
use crate::error::GspError;
use crate::fault::ChannelFault;
use crate::firmware::SearchPath;
use crate::firmware_rm::FirmwareRm;
use crate::handle::ObjectHandle;
use crate::info::{DeviceInfo, MemoryOwner, RmBackend, NULL_COMPUTE};
use crate::kernel::{RmDriver, RmTeardown};
use crate::module_rm::ModuleRm;
use crate::null_rm::NullRm;
use crate::objects::RmObject;
use crate::resources::{ChannelSetup, Channels, Doorbell, PinnedAlloc, VideoAlloc};
use crate::rm::Rm;
use crate::view::CpuView;
use macuda_core::{actor_protocol, ActorConfig, ActorJoin};
use macuda_hw::regs::NV_PGC6_AON_SECURE_SCRATCH_GROUP_42;
use macuda_pci::PciHandle;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// How the gsp actor reaches its RM.
#[derive(Clone)]
pub enum RmChoice {
    /// The software object tree (the null device).
    Null,
    /// GPU `index` of NVIDIA's kernel module, through `driver`'s nodes
    /// (the device files, or a fake of them in tests).
    Kernel {
        driver: Arc<dyn RmDriver>,
        index: u32,
        /// Video memory allocations from this many bytes take 2 MiB pages
        /// (`None`: the module's own threshold).
        huge_pages_from: Option<u64>,
    },
    /// GSP-RM we boot on a card no driver serves (the TinyGPU socket,
    /// sysfs, the simulated card), with the images for its chip found
    /// along `firmware`, our memory on it laid out by `tables` once it
    /// runs.
    Firmware {
        firmware: SearchPath,
        tables: TablesFactory,
        /// Where the RM keeps what crash reports say of GSP-RM.
        journal: crate::bare::SharedJournal,
        /// How GSP-RM's log records are decoded, where that is known.
        log_metadata: Option<crate::bare::SharedLogMetadata>,
    },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GspStats {
    pub allocs: u64,
    pub frees: u64,
    pub live_objects: u64,
    pub register_reads: u64,
    /// Bytes of video and pinned host memory RM holds for us now.
    pub rm_memory_bytes: u64,
    pub cpu_mappings: u64,
    pub channel_groups: u64,
}

actor_protocol! {
    /// The gsp actor's handle.
    pub handle GspHandle;
    request GspRequest;
    service GspService;
    error GspError;
    /// Identify the card, read its VRAM size and build the base objects.
    OpenDevice => fn open_device() -> DeviceInfo;
    DeviceInfo => fn device_info() -> DeviceInfo;
    Alloc => fn alloc(parent: ObjectHandle, class: u32) -> ObjectHandle;
    /// Free an object and its subtree; returns how many objects went.
    Free => fn free(handle: ObjectHandle) -> u32;
    Objects => fn objects() -> Vec<RmObject>;
    Stats => fn stats() -> GspStats;
    /// Video memory from RM, mapped for the GPU at `va` (aligned to the
    /// page size the device's [`crate::RmMemoryRules`] give for `bytes`).
    AllocVideo => fn alloc_video(bytes: u64, va: u64) -> VideoAlloc;
    /// Pinned host memory, mapped for the GPU at `va` (4 KiB aligned).
    AllocPinned => fn alloc_pinned(bytes: u64, va: u64) -> PinnedAlloc;
    /// A CPU view of `bytes` of video memory `handle` (through BAR1).
    MapCpu => fn map_cpu(handle: ObjectHandle, bytes: u64) -> CpuView;
    /// Unmap memory from the GPU at `va` and free it.
    FreeMemory => fn free_memory(handle: ObjectHandle, va: u64, bytes: u64) -> ();
    /// A channel group with a compute and a copy channel over the rings
    /// given, scheduled to run.
    CreateChannels => fn create_channels(setup: ChannelSetup) -> Channels;
    /// Free the channel group (after a fault, before fresh channels).
    DestroyChannels => fn destroy_channels() -> ();
    Doorbell => fn doorbell() -> Doorbell;
    /// What RM reported against our channels: `None` while they are
    /// healthy; the Xid, SM error states and MMU faults after an error.
    /// With `deep`, the debugger is asked even when the error notifier is
    /// empty (a wait that timed out wants to know of a fault RM did not
    /// notify).
    ChannelFault => fn channel_fault(deep: bool) -> Option<ChannelFault>;
    /// The supervisor's handle to our RM objects, on the kernel path.
    Teardown => fn teardown() -> Option<RmTeardown>;
}

/// The actor: the RM it opened (until then, how to reach it), what the
/// device is, and counts. Every request goes to the RM through [`Rm`].
struct GspActor {
    pci: PciHandle,
    choice: Option<RmChoice>,
    rm: Option<Box<dyn Rm>>,
    info: Option<DeviceInfo>,
    stats: GspStats,
}

const MIB: u64 = 1 << 20;

impl GspActor {
    fn read_vram_bytes(&mut self) -> Result<u64, GspError> {
        self.stats.register_reads += 1;
        let mib = self
            .pci
            .mmio_read32(u64::from(NV_PGC6_AON_SECURE_SCRATCH_GROUP_42::ADDR))
            .map_err(GspError::Pci)?;
        if mib == 0 {
            return Err(GspError::NoVram);
        }
        Ok(u64::from(mib) * MIB)
    }

    fn rm(&mut self) -> Result<&mut (dyn Rm + 'static), GspError> {
        self.rm.as_deref_mut().ok_or(GspError::NotOpen)
    }

    fn note_live(&mut self) {
        if let Some(n) = self.rm.as_ref().and_then(|r| r.live_objects()) {
            self.stats.live_objects = n;
        }
    }

    fn open_null(&mut self) -> Result<(Box<dyn Rm>, DeviceInfo), GspError> {
        let identity = self.pci.identify().map_err(GspError::Pci)?;
        let vram_bytes = self.read_vram_bytes()?;
        let can = self.pci.capabilities().map_err(GspError::Pci)?;
        let (rm, base) = NullRm::open(self.pci.clone(), identity.chip.chip)?;
        self.stats.allocs += 3;
        let info = DeviceInfo {
            chip: identity.chip,
            identity,
            vram_bytes,
            rm: RmBackend::Null,
            can,
            memory: MemoryOwner::Ours,
            firmware: "the null device runs no firmware".to_string(),
            client: base.client,
            device: base.device,
            subdevice: base.subdevice,
            name: None,
            driver_version: None,
            compute: NULL_COMPUTE,
        };
        Ok((Box::new(rm), info))
    }
}

impl GspService for GspActor {
    fn open_device(&mut self) -> Result<DeviceInfo, GspError> {
        if self.rm.is_some() {
            return self.info.clone().ok_or(GspError::NotOpen);
        }
        let choice = self.choice.take().ok_or(GspError::NotOpen)?;
        let opened = match &choice {
            RmChoice::Null => self.open_null(),
            RmChoice::Kernel {
                driver,
                index,
                huge_pages_from,
            } => ModuleRm::open(Arc::clone(driver), *index, *huge_pages_from)
                .map(|(rm, info)| (Box::new(rm) as Box<dyn Rm>, info)),
            RmChoice::Firmware {
                firmware,
                tables,
                journal,
                log_metadata,
            } => {
                let journaling = (journal.clone(), log_metadata.clone());
                FirmwareRm::open(self.pci.clone(), firmware, tables, journaling)
                    .map(|(rm, info)| (Box::new(rm) as Box<dyn Rm>, info))
            }
        };
        let (rm, info) = match opened {
            Ok(o) => o,
            Err(e) => {
                // A later open may try again.
                self.choice = Some(choice);
                return Err(e);
            }
        };
        tracing::info!(chip = %info.chip.chip, vram_mib = info.vram_bytes / MIB, rm = info.rm.describe(), "device open");
        self.rm = Some(rm);
        self.note_live();
        self.info = Some(info.clone());
        Ok(info)
    }

    fn device_info(&mut self) -> Result<DeviceInfo, GspError> {
        self.info.clone().ok_or(GspError::NotOpen)
    }

    fn alloc(&mut self, parent: ObjectHandle, class: u32) -> Result<ObjectHandle, GspError> {
        let h = self.rm()?.alloc(parent, class)?;
        self.stats.allocs += 1;
        self.note_live();
        Ok(h)
    }

    fn free(&mut self, handle: ObjectHandle) -> Result<u32, GspError> {
        let n = self.rm()?.free(handle)?;
        self.stats.frees += u64::from(n);
        self.note_live();
        Ok(n)
    }

    fn objects(&mut self) -> Result<Vec<RmObject>, GspError> {
        Ok(self.rm.as_ref().map(|r| r.objects()).unwrap_or_default())
    }

    fn stats(&mut self) -> Result<GspStats, GspError> {
        Ok(self.stats)
    }

    fn alloc_video(&mut self, bytes: u64, va: u64) -> Result<VideoAlloc, GspError> {
        let v = self.rm()?.alloc_video(bytes, va)?;
        self.stats.allocs += 1;
        self.stats.rm_memory_bytes += v.bytes;
        Ok(v)
    }

    fn alloc_pinned(&mut self, bytes: u64, va: u64) -> Result<PinnedAlloc, GspError> {
        let p = self.rm()?.alloc_pinned(bytes, va)?;
        self.stats.allocs += 1;
        self.stats.rm_memory_bytes += p.bytes;
        Ok(p)
    }

    fn map_cpu(&mut self, handle: ObjectHandle, bytes: u64) -> Result<CpuView, GspError> {
        let v = self.rm()?.map_cpu(handle, bytes)?;
        self.stats.cpu_mappings += 1;
        Ok(v)
    }

    fn free_memory(&mut self, handle: ObjectHandle, va: u64, bytes: u64) -> Result<(), GspError> {
        self.rm()?.free_memory(handle, va, bytes)?;
        self.stats.frees += 1;
        self.stats.rm_memory_bytes = self.stats.rm_memory_bytes.saturating_sub(bytes);
        Ok(())
    }

    fn create_channels(&mut self, setup: ChannelSetup) -> Result<Channels, GspError> {
        let c = self.rm()?.create_channels(setup)?;
        self.stats.channel_groups += 1;
        self.note_live();
        Ok(c)
    }

    fn destroy_channels(&mut self) -> Result<(), GspError> {
        self.rm()?.destroy_channels()?;
        self.note_live();
        Ok(())
    }

    fn doorbell(&mut self) -> Result<Doorbell, GspError> {
        Ok(self.rm()?.doorbell())
    }

    fn channel_fault(&mut self, deep: bool) -> Result<Option<ChannelFault>, GspError> {
        match self.rm.as_deref_mut() {
            Some(rm) => rm.channel_fault(deep),
            None => Ok(None),
        }
    }

    fn teardown(&mut self) -> Result<Option<RmTeardown>, GspError> {
        Ok(self.rm.as_ref().and_then(|r| r.teardown()))
    }
}

/// Start the gsp actor over `pci`, with the RM `choice` names; the device
/// opens at [`GspHandle::open_device`].
///
/// # Errors
/// Only if the thread cannot start.
pub fn spawn(
    config: ActorConfig,
    pci: PciHandle,
    choice: RmChoice,
) -> Result<(GspHandle, ActorJoin), GspError> {
    let actor = GspActor {
        pci,
        choice: Some(choice),
        rm: None,
        info: None,
        stats: GspStats::default(),
    };
    GspHandle::spawn(config, actor).map_err(GspError::Spawn)
}
