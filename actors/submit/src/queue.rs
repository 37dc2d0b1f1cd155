//! The hardware queues submit drives, one per engine: a GPFIFO ring, its
//! 64-bit timeline semaphore, and the push buffer being filled.

use crate::error::SubmitError;
use crate::pushbuf::PushBuffer;
use crate::ring::GpFifoRing;
use crate::timeline::Timeline;
use macuda_hw::gpfifo::ENTRY_BYTES;
use std::time::Duration;

/// Which of the two hardware queues work goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum QueueKind {
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

impl Queue {
    /// Claim the next ring entry for work released at the current issued
    /// value, waiting for room first where the ring is full; returns the
    /// entry's GPU address and GP_PUT past it.
    pub(crate) fn claim_entry(
        &mut self,
        patience: Duration,
        check_fault: impl FnMut(bool, Duration) -> Result<(), SubmitError>,
    ) -> Result<(u64, u32), SubmitError> {
        if self.ring.free() == 0 {
            self.make_room(patience, check_fault)?;
        }
        let slot = self.ring.claim().map_err(SubmitError::Ring)?;
        self.fetched_at.push_back(self.issued);
        Ok((
            self.ring_address + u64::from(slot) * ENTRY_BYTES,
            self.ring.put(),
        ))
    }

    /// A full ring: wait on the timeline for the oldest fetch still
    /// outstanding, then free every entry the engine fetched by then.
    fn make_room(
        &mut self,
        patience: Duration,
        check_fault: impl FnMut(bool, Duration) -> Result<(), SubmitError>,
    ) -> Result<(), SubmitError> {
        let oldest = self
            .fetched_at
            .front()
            .copied()
            .ok_or(SubmitError::Invariant {
                reason: "a full ring with nothing in flight",
            })?;
        let done = self
            .timeline
            .wait(self.name, oldest, patience, check_fault)?;
        let mut fetched = 0u32;
        while self.fetched_at.front().is_some_and(|&v| v <= done) {
            self.fetched_at.pop_front();
            fetched += 1;
        }
        let get = (self.ring.get() + fetched) & (self.ring.entries() - 1);
        self.ring.update_get(get).map_err(SubmitError::Ring)
    }

    /// Nothing queued reached the engine: every entry counts as fetched.
    pub(crate) fn forget_in_flight(&mut self) {
        let put = self.ring.put();
        let _ = self.ring.update_get(put);
        self.fetched_at.clear();
    }

    /// A fresh ring after the channels were reopened.
    pub(crate) fn restart(&mut self) -> Result<(), SubmitError> {
        self.ring = GpFifoRing::new(self.ring.entries()).map_err(SubmitError::Ring)?;
        self.fetched_at.clear();
        self.pending.clear();
        Ok(())
    }
}
