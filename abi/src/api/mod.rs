//! The exported C entry points, by topic. Each runs inside
//! [`crate::error::guard`]: a panic becomes `cudaErrorUnknown`, an error is
//! latched for `cudaGetLastError`, and a sticky error answers every call.
//! Pointers from the caller are checked for null before use; handles are
//! looked up, never dereferenced.

pub mod device;
pub mod errors;
pub mod graph;
pub mod launch;
pub mod memory;
pub mod registration;
pub mod streams;

use crate::error::CudaError;
use std::ffi::{c_char, CStr};

/// Where an entry writes its answer: refused when null.
///
/// # Safety
/// A non-null `p` must be valid for writes of a `T`.
pub(crate) unsafe fn out<'a, T>(p: *mut T) -> Result<&'a mut T, CudaError> {
    // SAFETY: the caller's promise for a non-null pointer.
    unsafe { p.as_mut() }.ok_or(CudaError::INVALID_VALUE)
}

/// A C string argument, lossily as UTF-8.
///
/// # Safety
/// A non-null `p` must point to a NUL-terminated string.
pub(crate) unsafe fn text(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's promise.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}
