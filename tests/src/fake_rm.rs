//! A fake of NVIDIA's kernel module at the ioctl layer, for CI: it answers
//! the escapes the kernel RM path issues (CARD_INFO, REGISTER_FD, RM_ALLOC,
//! RM_CONTROL, RM_FREE) with the rules the real module applies (exact
//! structure sizes, exact control parameter sizes, objects under live
//! parents, allocation only on the control node, REGISTER_FD only on a
//! device node), keeps the object tree, and can be told to refuse a class
//! or control with an RM status, or fail an escape with an errno.

use macuda_gsp::kernel::{RmDriver, RmMapping, RmNode, CTL_NODE};
use macuda_hw::rm::{
    class, control, escape, fb_info, ArchInfo, BuildVersionV2, CardInfo, ClassListV2, GpuIdInfoV2,
    GpuNameString, MapMemory, PciInfo, RegisterFd, RmAlloc, RmControl, RmFree, CARD_INFO_ENTRIES,
};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub use macuda_hw::rm::status::{INVALID_ARGUMENT, NOT_SUPPORTED, OBJECT_NOT_FOUND, STATE_IN_USE};

/// What the real module (580.159.04, on the H200) answers a control whose
/// parameter size is wrong: `NV_ERR_INVALID_ARGUMENT`, not the
/// `NV_ERR_INVALID_PARAM_STRUCT` the reference expected (observed by
/// tests/tests/kernel_rm.rs on the device).
pub const WRONG_PARAMS_SIZE: u32 = INVALID_ARGUMENT;
/// What the real module answers an allocation under a parent that does
/// not exist (observed the same way).
pub const MISSING_PARENT: u32 = OBJECT_NOT_FOUND;

/// What the fake module holds and what it saw.
pub struct FakeModule {
    pub cards: Vec<CardInfo>,
    pub driver_version: String,
    pub name: String,
    pub architecture: u32,
    pub implementation: u32,
    pub ram_kib: u32,
    /// (class or control number, RM status) to refuse with.
    pub refuse: Option<(u32, u32)>,
    /// (escape number, errno) to fail the ioctl with.
    pub fail: Option<(u32, i32)>,
    /// handle -> (parent, class); clients have parent 0.
    pub objects: BTreeMap<u32, (u32, u32)>,
    /// ctl fds device nodes were linked to.
    pub registered: Vec<i32>,
    /// Classes the device offers.
    pub classes: Vec<u32>,
    /// Device-node fds with a mapping context: fd -> (object, length).
    pub contexts: BTreeMap<i32, (u32, u64)>,
    pub next_handle: u32,
    pub next_fd: i32,
}

impl FakeModule {
    /// One H200-like GPU, driver 580.
    pub fn h200() -> FakeModule {
        FakeModule {
            cards: vec![CardInfo {
                valid: 1,
                pci_info: PciInfo {
                    domain: 0,
                    bus: 0,
                    slot: 6,
                    function: 0,
                    vendor_id: 0x10DE,
                    device_id: 0x2335,
                },
                gpu_id: 6,
                minor_number: 0,
                ..CardInfo::default()
            }],
            driver_version: "580.159.04".into(),
            name: "NVIDIA H200".into(),
            architecture: 0x180,
            implementation: 0,
            ram_kib: 143_771 * 1024,
            refuse: None,
            fail: None,
            objects: BTreeMap::new(),
            registered: Vec::new(),
            classes: vec![0xC661, 0xC86F, 0xCBC0, 0xC8B5, 0x90F1, 0xA06C],
            contexts: BTreeMap::new(),
            next_handle: 0xC1D0_0001,
            next_fd: 100,
        }
    }

    /// Handles of the live clients.
    pub fn clients(&self) -> Vec<u32> {
        self.objects
            .iter()
            .filter(|(_, (p, _))| *p == 0)
            .map(|(h, _)| *h)
            .collect()
    }

    fn free_tree(&mut self, handle: u32) {
        let children: Vec<u32> = self
            .objects
            .iter()
            .filter(|(_, (p, _))| *p == handle)
            .map(|(h, _)| *h)
            .collect();
        for c in children {
            self.free_tree(c);
        }
        self.objects.remove(&handle);
    }
}

/// The fake as a driver the kernel RM path opens nodes from.
#[derive(Clone)]
pub struct FakeRm(pub Arc<Mutex<FakeModule>>);

impl FakeRm {
    pub fn new(module: FakeModule) -> FakeRm {
        FakeRm(Arc::new(Mutex::new(module)))
    }
}

impl RmDriver for FakeRm {
    fn open(&self, path: &Path) -> std::io::Result<Box<dyn RmNode>> {
        let ctl = path == Path::new(CTL_NODE);
        let mut m = self.0.lock();
        let known_device = m
            .cards
            .iter()
            .any(|c| path == Path::new(&format!("/dev/nvidia{}", c.minor_number)));
        if !ctl && !known_device {
            return Err(std::io::Error::from_raw_os_error(nix::libc::ENOENT));
        }
        m.next_fd += 1;
        Ok(Box::new(FakeNode {
            module: Arc::clone(&self.0),
            fd: m.next_fd,
            ctl,
        }))
    }
}

