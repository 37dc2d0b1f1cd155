//! An in-process hook on libc's `ioctl`, for the capture tool: the first
//! bytes of libc's function are overwritten with a jump to ours, which
//! issues the system call itself and records what it was asked. Every
//! caller in the process (libcuda included, however it reached libc) goes
//! through it. x86-64 Linux only.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// One ioctl as the hook saw it: the request word and the argument's
/// bytes after the call (the driver's answer in place).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoctlRecord {
    pub fd: i32,
    pub request: u64,
    pub result: i64,
    pub arg: Vec<u8>,
    /// For RM escapes that carry a pointer to parameters (alloc, control):
    /// those parameter bytes after the call.
    pub params: Vec<u8>,
}

static RECORDS: Mutex<Vec<IoctlRecord>> = Mutex::new(Vec::new());
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Where an RM escape's argument holds its parameter pointer and size:
/// RM_ALLOC as NVOS21 (32 bytes: pAllocParms +16, paramsSize +24) or the
/// longer NVOS64 (pAllocParms +16, pRightsRequested +24, paramsSize +32);
/// RM_CONTROL as NVOS54 (32 bytes: params +16, paramsSize +24).
fn pointer_params(nr: u64, size: usize) -> Option<(usize, usize)> {
    match (nr, size) {
        (0x2B | 0x2A, 32) => Some((16, 24)),
        (0x2B, s) if s >= 40 => Some((16, 32)),
        _ => None,
    }
}
/// Parameter blocks larger than this are not kept.
const MAX_PARAMS: usize = 64 << 10;

/// The parameter size RM takes for an allocation of `class` when the
/// caller gives none: the structures we declare for the classes whose
/// parameters the capture reads (0 for the rest).
fn alloc_params_size(class: u32) -> usize {
    use macuda_hw::rm::{self, class as c};
    match class {
        _ if class & 0xFF == 0x6F => std::mem::size_of::<rm::ChannelAlloc>(),
        c::KEPLER_CHANNEL_GROUP_A => std::mem::size_of::<rm::ChannelGroupAlloc>(),
        c::FERMI_CONTEXT_SHARE_A => std::mem::size_of::<rm::CtxShareAlloc>(),
        c::FERMI_VASPACE_A => std::mem::size_of::<rm::VaSpaceAlloc>(),
        c::NV1_MEMORY_USER | c::NV1_MEMORY_SYSTEM => std::mem::size_of::<rm::MemoryAlloc>(),
        c::GT200_DEBUGGER => std::mem::size_of::<rm::DebuggerAlloc>(),
        _ => 0,
    }
}

/// The request word's size field (14 bits at 16) and number (8 bits).
fn size_of_request(request: u64) -> usize {
    ((request >> 16) & 0x3FFF) as usize
}

extern "C" fn hooked_ioctl(fd: i32, request: u64, arg: *mut u8) -> i32 {
    // SAFETY: the same system call libc's ioctl makes, with its arguments.
    let r = unsafe { nix::libc::syscall(nix::libc::SYS_ioctl, fd, request, arg) };
    let size = size_of_request(request);
    let is_rm = (request >> 8) & 0xFF == macuda_hw::rm::IOCTL_TYPE;
    let mut rec = IoctlRecord {
        fd,
        request,
        result: r,
        arg: Vec::new(),
        params: Vec::new(),
    };
    if is_rm && !arg.is_null() && size > 0 {
        // SAFETY: an RM escape's argument is `size` bytes the caller owns.
        rec.arg = unsafe { std::slice::from_raw_parts(arg, size) }.to_vec();
        let nr = request & 0xFF;
        if let Some((p_at, n_at)) = pointer_params(nr, size) {
            let ptr = u64::from_le_bytes(rec.arg[p_at..p_at + 8].try_into().unwrap_or([0; 8]));
            let len = u32::from_le_bytes(rec.arg[n_at..n_at + 4].try_into().unwrap_or([0; 4]));
            let mut len = len as usize;
            // libcuda's allocations leave paramsSize 0 and let RM take the
            // class's own size; ours are the same structures.
            if len == 0 && nr == u64::from(macuda_hw::rm::escape::RM_ALLOC) {
                let class = u32::from_le_bytes(rec.arg[12..16].try_into().unwrap_or([0; 4]));
                len = alloc_params_size(class);
            }
            if ptr != 0 && len > 0 && len <= MAX_PARAMS {
                // SAFETY: the caller handed RM `len` bytes at `ptr`.
                rec.params = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }.to_vec();
            }
        }
    }
    RECORDS.lock().push(rec);
    // CAST: ioctl returns an int.
    r as i32
}

