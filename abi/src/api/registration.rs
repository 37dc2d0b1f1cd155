//! What the static constructors nvcc and clang generate call, before
//! `main`: register each fat binary, its kernels' host stubs and its
//! device variables' shadows; and, at exit, unregister the fat binary.
//! Nothing here starts the runtime.

use super::text;
use crate::error::guard_quiet;
use crate::state::registry::REGISTRY;
use crate::types::Dim3;
use std::ffi::{c_char, c_int, c_void};

/// # Safety
/// `fat_cubin` is the fat binary wrapper nvcc or clang emitted (or null).
#[no_mangle]
pub unsafe extern "C" fn __cudaRegisterFatBinary(fat_cubin: *mut c_void) -> *mut *mut c_void {
    guard_quiet(std::ptr::null_mut(), || {
        // SAFETY: a compiler-made wrapper, as the caller promises.
        unsafe { REGISTRY.register_module(fat_cubin.cast::<u8>()) as *mut *mut c_void }
    })
}

/// Modules are loaded on first use, so the end of registration needs
/// nothing; the empty body still runs in the guard, as every entry's
/// does, so that one rule holds for all of them (and work added here
/// later cannot unwind into C).
#[no_mangle]
pub extern "C" fn __cudaRegisterFatBinaryEnd(_handle: *mut *mut c_void) {
    guard_quiet((), || {});
}

#[no_mangle]
pub extern "C" fn __cudaUnregisterFatBinary(handle: *mut *mut c_void) {
    guard_quiet((), || REGISTRY.unregister(handle as usize));
}

/// # Safety
/// `device_name` is null or a NUL-terminated string.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn __cudaRegisterFunction(
    handle: *mut *mut c_void,
    host_fun: *const c_char,
    _device_fun: *mut c_char,
    device_name: *const c_char,
    _thread_limit: c_int,
    _tid: *mut Dim3,
    _bid: *mut Dim3,
    _block_dim: *mut Dim3,
    _grid_dim: *mut Dim3,
    _warp_size: *mut c_int,
) {
    guard_quiet((), || {
        // SAFETY: the caller's promise.
        let Some(name) = (unsafe { text(device_name) }) else {
            eprintln!("macuda: __cudaRegisterFunction without a kernel name; ignored");
            return;
        };
        if !REGISTRY.register_kernel(handle as usize, host_fun as usize, name.clone()) {
            eprintln!("macuda: kernel `{name}` registered to an unknown module; ignored");
        }
    });
}

/// # Safety
/// `device_name` is null or a NUL-terminated string.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn __cudaRegisterVar(
    handle: *mut *mut c_void,
    host_var: *mut c_char,
    _device_address: *mut c_char,
    device_name: *const c_char,
    _ext: c_int,
    size: usize,
    _constant: c_int,
    _global: c_int,
) {
    guard_quiet((), || {
        // SAFETY: the caller's promise.
        let Some(name) = (unsafe { text(device_name) }) else {
            return;
        };
        REGISTRY.register_var(handle as usize, host_var as usize, name, size, false);
    });
}

/// `__managed__` variables need managed memory, which this runtime does
/// not keep: the variable is registered as refused (every use of it
/// answers `cudaErrorNotSupported`), its host pointer is left null, and
/// the refusal is said once, here.
///
/// # Safety
/// `device_name` is null or a NUL-terminated string; `host_var_ptr` is
/// null or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn __cudaRegisterManagedVar(
    handle: *mut *mut c_void,
    host_var_ptr: *mut *mut c_void,
    _device_address: *mut c_char,
    device_name: *const c_char,
    _ext: c_int,
    size: usize,
    _constant: c_int,
    _global: c_int,
) {
    guard_quiet((), || {
        // SAFETY: the caller's promise.
        let name = unsafe { text(device_name) }.unwrap_or_default();
        eprintln!(
            "macuda: __managed__ variable `{name}` refused: managed memory is not supported; its uses answer cudaErrorNotSupported"
        );
        if !host_var_ptr.is_null() {
            // SAFETY: writable, as the caller promises.
            unsafe { *host_var_ptr = std::ptr::null_mut() };
        }
        REGISTRY.register_var(handle as usize, host_var_ptr as usize, name, size, true);
    });
}

/// nvcc calls this before using a module's managed variables: a module
/// with one is refused (0), others are fine (1).
#[no_mangle]
pub extern "C" fn __cudaInitModule(handle: *mut *mut c_void) -> c_char {
    guard_quiet(0, || {
        // A module we never registered has no managed variables of ours.
        let Some(module) = REGISTRY.module(handle as usize) else {
            return 1;
        };
        let managed = REGISTRY
            .vars
            .iter()
            .any(|v| v.managed && std::sync::Arc::ptr_eq(&module, &v.module));
        c_char::from(!managed)
    })
}
