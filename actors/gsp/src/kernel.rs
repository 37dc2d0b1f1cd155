//! RM through NVIDIA's kernel module: the client, device and subdevice
//! objects allocated with the module's ioctls on /dev/nvidiactl and
//! /dev/nvidiaN, and the controls that say what the GPU is. No libcuda is
//! involved; the parameter structures are ours (macuda_hw::rm), pinned to
//! the 580 headers.
//!
//! An ioctl returns 0 whenever the request reached RM, even if RM refused
//! it: the RM status in the structure is the real answer, so every call
//! checks both.

use macuda_hw::methods::usermode;
use macuda_hw::page;
use macuda_hw::rm::{
    self, class, control, escape, fb_info, uvm, AllocOsMemory, ArchInfo, BuildVersionV2, CardInfo,
    ChannelAlloc, ChannelGroupAlloc, ClassListV2, CtxShareAlloc, DebuggerAlloc, DeviceAlloc,
    FbInfoV2, GidInfo, GpfifoSchedule, GpuIdInfoV2, GpuNameString, MapMemory, MemoryAlloc, PciInfo,
    RegisterFd, RmAlloc, RmControl, RmFree, SubdeviceAlloc, VaSpaceAlloc, WorkSubmitToken,
    CARD_INFO_ENTRIES,
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
/// The window the direct path (device tests, channel context buffers)
/// takes VAs from, one after another: above the window kept for mappings
/// the CPU shares at the same address, below [`ALLOCATOR_VA_WINDOW`].
const GPU_VA_START: u64 = 0x20_0000_0000;
const GPU_VA_END: u64 = 0x40_0000_0000;
/// The VAs left to the memory actor's allocator: everything from the end of
/// the direct window up to 2^40, because QMDs, push buffers and constant
/// banks must lie below 2^40 (the fields hold VA >> 8 in 32 bits).
pub const ALLOCATOR_VA_WINDOW: std::ops::Range<u64> = GPU_VA_END..(1 << 40);
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

impl GpuVaSpace {
    /// The next `bytes` of VA at `align` in the direct window (the memory
    /// actor allocates in [`ALLOCATOR_VA_WINDOW`] instead).
    ///
    /// # Errors
    /// The window is exhausted.
    pub fn take_va(&mut self, bytes: u64, align: u64) -> Result<u64, KernelRmError> {
        let va = self.next_va.next_multiple_of(align);
        if va + bytes > GPU_VA_END {
            return Err(KernelRmError::VaExhausted { bytes });
        }
        self.next_va = va + bytes;
        Ok(va)
    }
}

/// Video memory RM allocated, not yet mapped anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VideoMemory {
    pub handle: u32,
    /// Rounded up to a whole number of `page`.
    pub bytes: u64,
    /// The page size it is mapped with (2 MiB for large buffers).
    pub page: u64,
}

/// The page size RM gives video memory of `bytes`. Decided on the size
/// rounded to small pages, so that asking again with the rounded size (as
/// the memory actor does: it takes the VA first, then hands RM the size it
/// reserved) gives the same answer: a size just under the threshold once
/// got small-page VA and huge-page memory, which UVM refused to map.
pub fn video_page(bytes: u64) -> u64 {
    if bytes.div_ceil(page::SMALL).saturating_mul(page::SMALL) >= HUGE_PAGE_THRESHOLD {
        page::HUGE
    } else {
        page::SMALL
    }
}

/// Process memory RM pinned (an OS descriptor), with the process's view.
pub struct PinnedHost {
    pub handle: u32,
    pub bytes: u64,
    pub map: Arc<memmap2::MmapRaw>,
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
    pub l2_bytes: u64,
    pub memory_bus_bits: u32,
    /// The heap RM allocates clients' video memory from.
    pub heap_bytes: u64,
    /// Video memory less what RM keeps for itself.
    pub usable_bytes: u64,
}

