//! Stream capture and graphs.

use super::out;
use crate::error::{guard, CudaError};
use crate::graph;
use crate::runtime::runtime;
use crate::types::{flags, graph_update, GraphExecUpdateResultInfo, Handle};
use std::ffi::{c_int, c_ulonglong};

#[no_mangle]
pub extern "C" fn cudaStreamBeginCapture(stream: Handle, mode: c_int) -> CudaError {
    let _timed = crate::call_spans::time("cudaStreamBeginCapture");
    guard(|| graph::begin(runtime()?, stream as usize, mode))
}

/// # Safety
/// `graph_out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamEndCapture(stream: Handle, graph_out: *mut Handle) -> CudaError {
    let _timed = crate::call_spans::time("cudaStreamEndCapture");
    guard(|| {
        // SAFETY: the caller's promise.
        let g = unsafe { out(graph_out) }?;
        *g = std::ptr::null_mut();
        *g = graph::end(runtime()?, stream as usize)? as Handle;
        Ok(())
    })
}

/// # Safety
/// `status` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamIsCapturing(stream: Handle, status: *mut c_int) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let st = unsafe { out(status) }?;
        *st = graph::status(runtime()?, stream as usize)?;
        Ok(())
    })
}

/// CUB asks for the calling thread's capture mode and sets it around its
/// own calls; there is one mode per thread, which we keep.
///
/// # Safety
/// `mode` is null or readable and writable.
#[no_mangle]
pub unsafe extern "C" fn cudaThreadExchangeStreamCaptureMode(mode: *mut c_int) -> CudaError {
    thread_local! {
        static MODE: std::cell::Cell<c_int> = const { std::cell::Cell::new(flags::CAPTURE_MODE_GLOBAL) };
    }
    guard(|| {
        // SAFETY: the caller's promise.
        let m = unsafe { out(mode) }?;
        if !(flags::CAPTURE_MODE_GLOBAL..=flags::CAPTURE_MODE_RELAXED).contains(m) {
            return Err(CudaError::INVALID_VALUE);
        }
        *m = MODE.with(|c| c.replace(*m));
        Ok(())
    })
}

/// # Safety
/// `exec` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaGraphInstantiate(
    exec: *mut Handle,
    graph_h: Handle,
    _flags: c_ulonglong,
) -> CudaError {
    let _timed = crate::call_spans::time("cudaGraphInstantiate");
    guard(|| {
        // SAFETY: the caller's promise.
        let e = unsafe { out(exec) }?;
        let rt = runtime()?;
        let g = rt.graphs.graph(graph_h as usize)?;
        *e = rt.graphs.instantiate(&g) as Handle;
        Ok(())
    })
}

/// # Safety
/// As [`cudaGraphInstantiate`].
#[no_mangle]
pub unsafe extern "C" fn cudaGraphInstantiateWithFlags(
    exec: *mut Handle,
    graph_h: Handle,
    flags_: c_ulonglong,
) -> CudaError {
    let _timed = crate::call_spans::time("cudaGraphInstantiateWithFlags");
    // SAFETY: passed on.
    unsafe { cudaGraphInstantiate(exec, graph_h, flags_) }
}

/// # Safety
/// `info` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaGraphExecUpdate(
    exec: Handle,
    graph_h: Handle,
    info: *mut GraphExecUpdateResultInfo,
) -> CudaError {
    let _timed = crate::call_spans::time("cudaGraphExecUpdate");
    guard(|| {
        let rt = runtime()?;
        let (e, g) = (
            rt.graphs.exec(exec as usize)?,
            rt.graphs.graph(graph_h as usize)?,
        );
        let result = graph::update(rt, &e, &g)?;
        // SAFETY: the caller's promise, for a non-null pointer.
        if let Some(i) = unsafe { info.as_mut() } {
            i.result = result.err().unwrap_or(graph_update::SUCCESS);
            i.errorNode = std::ptr::null_mut();
            i.errorFromNode = std::ptr::null_mut();
        }
        result.map_err(|_| CudaError::GRAPH_EXEC_UPDATE_FAILURE)
    })
}

#[no_mangle]
pub extern "C" fn cudaGraphLaunch(exec: Handle, stream: Handle) -> CudaError {
    let _timed = crate::call_spans::time("cudaGraphLaunch");
    guard(|| {
        let rt = runtime()?;
        let e = rt.graphs.exec(exec as usize)?;
        graph::launch(rt, &e, stream as usize)
    })
}

#[no_mangle]
pub extern "C" fn cudaGraphDestroy(graph_h: Handle) -> CudaError {
    guard(|| runtime()?.graphs.destroy_graph(graph_h as usize))
}

#[no_mangle]
pub extern "C" fn cudaGraphExecDestroy(exec: Handle) -> CudaError {
    guard(|| {
        let rt = runtime()?;
        let e = rt.graphs.destroy_exec(exec as usize)?;
        graph::forget(rt, &e)
    })
}

/// The node count (node handles are not given out).
///
/// # Safety
/// `count` is null or readable and writable; `nodes` must be null.
#[no_mangle]
pub unsafe extern "C" fn cudaGraphGetNodes(
    graph_h: Handle,
    nodes: *mut Handle,
    count: *mut usize,
) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let n = unsafe { out(count) }?;
        if !nodes.is_null() {
            return Err(CudaError::NOT_SUPPORTED);
        }
        *n = runtime()?.graphs.graph(graph_h as usize)?.nodes.len();
        Ok(())
    })
}
