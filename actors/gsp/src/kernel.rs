//! RM through NVIDIA's kernel module: the client, device and subdevice
//! objects allocated with the module's ioctls on /dev/nvidiactl and
//! /dev/nvidiaN, and the controls that say what the GPU is. No libcuda is
//! involved; the parameter structures are ours (macuda_hw::rm), pinned to
//! the 580 headers.
//!
//! An ioctl returns 0 whenever the request reached RM, even if RM refused
//! it: the RM status in the structure is the real answer, so every call
//! checks both.

use macuda_hw::gpfifo::ENTRY_BYTES;
use macuda_hw::methods::usermode;
use macuda_hw::push::{USERD_BYTES, USERD_GP_GET, USERD_GP_PUT};
use macuda_hw::rm::{
    self, class, control, escape, fb_info, uvm, AllocOsMemory, ArchInfo, BuildVersionV2, CardInfo,
    ChannelAlloc, ChannelGroupAlloc, ClassListV2, CtxShareAlloc, DeviceAlloc, FbInfoV2, GidInfo,
    GpfifoSchedule, GpuIdInfoV2, GpuNameString, MapMemory, MemoryAlloc, PciInfo, RegisterFd,
    RmAlloc, RmControl, RmFree, SubdeviceAlloc, VaSpaceAlloc, WorkSubmitToken, CARD_INFO_ENTRIES,
};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The VA space RM creates (tinygrad's values): from 4 KiB to just below
/// 2^49.
const VA_SPACE_BASE: u64 = 0x1000;
const VA_SPACE_SIZE: u64 = 0x1_FFFF_FB00_0000;
/// Where our allocations go in it: above the window kept for mappings the
/// CPU shares at the same address.
const GPU_VA_START: u64 = 0x20_0000_0000;
const GPU_VA_END: u64 = 1 << 48;
const PAGE_4K: u64 = 4 << 10;
const PAGE_2M: u64 = 2 << 20;
/// Allocations from this size up take 2 MiB pages.
const HUGE_PAGE_THRESHOLD: u64 = 8 << 20;

/// A GPU VA space managed by UVM and registered for one GPU.
pub struct GpuVaSpace {
    uvm: Box<dyn RmNode>,
    /// Holds the address space for UVM's teardown.
    _uvm_mm: Box<dyn RmNode>,
    pub handle: u32,
    pub uuid: [u8; 16],
    next_va: u64,
}

/// Video memory mapped into a GPU VA space (and maybe for the CPU).
pub struct VramBuffer {
    pub handle: u32,
    /// The GPU virtual address.
    pub va: u64,
    pub bytes: u64,
    pub cpu: Option<Box<dyn RmMapping>>,
}

/// GPFIFO channel classes we drive, preferred first.
pub const GPFIFO_CLASSES: &[u32] = &[
    class::BLACKWELL_CHANNEL_GPFIFO_A,
    class::HOPPER_CHANNEL_GPFIFO_A,
];
/// VA reserved for each channel's context buffers (UVM maps them there).
const CHANNEL_VA_WINDOW: u64 = 64 << 20;

/// A channel group with its subcontext and error notifier.
pub struct ChannelGroup {
    pub handle: u32,
    pub context_share: u32,
    pub notifier: u32,
    /// The notifier as the CPU sees it (RM writes errors there).
    notifier_map: Box<dyn RmMapping>,
}

/// What RM wrote to a channel group's error notifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the channel was removed: Xid {xid} ({}) on engine type {engine}", rm::xid_name(*.xid))]
pub struct ChannelError {
    pub xid: u32,
    pub engine: u16,
}

impl ChannelGroup {
    /// The error RM reported for the group's channels, if any.
    pub fn error(&self) -> Option<ChannelError> {
        let at = rm::NOTIFIER_SLOT_ERROR * std::mem::size_of::<rm::Notification>();
        // SAFETY: slot 0 lies inside the notifier's 4 KiB mapping; volatile,
        // RM (GSP) writes it.
        let n = unsafe {
            std::ptr::read_volatile(
                self.notifier_map
                    .as_ptr()
                    .add(at)
                    .cast::<rm::Notification>(),
            )
        };
        (n.status == rm::NOTIFICATION_STATUS_ERROR).then_some(ChannelError {
            xid: n.info32,
            engine: n.info16,
        })
    }
}

/// A GPFIFO channel whose ring and USERD the CPU writes.
pub struct GpfifoChannel {
    pub handle: u32,
    pub engine: u32,
    pub engine_class: u32,
    /// What the doorbell takes to run this channel.
    pub token: u32,
    pub entries: u32,
    userd_offset: u64,
    memory: VramBuffer,
    put: u32,
}

impl GpfifoChannel {
    fn cpu(&self) -> *mut u8 {
        // The channel memory is always allocated with a CPU mapping.
        self.memory
            .cpu
            .as_ref()
            .map_or(std::ptr::null_mut(), |m| m.as_ptr())
    }

    /// Hand a push buffer (GPU VA, length in dwords) to the engine: the
    /// GP entry at GP_PUT, GP_PUT past it in USERD, then the doorbell.
    ///
    /// # Errors
    /// A push buffer the GP entry cannot describe.
    pub fn submit(
        &mut self,
        usermode: &Usermode,
        push_va: u64,
        dwords: u32,
    ) -> Result<(), macuda_hw::push::FormatError> {
        let entry = macuda_hw::push::GpEntry::subroutine(push_va, dwords)?.encode();
        let base = self.cpu();
        let slot = u64::from(self.put) * ENTRY_BYTES;
        self.put = (self.put + 1) % self.entries;
        // SAFETY: the ring and USERD lie inside the channel memory's CPU
        // mapping (entries x 8 bytes, then USERD); volatile stores to
        // device memory.
        unsafe {
            std::ptr::write_volatile(base.add(slot as usize).cast::<u64>(), entry);
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            std::ptr::write_volatile(
                base.add((self.userd_offset + USERD_GP_PUT) as usize)
                    .cast::<u32>(),
                self.put,
            );
        }
        usermode.ring(self.token);
        Ok(())
    }

    /// GP_GET as the engine last reported it in USERD.
    pub fn gp_get(&self) -> u32 {
        // SAFETY: inside the channel memory's CPU mapping; volatile, the
        // engine writes it.
        unsafe {
            std::ptr::read_volatile(
                self.cpu()
                    .add((self.userd_offset + USERD_GP_GET) as usize)
                    .cast::<u32>(),
            )
        }
    }
}

/// Pinned host memory mapped into a GPU VA space.
pub struct HostBuffer {
    pub handle: u32,
    /// The GPU virtual address.
    pub va: u64,
    pub bytes: u64,
    /// The process's view of the same memory.
    pub map: memmap2::MmapMut,
}

/// Handles we choose ourselves (RM wants them on the OS-descriptor path),
/// far from the ones RM generates.
const FIRST_OWN_HANDLE: u32 = 0x1001;

/// Usermode classes we drive, preferred first.
pub const USERMODE_CLASSES: &[u32] = &[usermode::BLACKWELL_USERMODE_A, usermode::HOPPER_USERMODE_A];

/// The usermode register page of a GPU, mapped for the CPU.
pub struct Usermode {
    pub class: u32,
    pub object: u32,
    map: Box<dyn RmMapping>,
}

impl Usermode {
    fn read32(&self, offset: u32) -> u32 {
        debug_assert!(offset as usize + 4 <= self.map.len());
        // SAFETY: inside the mapped page (the offsets are within the 64 KiB page), 4-byte aligned
        // register offsets; a volatile read because the GPU changes them.
        unsafe { std::ptr::read_volatile(self.map.as_ptr().add(offset as usize).cast::<u32>()) }
    }

    /// PTIMER in nanoseconds: TIME_1, TIME_0, TIME_1 again, retried if the
    /// high half moved in between.
    pub fn time_ns(&self) -> u64 {
        loop {
            let hi = self.read32(usermode::TIME_1::BYTE_OFFSET);
            let lo = self.read32(usermode::TIME_0::BYTE_OFFSET);
            if self.read32(usermode::TIME_1::BYTE_OFFSET) == hi {
                return u64::from(hi) << 32 | u64::from(lo);
            }
        }
    }

    /// Ring the doorbell with a channel's work-submit token, after a fence
    /// that makes every earlier store (GP entry, GP_PUT) visible first.
    pub fn ring(&self, token: u32) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        let at = usermode::NOTIFY_CHANNEL_PENDING::BYTE_OFFSET as usize;
        debug_assert!(at + 4 <= self.map.len());
        // SAFETY: inside the mapped page (the offsets are within the 64 KiB page); a volatile store is
        // the doorbell write.
        unsafe { std::ptr::write_volatile(self.map.as_ptr().add(at).cast::<u32>(), token) }
    }
}

