//! Copies and fills in stream order: checked against the runtime's map of
//! what it handed out, then run on the GPU's queues (or by the CPU on the
//! null device).

use super::small_upload::{cpu_upload, inline_upload};
use super::staging::{with_staging, RING_PIECE_MAX, STAGING_BYTES};
use crate::device::Execution;
use crate::error::CudaError;
use crate::runtime::Runtime;
use crate::state::memory_map::{sides, Copy2dOp, CopyOp, End, FillOp};
use crate::state::streams::StreamState;
use macuda_submit::LaneItem;

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
