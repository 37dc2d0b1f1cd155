//! What this library needs of the CUDA runtime, through the runtime's C
//! entry points, as any CUDA program calls them: fat-binary registration,
//! device queries, kernel attributes, launches, and the memory split GEMMs
//! keep their partial sums in. With our libcudart these
//! resolve to it (statically or through libcudart.so); nothing here knows
//! which runtime answers.

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `dim3`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dim3 {
    pub x: c_uint,
    pub y: c_uint,
    pub z: c_uint,
}

/// `cudaStream_t`.
pub type Stream = *mut c_void;

/// `cudaSuccess`.
pub const SUCCESS: c_int = 0;

/// The `cudaDeviceAttr` values we ask for.
pub mod attr {
    use std::ffi::c_int;
    pub const MULTIPROCESSOR_COUNT: c_int = 16;
    pub const COMPUTE_CAPABILITY_MAJOR: c_int = 75;
    pub const COMPUTE_CAPABILITY_MINOR: c_int = 76;
    pub const MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: c_int = 97;
}

/// `cudaFuncAttributeMaxDynamicSharedMemorySize`.
pub const FUNC_ATTR_MAX_DYNAMIC_SHARED_MEMORY_SIZE: c_int = 8;

extern "C" {
    pub fn __cudaRegisterFatBinary(fat_cubin: *mut c_void) -> *mut *mut c_void;
    pub fn __cudaRegisterFatBinaryEnd(handle: *mut *mut c_void);
    #[allow(clippy::too_many_arguments)]
    pub fn __cudaRegisterFunction(
        handle: *mut *mut c_void,
        host_fun: *const c_char,
        device_fun: *mut c_char,
        device_name: *const c_char,
        thread_limit: c_int,
        tid: *mut Dim3,
        bid: *mut Dim3,
        block_dim: *mut Dim3,
        grid_dim: *mut Dim3,
        warp_size: *mut c_int,
    );
    pub fn cudaGetDevice(device: *mut c_int) -> c_int;
    pub fn cudaDeviceGetAttribute(value: *mut c_int, attr: c_int, device: c_int) -> c_int;
    pub fn cudaFuncSetAttribute(func: *const c_void, attr: c_int, value: c_int) -> c_int;
    pub fn cudaMalloc(ptr: *mut *mut c_void, size: usize) -> c_int;
    pub fn cudaFree(ptr: *mut c_void) -> c_int;
    pub fn cudaDeviceSynchronize() -> c_int;
    pub fn cudaLaunchKernel(
        func: *const c_void,
        grid: Dim3,
        block: Dim3,
        args: *mut *mut c_void,
        shared: usize,
        stream: Stream,
    ) -> c_int;
}

/// What a handle needs to know of the device it was created on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceFacts {
    pub ordinal: c_int,
    /// Compute capability, major * 10 + minor.
    pub sm: u32,
    pub multiprocessors: u32,
    /// The most dynamic shared memory a block may be given.
    pub shared_optin: u32,
}

/// The two chips the unit tests plan for, as their runtimes report them.
#[cfg(test)]
impl DeviceFacts {
    pub(crate) fn h200() -> DeviceFacts {
        DeviceFacts {
            ordinal: 0,
            sm: 90,
            multiprocessors: 132,
            shared_optin: 232448,
        }
    }

    pub(crate) fn rtx5090() -> DeviceFacts {
        DeviceFacts {
            ordinal: 0,
            sm: 120,
            multiprocessors: 170,
            shared_optin: 101376,
        }
    }
}

fn attribute(a: c_int, device: c_int) -> Result<c_int, c_int> {
    let mut v = 0;
    // SAFETY: a valid out pointer.
    let rc = unsafe { cudaDeviceGetAttribute(&mut v, a, device) };
    if rc == SUCCESS {
        Ok(v)
    } else {
        Err(rc)
    }
}

/// The current device's facts; the runtime's error code when it has none.
pub fn current_device() -> Result<DeviceFacts, c_int> {
    let mut ordinal = 0;
    // SAFETY: a valid out pointer.
    let rc = unsafe { cudaGetDevice(&mut ordinal) };
    if rc != SUCCESS {
        return Err(rc);
    }
    let major = attribute(attr::COMPUTE_CAPABILITY_MAJOR, ordinal)?;
    let minor = attribute(attr::COMPUTE_CAPABILITY_MINOR, ordinal)?;
    let multiprocessors = attribute(attr::MULTIPROCESSOR_COUNT, ordinal)?;
    let shared_optin = attribute(attr::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, ordinal)?;
    Ok(DeviceFacts {
        ordinal,
        // CAST: the runtime reports small non-negative numbers.
        sm: (major.max(0) * 10 + minor.max(0)) as u32,
        multiprocessors: multiprocessors.max(1) as u32,
        shared_optin: shared_optin.max(0) as u32,
    })
}