/// One open node of the kernel module (/dev/nvidiactl or /dev/nvidiaN).
pub trait RmNode: Send + Sync {
    /// The number naming this node to the driver (its fd), for REGISTER_FD.
    fn fd(&self) -> i32;
    /// Issue ioctl `request` over `size` bytes at `params`.
    ///
    /// # Safety
    /// `params` points to `size` live, writable bytes, and every pointer
    /// inside them points to live memory of this process, for the
    /// duration of the call.
    unsafe fn ioctl(&self, request: u64, params: *mut u8, size: usize) -> std::io::Result<()>;
    /// Map `len` bytes of what RM_MAP_MEMORY attached to this node.
    ///
    /// # Errors
    /// The mmap fails.
    fn map(&self, len: usize) -> std::io::Result<Box<dyn RmMapping>>;
}

/// A CPU mapping of an RM object; unmapped when dropped.
pub trait RmMapping: Send + Sync {
    fn as_ptr(&self) -> *mut u8;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl RmMapping for memmap2::MmapRaw {
    fn as_ptr(&self) -> *mut u8 {
        self.as_mut_ptr()
    }

    fn len(&self) -> usize {
        memmap2::MmapRaw::len(self)
    }
}

/// Opens nodes: the device files on a real machine, a fake in tests.
pub trait RmDriver: Send + Sync {
    /// # Errors
    /// The node cannot be opened.
    fn open(&self, path: &Path) -> std::io::Result<Box<dyn RmNode>>;
}

/// The kernel module's device files.
pub struct DeviceFiles;

impl RmDriver for DeviceFiles {
    fn open(&self, path: &Path) -> std::io::Result<Box<dyn RmNode>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(nix::libc::O_CLOEXEC)
            .open(path)?;
        Ok(Box::new(DeviceFile(file)))
    }
}

