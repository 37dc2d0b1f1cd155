//! Events as the GPU sees them: a record's semaphore release and, for a
//! timed one, where its clock stamp lands and how it is read back.

use super::{SubmitActor, STAMPS_OFFSET, STAMP_BYTES, TIMED_EVENTS};
use crate::error::SubmitError;
use crate::events::{EventSlot, Stamp};
use crate::lane::EventId;

impl SubmitActor {
    pub(super) fn record_event(&mut self, event: EventId, timed: bool) -> Result<(), SubmitError> {
        self.flush_chain_keep_going()?;
        self.live_event(event)?;
        let stamp = if timed {
            Some(self.stamp(event)?)
        } else {
            None
        };
        let record = (self.compute.issued, self.copy.issued);
        self.events.record(event, record, stamp)?;
        self.stats.events += 1;
        Ok(())
    }

    pub(super) fn live_event(&self, event: EventId) -> Result<&EventSlot, SubmitError> {
        self.events.live(event)
    }

    pub(super) fn stamp_address(&self, event: EventId) -> u64 {
        self.compute.timeline.address + STAMPS_OFFSET + u64::from(event.0) * STAMP_BYTES
    }

    /// A compute-queue push buffer that waits for everything queued so far
    /// (kernels and copies), then releases a fresh timeline value into the
    /// event's slot with the engine's clock, then on the timeline.
    pub(super) fn stamp(&mut self, event: EventId) -> Result<Stamp, SubmitError> {
        if event.0 >= TIMED_EVENTS {
            return Err(SubmitError::UntimedEvent {
                event,
                limit: TIMED_EVENTS,
            });
        }
        let host = Stamp::Host {
            ns: u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX),
        };
        // A device that runs nothing stamps nothing: the host's clock it is.
        if self.broken() || !self.can.submission {
            return Ok(host);
        }
        let mut pb = std::mem::take(&mut self.compute.pending);
        if let Some(v) = self.compute_waits_for_copy.take() {
            pb.host_semaphore(self.copy.timeline.address, v, true)
                .map_err(SubmitError::Format)?;
        }
        if self.compute.issued > 0 {
            pb.host_semaphore(self.compute.timeline.address, self.compute.issued, true)
                .map_err(SubmitError::Format)?;
        }
        self.compute.issued += 1;
        let value = self.compute.issued;
        pb.stamped_release(self.stamp_address(event), value)
            .map_err(SubmitError::Format)?;
        pb.host_semaphore(self.compute.timeline.address, value, false)
            .map_err(SubmitError::Format)?;
        self.submit_compute(pb)?;
        Ok(Stamp::Gpu { value })
    }

    /// Read `len` bytes the engines write (semaphores, stamps).
    pub(super) fn read_engine_memory(
        &mut self,
        address: u64,
        len: u64,
    ) -> Result<Vec<u8>, SubmitError> {
        if let Some((w, off)) = self.window(address, len) {
            let mut out = vec![0u8; len as usize];
            w.view
                .read(off, &mut out)
                .map_err(|e| SubmitError::Memory(macuda_memory::MemoryError::View(e)))?;
            return Ok(out);
        }
        self.memory
            .read_device(address, len)
            .map_err(SubmitError::Memory)
    }
}
