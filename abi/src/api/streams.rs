//! Streams and events.

use super::out;
use crate::device::Execution;
use crate::error::{guard, CudaError};
use crate::graph;
use crate::runtime::runtime;
use crate::state::nodes::Node;
use crate::types::{flags, Handle};
use crate::work::issue;
use std::ffi::{c_float, c_int, c_uint};
use std::sync::atomic::Ordering;

/// # Safety
/// `stream` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamCreateWithPriority(
    stream: *mut Handle,
    flags_: c_uint,
    priority: c_int,
) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let stream = unsafe { out(stream) }?;
        if flags_ & !flags::STREAM_NON_BLOCKING != 0 {
            return Err(CudaError::INVALID_VALUE);
        }
        let rt = runtime()?;
        let id = rt.call(|s| s.submit.create_stream())?;
        *stream = rt.streams.create(id, flags_, priority) as Handle;
        Ok(())
    })
}

/// # Safety
/// `stream` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamCreateWithFlags(
    stream: *mut Handle,
    flags_: c_uint,
) -> CudaError {
    // SAFETY: passed on.
    unsafe { cudaStreamCreateWithPriority(stream, flags_, 0) }
}

/// # Safety
/// `stream` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamCreate(stream: *mut Handle) -> CudaError {
    // SAFETY: passed on.
    unsafe { cudaStreamCreateWithPriority(stream, flags::STREAM_DEFAULT, 0) }
}

/// Work queued on the stream still runs; the handle is gone at once.
#[no_mangle]
pub extern "C" fn cudaStreamDestroy(stream: Handle) -> CudaError {
    guard(|| {
        let rt = runtime()?;
        let s = rt.streams.remove(stream as usize)?;
        let id = s.id;
        rt.call(|st| st.submit.destroy_stream(id))
    })
}

#[no_mangle]
pub extern "C" fn cudaStreamSynchronize(stream: Handle) -> CudaError {
    let _timed = crate::call_spans::time("cudaStreamSynchronize");
    guard(|| {
        let rt = runtime()?;
        let s = rt.streams.get(stream as usize)?;
        if let Some(c) = s.capturing() {
            c.invalidated.store(true, Ordering::Release);
            return Err(CudaError::STREAM_CAPTURE_UNSUPPORTED);
        }
        // Through the runtime's sync, which does not ask the actor when
        // nothing reached the lane since the last sync that returned
        // (llama.cpp's empty syncs cost 12 us each in the actor's round
        // trip when this entry asked it directly).
        rt.synchronize(s.id)
    })
}

/// Done when everything queued so far is done (the streams share the
/// queues, so that is the question).
#[no_mangle]
pub extern "C" fn cudaStreamQuery(stream: Handle) -> CudaError {
    let _timed = crate::call_spans::time("cudaStreamQuery");
    guard(|| {
        let rt = runtime()?;
        let s = rt.streams.get(stream as usize)?;
        if let Some(c) = s.capturing() {
            c.invalidated.store(true, Ordering::Release);
            return Err(CudaError::STREAM_CAPTURE_UNSUPPORTED);
        }
        if rt.execution == Execution::Nothing {
            return Ok(());
        }
        let event = rt.call(|st| st.submit.create_event())?;
        rt.push(macuda_submit::LaneItem::RecordEvent {
            stream: s.id,
            event,
            timed: false,
        })?;
        let done = rt.call(|st| st.submit.query_event(event));
        let _ = rt.call(|st| st.submit.destroy_event(event));
        if done? {
            Ok(())
        } else {
            Err(CudaError::NOT_READY)
        }
    })
}

/// # Safety
/// `out_flags` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamGetFlags(stream: Handle, out_flags: *mut c_uint) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let f = unsafe { out(out_flags) }?;
        *f = runtime()?.streams.get(stream as usize)?.flags;
        Ok(())
    })
}

/// # Safety
/// `priority` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamGetPriority(stream: Handle, priority: *mut c_int) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let p = unsafe { out(priority) }?;
        *p = runtime()?.streams.get(stream as usize)?.priority;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn cudaStreamWaitEvent(stream: Handle, event: Handle, _flags: c_uint) -> CudaError {
    let _timed = crate::call_spans::time("cudaStreamWaitEvent");
    guard(|| {
        let rt = runtime()?;
        if graph::join(rt, stream as usize, event as usize)? {
            return Ok(());
        }
        issue(rt, stream as usize, Node::Wait(event as usize), false)
    })
}