/// An open RM client with its device and subdevice on one GPU; freed
/// (everything under the client) when dropped.
pub struct KernelRm {
    driver: Arc<dyn RmDriver>,
    /// Shared with the [`RmTeardown`] the supervisor holds.
    ctl: Arc<dyn RmNode>,
    /// Kept open: it pins the GPU and links to the ctl fd's client.
    device_node: Box<dyn RmNode>,
    node: PathBuf,
    index: u32,
    card: CardInfo,
    driver_version: String,
    client: u32,
    device: u32,
    subdevice: u32,
    next_handle: std::sync::atomic::AtomicU32,
    /// Channel groups the teardown handle stops.
    groups: Arc<parking_lot::Mutex<Vec<u32>>>,
    /// Set once the client is freed, by whichever of us or the teardown
    /// handle does it first.
    freed: Arc<std::sync::atomic::AtomicBool>,
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

    /// Map `size` bytes of RM memory object `handle` into `space` at `va`
    /// (chosen by the caller, aligned to the object's page size), through
    /// UVM: an external range, then the allocation mapped into it.
    ///
    /// # Errors
    /// UVM refusing the range or the mapping.
    pub fn map_gpu(
        &self,
        space: &GpuVaSpace,
        handle: u32,
        va: u64,
        size: u64,
    ) -> Result<(), KernelRmError> {
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
        let mapped = raw_ioctl(
            space.uvm.as_ref(),
            uvm::MAP_EXTERNAL_ALLOCATION,
            std::slice::from_mut(map.as_mut()),
            "UVM_MAP_EXTERNAL_ALLOCATION",
        )
        .and_then(|()| check(map.status, "a GPU mapping"));
        if let Err(e) = mapped {
            // Give the range back so a failed mapping leaves nothing behind.
            let _ = self.unmap_gpu(space, va, size);
            return Err(e);
        }
        Ok(())
    }

    /// Remove the GPU mapping (and UVM range) at `va`.
    ///
    /// # Errors
    /// UVM refusing (no range there).
    pub fn unmap_gpu(&self, space: &GpuVaSpace, va: u64, size: u64) -> Result<(), KernelRmError> {
        let mut free = [uvm::Free {
            base: va,
            length: size,
            ..uvm::Free::default()
        }];
        raw_ioctl(space.uvm.as_ref(), uvm::FREE, &mut free, "UVM_FREE")?;
        check(free[0].status, "freeing a UVM range")
    }

