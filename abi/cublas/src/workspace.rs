//! Device memory a handle keeps for the partial sums of split GEMMs: one
//! buffer per stream, since a stream runs its launches in order (a GEMM's
//! reduction has read the partials before the next GEMM on that stream
//! writes them) while two streams could run at once. A buffer that grows
//! is retired, not freed, because launches already queued may still read
//! it; everything is freed when the handle goes, after the device has
//! finished (cublasDestroy waits for the handle's work, as NVIDIA's does).

use crate::runtime;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};

/// The least a stream's buffer grows to, so that a run of small GEMMs
/// allocates once.
const FIRST_BYTES: usize = 1 << 20;
/// The alignment the kernels' f32 stores need of a lent workspace.
const LENT_ALIGN: usize = 16;

#[derive(Debug, Clone, Copy)]
struct Buffer {
    address: usize,
    bytes: usize,
}

#[derive(Debug, Default)]
pub struct Partials {
    by_stream: HashMap<usize, Buffer>,
    retired: Vec<Buffer>,
}

impl Partials {
    /// Device memory of at least `bytes` for GEMMs on `stream`: the
    /// caller's lent workspace (cublasSetWorkspace) where it is large
    /// enough and aligned, else this handle's own; the CUDA error when
    /// the runtime has no more memory.
    pub fn for_stream(
        &mut self,
        stream: usize,
        bytes: usize,
        lent: (usize, usize),
    ) -> Result<*mut c_void, c_int> {
        let (lent_at, lent_bytes) = lent;
        if lent_at != 0 && lent_at % LENT_ALIGN == 0 && lent_bytes >= bytes {
            return Ok(lent_at as *mut c_void);
        }
        if let Some(b) = self.by_stream.get(&stream) {
            if b.bytes >= bytes {
                return Ok(b.address as *mut c_void);
            }
        }
        let size = bytes.max(FIRST_BYTES).next_power_of_two();
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: a writable out-pointer.
        let rc = unsafe { runtime::cudaMalloc(&mut p, size) };
        if rc != runtime::SUCCESS {
            return Err(rc);
        }
        let fresh = Buffer {
            address: p as usize,
            bytes: size,
        };
        if let Some(old) = self.by_stream.insert(stream, fresh) {
            self.retired.push(old);
        }
        Ok(p)
    }
}

impl Drop for Partials {
    fn drop(&mut self) {
        if self.by_stream.is_empty() && self.retired.is_empty() {
            return;
        }
        // SAFETY: plain runtime calls on memory this handle allocated;
        // their errors (a device already lost) leave nothing to do.
        unsafe {
            runtime::cudaDeviceSynchronize();
            for b in self.by_stream.values().chain(self.retired.iter()) {
                runtime::cudaFree(b.address as *mut c_void);
            }
        }
    }
}
