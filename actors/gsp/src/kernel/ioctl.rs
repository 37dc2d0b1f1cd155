//! The module's device nodes and the raw calls on them: escapes and
//! ioctls, each checked twice (an ioctl returns 0 whenever the request
//! reached RM, even if RM refused it: the RM status in the structure is
//! the real answer), and RM's alloc, control and free.

use super::error::KernelRmError;
use macuda_hw::rm::{self, control, escape, GpfifoSchedule, RmAlloc, RmControl, RmFree};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

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

pub(super) fn open_node(
    driver: &dyn RmDriver,
    path: &Path,
) -> Result<Box<dyn RmNode>, KernelRmError> {
    driver.open(path).map_err(|source| KernelRmError::Open {
        path: path.to_path_buf(),
        source,
    })
}

/// One escape: `params` is the exact structure the escape takes.
pub(super) fn escape_call<T>(
    node: &dyn RmNode,
    nr: u32,
    params: &mut [T],
    what: &'static str,
) -> Result<(), KernelRmError> {
    let size = std::mem::size_of_val(params);
    raw_ioctl(node, rm::request(nr, size), params, what)
}

/// One ioctl with a ready request word (UVM's are bare command numbers).
pub(super) fn raw_ioctl<T>(
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

pub(super) fn check(status: u32, what: &'static str) -> Result<(), KernelRmError> {
    if status == 0 {
        Ok(())
    } else {
        Err(KernelRmError::Status { what, status })
    }
}

pub(super) fn free_raw(
    ctl: &dyn RmNode,
    client: u32,
    parent: u32,
    object: u32,
) -> Result<(), KernelRmError> {
    let mut f = [RmFree {
        h_root: client,
        h_object_parent: parent,
        h_object_old: object,
        status: 0,
    }];
    escape_call(ctl, escape::RM_FREE, &mut f, "RM_FREE")?;
    check(f[0].status, "a free")
}

pub(super) fn control_raw<P>(
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

pub(super) fn alloc_raw<P>(
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

pub(super) fn schedule_raw(
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