    /// Video memory allocated by RM: its handle and the size it got (a
    /// whole number of the page size it is mapped with).
    ///
    /// # Errors
    /// RM refusing (out of memory, for one).
    pub fn alloc_video(&self, bytes: u64) -> Result<VideoMemory, KernelRmError> {
        let page = video_page(bytes);
        let huge = page == page::HUGE;
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
                // Named either way: left to RM's default, the page size
                // could differ from the one the VA was aligned for.
                | if huge {
                    rm::memory::ATTR_PAGE_SIZE_HUGE
                } else {
                    rm::memory::ATTR_PAGE_SIZE_4KB
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
        Ok(VideoMemory {
            handle,
            bytes: size,
            page,
        })
    }

    /// Host memory of this process (an anonymous mapping), pinned by RM as
    /// an OS descriptor: what the copy engine reads and writes on the host
    /// side once it is mapped into a VA space ([`KernelRm::map_gpu`]).
    ///
    /// # Errors
    /// The anonymous mapping, or RM refusing to pin it.
    pub fn pin_host(&self, bytes: u64) -> Result<PinnedHost, KernelRmError> {
        let size = bytes.max(1).next_multiple_of(page::SMALL);
        // CAST: host allocations fit the address space.
        let map = memmap2::MmapMut::map_anon(size as usize)
            .map(memmap2::MmapRaw::from)
            .map_err(|source| KernelRmError::Map {
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
            self.device_node.as_ref(),
            escape::RM_ALLOC_MEMORY,
            &mut params,
            "RM_ALLOC_MEMORY",
        )?;
        check(params[0].status, "pinning host memory")?;
        Ok(PinnedHost {
            handle,
            bytes: size,
            map: Arc::new(map),
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
            size: page::SMALL,
            alignment: page::SMALL,
            limit: page::SMALL - 1,
            ..MemoryAlloc::default()
        };
        let notifier = self.alloc(self.device, class::NV1_MEMORY_SYSTEM, Some(&mut notifier))?;
        // CAST: one page.
        let notifier_map = self.map_sysmem(notifier, page::SMALL as usize)?;
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

    /// A GPFIFO channel in `group` over a ring and USERD the caller
    /// placed in video memory it allocated, with an object of
    /// `engine_class` on it, its work-submit token, and its context
    /// buffers mapped through UVM.
    ///
    /// # Errors
    /// RM or UVM refusing a step.
    pub fn channel_on(
        &self,
        space: &mut GpuVaSpace,
        group: &ChannelGroup,
        engine_class: u32,
        placement: &RingPlacement,
    ) -> Result<ChannelObjects, KernelRmError> {
        let gpfifo_class = self.pick_class("GPFIFO channel", GPFIFO_CLASSES)?;
        let mut params = ChannelAlloc {
            h_object_error: group.notifier,
            h_object_buffer: placement.ring_memory,
            gp_fifo_offset: placement.ring_va,
            gp_fifo_entries: placement.entries,
            h_context_share: group.context_share,
            ..ChannelAlloc::default()
        };
        params.h_userd_memory[0] = placement.userd_memory;
        params.userd_offset[0] = placement.userd_offset;
        let channel = self.alloc(group.handle, gpfifo_class, Some(&mut params))?;
        let engine = self.alloc(channel, engine_class, None::<&mut ()>)?;
        let mut token = WorkSubmitToken { token: u32::MAX };
        self.control(channel, control::GPFIFO_GET_WORK_SUBMIT_TOKEN, &mut token)?;
        let window = space.take_va(CHANNEL_VA_WINDOW, page::HUGE)?;
        let mut reg = [uvm::RegisterChannel {
            uuid: space.uuid,
            rm_ctrl_fd: self.ctl.fd(),
            h_client: self.client,
            h_channel: channel,
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
        Ok(ChannelObjects {
            channel,
            gpfifo_class,
            engine,
            token: token.token,
        })
    }

    /// Tell UVM a channel is going: it resets the channel and unmaps its
    /// context buffers (what must come before the channel is freed).
    ///
    /// # Errors
    /// UVM refusing.
    pub fn unregister_channel(
        &self,
        space: &GpuVaSpace,
        channel: u32,
    ) -> Result<(), KernelRmError> {
        let mut p = [uvm::UnregisterChannel {
            uuid: space.uuid,
            h_client: self.client,
            h_channel: channel,
            ..uvm::UnregisterChannel::default()
        }];
        raw_ioctl(
            space.uvm.as_ref(),
            uvm::UNREGISTER_CHANNEL,
            &mut p,
            "UVM_UNREGISTER_CHANNEL",
        )?;
        check(p[0].status, "unregistering a channel from UVM")
    }

    /// Take the group's channels off the scheduler.
    ///
    /// # Errors
    /// RM refusing.
    pub fn unschedule(&self, group: &ChannelGroup) -> Result<(), KernelRmError> {
        schedule_raw(self.ctl.as_ref(), self.client, group.handle, false)
    }

    /// Let the group's channels run.
    ///
    /// # Errors
    /// RM refusing.
    pub fn schedule(&self, group: &ChannelGroup) -> Result<(), KernelRmError> {
        schedule_raw(self.ctl.as_ref(), self.client, group.handle, true)
    }

    /// A debugger object on this client's compute object `compute`: what
    /// RM recorded against the channel can be read after a fault.
    ///
    /// # Errors
    /// RM refusing.
    pub fn debugger(&self, compute: u32) -> Result<u32, KernelRmError> {
        let mut params = DebuggerAlloc {
            h_app_client: self.client,
            h_class3d_object: compute,
            ..DebuggerAlloc::default()
        };
        self.alloc(self.device, class::GT200_DEBUGGER, Some(&mut params))
    }

    /// What the debugger says of `channel` after a fault: the SMs that
    /// recorded an error (the first [`rm::SM_ERROR_STATES_PER_CALL`]), and
    /// whether RM saw an MMU fault, with the faulting addresses when it did.
    ///
    /// # Errors
    /// RM refusing either control.
    pub fn fault_state(&self, debugger: u32, channel: u32) -> Result<FaultState, KernelRmError> {
        let mut all = Box::new(rm::ReadAllSmErrorStates {
            h_target_channel: channel,
            // CAST: 100 records.
            num_sms_to_read: rm::SM_ERROR_STATES_PER_CALL as u32,
            ..rm::ReadAllSmErrorStates::default()
        });
        self.control(
            debugger,
            control::DEBUG_READ_ALL_SM_ERROR_STATES,
            all.as_mut(),
        )?;
        let sm_errors: Vec<(u32, rm::SmErrorState)> = all
            .sm_error_states
            .iter()
            .enumerate()
            .filter(|(_, e)| e.hww_global_esr != 0 || e.hww_warp_esr != 0)
            // CAST: an index below 100.
            .map(|(i, e)| (all.starting_sm + i as u32, *e))
            .collect();
        let mmu_fault = all.mmu_fault.valid != 0;
        let mut mmu_faults = Vec::new();
        if mmu_fault {
            let mut info = rm::ReadMmuFaultInfo::default();
            self.control(debugger, control::DEBUG_READ_MMU_FAULT_INFO, &mut info)?;
            let n = (info.count as usize).min(rm::MMU_FAULT_ENTRIES);
            mmu_faults.extend_from_slice(&info.entries[..n]);
        }
        Ok(FaultState {
            sm_errors,
            mmu_fault,
            mmu_fault_info: all.mmu_fault.fault_info,
            mmu_faults,
        })
    }

    /// The graphics engine's shape: what sizes the shader local memory
    /// the channel must provide.
    ///
    /// # Errors
    /// RM refusing the control.
    pub fn gr_facts(&self) -> Result<GrFacts, KernelRmError> {
        let indices = [
            rm::gr_info::LITTER_NUM_GPCS,
            rm::gr_info::LITTER_NUM_TPC_PER_GPC,
            rm::gr_info::LITTER_NUM_SM_PER_TPC,
            rm::gr_info::MAX_WARPS_PER_SM,
            rm::gr_info::SM_VERSION,
            rm::gr_info::MAX_THREADS_PER_WARP,
            rm::gr_info::GPU_CORE_COUNT,
            rm::gr_info::MAX_SP_PER_SM,
        ];
        let mut list = indices.map(|index| rm::InfoEntry { index, data: 0 });
        let mut params = rm::GrGetInfo {
            // CAST: eight entries.
            list_size: list.len() as u32,
            list: list.as_mut_ptr() as u64,
            ..rm::GrGetInfo::default()
        };
        self.control(self.subdevice, control::GR_GET_INFO, &mut params)?;
        Ok(GrFacts {
            gpcs: list[0].data,
            tpcs_per_gpc: list[1].data,
            sms_per_tpc: list[2].data,
            max_warps_per_sm: list[3].data,
            sm_version: list[4].data,
            warp_size: list[5].data,
            cores: list[6].data,
            cores_per_sm: list[7].data,
        })
    }

    /// A handle the supervisor keeps: it can stop our channel groups and
    /// free the client even when the actor that owns this RM is stuck.
    pub fn teardown(&self) -> RmTeardown {
        RmTeardown {
            ctl: Arc::clone(&self.ctl),
            client: self.client,
            groups: Arc::clone(&self.groups),
            freed: Arc::clone(&self.freed),
        }
    }

    /// Note a channel group the teardown handle must stop.
    pub fn track_group(&self, group: u32) {
        self.groups.lock().push(group);
    }

    /// Forget a channel group freed on purpose.
    pub fn untrack_group(&self, group: u32) {
        self.groups.lock().retain(|g| *g != group);
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
        let asked = [
            fb_info::RAM_SIZE,
            fb_info::L2CACHE_SIZE,
            fb_info::BUS_WIDTH,
            fb_info::HEAP_SIZE,
            fb_info::USABLE_RAM_SIZE,
        ];
        let mut fb = FbInfoV2 {
            // CAST: five entries.
            count: asked.len() as u32,
            ..FbInfoV2::default()
        };
        for (e, index) in fb.entries.iter_mut().zip(asked) {
            e.index = index;
        }
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
            l2_bytes: u64::from(fb.entries[1].data),
            memory_bus_bits: fb.entries[2].data,
            heap_bytes: u64::from(fb.entries[3].data) << 10,
            usable_bytes: u64::from(fb.entries[4].data) << 10,
        })
    }
}

fn schedule_raw(
    ctl: &dyn RmNode,
    client: u32,
    group: u32,
    enable: bool,
) -> Result<(), KernelRmError> {
    let mut s = GpfifoSchedule {
        enable: u8::from(enable),
        ..GpfifoSchedule::default()
    };
    control_raw(ctl, client, group, control::GPFIFO_SCHEDULE, &mut s)
}

/// Where a channel's ring and USERD live: video memory its owner
/// allocated and mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingPlacement {
    pub ring_memory: u32,
    pub ring_va: u64,
    pub entries: u32,
    /// The memory object holding USERD, and its offset inside it.
    pub userd_memory: u32,
    pub userd_offset: u64,
}

/// The RM objects of one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelObjects {
    pub channel: u32,
    pub gpfifo_class: u32,
    /// The compute or copy object bound to it.
    pub engine: u32,
    /// What the doorbell takes to run it.
    pub token: u32,
}

/// What the debugger object says after a fault.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultState {
    /// (SM index, its error registers) for each SM that recorded one.
    pub sm_errors: Vec<(u32, rm::SmErrorState)>,
    /// RM saw an MMU fault on the channel.
    pub mmu_fault: bool,
    pub mmu_fault_info: u32,
    pub mmu_faults: Vec<rm::MmuFaultEntry>,
}

/// The graphics engine's shape, from GR_GET_INFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrFacts {
    pub gpcs: u32,
    pub tpcs_per_gpc: u32,
    pub sms_per_tpc: u32,
    pub max_warps_per_sm: u32,
    /// e.g. 0x900 on the H200.
    pub sm_version: u32,
    pub warp_size: u32,
    /// FP32 cores of the SMs RM enabled, and per SM: their ratio is the
    /// SM count (the LITTER figures above are the chip's maximum).
    pub cores: u32,
    pub cores_per_sm: u32,
}

