//! Allocation, copies, fills and device variables.

use super::out;
use crate::error::{guard, CudaError};
use crate::memory::{
    alloc_device, alloc_host, free_device, free_host, register_host, unregister_host,
};
use crate::runtime::{runtime, Runtime};
use crate::state::memory_map::{Copy2dOp, CopyOp, FillOp, PointerKind};
use crate::state::nodes::Node;
use crate::state::registry::REGISTRY;
use crate::types::{flags, memcpy_kind, memory_type, Handle, PointerAttributes};
use crate::work::issue;
use std::ffi::{c_int, c_uint, c_void};

/// # Safety
/// `p` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaMalloc(p: *mut *mut c_void, bytes: usize) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let p = unsafe { out(p) }?;
        let va = alloc_device(runtime()?, bytes as u64)?;
        *p = va as *mut c_void;
        Ok(())
    })
}

/// Rows padded to 512 bytes (the texture alignment), as NVIDIA's are.
///
/// # Safety
/// `p` and `pitch` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaMallocPitch(
    p: *mut *mut c_void,
    pitch: *mut usize,
    width: usize,
    height: usize,
) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let (p, pitch) = unsafe { (out(p)?, out(pitch)?) };
        let row = (width as u64).next_multiple_of(crate::device::TEXTURE_ALIGNMENT);
        let va = alloc_device(runtime()?, row * height as u64)?;
        *p = va as *mut c_void;
        *pitch = row as usize;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn cudaFree(p: *mut c_void) -> CudaError {
    guard(|| free_device(runtime()?, p as u64))
}

/// Managed memory is not kept by this runtime.
#[no_mangle]
pub extern "C" fn cudaMallocManaged(
    _p: *mut *mut c_void,
    _bytes: usize,
    _flags: c_uint,
) -> CudaError {
    guard(|| Err(CudaError::NOT_SUPPORTED))
}

/// # Safety
/// `p` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaMallocHost(p: *mut *mut c_void, bytes: usize) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let p = unsafe { out(p) }?;
        *p = alloc_host(runtime()?, bytes as u64)? as *mut c_void;
        Ok(())
    })
}

/// Every pinned buffer is portable and mapped (there is one device, and
/// the GPU reaches all of them).
///
/// # Safety
/// `p` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaHostAlloc(
    p: *mut *mut c_void,
    bytes: usize,
    flags: c_uint,
) -> CudaError {
    guard(|| {
        if flags & !(flags::HOST_ALLOC_PORTABLE | flags::HOST_ALLOC_MAPPED | WRITE_COMBINED) != 0 {
            return Err(CudaError::INVALID_VALUE);
        }
        // SAFETY: the caller's promise.
        let p = unsafe { out(p) }?;
        *p = alloc_host(runtime()?, bytes as u64)? as *mut c_void;
        Ok(())
    })
}

/// `cudaHostAllocWriteCombined`.
const WRITE_COMBINED: u32 = 4;

#[no_mangle]
pub extern "C" fn cudaFreeHost(p: *mut c_void) -> CudaError {
    guard(|| free_host(runtime()?, p as usize))
}

/// # Safety
/// `dev` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaHostGetDevicePointer(
    dev: *mut *mut c_void,
    host: *mut c_void,
    _flags: c_uint,
) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let dev = unsafe { out(dev) }?;
        let rt = runtime()?;
        match rt.memory.lock().pointer(host as usize) {
            PointerKind::Pinned { va: Some(va) } => {
                *dev = va as *mut c_void;
                Ok(())
            }
            _ => Err(CudaError::INVALID_VALUE),
        }
    })
}

#[no_mangle]
pub extern "C" fn cudaHostRegister(p: *mut c_void, bytes: usize, flags: c_uint) -> CudaError {
    guard(|| {
        let rt = runtime()?;
        // We make no GPU mapping of registered memory: a request for a
        // device pointer to it is refused up front.
        if flags & flags::HOST_REGISTER_MAPPED != 0 {
            return Err(CudaError::NOT_SUPPORTED);
        }
        register_host(rt, p as usize, bytes)
    })
}

#[no_mangle]
pub extern "C" fn cudaHostUnregister(p: *mut c_void) -> CudaError {
    guard(|| unregister_host(runtime()?, p as usize))
}

