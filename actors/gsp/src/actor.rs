use crate::error::GspError;
use crate::objects::{ObjectHandle, ObjectTree, RmObject};
use macuda_core::{actor_protocol, ActorConfig, ActorJoin};
use macuda_hw::regs::NV_PGC6_AON_SECURE_SCRATCH_GROUP_42;
use macuda_hw::ChipIdentity;
use macuda_pci::{PciHandle, PciIdentity};
use serde::{Deserialize, Serialize};

/// Which RM answers this actor's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RmBackend {
    /// No firmware, no kernel module: an object tree kept in software.
    Null,
}

impl RmBackend {
    pub fn describe(self) -> &'static str {
        match self {
            RmBackend::Null => "null RM (no firmware)",
        }
    }
}

/// What the rest of the stack needs to know about the opened device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub identity: PciIdentity,
    pub chip: ChipIdentity,
    pub vram_bytes: u64,
    pub rm: RmBackend,
    /// Objects every later allocation hangs under.
    pub client: ObjectHandle,
    pub device: ObjectHandle,
    pub subdevice: ObjectHandle,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GspStats {
    pub allocs: u64,
    pub frees: u64,
    pub live_objects: u64,
    pub register_reads: u64,
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
}

struct GspActor {
    pci: PciHandle,
    tree: ObjectTree,
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
}

impl GspService for GspActor {
    fn open_device(&mut self) -> Result<DeviceInfo, GspError> {
        let identity = self.pci.identify().map_err(GspError::Pci)?;
        let vram_bytes = self.read_vram_bytes()?;
        let client = self.alloc(ObjectHandle::NONE, macuda_hw::class::NV01_ROOT_CLIENT)?;
        let device = self.alloc(client, macuda_hw::class::NV01_DEVICE_0)?;
        let subdevice = self.alloc(device, macuda_hw::class::NV20_SUBDEVICE_0)?;
        let info = DeviceInfo {
            chip: identity.chip,
            identity,
            vram_bytes,
            rm: RmBackend::Null,
            client,
            device,
            subdevice,
        };
        tracing::info!(chip = %info.chip.chip, vram_mib = vram_bytes / MIB, "device open");
        self.info = Some(info.clone());
        Ok(info)
    }

    fn device_info(&mut self) -> Result<DeviceInfo, GspError> {
        self.info.clone().ok_or(GspError::NotOpen)
    }

    fn alloc(&mut self, parent: ObjectHandle, class: u32) -> Result<ObjectHandle, GspError> {
        let h = self.tree.alloc(parent, class)?;
        self.stats.allocs += 1;
        self.stats.live_objects = self.tree.len() as u64;
        Ok(h)
    }

    fn free(&mut self, handle: ObjectHandle) -> Result<u32, GspError> {
        let n = self.tree.free(handle)?;
        self.stats.frees += u64::from(n);
        self.stats.live_objects = self.tree.len() as u64;
        Ok(n)
    }

    fn objects(&mut self) -> Result<Vec<RmObject>, GspError> {
        Ok(self.tree.all())
    }

    fn stats(&mut self) -> Result<GspStats, GspError> {
        Ok(self.stats)
    }
}

/// Start the gsp actor over `pci`.
///
/// # Errors
/// Only if the thread cannot start.
pub fn spawn(config: ActorConfig, pci: PciHandle) -> Result<(GspHandle, ActorJoin), GspError> {
    let actor = GspActor {
        pci,
        tree: ObjectTree::default(),
        info: None,
        stats: GspStats::default(),
    };
    GspHandle::spawn(config, actor).map_err(GspError::Spawn)
}
