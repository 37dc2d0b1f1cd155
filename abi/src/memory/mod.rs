//! Device and pinned host allocations, and the copies and fills between
//! them, checked against the runtime's map of what it handed out
//! ([`crate::state::memory_map`]) before anything is queued.
//!
//! On a GPU, copies run on the copy engine in stream order: device and
//! pinned memory directly, pageable host memory through pinned staging.
//! A small upload from pageable memory returns at once, as CUDA's
//! asynchronous copies from pageable memory do once the source is taken
//! (llama.cpp sets a token's inputs that way, and each had waited for the
//! GPU): up to [`INLINE_UPLOAD_MAX`] its bytes travel in the compute
//! queue's push buffer and the engine writes them in stream order, with
//! no copy engine and no wait between two queues (each of a decode
//! token's inputs had cost about 16 us on the copy engine); up to
//! [`RING_PIECE_MAX`], or with `MACUDA_SMALL_UPLOADS=staged`, it is staged
//! into a ring for the copy engine. With `MACUDA_SMALL_UPLOADS=cpu`, one
//! to a GPU with nothing of ours left to run is written by the CPU through
//! the card's mapping of video memory instead. Anything larger, and every
//! download, goes through the other half of the staging buffer a chunk at
//! a time, with a sync on each. On the null device the CPU does them at the
//! call (it keeps the device's memory).
//!
//! Here: allocations. `copy`: copies and fills; `small_upload`: the ways a
//! small upload skips the copy engine; `staging`: the pinned buffer
//! pageable copies go through.

mod copy;
mod small_upload;
mod staging;

pub use copy::{run_copy, run_copy2d, run_fill};
pub use small_upload::INLINE_UPLOAD_MAX;
pub use staging::{RING_PIECE_MAX, STAGING_BYTES};

use crate::device::Execution;
use crate::error::CudaError;
use crate::runtime::Runtime;
use crate::state::memory_map::{HostAlloc, HostBacking};
use std::alloc::Layout;

/// Host pages.
const PAGE: usize = 4096;

/// `cudaMalloc`.
pub fn alloc_device(rt: &Runtime, bytes: u64) -> Result<u64, CudaError> {
    if bytes == 0 {
        return Ok(0);
    }
    let b = rt
        .call_host(|s| s.memory.alloc_device(bytes))
        .map_err(|e| {
            tracing::warn!(
                bytes,
                cause = %macuda_core::error_chain(&e).join(": "),
                "cudaMalloc refused"
            );
            match rt.cuda_error(&e) {
                e if e.is_sticky() => e,
                _ => CudaError::MEMORY_ALLOCATION,
            }
        })?;
    rt.memory.lock().device.insert(b.va, b.bytes.max(bytes));
    Ok(b.va)
}

/// `cudaFree`: waits for the device first (work queued may still use the
/// memory), as NVIDIA's does.
pub fn free_device(rt: &Runtime, va: u64) -> Result<(), CudaError> {
    if va == 0 {
        return Ok(());
    }
    if rt.memory.lock().device_base(va).is_none() {
        return Err(CudaError::INVALID_VALUE);
    }
    rt.synchronize_all()?;
    rt.memory.lock().device.remove(&va);
    // The CPU must not write through a window on memory RM may hand on.
    rt.windows.lock().remove(&va);
    rt.call(|s| s.memory.free_device(va)).map(|_| ())
}

/// `cudaMallocHost` / `cudaHostAlloc`.
pub fn alloc_host(rt: &Runtime, bytes: u64) -> Result<usize, CudaError> {
    let bytes = bytes.max(1);
    let alloc = match rt.execution {
        Execution::Gpu => {
            let h = rt.call(|s| s.memory.alloc_host(bytes)).map_err(|e| {
                if e.is_sticky() {
                    e
                } else {
                    CudaError::MEMORY_ALLOCATION
                }
            })?;
            match (h.va, h.view) {
                (Some(va), Some(view)) => (
                    view.as_ptr() as usize,
                    HostAlloc {
                        bytes: bytes as usize,
                        backing: HostBacking::Gpu { va, _view: view },
                    },
                ),
                _ => return Err(CudaError::MEMORY_ALLOCATION),
            }
        }
        Execution::Nothing => {
            let layout = Layout::from_size_align(bytes as usize, PAGE)
                .map_err(|_| CudaError::MEMORY_ALLOCATION)?;
            // SAFETY: the layout is non-zero in size.
            let p = unsafe { std::alloc::alloc_zeroed(layout) };
            if p.is_null() {
                return Err(CudaError::MEMORY_ALLOCATION);
            }
            (
                p as usize,
                HostAlloc {
                    bytes: bytes as usize,
                    backing: HostBacking::Ours { layout },
                },
            )
        }
    };
    let p = alloc.0;
    rt.memory.lock().host.insert(p, alloc.1);
    Ok(p)
}

/// `cudaFreeHost`.
pub fn free_host(rt: &Runtime, p: usize) -> Result<(), CudaError> {
    if p == 0 {
        return Ok(());
    }
    let a = rt
        .memory
        .lock()
        .host
        .remove(&p)
        .ok_or(CudaError::INVALID_VALUE)?;
    match a.backing {
        HostBacking::Gpu { va, .. } => {
            rt.synchronize_all()?;
            rt.call(|s| s.memory.free_host(va)).map(|_| ())
        }
        HostBacking::Ours { layout } => {
            // SAFETY: allocated above with this layout, and removed from
            // the map so it is freed once.
            unsafe { std::alloc::dealloc(p as *mut u8, layout) };
            Ok(())
        }
    }
}

/// `cudaHostRegister`: the range is remembered (copies from it are
/// staged); no GPU mapping of it is made.
pub fn register_host(rt: &Runtime, p: usize, bytes: usize) -> Result<(), CudaError> {
    if p == 0 || bytes == 0 {
        return Err(CudaError::INVALID_VALUE);
    }
    let mut m = rt.memory.lock();
    let overlaps =
        |map_start: usize, map_len: usize| p < map_start + map_len && map_start < p + bytes;
    if m.registered.iter().any(|(&s, &l)| overlaps(s, l))
        || m.host.iter().any(|(&s, a)| overlaps(s, a.bytes))
    {
        return Err(CudaError::HOST_MEMORY_ALREADY_REGISTERED);
    }
    m.registered.insert(p, bytes);
    Ok(())
}

pub fn unregister_host(rt: &Runtime, p: usize) -> Result<(), CudaError> {
    rt.memory
        .lock()
        .registered
        .remove(&p)
        .map(|_| ())
        .ok_or(CudaError::HOST_MEMORY_NOT_REGISTERED)
}
