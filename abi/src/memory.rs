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
//! the card's mapping of video memory instead (`cpu_upload`). Anything larger, and every download,
//! goes through the other half of the staging buffer a chunk at a time,
//! with a sync on each. On the null device the CPU does them at the call (it
//! keeps the device's memory).

use crate::device::Execution;
use crate::error::CudaError;
use crate::knobs::SmallUploads;
use crate::runtime::Runtime;
use crate::state::memory_map::{sides, Copy2dOp, CopyOp, End, FillOp, HostAlloc, HostBacking};
use crate::state::streams::StreamState;
use macuda_gsp::CpuView;
use macuda_memory::DeviceWindow;
use macuda_submit::LaneItem;
use parking_lot::Mutex;
use std::alloc::Layout;
use std::sync::LazyLock;

/// Bytes a staged copy moves per chunk.
pub const STAGING_BYTES: u64 = 8 << 20;
/// The staging ring small uploads take their bytes from, after the chunk
/// half of the staging buffer.
const RING_BYTES: u64 = 8 << 20;
/// Uploads up to this size go through the ring.
pub const RING_PIECE_MAX: u64 = 1 << 20;
/// Uploads up to this size (whole words at a word-aligned address) travel
/// in the push buffer: what a decode token's inputs need (a 256-entry
/// attention mask of 64 rows of floats is 64 KiB), while the command
/// region (2 MiB) holds many of them in flight.
pub const INLINE_UPLOAD_MAX: u64 = 64 << 10;
/// Where pieces of the ring start (the copy engine's liking).
const RING_ALIGN: u64 = 256;
/// Host pages.
const PAGE: usize = 4096;

impl CopyOp {
    /// Both ends, checked.
    pub fn ends(&self, rt: &Runtime) -> Result<(End, End), CudaError> {
        let (d, s) = sides(self.kind)?;
        let m = rt.memory.lock();
        Ok((
            m.end(self.dst, self.bytes, d)?,
            m.end(self.src, self.bytes, s)?,
        ))
    }
}

impl Copy2dOp {
    pub fn check(&self, rt: &Runtime) -> Result<(End, End), CudaError> {
        if self.width > self.dpitch || self.width > self.spitch {
            return Err(CudaError::INVALID_PITCH_VALUE);
        }
        let extent = |pitch: u64| pitch * self.height.saturating_sub(1) + self.width;
        let (d, s) = sides(self.kind)?;
        let m = rt.memory.lock();
        Ok((
            m.end(self.dst, extent(self.dpitch), d)?,
            m.end(self.src, extent(self.spitch), s)?,
        ))
    }
}

impl FillOp {
    pub fn check(&self, rt: &Runtime) -> Result<(), CudaError> {
        rt.memory.lock().device_range(self.dst, self.bytes)
    }
}

/// The pinned buffer pageable copies go through, made on first use: a
/// chunk half (`[0, STAGING_BYTES)`, used with a sync on each side) and the
/// upload ring after it.
struct Staging {
    va: u64,
    view: CpuView,
    /// The ring's next free byte, from the ring's start.
    ring_cursor: u64,
    /// The lane's count after the ring's last piece was pushed: once a sync
    /// covered it, every piece in the ring has been read.
    ring_pushed: u64,
}

impl Staging {
    /// The ring's offset (in the buffer) for `n` bytes: from the ring's
    /// start again when a sync covered every piece in it, or, when `n` does
    /// not fit in what is left, after a sync that lets the GPU read them.
    fn ring_place(&mut self, rt: &Runtime, stream: &StreamState, n: u64) -> Result<u64, CudaError> {
        if self.ring_cursor > 0 && rt.synced_through(self.ring_pushed) {
            self.ring_cursor = 0;
        }
        if self.ring_cursor + n > RING_BYTES {
            sync(rt, stream)?;
            self.ring_cursor = 0;
        }
        let at = STAGING_BYTES + self.ring_cursor;
        self.ring_cursor = (self.ring_cursor + n).next_multiple_of(RING_ALIGN);
        Ok(at)
    }
}

static STAGING: LazyLock<Mutex<Option<Staging>>> = LazyLock::new(|| Mutex::new(None));

fn with_staging<T>(
    rt: &Runtime,
    f: impl FnOnce(&mut Staging) -> Result<T, CudaError>,
) -> Result<T, CudaError> {
    let mut g = STAGING.lock();
    if g.is_none() {
        let h = rt.call(|s| s.memory.alloc_host(STAGING_BYTES + RING_BYTES))?;
        match (h.va, h.view) {
            (Some(va), Some(view)) => {
                *g = Some(Staging {
                    va,
                    view,
                    ring_cursor: 0,
                    ring_pushed: 0,
                })
            }
            _ => return Err(CudaError::MEMORY_ALLOCATION),
        }
    }
    let s = g.as_mut().ok_or(CudaError::MEMORY_ALLOCATION)?;
    f(s)
}