/// Why the hook could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("libc's ioctl could not be found")]
    NoIoctl,
    #[error("the hook works on x86-64 Linux only")]
    Unsupported,
    #[error("mprotect of libc's code failed")]
    Protect(#[source] std::io::Error),
}

/// Patch libc's `ioctl` to jump to the hook. Call once, before anything
/// (libcuda) starts threads that issue ioctls.
///
/// # Errors
/// Not x86-64 Linux, ioctl not found, or the page cannot be made writable.
pub fn install() -> Result<(), HookError> {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        return Err(HookError::Unsupported);
    }
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    // SAFETY: dlsym with a NUL-terminated name.
    let target = unsafe { nix::libc::dlsym(nix::libc::RTLD_DEFAULT, c"ioctl".as_ptr()) };
    if target.is_null() {
        return Err(HookError::NoIoctl);
    }
    let target = target.cast::<u8>();
    // movabs rax, imm64; jmp rax
    let hook = hooked_ioctl as *const () as usize as u64;
    let mut code = [0u8; 12];
    code[0] = 0x48;
    code[1] = 0xB8;
    code[2..10].copy_from_slice(&hook.to_le_bytes());
    code[10] = 0xFF;
    code[11] = 0xE0;
    // SAFETY: sysconf has no preconditions.
    let page =
        usize::try_from(unsafe { nix::libc::sysconf(nix::libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let start = (target as usize) & !(page - 1);
    let end = (target as usize + code.len()).next_multiple_of(page);
    let rwx = nix::libc::PROT_READ | nix::libc::PROT_WRITE | nix::libc::PROT_EXEC;
    // SAFETY: the pages hold libc's code; making them writable for the
    // patch and restoring read+exec after is what the hook needs, done
    // before any other thread runs.
    unsafe {
        if nix::libc::mprotect(start as *mut _, end - start, rwx) != 0 {
            return Err(HookError::Protect(std::io::Error::last_os_error()));
        }
        std::ptr::copy_nonoverlapping(code.as_ptr(), target, code.len());
        if nix::libc::mprotect(
            start as *mut _,
            end - start,
            nix::libc::PROT_READ | nix::libc::PROT_EXEC,
        ) != 0
        {
            return Err(HookError::Protect(std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// Every ioctl recorded so far.
pub fn records() -> Vec<IoctlRecord> {
    RECORDS.lock().clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ioctl_through_libc_is_recorded_and_still_answered() {
        if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
            eprintln!("skipped: the hook is x86-64 Linux only");
            return;
        }
        install().unwrap();
        let f = std::fs::File::open("/dev/null").unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
        let mut n: i32 = -1;
        // FIONREAD on /dev/null: not a tty ioctl, the kernel answers it
        // (ENOTTY) and the hook must pass that through.
        // SAFETY: a valid fd and a writable int.
        let r = unsafe { nix::libc::ioctl(fd, nix::libc::FIONREAD, &mut n) };
        let seen = records();
        assert!(
            seen.iter()
                .any(|rec| rec.fd == fd && rec.request == nix::libc::FIONREAD),
            "{seen:?}"
        );
        // The answer the kernel gave reached the caller.
        let direct =
            unsafe { nix::libc::syscall(nix::libc::SYS_ioctl, fd, nix::libc::FIONREAD, &mut n) };
        assert_eq!(i64::from(r), direct);
    }
}
