//! The hardware queues submit drives, one per engine: a GPFIFO ring, its
//! 64-bit timeline semaphore, and the push buffer being filled.

use crate::pushbuf::PushBuffer;
use crate::ring::GpFifoRing;
use crate::timeline::Timeline;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueKind {
    Compute,
    Copy,
}

/// One hardware queue: a GPFIFO ring, its 64-bit timeline semaphore, and
/// the push buffer being filled for the next submission.
pub(crate) struct Queue {
    pub(crate) name: &'static str,
    pub(crate) ring: GpFifoRing,
    /// Where the ring's entries live on the GPU.
    pub(crate) ring_address: u64,
    /// The USERD block software and Host exchange GP_PUT / GP_GET through.
    pub(crate) userd: u64,
    /// Work token for the doorbell. The null RM has no channels, so there it
    /// is a fixed number; real backends take it from RM.
    pub(crate) token: u32,
    pub(crate) timeline: Timeline,
    /// The last value handed out; the GPU writes it when the work is done.
    pub(crate) issued: u64,
    /// Per entry between GP_GET and GP_PUT, oldest first: the timeline
    /// value whose arrival proves the engine fetched it (every push buffer
    /// ends with, or comes before, the release of the value issued with it).
    pub(crate) fetched_at: std::collections::VecDeque<u64>,
    pub(crate) pending: PushBuffer,
}