fn sync(rt: &Runtime, stream: &StreamState) -> Result<(), CudaError> {
    rt.synchronize(stream.id)
}

/// Run a 1-D copy now (it is not being captured).
pub fn run_copy(
    rt: &Runtime,
    dst: End,
    src: End,
    bytes: u64,
    stream: &StreamState,
    sync_after: bool,
) -> Result<(), CudaError> {
    if bytes == 0 {
        return Ok(());
    }
    match rt.execution {
        Execution::Nothing => cpu_copy(rt, dst, src, bytes),
        Execution::Gpu => gpu_copy(rt, dst, src, bytes, stream, sync_after),
    }
}

fn gpu_copy(
    rt: &Runtime,
    dst: End,
    src: End,
    bytes: u64,
    stream: &StreamState,
    sync_after: bool,
) -> Result<(), CudaError> {
    if cpu_upload(rt, dst, src, bytes)? {
        return Ok(());
    }
    match (dst.gpu(), src.gpu()) {
        (Some(d), _) if inline_upload(rt, dst, src, bytes) => {
            let host = src.host().ok_or(CudaError::INVALID_VALUE)?;
            // SAFETY: the caller's source holds `bytes` readable bytes (the
            // CUDA contract for a host pointer).
            let data = unsafe { std::slice::from_raw_parts(host as *const u8, bytes as usize) };
            rt.push(LaneItem::Upload {
                stream: stream.id,
                dst: d,
                data: data.into(),
            })?;
            if sync_after {
                sync(rt, stream)?;
            }
            Ok(())
        }
        (Some(d), Some(s)) => {
            rt.push(LaneItem::Copy {
                stream: stream.id,
                src: s,
                dst: d,
                bytes,
            })?;
            if sync_after {
                sync(rt, stream)?;
            }
            Ok(())
        }
        (Some(d), None) if bytes <= RING_PIECE_MAX => {
            let host = src.host().ok_or(CudaError::INVALID_VALUE)?;
            // SAFETY: the caller's source holds `bytes` readable bytes (the
            // CUDA contract for a host pointer).
            let data = unsafe { std::slice::from_raw_parts(host as *const u8, bytes as usize) };
            with_staging(rt, |st| {
                let at = st.ring_place(rt, stream, bytes)?;
                st.view.write(at, data).map_err(|_| CudaError::UNKNOWN)?;
                rt.push(LaneItem::Copy {
                    stream: stream.id,
                    src: st.va + at,
                    dst: d,
                    bytes,
                })?;
                st.ring_pushed = rt.pushed();
                Ok(())
            })?;
            if sync_after {
                sync(rt, stream)?;
            }
            Ok(())
        }
        (Some(d), None) => {
            let host = src.host().ok_or(CudaError::INVALID_VALUE)?;
            with_staging(rt, |st| {
                let mut done = 0;
                while done < bytes {
                    let n = (bytes - done).min(STAGING_BYTES);
                    // The staging buffer is free once earlier work is done.
                    sync(rt, stream)?;
                    // SAFETY: the caller's source holds `bytes` readable
                    // bytes (the CUDA contract for a host pointer).
                    let part = unsafe {
                        std::slice::from_raw_parts((host + done as usize) as *const u8, n as usize)
                    };
                    st.view.write(0, part).map_err(|_| CudaError::UNKNOWN)?;
                    rt.push(LaneItem::Copy {
                        stream: stream.id,
                        src: st.va,
                        dst: d + done,
                        bytes: n,
                    })?;
                    done += n;
                }
                sync(rt, stream)
            })
        }
        (None, Some(s)) => {
            let host = dst.host().ok_or(CudaError::INVALID_VALUE)?;
            with_staging(rt, |st| {
                let mut done = 0;
                while done < bytes {
                    let n = (bytes - done).min(STAGING_BYTES);
                    rt.push(LaneItem::Copy {
                        stream: stream.id,
                        src: s + done,
                        dst: st.va,
                        bytes: n,
                    })?;
                    sync(rt, stream)?;
                    // SAFETY: the caller's destination holds `bytes`
                    // writable bytes.
                    let part = unsafe {
                        std::slice::from_raw_parts_mut(
                            (host + done as usize) as *mut u8,
                            n as usize,
                        )
                    };
                    st.view.read(0, part).map_err(|_| CudaError::UNKNOWN)?;
                    done += n;
                }
                Ok(())
            })
        }
        (None, None) => {
            // Host to host: in stream order, then on the CPU.
            sync(rt, stream)?;
            cpu_copy(rt, dst, src, bytes)
        }
    }
}