struct DeviceFile(File);

impl RmNode for DeviceFile {
    fn fd(&self) -> i32 {
        self.0.as_raw_fd()
    }

    unsafe fn ioctl(&self, request: u64, params: *mut u8, size: usize) -> std::io::Result<()> {
        let _ = size;
        // SAFETY: the caller guarantees `params` holds `size` live bytes,
        // the size the request (or, for UVM, the command) names; the driver
        // copies that many bytes in and out and keeps no pointer after it.
        let r =
            unsafe { nix::libc::ioctl(self.0.as_raw_fd(), request as nix::libc::c_ulong, params) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    fn map(&self, len: usize) -> std::io::Result<Box<dyn RmMapping>> {
        let map = memmap2::MmapOptions::new().len(len).map_raw(&self.0)?;
        Ok(Box::new(map))
    }
}

/// The control node every client lives on.
pub const CTL_NODE: &str = "/dev/nvidiactl";
/// The driver major version whose structures we declare.
pub const DRIVER_MAJOR: u32 = 580;

#[derive(Debug, thiserror::Error)]
pub enum KernelRmError {
    #[error("cannot open {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("ioctl {what} failed")]
    Ioctl {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("RM refused {what}: status {status:#x} ({})", rm::status::name(*.status))]
    Status { what: &'static str, status: u32 },
    #[error("cannot map {len} bytes of object {object:#x}")]
    Map {
        object: u32,
        len: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("the GPU offers none of the {kind} classes we drive ({wanted:x?})")]
    NoClass {
        kind: &'static str,
        wanted: &'static [u32],
    },
    #[error("no GPU virtual addresses left for {bytes} bytes")]
    VaExhausted { bytes: u64 },
    #[error("no GPU {index}: the kernel module lists {found}")]
    NoGpu { index: u32, found: usize },
    #[error("the kernel module is {found}; these structures are declared for {DRIVER_MAJOR}")]
    DriverVersion { found: String },
}

/// What the kernel module says the GPU is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelIdentity {
    pub index: u32,
    pub node: PathBuf,
    pub pci: PciInfo,
    pub gpu_id: u32,
    pub driver_version: String,
    pub name: String,
    pub architecture: u32,
    pub implementation: u32,
    pub chip: Option<&'static str>,
    /// Video memory clients can use.
    pub vram_bytes: u64,
}

/// An open RM client with its device and subdevice on one GPU; freed
/// (everything under the client) when dropped.
pub struct KernelRm {
    driver: Arc<dyn RmDriver>,
    ctl: Box<dyn RmNode>,
    /// Kept open: it pins the GPU and links to the ctl fd's client.
    _device_node: Box<dyn RmNode>,
    node: PathBuf,
    index: u32,
    card: CardInfo,
    driver_version: String,
    client: u32,
    device: u32,
    subdevice: u32,
    next_handle: std::sync::atomic::AtomicU32,
}

fn open_node(driver: &dyn RmDriver, path: &Path) -> Result<Box<dyn RmNode>, KernelRmError> {
    driver.open(path).map_err(|source| KernelRmError::Open {
        path: path.to_path_buf(),
        source,
    })
}

/// One escape: `params` is the exact structure the escape takes.
fn escape_call<T>(
    node: &dyn RmNode,
    nr: u32,
    params: &mut [T],
    what: &'static str,
) -> Result<(), KernelRmError> {
    let size = std::mem::size_of_val(params);
    raw_ioctl(node, rm::request(nr, size), params, what)
}

/// One ioctl with a ready request word (UVM's are bare command numbers).
fn raw_ioctl<T>(
    node: &dyn RmNode,
    request: u64,
    params: &mut [T],
    what: &'static str,
) -> Result<(), KernelRmError> {
    let size = std::mem::size_of_val(params);
    // SAFETY: `params` is an exclusive borrow of `size` bytes, live for the
    // call; the pointers inside it were made from borrows the callers hold
    // across this call.
    unsafe { node.ioctl(request, params.as_mut_ptr().cast(), size) }
        .map_err(|source| KernelRmError::Ioctl { what, source })
}

fn check(status: u32, what: &'static str) -> Result<(), KernelRmError> {
    if status == 0 {
        Ok(())
    } else {
        Err(KernelRmError::Status { what, status })
    }
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

impl KernelRm {
    /// Open GPU `index` (the module's order): client, device, subdevice.
    ///
    /// # Errors
    /// No such GPU, a driver other than 580, or any RM refusal.
    pub fn open(driver: Arc<dyn RmDriver>, index: u32) -> Result<KernelRm, KernelRmError> {
        let ctl = open_node(driver.as_ref(), Path::new(CTL_NODE))?;
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
            _device_node: device_node,
            node,
            index,
            card,
            driver_version,
            client,
            device: 0,
            subdevice: 0,
            next_handle: std::sync::atomic::AtomicU32::new(FIRST_OWN_HANDLE),
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
        let mut f = [RmFree {
            h_root: self.client,
            h_object_parent: parent,
            h_object_old: object,
            status: 0,
        }];
        escape_call(self.ctl.as_ref(), escape::RM_FREE, &mut f, "RM_FREE")?;
        check(f[0].status, "a free")
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

    /// The usermode register page: PTIMER and the doorbell.
    ///
    /// # Errors
    /// No usermode class, or RM refusing its allocation or mapping.
    pub fn usermode(&self) -> Result<Usermode, KernelRmError> {
        let class = self.pick_class("usermode", USERMODE_CLASSES)?;
        let object = self.alloc(self.subdevice, class, None::<&mut ()>)?;
        // CAST: the page is 64 KiB.
        let map = self.map(object, usermode::SIZE as usize)?;
        Ok(Usermode { class, object, map })
    }

    /// A GPU VA space whose page tables UVM manages, registered with UVM
    /// for this GPU: what compute and copy channels run in.
    ///
    /// # Errors
    /// UVM or RM refusing a step.
    pub fn va_space(&self) -> Result<GpuVaSpace, KernelRmError> {
        let driver = self.driver.as_ref();
        let uvm_node = open_node(driver, Path::new(uvm::NODE))?;
        let mut init = [uvm::Initialize::default()];
        raw_ioctl(
            uvm_node.as_ref(),
            uvm::INITIALIZE,
            &mut init,
            "UVM_INITIALIZE",
        )?;
        check(init[0].status, "UVM initialisation")?;
        // A second node holds the address space for UVM's teardown at exit;
        // some platforms answer "nothing to do", which is fine.
        let mm = open_node(driver, Path::new(uvm::NODE))?;
        let mut mm_init = [uvm::MmInitialize {
            uvm_fd: uvm_node.fd(),
            status: 0,
        }];
        if let Err(e) = raw_ioctl(
            mm.as_ref(),
            uvm::MM_INITIALIZE,
            &mut mm_init,
            "UVM_MM_INITIALIZE",
        ) {
            tracing::debug!(error = %e, "UVM_MM_INITIALIZE");
        }
        let mut params = VaSpaceAlloc {
            flags: rm::vaspace::IS_EXTERNALLY_OWNED | rm::vaspace::ENABLE_PAGE_FAULTING,
            va_base: VA_SPACE_BASE,
            va_size: VA_SPACE_SIZE,
            ..VaSpaceAlloc::default()
        };
        let handle = self.alloc(self.device, class::FERMI_VASPACE_A, Some(&mut params))?;
        let mut gid = GidInfo {
            flags: rm::GID_FORMAT_BINARY,
            ..GidInfo::default()
        };
        self.control(self.subdevice, control::GPU_GET_GID_INFO, &mut gid)?;
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&gid.data[..16]);
        let mut reg = [uvm::RegisterGpu {
            uuid,
            rm_ctrl_fd: -1,
            ..uvm::RegisterGpu::default()
        }];
        raw_ioctl(
            uvm_node.as_ref(),
            uvm::REGISTER_GPU,
            &mut reg,
            "UVM_REGISTER_GPU",
        )?;
        check(reg[0].status, "registering the GPU with UVM")?;
        let mut reg_va = [uvm::RegisterGpuVaSpace {
            uuid,
            rm_ctrl_fd: self.ctl.fd(),
            h_client: self.client,
            h_va_space: handle,
            status: 0,
        }];
        raw_ioctl(
            uvm_node.as_ref(),
            uvm::REGISTER_GPU_VASPACE,
            &mut reg_va,
            "UVM_REGISTER_GPU_VASPACE",
        )?;
        check(reg_va[0].status, "registering the VA space with UVM")?;
        Ok(GpuVaSpace {
            uvm: uvm_node,
            _uvm_mm: mm,
            handle,
            uuid,
            next_va: GPU_VA_START,
        })
    }

    /// Map RM memory object `handle` (`size` bytes) into `space` at a VA
    /// of ours aligned to `page`, through UVM.
    fn map_for_gpu(
        &self,
        space: &mut GpuVaSpace,
        handle: u32,
        size: u64,
        page: u64,
    ) -> Result<u64, KernelRmError> {
        let va = space.next_va.next_multiple_of(page);
        if va + size > GPU_VA_END {
            return Err(KernelRmError::VaExhausted { bytes: size });
        }
        space.next_va = va + size;
        let mut range = [uvm::CreateExternalRange {
            base: va,
            length: size,
            ..uvm::CreateExternalRange::default()
        }];
        raw_ioctl(
            space.uvm.as_ref(),
            uvm::CREATE_EXTERNAL_RANGE,
            &mut range,
            "UVM_CREATE_EXTERNAL_RANGE",
        )?;
        check(range[0].status, "a UVM external range")?;
        let mut map = Box::new(uvm::MapExternalAllocation {
            base: va,
            length: size,
            count: 1,
            rm_ctrl_fd: self.ctl.fd(),
            h_client: self.client,
            h_memory: handle,
            ..uvm::MapExternalAllocation::default()
        });
        map.per_gpu[0] = uvm::GpuMappingAttributes {
            uuid: space.uuid,
            mapping_type: uvm::MAPPING_READ_WRITE_ATOMIC,
            ..uvm::GpuMappingAttributes::default()
        };
        raw_ioctl(
            space.uvm.as_ref(),
            uvm::MAP_EXTERNAL_ALLOCATION,
            std::slice::from_mut(map.as_mut()),
            "UVM_MAP_EXTERNAL_ALLOCATION",
        )?;
        check(map.status, "a GPU mapping")?;
        Ok(va)
    }

    /// Host memory of this process, pinned by RM and mapped into `space`
    /// through UVM: what the copy engine reads and writes on the host side.
    ///
    /// # Errors
    /// The anonymous mapping, RM or UVM refusing.
    pub fn alloc_host(
        &self,
        space: &mut GpuVaSpace,
        bytes: u64,
    ) -> Result<HostBuffer, KernelRmError> {
        let size = bytes.max(1).next_multiple_of(PAGE_4K);
        // CAST: host allocations fit the address space.
        let map =
            memmap2::MmapMut::map_anon(size as usize).map_err(|source| KernelRmError::Map {
                object: 0,
                len: size as usize,
                source,
            })?;
        let handle = self
            .next_handle
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut params = [AllocOsMemory {
            h_root: self.client,
            h_object_parent: self.device,
            h_object_new: handle,
            h_class: class::NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
            flags: rm::OS_MEMORY_FLAGS,
            p_memory: map.as_ptr() as u64,
            limit: size - 1,
            fd: -1,
            ..AllocOsMemory::default()
        }];
        // This escape works only on a device node.
        escape_call(
            self._device_node.as_ref(),
            escape::RM_ALLOC_MEMORY,
            &mut params,
            "RM_ALLOC_MEMORY",
        )?;
        check(params[0].status, "pinning host memory")?;
        let va = self.map_for_gpu(space, handle, size, PAGE_4K)?;
        Ok(HostBuffer {
            handle,
            va,
            bytes: size,
            map,
        })
    }

    /// Video memory: allocated by RM, mapped into `space` at a VA of ours
    /// (through UVM), and, with `cpu`, mapped for the CPU through BAR1.
    ///
    /// # Errors
    /// RM or UVM refusing, or the VA window exhausted.
    pub fn alloc_vram(
        &self,
        space: &mut GpuVaSpace,
        bytes: u64,
        cpu: bool,
    ) -> Result<VramBuffer, KernelRmError> {
        let huge = bytes >= HUGE_PAGE_THRESHOLD;
        let page = if huge { PAGE_2M } else { PAGE_4K };
        let size = bytes.max(1).next_multiple_of(page);
        let mut params = MemoryAlloc {
            owner: self.client,
            kind: rm::memory::TYPE_IMAGE,
            flags: rm::memory::FLAG_IGNORE_BANK_PLACEMENT
                | rm::memory::FLAG_ALIGNMENT_FORCE
                | rm::memory::FLAG_MEMORY_HANDLE_PROVIDED
                | rm::memory::FLAG_MAP_NOT_REQUIRED
                | rm::memory::FLAG_PERSISTENT_VIDMEM,
            attr: rm::memory::ATTR_ALLOW_NONCONTIGUOUS
                | if huge {
                    rm::memory::ATTR_PAGE_SIZE_HUGE
                } else {
                    0
                },
            attr2: rm::memory::ATTR2_PREFER_NO_ZBC
                | rm::memory::ATTR2_GPU_CACHEABLE
                | if huge { rm::memory::ATTR2_HUGE_2MB } else { 0 },
            format: rm::memory::FORMAT_GENERIC,
            size,
            alignment: page,
            limit: size - 1,
            ..MemoryAlloc::default()
        };
        let handle = self.alloc(self.device, class::NV1_MEMORY_USER, Some(&mut params))?;
        let va = self.map_for_gpu(space, handle, size, page)?;
        let cpu = if cpu {
            // CAST: allocations fit the address space.
            Some(self.map(handle, size as usize)?)
        } else {
            None
        };
        Ok(VramBuffer {
            handle,
            va,
            bytes: size,
            cpu,
        })
    }

    /// A channel group on the compute engine with one subcontext in
    /// `space`, and its error notifier.
    ///
    /// # Errors
    /// RM refusing an allocation.
    pub fn channel_group(&self, space: &GpuVaSpace) -> Result<ChannelGroup, KernelRmError> {
        let mut notifier = MemoryAlloc {
            owner: self.client,
            kind: rm::memory::TYPE_NOTIFIER,
            flags: rm::memory::FLAG_IGNORE_BANK_PLACEMENT
                | rm::memory::FLAG_ALIGNMENT_FORCE
                | rm::memory::FLAG_MEMORY_HANDLE_PROVIDED
                | rm::memory::FLAG_MAP_NOT_REQUIRED,
            attr: rm::memory::ATTR_ALLOW_NONCONTIGUOUS | rm::memory::ATTR_LOCATION_PCI,
            attr2: rm::memory::ATTR2_PREFER_NO_ZBC | rm::memory::ATTR2_GPU_UNCACHED,
            size: PAGE_4K,
            alignment: PAGE_4K,
            limit: PAGE_4K - 1,
            ..MemoryAlloc::default()
        };
        let notifier = self.alloc(self.device, class::NV1_MEMORY_SYSTEM, Some(&mut notifier))?;
        // CAST: one page.
        let notifier_map = self.map_sysmem(notifier, PAGE_4K as usize)?;
        // SAFETY: the whole mapping; RM reads it only after an error.
        unsafe { std::ptr::write_bytes(notifier_map.as_ptr(), 0, notifier_map.len()) };
        let mut tsg = ChannelGroupAlloc {
            engine_type: rm::ENGINE_TYPE_GR0,
            ..ChannelGroupAlloc::default()
        };
        let group = self.alloc(self.device, class::KEPLER_CHANNEL_GROUP_A, Some(&mut tsg))?;
        let mut ctx = CtxShareAlloc {
            h_va_space: space.handle,
            flags: rm::CTXSHARE_SUBCONTEXT_ASYNC,
            subctx_id: 0,
        };
        let context_share = self.alloc(group, class::FERMI_CONTEXT_SHARE_A, Some(&mut ctx))?;
        Ok(ChannelGroup {
            handle: group,
            context_share,
            notifier,
            notifier_map,
        })
    }

    /// A GPFIFO channel in `group` with an object of `engine_class` on it:
    /// its ring and USERD in video memory the CPU writes through BAR1, its
    /// work-submit token, and its context buffers mapped through UVM.
    ///
    /// # Errors
    /// RM or UVM refusing a step.
    pub fn channel(
        &self,
        space: &mut GpuVaSpace,
        group: &ChannelGroup,
        engine_class: u32,
        entries: u32,
    ) -> Result<GpfifoChannel, KernelRmError> {
        let gpfifo_class = self.pick_class("GPFIFO channel", GPFIFO_CLASSES)?;
        let ring_bytes = u64::from(entries) * ENTRY_BYTES;
        let userd_offset = ring_bytes.next_multiple_of(USERD_BYTES);
        let memory = self.alloc_vram(space, userd_offset + USERD_BYTES, true)?;
        let mut params = ChannelAlloc {
            h_object_error: group.notifier,
            h_object_buffer: memory.handle,
            gp_fifo_offset: memory.va,
            gp_fifo_entries: entries,
            h_context_share: group.context_share,
            ..ChannelAlloc::default()
        };
        params.h_userd_memory[0] = memory.handle;
        params.userd_offset[0] = userd_offset;
        let handle = self.alloc(group.handle, gpfifo_class, Some(&mut params))?;
        let engine = self.alloc(handle, engine_class, None::<&mut ()>)?;
        let mut token = WorkSubmitToken { token: u32::MAX };
        self.control(handle, control::GPFIFO_GET_WORK_SUBMIT_TOKEN, &mut token)?;
        let window = space.next_va.next_multiple_of(PAGE_2M);
        space.next_va = window + CHANNEL_VA_WINDOW;
        let mut reg = [uvm::RegisterChannel {
            uuid: space.uuid,
            rm_ctrl_fd: self.ctl.fd(),
            h_client: self.client,
            h_channel: handle,
            base: window,
            length: CHANNEL_VA_WINDOW,
            ..uvm::RegisterChannel::default()
        }];
        raw_ioctl(
            space.uvm.as_ref(),
            uvm::REGISTER_CHANNEL,
            &mut reg,
            "UVM_REGISTER_CHANNEL",
        )?;
        check(reg[0].status, "registering the channel with UVM")?;
        Ok(GpfifoChannel {
            handle,
            engine,
            engine_class,
            token: token.token,
            entries,
            userd_offset,
            memory,
            put: 0,
        })
    }

    /// Let the group's channels run.
    ///
    /// # Errors
    /// RM refusing.
    pub fn schedule(&self, group: &ChannelGroup) -> Result<(), KernelRmError> {
        let mut s = GpfifoSchedule {
            enable: 1,
            ..GpfifoSchedule::default()
        };
        self.control(group.handle, control::GPFIFO_SCHEDULE, &mut s)
    }

    /// What the GPU is: name, chip, video memory, driver.
    ///
    /// # Errors
    /// Any control RM refuses.
    pub fn identify(&self) -> Result<KernelIdentity, KernelRmError> {
        let mut name = GpuNameString::default();
        self.control(self.subdevice, control::GPU_GET_NAME_STRING, &mut name)?;
        let mut arch = ArchInfo::default();
        self.control(self.subdevice, control::MC_GET_ARCH_INFO, &mut arch)?;
        let mut fb = FbInfoV2 {
            count: 1,
            ..FbInfoV2::default()
        };
        fb.entries[0].index = fb_info::RAM_SIZE;
        self.control(self.subdevice, control::FB_GET_INFO_V2, &mut fb)?;
        Ok(KernelIdentity {
            index: self.index,
            node: self.node.clone(),
            pci: self.card.pci_info,
            gpu_id: self.card.gpu_id,
            driver_version: self.driver_version.clone(),
            name: rm::c_string(&name.name),
            architecture: arch.architecture,
            implementation: arch.implementation,
            chip: rm::chip_name(arch.architecture, arch.implementation),
            vram_bytes: u64::from(fb.entries[0].data) << 10,
        })
    }
}

fn control_raw<P>(
    ctl: &dyn RmNode,
    client: u32,
    object: u32,
    cmd: u32,
    params: &mut P,
) -> Result<(), KernelRmError> {
    let mut c = [RmControl {
        h_client: client,
        h_object: object,
        cmd,
        flags: 0,
        params: std::ptr::from_mut(params) as u64,
        // CAST: parameter structures are a few KiB at most.
        params_size: std::mem::size_of::<P>() as u32,
        status: 0,
    }];
    escape_call(ctl, escape::RM_CONTROL, &mut c, "RM_CONTROL")?;
    check(c[0].status, "a control")
}

fn alloc_raw<P>(
    ctl: &dyn RmNode,
    client: u32,
    parent: u32,
    class: u32,
    params: Option<&mut P>,
) -> Result<u32, KernelRmError> {
    let (ptr, size) = match params {
        // CAST: allocation parameters are at most a few hundred bytes.
        Some(p) => (
            std::ptr::from_mut(p) as u64,
            std::mem::size_of::<P>() as u32,
        ),
        None => (0, 0),
    };
    let mut a = [RmAlloc {
        h_root: client,
        h_object_parent: parent,
        h_object_new: 0,
        h_class: class,
        p_alloc_parms: ptr,
        params_size: size,
        status: 0,
    }];
    escape_call(ctl, escape::RM_ALLOC, &mut a, "RM_ALLOC")?;
    check(a[0].status, "an allocation")?;
    Ok(a[0].h_object_new)
}

impl Drop for KernelRm {
    fn drop(&mut self) {
        // Freeing the client frees the device, subdevice and all below.
        if let Err(e) = self.free(0, self.client) {
            tracing::warn!(error = %e, "freeing the RM client failed");
        }
    }
}