/// # Safety
/// `attr` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaPointerGetAttributes(
    attr: *mut PointerAttributes,
    p: *const c_void,
) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let attr = unsafe { out(attr) }?;
        let rt = runtime()?;
        let kind = rt.memory.lock().pointer(p as usize);
        let (t, dev, host) = match kind {
            PointerKind::Device => (memory_type::DEVICE, p as usize, 0),
            PointerKind::Pinned { va } => (memory_type::HOST, va.unwrap_or(0) as usize, p as usize),
            PointerKind::Registered => (memory_type::HOST, 0, p as usize),
            PointerKind::Unknown => (memory_type::UNREGISTERED, 0, 0),
        };
        attr.r#type = t;
        attr.device = if kind == PointerKind::Unknown {
            NO_DEVICE
        } else {
            0
        };
        attr.devicePointer = dev as *mut c_void;
        attr.hostPointer = host as *mut c_void;
        Ok(())
    })
}

/// What `cudaPointerGetAttributes` names as the device of memory CUDA
/// does not know.
const NO_DEVICE: c_int = -2;

fn copy(rt: &Runtime, op: CopyOp, stream: usize, sync: bool) -> Result<(), CudaError> {
    // Checked here too, so that a capture refuses a bad copy at once.
    op.ends(rt)?;
    issue(rt, stream, Node::Copy(op), sync)
}

/// A 1-D copy as the entries take it.
fn memcpy(
    dst: usize,
    src: usize,
    bytes: usize,
    kind: c_int,
    stream: usize,
    sync: bool,
) -> Result<(), CudaError> {
    let op = CopyOp {
        dst,
        src,
        bytes: bytes as u64,
        kind,
    };
    copy(runtime()?, op, stream, sync)
}

/// Peer copies name devices: there is one, 0.
fn on_our_device(dst_device: c_int, src_device: c_int) -> Result<(), CudaError> {
    if dst_device != 0 || src_device != 0 {
        return Err(CudaError::INVALID_DEVICE);
    }
    Ok(())
}

#[no_mangle]
pub extern "C" fn cudaMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_int,
) -> CudaError {
    let _timed = crate::call_spans::time("cudaMemcpy");
    guard(|| memcpy(dst as usize, src as usize, bytes, kind, 0, true))
}

#[no_mangle]
pub extern "C" fn cudaMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_int,
    stream: Handle,
) -> CudaError {
    let _timed = crate::call_spans::time("cudaMemcpyAsync");
    guard(|| {
        memcpy(
            dst as usize,
            src as usize,
            bytes,
            kind,
            stream as usize,
            false,
        )
    })
}

#[no_mangle]
pub extern "C" fn cudaMemcpyPeerAsync(
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    bytes: usize,
    stream: Handle,
) -> CudaError {
    guard(|| {
        on_our_device(dst_device, src_device)?;
        let kind = memcpy_kind::DEVICE_TO_DEVICE;
        memcpy(
            dst as usize,
            src as usize,
            bytes,
            kind,
            stream as usize,
            false,
        )
    })
}

#[no_mangle]
pub extern "C" fn cudaMemcpyPeer(
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    bytes: usize,
) -> CudaError {
    guard(|| {
        on_our_device(dst_device, src_device)?;
        memcpy(
            dst as usize,
            src as usize,
            bytes,
            memcpy_kind::DEVICE_TO_DEVICE,
            0,
            true,
        )
    })
}

#[allow(clippy::too_many_arguments)]
fn copy2d(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_int,
    stream: usize,
    sync: bool,
) -> Result<(), CudaError> {
    let rt = runtime()?;
    let op = Copy2dOp {
        dst: dst as usize,
        dpitch: dpitch as u64,
        src: src as usize,
        spitch: spitch as u64,
        width: width as u64,
        height: height as u64,
        kind,
    };
    op.check(rt)?;
    issue(rt, stream, Node::Copy2d(op), sync)
}