/// With `MACUDA_SMALL_UPLOADS=cpu`, a small upload from host memory to
/// an idle GPU is written by the CPU into video memory through the card's
/// mapping, and is done when this returns: with nothing of ours left to
/// run, nothing queued can read the destination or write the source
/// first, and whatever is queued later comes after the write (the fence
/// drains the CPU's write-combining buffers before the doorbell that
/// starts it). True when it was written so; false where another way must
/// carry it (not idle, too large, or no CPU window on that memory).
fn cpu_upload(rt: &Runtime, dst: End, src: End, bytes: u64) -> Result<bool, CudaError> {
    let (End::Device(d), Some(host)) = (dst, src.host()) else {
        return Ok(false);
    };
    if rt.knobs.small_uploads != SmallUploads::Cpu
        || bytes > INLINE_UPLOAD_MAX
        || !rt.idle_since_sync()
    {
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
fn inline_upload(rt: &Runtime, dst: End, src: End, bytes: u64) -> bool {
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

/// A copy the CPU does: host memory directly, device memory through the
/// memory actor.
fn cpu_copy(rt: &Runtime, dst: End, src: End, bytes: u64) -> Result<(), CudaError> {
    let mut done = 0;
    while done < bytes {
        let n = (bytes - done).min(STAGING_BYTES);
        let data = match src.offset(done) {
            End::Device(va) => rt.call(|s| s.memory.read_device(va, n))?,
            e => {
                let h = e.host().ok_or(CudaError::INVALID_VALUE)?;
                // SAFETY: `n` readable bytes at the caller's source.
                unsafe { std::slice::from_raw_parts(h as *const u8, n as usize) }.to_vec()
            }
        };
        match dst.offset(done) {
            End::Device(va) => rt.call(|s| s.memory.write_device(va, data))?,
            e => {
                let h = e.host().ok_or(CudaError::INVALID_VALUE)?;
                // SAFETY: `n` writable bytes at the caller's destination;
                // the source was copied out first, so overlap is harmless.
                unsafe { std::ptr::copy(data.as_ptr(), h as *mut u8, n as usize) };
            }
        }
        done += n;
    }
    Ok(())
}

/// Run a 2-D copy now.
pub fn run_copy2d(
    rt: &Runtime,
    op: &Copy2dOp,
    dst: End,
    src: End,
    stream: &StreamState,
    sync_after: bool,
) -> Result<(), CudaError> {
    if op.width == 0 || op.height == 0 {
        return Ok(());
    }
    if let (Execution::Gpu, Some(d), Some(s)) = (rt.execution, dst.gpu(), src.gpu()) {
        rt.push(LaneItem::Copy2d {
            stream: stream.id,
            src: s,
            src_pitch: op.spitch,
            dst: d,
            dst_pitch: op.dpitch,
            width: op.width,
            height: op.height,
        })?;
        if sync_after {
            sync(rt, stream)?;
        }
        return Ok(());
    }
    for row in 0..op.height {
        run_copy(
            rt,
            dst.offset(row * op.dpitch),
            src.offset(row * op.spitch),
            op.width,
            stream,
            false,
        )?;
    }
    if sync_after && rt.execution == Execution::Gpu {
        sync(rt, stream)?;
    }
    Ok(())
}

/// Run a fill now.
pub fn run_fill(
    rt: &Runtime,
    op: &FillOp,
    stream: &StreamState,
    sync_after: bool,
) -> Result<(), CudaError> {
    if op.bytes == 0 {
        return Ok(());
    }
    if rt.execution == Execution::Nothing {
        let mut done = 0;
        while done < op.bytes {
            let n = (op.bytes - done).min(STAGING_BYTES);
            let va = op.dst + done;
            rt.call(|s| s.memory.write_device(va, vec![op.value; n as usize]))?;
            done += n;
        }
        return Ok(());
    }
    // The copy engine fills four-byte words: the aligned middle that way,
    // the ragged ends (under four bytes each) copied from staging.
    const WORD: u64 = 4;
    let start = op.dst.next_multiple_of(WORD).min(op.dst + op.bytes);
    let end = ((op.dst + op.bytes) / WORD * WORD).max(start);
    if end > start {
        rt.push(LaneItem::Fill {
            stream: stream.id,
            dst: start,
            bytes: end - start,
            value: u32::from_ne_bytes([op.value; 4]),
        })?;
    }
    for (at, n) in [(op.dst, start - op.dst), (end, op.dst + op.bytes - end)] {
        if n > 0 {
            with_staging(rt, |st| {
                sync(rt, stream)?;
                st.view
                    .write(0, &vec![op.value; n as usize])
                    .map_err(|_| CudaError::UNKNOWN)?;
                rt.push(LaneItem::Copy {
                    stream: stream.id,
                    src: st.va,
                    dst: at,
                    bytes: n,
                })?;
                sync(rt, stream)
            })?;
        }
    }
    if sync_after {
        sync(rt, stream)?;
    }
    Ok(())
}

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
