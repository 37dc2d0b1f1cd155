//! How a small upload travels when it need not wait for the copy engine:
//! written by the CPU into an idle GPU's memory, or carried in the compute
//! queue's push buffer.

use crate::error::CudaError;
use crate::knobs::SmallUploads;
use crate::runtime::Runtime;
use crate::state::memory_map::End;
use macuda_memory::DeviceWindow;

/// Uploads up to this size (whole words at a word-aligned address) travel
/// in the push buffer: what a decode token's inputs need (a 256-entry
/// attention mask of 64 rows of floats is 64 KiB), while the command
/// region (2 MiB) holds many of them in flight.
pub const INLINE_UPLOAD_MAX: u64 = 64 << 10;
/// With `MACUDA_SMALL_UPLOADS=cpu`, a small upload from host memory to
/// an idle GPU is written by the CPU into video memory through the card's
/// mapping, and is done when this returns: with nothing of ours left to
/// run, nothing queued can read the destination or write the source
/// first, and whatever is queued later comes after the write (the fence
/// drains the CPU's write-combining buffers before the doorbell that
/// starts it). True when it was written so; false where another way must
/// carry it (not idle, too large, or no CPU window on that memory).
pub(super) fn cpu_upload(rt: &Runtime, dst: End, src: End, bytes: u64) -> Result<bool, CudaError> {
    // The knob first: every copy asks, and by default the answer is no.
    if rt.knobs.small_uploads != SmallUploads::Cpu || bytes > INLINE_UPLOAD_MAX {
        return Ok(false);
    }
    let (End::Device(d), Some(host)) = (dst, src.host()) else {
        return Ok(false);
    };
    if !rt.idle_since_sync() {
        return Ok(false);
    }
    let Some(window) = device_window(rt, d)? else {
        return Ok(false);
    };
    let Some(offset) = window.offset_of(d, bytes) else {
        return Ok(false);
    };
    // SAFETY: the caller's source holds `bytes` readable bytes (the CUDA
    // contract for a host pointer).
    let data = unsafe { std::slice::from_raw_parts(host as *const u8, bytes as usize) };
    window
        .view
        .write(offset, data)
        .map_err(|_| CudaError::UNKNOWN)?;
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    Ok(true)
}

/// The CPU's window on the device allocation holding `va`, asked of the
/// memory actor once per allocation and kept until it is freed.
fn device_window(rt: &Runtime, va: u64) -> Result<Option<DeviceWindow>, CudaError> {
    let Some(base) = rt.memory.lock().device_allocation(va) else {
        return Ok(None);
    };
    if let Some(w) = rt.windows.lock().get(&base) {
        return Ok(w.clone());
    }
    let window = rt.call(|s| s.memory.cpu_window(base))?;
    rt.windows.lock().insert(base, window.clone());
    Ok(window)
}

/// Whether an upload of `bytes` from `src` to `dst` travels in the push
/// buffer: small, whole words at a word-aligned address, not turned off,
/// and its bytes taken now the same as the ones stream order would read.
/// From pageable memory they are (CUDA takes them at the call too). From
/// pinned memory, which the GPU can write, only when the GPU has nothing of
/// ours left to run: a kernel or copy queued before the upload may write
/// its source, and the upload must see that (llama.cpp's token inputs come
/// from pinned memory, each after a sync).
pub(super) fn inline_upload(rt: &Runtime, dst: End, src: End, bytes: u64) -> bool {
    let word = macuda_submit::INLINE_WORD_BYTES;
    let End::Device(dst) = dst else {
        return false;
    };
    let settled = match src {
        End::Host(_) => true,
        End::Pinned { .. } => rt.idle_since_sync(),
        End::Device(_) => false,
    };
    settled
        && rt.knobs.small_uploads != SmallUploads::Staged
        && bytes <= INLINE_UPLOAD_MAX
        && dst.is_multiple_of(word)
        && bytes.is_multiple_of(word)
}