#[no_mangle]
pub extern "C" fn cudaMemcpy2D(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_int,
) -> CudaError {
    let _timed = crate::call_spans::time("cudaMemcpy2D");
    guard(|| copy2d(dst, dpitch, src, spitch, width, height, kind, 0, true))
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn cudaMemcpy2DAsync(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_int,
    stream: Handle,
) -> CudaError {
    let _timed = crate::call_spans::time("cudaMemcpy2DAsync");
    guard(|| {
        copy2d(
            dst,
            dpitch,
            src,
            spitch,
            width,
            height,
            kind,
            stream as usize,
            false,
        )
    })
}

fn fill(
    dst: *mut c_void,
    value: c_int,
    bytes: usize,
    stream: usize,
    sync: bool,
) -> Result<(), CudaError> {
    let rt = runtime()?;
    let op = FillOp {
        dst: dst as u64,
        // CAST: memset takes the value's low byte.
        value: value as u8,
        bytes: bytes as u64,
    };
    op.check(rt)?;
    issue(rt, stream, Node::Fill(op), sync)
}

#[no_mangle]
pub extern "C" fn cudaMemset(dst: *mut c_void, value: c_int, bytes: usize) -> CudaError {
    let _timed = crate::call_spans::time("cudaMemset");
    guard(|| fill(dst, value, bytes, 0, true))
}

#[no_mangle]
pub extern "C" fn cudaMemsetAsync(
    dst: *mut c_void,
    value: c_int,
    bytes: usize,
    stream: Handle,
) -> CudaError {
    let _timed = crate::call_spans::time("cudaMemsetAsync");
    guard(|| fill(dst, value, bytes, stream as usize, false))
}

/// Where a registered device variable lives, checked against `count`
/// bytes at `offset`.
fn symbol(
    rt: &Runtime,
    symbol: *const c_void,
    offset: usize,
    count: usize,
) -> Result<u64, CudaError> {
    let var = REGISTRY.var(symbol as usize)?;
    let g = var.resolve(rt)?;
    let end = offset.checked_add(count).ok_or(CudaError::INVALID_VALUE)?;
    if end as u64 > g.bytes {
        return Err(CudaError::INVALID_VALUE);
    }
    Ok(g.address + offset as u64)
}

/// Which way a copy through a device variable goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Through {
    ToSymbol,
    FromSymbol,
}

/// A copy between `other` and `count` bytes at `offset` in a registered
/// device variable.
#[allow(clippy::too_many_arguments)]
fn symbol_copy(
    way: Through,
    other: usize,
    sym: *const c_void,
    count: usize,
    offset: usize,
    kind: c_int,
    stream: usize,
    sync: bool,
) -> Result<(), CudaError> {
    let host_side = match way {
        Through::ToSymbol => memcpy_kind::HOST_TO_DEVICE,
        Through::FromSymbol => memcpy_kind::DEVICE_TO_HOST,
    };
    if kind != host_side && kind != memcpy_kind::DEVICE_TO_DEVICE && kind != memcpy_kind::DEFAULT {
        return Err(CudaError::INVALID_MEMCPY_DIRECTION);
    }
    let at = symbol(runtime()?, sym, offset, count)? as usize;
    let (dst, src) = match way {
        Through::ToSymbol => (at, other),
        Through::FromSymbol => (other, at),
    };
    memcpy(dst, src, count, kind, stream, sync)
}

#[no_mangle]
pub extern "C" fn cudaMemcpyToSymbol(
    sym: *const c_void,
    src: *const c_void,
    count: usize,
    offset: usize,
    kind: c_int,
) -> CudaError {
    guard(|| {
        symbol_copy(
            Through::ToSymbol,
            src as usize,
            sym,
            count,
            offset,
            kind,
            0,
            true,
        )
    })
}

#[no_mangle]
pub extern "C" fn cudaMemcpyToSymbolAsync(
    sym: *const c_void,
    src: *const c_void,
    count: usize,
    offset: usize,
    kind: c_int,
    stream: Handle,
) -> CudaError {
    guard(|| {
        symbol_copy(
            Through::ToSymbol,
            src as usize,
            sym,
            count,
            offset,
            kind,
            stream as usize,
            false,
        )
    })
}

#[no_mangle]
pub extern "C" fn cudaMemcpyFromSymbol(
    dst: *mut c_void,
    sym: *const c_void,
    count: usize,
    offset: usize,
    kind: c_int,
) -> CudaError {
    guard(|| {
        symbol_copy(
            Through::FromSymbol,
            dst as usize,
            sym,
            count,
            offset,
            kind,
            0,
            true,
        )
    })
}

#[no_mangle]
pub extern "C" fn cudaMemcpyFromSymbolAsync(
    dst: *mut c_void,
    sym: *const c_void,
    count: usize,
    offset: usize,
    kind: c_int,
    stream: Handle,
) -> CudaError {
    guard(|| {
        symbol_copy(
            Through::FromSymbol,
            dst as usize,
            sym,
            count,
            offset,
            kind,
            stream as usize,
            false,
        )
    })
}

/// # Safety
/// `p` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaGetSymbolAddress(
    p: *mut *mut c_void,
    sym: *const c_void,
) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let p = unsafe { out(p) }?;
        *p = symbol(runtime()?, sym, 0, 0)? as *mut c_void;
        Ok(())
    })
}

/// # Safety
/// `size` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaGetSymbolSize(size: *mut usize, sym: *const c_void) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let size = unsafe { out(size) }?;
        let rt = runtime()?;
        let var = REGISTRY.var(sym as usize)?;
        *size = var.resolve(rt)?.bytes as usize;
        Ok(())
    })
}
