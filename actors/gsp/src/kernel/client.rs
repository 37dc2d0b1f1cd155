//! An RM client with its device and subdevice on one GPU, the objects
//! and controls under it, and CPU mappings of its memory.

use super::error::KernelRmError;
use super::ioctl::{
    alloc_raw, check, control_raw, escape_call, free_raw, open_node, RmDriver, RmMapping, RmNode,
    CTL_NODE, DRIVER_MAJOR,
};
use macuda_hw::rm::{
    self, class, control, escape, BuildVersionV2, CardInfo, ClassListV2, DeviceAlloc, GpuIdInfoV2,
    MapMemory, RegisterFd, SubdeviceAlloc, CARD_INFO_ENTRIES,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Handles we choose ourselves (RM wants them on the OS-descriptor path),
/// far from the ones RM generates.
const FIRST_OWN_HANDLE: u32 = 0x1001;

/// An open RM client with its device and subdevice on one GPU; freed
/// (everything under the client) when dropped.
pub struct KernelRm {
    pub(super) driver: Arc<dyn RmDriver>,
    /// Shared with the [`RmTeardown`](super::RmTeardown) the supervisor holds.
    pub(super) ctl: Arc<dyn RmNode>,
    /// Kept open: it pins the GPU and links to the ctl fd's client.
    pub(super) device_node: Box<dyn RmNode>,
    pub(super) node: PathBuf,
    pub(super) index: u32,
    pub(super) card: CardInfo,
    pub(super) driver_version: String,
    pub(super) client: u32,
    pub(super) device: u32,
    pub(super) subdevice: u32,
    pub(super) next_handle: std::sync::atomic::AtomicU32,
    /// Channel groups the teardown handle stops.
    pub(super) groups: Arc<parking_lot::Mutex<Vec<u32>>>,
    /// Set once the client is freed, by whichever of us or the teardown
    /// handle does it first.
    pub(super) freed: Arc<std::sync::atomic::AtomicBool>,
}

/// The GPUs the kernel module lists, in its order.
///
/// # Errors
/// The control node cannot be opened or the escape fails.
pub fn cards(driver: &dyn RmDriver) -> Result<Vec<CardInfo>, KernelRmError> {
    let ctl = open_node(driver, Path::new(CTL_NODE))?;
    list_cards(ctl.as_ref())
}

fn list_cards(ctl: &dyn RmNode) -> Result<Vec<CardInfo>, KernelRmError> {
    let mut all = [CardInfo::default(); CARD_INFO_ENTRIES];
    escape_call(ctl, escape::CARD_INFO, &mut all, "CARD_INFO")?;
    Ok(all.into_iter().filter(|c| c.valid != 0).collect())
}

impl Drop for KernelRm {
    fn drop(&mut self) {
        // Freeing the client frees the device, subdevice and all below;
        // recovery may have freed it already.
        if self.freed.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        // The same order as recovery's: our channel groups leave the
        // scheduler before their memory goes with the client (an actor
        // unwinding from a panic gets here before recovery does).
        if let Err(e) = self.teardown().stop_channels() {
            tracing::warn!(error = %e, "stopping our channel groups failed");
        }
        if self.freed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        if let Err(e) = self.free(0, self.client) {
            tracing::warn!(error = %e, "freeing the RM client failed");
        }
    }
}

impl KernelRm {
    /// Open GPU `index` (the module's order): client, device, subdevice.
    ///
    /// # Errors
    /// No such GPU, a driver other than 580, or any RM refusal.
    pub fn open(driver: Arc<dyn RmDriver>, index: u32) -> Result<KernelRm, KernelRmError> {
        let ctl: Arc<dyn RmNode> = Arc::from(open_node(driver.as_ref(), Path::new(CTL_NODE))?);
        let cards = list_cards(ctl.as_ref())?;
        let card = *cards.get(index as usize).ok_or(KernelRmError::NoGpu {
            index,
            found: cards.len(),
        })?;
        let client = alloc_raw(ctl.as_ref(), 0, 0, class::NV01_ROOT_CLIENT, None::<&mut ()>)?;
        let mut build = BuildVersionV2::default();
        control_raw(
            ctl.as_ref(),
            client,
            client,
            control::SYSTEM_GET_BUILD_VERSION_V2,
            &mut build,
        )?;
        let driver_version = rm::c_string(&build.driver_version);
        let major = driver_version
            .split('.')
            .next()
            .and_then(|m| m.parse::<u32>().ok());
        if major != Some(DRIVER_MAJOR) {
            // Closing the control node frees the client.
            return Err(KernelRmError::DriverVersion {
                found: driver_version,
                declared: DRIVER_MAJOR,
            });
        }
        // The device node pins the GPU; link it to our client before any
        // control names it.
        let node = PathBuf::from(format!("/dev/nvidia{}", card.minor_number));
        let device_node = open_node(driver.as_ref(), &node)?;
        let mut link = [RegisterFd { ctl_fd: ctl.fd() }];
        escape_call(
            device_node.as_ref(),
            escape::REGISTER_FD,
            &mut link,
            "REGISTER_FD",
        )?;
        let mut rm = KernelRm {
            driver,
            ctl,
            device_node,
            node,
            index,
            card,
            driver_version,
            client,
            device: 0,
            subdevice: 0,
            next_handle: std::sync::atomic::AtomicU32::new(FIRST_OWN_HANDLE),
            groups: Arc::default(),
            freed: Arc::default(),
        };
        let mut id = GpuIdInfoV2 {
            gpu_id: card.gpu_id,
            ..GpuIdInfoV2::default()
        };
        rm.control(client, control::GPU_GET_ID_INFO_V2, &mut id)?;
        let mut dev = DeviceAlloc {
            device_id: id.device_instance,
            h_client_share: client,
            ..DeviceAlloc::default()
        };
        rm.device = rm.alloc(client, class::NV01_DEVICE_0, Some(&mut dev))?;
        let mut sub = SubdeviceAlloc::default();
        rm.subdevice = rm.alloc(rm.device, class::NV20_SUBDEVICE_0, Some(&mut sub))?;
        Ok(rm)
    }

    pub fn client(&self) -> u32 {
        self.client
    }

    /// What the module's card list says of this GPU.
    pub fn card(&self) -> CardInfo {
        self.card
    }

    pub fn device(&self) -> u32 {
        self.device
    }

    pub fn subdevice(&self) -> u32 {
        self.subdevice
    }

    /// Allocate an object of `class` under `parent`; returns its handle.
    ///
    /// # Errors
    /// The ioctl fails or RM refuses.
    pub fn alloc<P>(
        &self,
        parent: u32,
        class: u32,
        params: Option<&mut P>,
    ) -> Result<u32, KernelRmError> {
        alloc_raw(self.ctl.as_ref(), self.client, parent, class, params)
    }

    /// Run control `cmd` on `object` with its parameter structure.
    ///
    /// # Errors
    /// The ioctl fails or RM refuses.
    pub fn control<P>(&self, object: u32, cmd: u32, params: &mut P) -> Result<(), KernelRmError> {
        control_raw(self.ctl.as_ref(), self.client, object, cmd, params)
    }

    /// Free `object` and everything under it.
    ///
    /// # Errors
    /// The ioctl fails or RM refuses.
    pub fn free(&self, parent: u32, object: u32) -> Result<(), KernelRmError> {
        free_raw(self.ctl.as_ref(), self.client, parent, object)
    }

    /// The classes the device offers.
    ///
    /// # Errors
    /// RM refuses the control.
    pub fn classes(&self) -> Result<Vec<u32>, KernelRmError> {
        let mut list = ClassListV2::default();
        self.control(self.device, control::GPU_GET_CLASSLIST_V2, &mut list)?;
        let n = (list.count as usize).min(list.classes.len());
        Ok(list.classes[..n].to_vec())
    }

    /// The first of `wanted` the device offers.
    ///
    /// # Errors
    /// None offered, or RM refuses the class list.
    pub fn pick_class(
        &self,
        kind: &'static str,
        wanted: &'static [u32],
    ) -> Result<u32, KernelRmError> {
        let offered = self.classes()?;
        wanted
            .iter()
            .copied()
            .find(|c| offered.contains(c))
            .ok_or(KernelRmError::NoClass { kind, wanted })
    }

    /// Map `len` bytes of `object` for the CPU: RM attaches the mapping to
    /// a fresh device node (a node holds one mapping context), which mmap
    /// then maps; the mapping keeps the node alive.
    ///
    /// # Errors
    /// Opening or linking the node, RM refusing, or the mmap failing.
    pub fn map(&self, object: u32, len: usize) -> Result<Box<dyn RmMapping>, KernelRmError> {
        let node = open_node(self.driver.as_ref(), &self.node)?;
        let mut link = [RegisterFd {
            ctl_fd: self.ctl.fd(),
        }];
        escape_call(node.as_ref(), escape::REGISTER_FD, &mut link, "REGISTER_FD")?;
        self.map_through(node.as_ref(), object, len)
    }

    /// Map `len` bytes of RM-allocated system memory for the CPU: RM ties
    /// such mappings to a control node, so a fresh one takes the mmap.
    ///
    /// # Errors
    /// Opening the node, RM refusing, or the mmap failing.
    pub fn map_sysmem(&self, object: u32, len: usize) -> Result<Box<dyn RmMapping>, KernelRmError> {
        let node = open_node(self.driver.as_ref(), Path::new(CTL_NODE))?;
        self.map_through(node.as_ref(), object, len)
    }

    /// RM_MAP_MEMORY (on our control node) attaching `object` to `node`,
    /// then the mmap of `node`.
    fn map_through(
        &self,
        node: &dyn RmNode,
        object: u32,
        len: usize,
    ) -> Result<Box<dyn RmMapping>, KernelRmError> {
        let mut m = [MapMemory {
            h_client: self.client,
            h_device: self.device,
            h_memory: object,
            length: len as u64,
            fd: node.fd(),
            ..MapMemory::default()
        }];
        escape_call(
            self.ctl.as_ref(),
            escape::RM_MAP_MEMORY,
            &mut m,
            "RM_MAP_MEMORY",
        )?;
        check(m[0].status, "a CPU mapping")?;
        node.map(len).map_err(|source| KernelRmError::Map {
            object,
            len,
            source,
        })
    }
}
