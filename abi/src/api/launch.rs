//! Launch entries: the call configuration, nvcc's and clang's stub
//! launches, cudaLaunchKernelExC, cooperative launches, the legacy path.

use super::out;
use crate::error::{guard, guard_quiet, CudaError};
use crate::launch::{launch, launch_legacy, pop_config, push_config, setup_argument, CallConfig};
use crate::runtime::runtime;
use crate::state::registry::REGISTRY;
use crate::types::{Dim3, Handle, LaunchConfig};
use std::ffi::{c_uint, c_void};

#[no_mangle]
pub extern "C" fn __cudaPushCallConfiguration(
    grid: Dim3,
    block: Dim3,
    shared: usize,
    stream: Handle,
) -> c_uint {
    guard_quiet(1, || {
        push_config(CallConfig {
            grid,
            block,
            shared,
            stream: stream as usize,
        });
        0
    })
}

/// # Safety
/// Each pointer is null or writable.
#[no_mangle]
pub unsafe extern "C" fn __cudaPopCallConfiguration(
    grid: *mut Dim3,
    block: *mut Dim3,
    shared: *mut usize,
    stream: *mut Handle,
) -> CudaError {
    guard(|| {
        let c = pop_config()?;
        // SAFETY: the caller's promise for each.
        unsafe {
            *out(grid)? = c.grid;
            *out(block)? = c.block;
            *out(shared)? = c.shared;
            *out(stream)? = c.stream as Handle;
        }
        Ok(())
    })
}

/// `cudaKernel_t` is the host stub's address here: the same key every
/// other entry takes.
///
/// # Safety
/// `kernel` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn __cudaGetKernel(
    kernel: *mut Handle,
    host_fun: *const c_void,
) -> CudaError {
    guard(|| {
        REGISTRY.kernel(host_fun as usize)?;
        // SAFETY: the caller's promise.
        unsafe { *out(kernel)? = host_fun as Handle };
        Ok(())
    })
}

/// # Safety
/// `args` holds one pointer per kernel parameter (the launch contract).
#[no_mangle]
pub unsafe extern "C" fn __cudaLaunchKernel(
    kernel: Handle,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared: usize,
    stream: Handle,
) -> CudaError {
    // SAFETY: passed on.
    unsafe { cudaLaunchKernel(kernel, grid, block, args, shared, stream) }
}

/// # Safety
/// As [`__cudaLaunchKernel`].
#[no_mangle]
pub unsafe extern "C" fn __cudaLaunchKernel_ptsz(
    kernel: Handle,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared: usize,
    stream: Handle,
) -> CudaError {
    // SAFETY: passed on.
    unsafe { cudaLaunchKernel(kernel, grid, block, args, shared, stream) }
}

/// # Safety
/// As [`__cudaLaunchKernel`].
#[no_mangle]
pub unsafe extern "C" fn cudaLaunchKernel(
    func: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared: usize,
    stream: Handle,
) -> CudaError {
    let _timed = crate::call_spans::time("cudaLaunchKernel");
    guard(|| {
        let rt = runtime()?;
        // SAFETY: the launch contract, passed on.
        unsafe {
            launch(
                rt,
                func as usize,
                grid,
                block,
                shared,
                stream as usize,
                args as *const *const c_void,
            )
        }
    })
}

/// # Safety
/// As [`__cudaLaunchKernel`].
#[no_mangle]
pub unsafe extern "C" fn cudaLaunchKernel_ptsz(
    func: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared: usize,
    stream: Handle,
) -> CudaError {
    let _timed = crate::call_spans::time("cudaLaunchKernel_ptsz");
    // SAFETY: passed on.
    unsafe { cudaLaunchKernel(func, grid, block, args, shared, stream) }
}

/// Launch attributes are hints for overlap and placement (ggml passes
/// programmatic stream serialisation); the launch runs in stream order
/// either way, which every attribute permits.
///
/// # Safety
/// `config` is null or readable; `args` as for [`__cudaLaunchKernel`].
#[no_mangle]
pub unsafe extern "C" fn cudaLaunchKernelExC(
    config: *const LaunchConfig,
    func: *const c_void,
    args: *mut *mut c_void,
) -> CudaError {
    let _timed = crate::call_spans::time("cudaLaunchKernelExC");
    guard(|| {
        // SAFETY: the caller's promise.
        let c = unsafe { config.as_ref() }.ok_or(CudaError::INVALID_VALUE)?;
        let rt = runtime()?;
        // SAFETY: the launch contract, passed on.
        unsafe {
            launch(
                rt,
                func as usize,
                c.gridDim,
                c.blockDim,
                c.dynamicSmemBytes,
                c.stream as usize,
                args as *const *const c_void,
            )
        }
    })
}

/// Cooperative launches need a grid-sync workspace and co-residency,
/// which this runtime does not provide (`cudaDevAttrCooperativeLaunch`
/// says 0): refused.
#[no_mangle]
pub extern "C" fn cudaLaunchCooperativeKernel(
    _func: *const c_void,
    _grid: Dim3,
    _block: Dim3,
    _args: *mut *mut c_void,
    _shared: usize,
    _stream: Handle,
) -> CudaError {
    guard(|| Err(CudaError::NOT_SUPPORTED))
}

#[no_mangle]
pub extern "C" fn cudaConfigureCall(
    grid: Dim3,
    block: Dim3,
    shared: usize,
    stream: Handle,
) -> CudaError {
    guard(|| {
        push_config(CallConfig {
            grid,
            block,
            shared,
            stream: stream as usize,
        });
        Ok(())
    })
}

/// Arguments are matched to parameters by order (clang's offsets follow
/// natural alignment, as the cubin's do).
///
/// # Safety
/// `arg` points to `size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn cudaSetupArgument(
    arg: *const c_void,
    size: usize,
    _offset: usize,
) -> CudaError {
    guard(|| {
        if arg.is_null() {
            return Err(CudaError::INVALID_VALUE);
        }
        // SAFETY: the caller's promise.
        setup_argument(unsafe { std::slice::from_raw_parts(arg.cast::<u8>(), size) });
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn cudaLaunch(func: *const c_void) -> CudaError {
    guard(|| launch_legacy(runtime()?, func as usize))
}
