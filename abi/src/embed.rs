//! Registering a fat binary held in Rust memory the way compiled host code
//! does (a wrapper, then one call per kernel), for Rust programs that drive
//! the runtime through its C entry points: the benchmark and the tests.

use crate::api::registration::{__cudaRegisterFatBinary, __cudaRegisterFunction};
use macuda_loader::fatbin::WrapperC;
use std::ffi::{c_char, c_void, CStr};

/// Register `fatbin` (which must live as long as the process, as compiled
/// modules do) and each `(host stub, kernel name)`; returns the module's
/// handle.
pub fn register(fatbin: &'static [u8], kernels: &[(*const c_void, &CStr)]) -> *mut *mut c_void {
    let wrapper = Box::leak(Box::new(WrapperC::around(fatbin)));
    // SAFETY: a well-formed wrapper around static bytes, and NUL-terminated
    // names; the five optional pointers may be null.
    unsafe {
        let module = __cudaRegisterFatBinary((wrapper as *mut WrapperC).cast());
        for (stub, name) in kernels {
            __cudaRegisterFunction(
                module,
                stub.cast::<c_char>(),
                name.as_ptr().cast_mut(),
                name.as_ptr(),
                -1,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
        }
        module
    }
}