/// FP32 cores per SM by compute capability (the programming guide's
/// table), for where RM does not say (the H200 answers MAX_SP_PER_SM
/// with 0).
pub fn fp32_cores_per_sm(compute_capability: u32) -> u32 {
    match compute_capability {
        75 | 80 => 64,
        _ => 128,
    }
}

impl GrFacts {
    /// SMs the engine really has: enabled cores over cores per SM (RM's
    /// figure, else the architecture's), or the chip's most when RM gave
    /// no core count.
    pub fn sm_count(&self, compute_capability: u32) -> u32 {
        let per_sm = if self.cores_per_sm > 0 {
            self.cores_per_sm
        } else {
            fp32_cores_per_sm(compute_capability)
        };
        if self.cores > 0 {
            self.cores / per_sm
        } else {
            self.gpcs * self.tpcs_per_gpc * self.sms_per_tpc
        }
    }
}

/// The supervisor's way to our RM objects on the kernel path, for
/// recovery: it shares the control node with the [`KernelRm`] that owns
/// the client, so it works when that owner is stuck or gone.
#[derive(Clone)]
pub struct RmTeardown {
    ctl: Arc<dyn RmNode>,
    client: u32,
    groups: Arc<parking_lot::Mutex<Vec<u32>>>,
    freed: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for RmTeardown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RmTeardown(client {:#x})", self.client)
    }
}

impl RmTeardown {
    /// Stop scheduling every channel group of ours: the GPU runs none of
    /// our work after this. Returns how many groups were stopped.
    ///
    /// # Errors
    /// The first group RM refused to stop (the others are still tried).
    pub fn stop_channels(&self) -> Result<usize, KernelRmError> {
        if self.is_freed() {
            return Ok(0);
        }
        let groups = self.groups.lock().clone();
        let mut first_err = None;
        let mut stopped = 0;
        for g in groups {
            match schedule_raw(self.ctl.as_ref(), self.client, g, false) {
                Ok(()) => stopped += 1,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(stopped), Err)
    }

    /// Free the client and every object under it. Returns false when its
    /// owner had already freed it.
    ///
    /// # Errors
    /// RM refusing.
    pub fn free_client(&self) -> Result<bool, KernelRmError> {
        if self.freed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return Ok(false);
        }
        free_raw(self.ctl.as_ref(), self.client, 0, self.client)?;
        self.groups.lock().clear();
        Ok(true)
    }

