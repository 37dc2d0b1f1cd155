//! Handles and their settings: create and destroy, the stream, the math,
//! pointer and atomics modes, the workspace, and the version queries.

use super::out;
use crate::enums::{
    property, AtomicsMode, MathMode, PointerMode, MATH_DISALLOW_REDUCED_PRECISION_REDUCTION,
};
use crate::guard::guard;
use crate::handle::{self, Context};
use crate::runtime::{self, Stream};
use crate::status::{Error, Status};
use crate::{kernels, VERSION};
use std::ffi::{c_int, c_void};

type CublasHandle = *mut c_void;

/// # Safety
/// `handle` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cublasCreate_v2(handle: *mut CublasHandle) -> Status {
    guard("cublasCreate_v2", || {
        // SAFETY: the caller's promise.
        let slot = unsafe { out(handle, "handle") }?;
        let device = runtime::current_device().map_err(Error::NoRuntime)?;
        kernels::register();
        *slot = handle::insert(Context::new(device));
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn cublasDestroy_v2(handle: CublasHandle) -> Status {
    guard("cublasDestroy_v2", || handle::remove(handle))
}

#[no_mangle]
pub extern "C" fn cublasSetStream_v2(handle: CublasHandle, stream: Stream) -> Status {
    guard("cublasSetStream_v2", || {
        handle::get(handle)?.settings.lock().stream = stream as usize;
        Ok(())
    })
}

/// # Safety
/// `stream` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cublasGetStream_v2(handle: CublasHandle, stream: *mut Stream) -> Status {
    guard("cublasGetStream_v2", || {
        let ctx = handle::get(handle)?;
        // SAFETY: the caller's promise.
        *unsafe { out(stream, "streamId") }? = ctx.settings().stream();
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn cublasSetMathMode(handle: CublasHandle, mode: c_int) -> Status {
    guard("cublasSetMathMode", || {
        let ctx = handle::get(handle)?;
        let math = MathMode::from_c(mode & !MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)?;
        let mut s = ctx.settings.lock();
        s.math = math;
        s.math_raw = mode;
        Ok(())
    })
}

/// # Safety
/// `mode` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cublasGetMathMode(handle: CublasHandle, mode: *mut c_int) -> Status {
    guard("cublasGetMathMode", || {
        let ctx = handle::get(handle)?;
        // SAFETY: the caller's promise.
        *unsafe { out(mode, "mode") }? = ctx.settings().math_raw;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn cublasSetPointerMode_v2(handle: CublasHandle, mode: c_int) -> Status {
    guard("cublasSetPointerMode_v2", || {
        let ctx = handle::get(handle)?;
        ctx.settings.lock().pointer_mode = PointerMode::from_c(mode)?;
        Ok(())
    })
}

/// # Safety
/// `mode` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cublasGetPointerMode_v2(handle: CublasHandle, mode: *mut c_int) -> Status {
    guard("cublasGetPointerMode_v2", || {
        let ctx = handle::get(handle)?;
        // SAFETY: the caller's promise.
        *unsafe { out(mode, "mode") }? = ctx.settings().pointer_mode as c_int;
        Ok(())
    })
}

/// Our kernels use no atomics either way; the mode is kept and reported.
#[no_mangle]
pub extern "C" fn cublasSetAtomicsMode(handle: CublasHandle, mode: c_int) -> Status {
    guard("cublasSetAtomicsMode", || {
        let ctx = handle::get(handle)?;
        ctx.settings.lock().atomics = AtomicsMode::from_c(mode)?;
        Ok(())
    })
}

/// # Safety
/// `mode` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cublasGetAtomicsMode(handle: CublasHandle, mode: *mut c_int) -> Status {
    guard("cublasGetAtomicsMode", || {
        let ctx = handle::get(handle)?;
        // SAFETY: the caller's promise.
        *unsafe { out(mode, "mode") }? = ctx.settings().atomics as c_int;
        Ok(())
    })
}

/// The workspace is the caller's memory, lent for the handle's launches:
/// split GEMMs keep their partial sums there when it is large enough and
/// 16-byte aligned (else in memory of the handle's own). NVIDIA's cuBLAS
/// takes any pointer and size here (seen on the H200: a null one with a
/// size, and one 16 bytes off alignment, both succeed), and so do we.
#[no_mangle]
pub extern "C" fn cublasSetWorkspace_v2(
    handle: CublasHandle,
    workspace: *mut c_void,
    bytes: usize,
) -> Status {
    guard("cublasSetWorkspace_v2", || {
        let ctx = handle::get(handle)?;
        ctx.settings.lock().workspace = (workspace as usize, bytes);
        Ok(())
    })
}

/// # Safety
/// `version` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cublasGetVersion_v2(handle: CublasHandle, version: *mut c_int) -> Status {
    guard("cublasGetVersion_v2", || {
        handle::get(handle)?;
        let (major, minor, patch) = VERSION;
        // SAFETY: the caller's promise.
        *unsafe { out(version, "version") }? = major * 10000 + minor * 100 + patch;
        Ok(())
    })
}

/// # Safety
/// `value` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cublasGetProperty(kind: c_int, value: *mut c_int) -> Status {
    guard("cublasGetProperty", || {
        let (major, minor, patch) = VERSION;
        let v = match kind {
            property::MAJOR_VERSION => major,
            property::MINOR_VERSION => minor,
            property::PATCH_LEVEL => patch,
            _ => {
                return Err(Error::Invalid {
                    what: "type",
                    value: kind.into(),
                    rule: "not a libraryPropertyType value",
                })
            }
        };
        // SAFETY: the caller's promise.
        *unsafe { out(value, "value") }? = v;
        Ok(())
    })
}
