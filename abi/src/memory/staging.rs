//! The pinned buffer copies from and to pageable memory go through: a
//! chunk half, used with a sync on each side, and a ring small uploads
//! take their bytes from.

use crate::error::CudaError;
use crate::runtime::Runtime;
use crate::state::streams::StreamState;
use macuda_gsp::CpuView;
use parking_lot::Mutex;
use std::sync::LazyLock;

/// Bytes a staged copy moves per chunk.
pub const STAGING_BYTES: u64 = 8 << 20;
/// The staging ring small uploads take their bytes from, after the chunk
/// half of the staging buffer.
const RING_BYTES: u64 = 8 << 20;
/// Uploads up to this size go through the ring.
pub const RING_PIECE_MAX: u64 = 1 << 20;
/// Where pieces of the ring start (the copy engine's liking).
const RING_ALIGN: u64 = 256;
/// The pinned buffer pageable copies go through, made on first use: a
/// chunk half (`[0, STAGING_BYTES)`, used with a sync on each side) and the
/// upload ring after it.
pub(super) struct Staging {
    pub(super) va: u64,
    pub(super) view: CpuView,
    /// The ring's next free byte, from the ring's start.
    ring_cursor: u64,
    /// The lane's count after the ring's last piece was pushed: once a sync
    /// covered it, every piece in the ring has been read.
    pub(super) ring_pushed: u64,
}

impl Staging {
    /// The ring's offset (in the buffer) for `n` bytes: from the ring's
    /// start again when a sync covered every piece in it, or, when `n` does
    /// not fit in what is left, after a sync that lets the GPU read them.
    pub(super) fn ring_place(
        &mut self,
        rt: &Runtime,
        stream: &StreamState,
        n: u64,
    ) -> Result<u64, CudaError> {
        if self.ring_cursor > 0 && rt.synced_through(self.ring_pushed) {
            self.ring_cursor = 0;
        }
        if self.ring_cursor + n > RING_BYTES {
            rt.synchronize(stream.id)?;
            self.ring_cursor = 0;
        }
        let at = STAGING_BYTES + self.ring_cursor;
        self.ring_cursor = (self.ring_cursor + n).next_multiple_of(RING_ALIGN);
        Ok(at)
    }
}

static STAGING: LazyLock<Mutex<Option<Staging>>> = LazyLock::new(|| Mutex::new(None));

pub(super) fn with_staging<T>(
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