    /// The client is gone (its owner dropped it, or [`RmTeardown::free_client`] ran).
    pub fn is_freed(&self) -> bool {
        self.freed.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn client(&self) -> u32 {
        self.client
    }
}

fn free_raw(ctl: &dyn RmNode, client: u32, parent: u32, object: u32) -> Result<(), KernelRmError> {
    let mut f = [RmFree {
        h_root: client,
        h_object_parent: parent,
        h_object_old: object,
        status: 0,
    }];
    escape_call(ctl, escape::RM_FREE, &mut f, "RM_FREE")?;
    check(f[0].status, "a free")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn gr(cores: u32, cores_per_sm: u32) -> GrFacts {
        GrFacts {
            gpcs: 8,
            tpcs_per_gpc: 9,
            sms_per_tpc: 2,
            max_warps_per_sm: 64,
            sm_version: 0x900,
            warp_size: 32,
            cores,
            cores_per_sm,
        }
    }

    #[test]
    fn the_sm_count_is_enabled_cores_over_cores_per_sm() {
        // What the H200 answered: 16896 cores, 0 per SM (so the
        // architecture's 128), 144 SMs at most.
        assert_eq!(gr(16896, 0).sm_count(90), 132);
        assert_eq!(gr(16896, 128).sm_count(90), 132);
        assert_eq!(gr(6912, 0).sm_count(80), 108, "A100: 64 cores per SM");
        assert_eq!(gr(0, 0).sm_count(90), 144, "no core count: the chip's most");
    }

    #[test]
    fn the_page_size_is_the_same_for_a_size_and_for_it_rounded_to_that_page() {
        // 8,384,768 bytes (test-backend-ops' SOFT_MAX asked for it) rounds
        // to 8 MiB: once small pages for the VA and huge ones from RM.
        for bytes in [
            1,
            page::SMALL - 1,
            HUGE_PAGE_THRESHOLD - page::SMALL - 1,
            HUGE_PAGE_THRESHOLD - page::SMALL + 1,
            8_384_768,
            HUGE_PAGE_THRESHOLD - 1,
            HUGE_PAGE_THRESHOLD,
            HUGE_PAGE_THRESHOLD + 1,
            u64::MAX - 1,
        ] {
            let page = video_page(bytes);
            let rounded = bytes.div_ceil(page).saturating_mul(page);
            assert_eq!(video_page(rounded), page, "{bytes} bytes");
        }
        assert_eq!(video_page(8_384_768), page::HUGE);
        assert_eq!(video_page(HUGE_PAGE_THRESHOLD - page::SMALL), page::SMALL);
    }
}