/// # Safety
/// `event` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaEventCreateWithFlags(event: *mut Handle, flags_: c_uint) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let event = unsafe { out(event) }?;
        let known = flags::EVENT_BLOCKING_SYNC | flags::EVENT_DISABLE_TIMING | INTERPROCESS;
        if flags_ & !known != 0 {
            return Err(CudaError::INVALID_VALUE);
        }
        let rt = runtime()?;
        let id = rt.call(|s| s.submit.create_event())?;
        *event = rt.events.create(id, flags_) as Handle;
        Ok(())
    })
}

/// `cudaEventInterprocess`.
const INTERPROCESS: u32 = 4;

/// # Safety
/// `event` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaEventCreate(event: *mut Handle) -> CudaError {
    // SAFETY: passed on.
    unsafe { cudaEventCreateWithFlags(event, flags::EVENT_DEFAULT) }
}

#[no_mangle]
pub extern "C" fn cudaEventDestroy(event: Handle) -> CudaError {
    guard(|| {
        let rt = runtime()?;
        let e = rt.events.remove(event as usize)?;
        let id = e.id;
        rt.call(|s| s.submit.destroy_event(id))
    })
}

#[no_mangle]
pub extern "C" fn cudaEventRecord(event: Handle, stream: Handle) -> CudaError {
    let _timed = crate::call_spans::time("cudaEventRecord");
    guard(|| {
        let rt = runtime()?;
        rt.events.get(event as usize)?;
        issue(rt, stream as usize, Node::Record(event as usize), false)
    })
}

#[no_mangle]
pub extern "C" fn cudaEventRecordWithFlags(
    event: Handle,
    stream: Handle,
    _flags: c_uint,
) -> CudaError {
    let _timed = crate::call_spans::time("cudaEventRecordWithFlags");
    cudaEventRecord(event, stream)
}

#[no_mangle]
pub extern "C" fn cudaEventQuery(event: Handle) -> CudaError {
    let _timed = crate::call_spans::time("cudaEventQuery");
    guard(|| {
        let rt = runtime()?;
        let e = rt.events.get(event as usize)?;
        let id = e.id;
        if rt.call(|s| s.submit.query_event(id).map(|d| !d))? {
            Err(CudaError::NOT_READY)
        } else {
            Ok(())
        }
    })
}

#[no_mangle]
pub extern "C" fn cudaEventSynchronize(event: Handle) -> CudaError {
    let _timed = crate::call_spans::time("cudaEventSynchronize");
    guard(|| {
        let rt = runtime()?;
        let e = rt.events.get(event as usize)?;
        let id = e.id;
        rt.call(|s| s.submit.sync_event(id))
    })
}

/// # Safety
/// `ms` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaEventElapsedTime(
    ms: *mut c_float,
    start: Handle,
    end: Handle,
) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let ms = unsafe { out(ms) }?;
        let rt = runtime()?;
        let (a, b) = (rt.events.get(start as usize)?, rt.events.get(end as usize)?);
        if !a.timed() || !b.timed() {
            return Err(CudaError::INVALID_RESOURCE_HANDLE);
        }
        if !a.recorded.load(Ordering::Acquire) || !b.recorded.load(Ordering::Acquire) {
            return Err(CudaError::INVALID_RESOURCE_HANDLE);
        }
        let (ia, ib) = (a.id, b.id);
        let ta = rt.call(|s| s.submit.event_time(ia))?;
        let tb = rt.call(|s| s.submit.event_time(ib))?;
        match (ta, tb) {
            (Some(ta), Some(tb)) => {
                // CAST: milliseconds, as a float, may lose the nanoseconds.
                *ms = (tb as f64 - ta as f64) as f32 / NS_PER_MS;
                Ok(())
            }
            _ => Err(CudaError::NOT_READY),
        }
    })
}

const NS_PER_MS: f32 = 1e6;
