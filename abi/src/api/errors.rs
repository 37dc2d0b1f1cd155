//! The error API: these read and clear the per-thread state; they are the
//! entries that do not latch what they answer.

use crate::error::{guard_quiet, peek_last, take_last, CudaError};
use std::ffi::c_char;

#[no_mangle]
pub extern "C" fn cudaGetLastError() -> CudaError {
    guard_quiet(CudaError::UNKNOWN, take_last)
}

#[no_mangle]
pub extern "C" fn cudaPeekAtLastError() -> CudaError {
    guard_quiet(CudaError::UNKNOWN, peek_last)
}

#[no_mangle]
pub extern "C" fn cudaGetErrorString(error: CudaError) -> *const c_char {
    guard_quiet(CudaError::UNKNOWN.text_ptr(), || error.text_ptr())
}

#[no_mangle]
pub extern "C" fn cudaGetErrorName(error: CudaError) -> *const c_char {
    guard_quiet(CudaError::UNKNOWN.name_ptr(), || error.name_ptr())
}