struct FakeNode {
    module: Arc<Mutex<FakeModule>>,
    fd: i32,
    ctl: bool,
}

fn errno(e: i32) -> std::io::Error {
    std::io::Error::from_raw_os_error(e)
}

/// Read a `T` the caller handed over by pointer.
///
/// # Safety
/// `p` points to `size_of::<T>()` live bytes.
unsafe fn take<T: Copy>(p: *const u8) -> T {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::read_unaligned(p.cast::<T>()) }
}

/// Write a `T` back where the caller's pointer points.
///
/// # Safety
/// `p` points to `size_of::<T>()` live, writable bytes.
unsafe fn give<T: Copy>(p: *mut u8, v: T) {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::write_unaligned(p.cast::<T>(), v) }
}

fn name_bytes<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let n = s.len().min(N - 1);
    out[..n].copy_from_slice(&s.as_bytes()[..n]);
    out
}

/// A mapping backed by host memory.
struct HeapMapping(Box<[std::cell::UnsafeCell<u8>]>);

// SAFETY: the bytes are only reached through raw pointers, as device
// memory would be; nothing here hands out references to them.
unsafe impl Sync for HeapMapping {}

impl RmMapping for HeapMapping {
    fn as_ptr(&self) -> *mut u8 {
        self.0.as_ptr().cast::<u8>().cast_mut()
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

impl RmNode for FakeNode {
    fn fd(&self) -> i32 {
        self.fd
    }

    fn map(&self, len: usize) -> std::io::Result<Box<dyn RmMapping>> {
        // Like the module: only a node RM_MAP_MEMORY attached an object to,
        // and exactly the length it was given.
        let m = self.module.lock();
        match m.contexts.get(&self.fd) {
            Some(&(_, l)) if l == len as u64 => Ok(Box::new(HeapMapping(
                (0..len).map(|_| std::cell::UnsafeCell::new(0)).collect(),
            ))),
            Some(_) => Err(errno(nix::libc::ENXIO)),
            None => Err(errno(nix::libc::EINVAL)),
        }
    }

    unsafe fn ioctl(&self, request: u64, params: *mut u8, size: usize) -> std::io::Result<()> {
        // RM escapes only: type 'F', the number in the low byte, the size
        // in the request must be the size passed. UVM is not emulated.
        if (request >> 8) & 0xFF != macuda_hw::rm::IOCTL_TYPE
            || ((request >> 16) & 0x3FFF) as usize != size
        {
            return Err(errno(nix::libc::ENOTTY));
        }
        // CAST: the low byte.
        let nr = (request & 0xFF) as u32;
        let mut m = self.module.lock();
        if let Some((n, e)) = m.fail {
            if n == nr {
                return Err(errno(e));
            }
        }
        let exact = |want: usize| {
            if size == want {
                Ok(())
            } else {
                Err(errno(nix::libc::EINVAL))
            }
        };
        match nr {
            escape::CARD_INFO => {
                exact(CARD_INFO_ENTRIES * std::mem::size_of::<CardInfo>())?;
                if !self.ctl {
                    return Err(errno(nix::libc::EINVAL));
                }
                for i in 0..CARD_INFO_ENTRIES {
                    let card = m.cards.get(i).copied().unwrap_or_default();
                    // SAFETY: `size` covers all entries (checked above).
                    unsafe { give(params.add(i * std::mem::size_of::<CardInfo>()), card) };
                }
            }
            escape::REGISTER_FD => {
                exact(std::mem::size_of::<RegisterFd>())?;
                if self.ctl {
                    return Err(errno(nix::libc::EINVAL));
                }
                // SAFETY: the size was checked.
                let r: RegisterFd = unsafe { take(params) };
                m.registered.push(r.ctl_fd);
            }
            escape::RM_ALLOC => {
                exact(std::mem::size_of::<RmAlloc>())?;
                if !self.ctl {
                    return Err(errno(nix::libc::EINVAL));
                }
                // SAFETY: the size was checked.
                let mut a: RmAlloc = unsafe { take(params) };
                a.status = if m.refuse.is_some_and(|(c, _)| c == a.h_class) {
                    m.refuse.map_or(0, |(_, s)| s)
                } else if a.h_class == class::NV01_ROOT_CLIENT {
                    let h = m.next_handle;
                    m.next_handle += 1;
                    m.objects.insert(h, (0, a.h_class));
                    a.h_object_new = h;
                    0
                } else if !m.objects.contains_key(&a.h_root)
                    || !m.objects.contains_key(&a.h_object_parent)
                {
                    MISSING_PARENT
                } else {
                    let h = m.next_handle;
                    m.next_handle += 1;
                    m.objects.insert(h, (a.h_object_parent, a.h_class));
                    a.h_object_new = h;
                    0
                };
                // SAFETY: as above.
                unsafe { give(params, a) };
            }
            escape::RM_CONTROL => {
                exact(std::mem::size_of::<RmControl>())?;
                // SAFETY: the size was checked.
                let mut c: RmControl = unsafe { take(params) };
                let p = c.params as *mut u8;
                let sized = |want: usize| c.params_size as usize == want;
                c.status = if m.refuse.is_some_and(|(n, _)| n == c.cmd) {
                    m.refuse.map_or(0, |(_, s)| s)
                } else if !m.objects.contains_key(&c.h_client)
                    || !m.objects.contains_key(&c.h_object)
                {
                    INVALID_ARGUMENT
                } else {
                    match c.cmd {
                        control::SYSTEM_GET_BUILD_VERSION_V2
                            if sized(std::mem::size_of::<BuildVersionV2>()) =>
                        {
                            let v = BuildVersionV2 {
                                driver_version: name_bytes(&m.driver_version),
                                ..BuildVersionV2::default()
                            };
                            // SAFETY: the caller passed a params block of this size.
                            unsafe { give(p, v) };
                            0
                        }
                        control::GPU_GET_ID_INFO_V2 if sized(std::mem::size_of::<GpuIdInfoV2>()) => {
                            // SAFETY: as above.
                            let mut id: GpuIdInfoV2 = unsafe { take(p) };
                            if m.cards.iter().any(|k| k.gpu_id == id.gpu_id) {
                                id.device_instance = 0;
                                // SAFETY: as above.
                                unsafe { give(p, id) };
                                0
                            } else {
                                INVALID_ARGUMENT
                            }
                        }
                        control::GPU_GET_NAME_STRING
                            if sized(std::mem::size_of::<GpuNameString>()) =>
                        {
                            let n = GpuNameString {
                                flags: 0,
                                name: name_bytes(&m.name),
                            };
                            // SAFETY: as above.
                            unsafe { give(p, n) };
                            0
                        }
                        control::MC_GET_ARCH_INFO if sized(std::mem::size_of::<ArchInfo>()) => {
                            let a = ArchInfo {
                                architecture: m.architecture,
                                implementation: m.implementation,
                                ..ArchInfo::default()
                            };
                            // SAFETY: as above.
                            unsafe { give(p, a) };
                            0
                        }
                        control::FB_GET_INFO_V2
                            if sized(std::mem::size_of::<macuda_hw::rm::FbInfoV2>()) =>
                        {
                            // SAFETY: as above.
                            let mut f: macuda_hw::rm::FbInfoV2 = unsafe { take(p) };
                            for e in f.entries.iter_mut().take(f.count as usize) {
                                if e.index == fb_info::RAM_SIZE
                                    || e.index == fb_info::TOTAL_RAM_SIZE
                                {
                                    e.data = m.ram_kib;
                                }
                            }
                            // SAFETY: as above.
                            unsafe { give(p, f) };
                            0
                        }
                        control::GPU_GET_CLASSLIST_V2
                            if sized(std::mem::size_of::<ClassListV2>()) =>
                        {
                            let mut l = ClassListV2::default();
                            for (slot, c) in l.classes.iter_mut().zip(&m.classes) {
                                *slot = *c;
                            }
                            // CAST: a handful of classes.
                            l.count = m.classes.len() as u32;
                            // SAFETY: as above.
                            unsafe { give(p, l) };
                            0
                        }
                        control::SYSTEM_GET_BUILD_VERSION_V2
                        | control::GPU_GET_CLASSLIST_V2
                        | control::GPU_GET_ID_INFO_V2
                        | control::GPU_GET_NAME_STRING
                        | control::MC_GET_ARCH_INFO
                        | control::FB_GET_INFO_V2 => WRONG_PARAMS_SIZE,
                        _ => NOT_SUPPORTED,
                    }
                };
                // SAFETY: the size was checked.
                unsafe { give(params, c) };
            }
            escape::RM_MAP_MEMORY => {
                exact(std::mem::size_of::<MapMemory>())?;
                if !self.ctl {
                    return Err(errno(nix::libc::EINVAL));
                }
                // SAFETY: the size was checked.
                let mut r: MapMemory = unsafe { take(params) };
                r.status = if !m.objects.contains_key(&r.h_memory) {
                    OBJECT_NOT_FOUND
                } else {
                    match m.contexts.entry(r.fd) {
                        // One mapping context per node.
                        std::collections::btree_map::Entry::Occupied(_) => STATE_IN_USE,
                        std::collections::btree_map::Entry::Vacant(v) => {
                            v.insert((r.h_memory, r.length));
                            0
                        }
                    }
                };
                // SAFETY: as above.
                unsafe { give(params, r) };
            }
            escape::RM_FREE => {
                exact(std::mem::size_of::<RmFree>())?;
                // SAFETY: the size was checked.
                let mut f: RmFree = unsafe { take(params) };
                f.status = if m.objects.contains_key(&f.h_object_old) {
                    m.free_tree(f.h_object_old);
                    0
                } else {
                    INVALID_ARGUMENT
                };
                // SAFETY: as above.
                unsafe { give(params, f) };
            }
            _ => return Err(errno(nix::libc::ENOTTY)),
        }
        Ok(())
    }
}
