//! Waiting on the GPU: the queues' timelines read and waited for, the
//! channel fault RM reports latched, and a sync point's bookkeeping.

use super::SubmitActor;
use crate::error::{QueueMarks, SubmitError};
use crate::queue::{Queue, QueueKind};
use macuda_core::{Incident, IncidentReporter};
use macuda_gsp::{ChannelFault, Doorbell, GspHandle};
use macuda_hw::push::{USERD_GP_GET, USERD_GP_PUT};
use macuda_memory::{DeviceWindow, MemoryHandle};
use std::time::Duration;
use std::time::Instant;

impl SubmitActor {
    /// The value a queue's timeline semaphore holds: what the GPU wrote.
    pub(super) fn completed(&self, q: QueueKind) -> Result<u64, SubmitError> {
        self.queue(q).timeline.completed()
    }

    pub(super) fn wait_compute(&mut self, value: u64) -> Result<(), SubmitError> {
        // Work the device declined is not outstanding: nothing to wait for.
        if value <= self.dropped_through {
            return Ok(());
        }
        self.wait_timeline(QueueKind::Compute, value).map(|_| ())
    }

    /// Wait until a queue's timeline reaches `value`; returns what it read.
    /// While it waits it asks RM, now and then, whether the channels were
    /// removed: a faulted channel never releases, and the fault names why.
    pub(super) fn wait_timeline(
        &mut self,
        kind: QueueKind,
        value: u64,
    ) -> Result<u64, SubmitError> {
        let started = Instant::now();
        let r = self.wait_timeline_untimed(kind, value);
        self.note_wait(started);
        r
    }

    pub(super) fn note_wait(&mut self, started: Instant) {
        let spent = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.wait_ns += spent;
    }

    pub(super) fn wait_timeline_untimed(
        &mut self,
        kind: QueueKind,
        value: u64,
    ) -> Result<u64, SubmitError> {
        let patience = self.config.sync_timeout;
        let (q, mut still) = self.queue_and_watch(kind);
        let issued = q.issued;
        let mut r = q.timeline.wait(q.name, value, patience, |deep, for_| {
            still.check(deep, for_)
        });
        // A timeline never passes what was handed out: a card that answers
        // more is not answering (off the bus, every read is all ones).
        if let Ok(read) = r {
            if read > issued {
                r = Err(SubmitError::ImpossibleTimeline {
                    queue: q.name,
                    read,
                    issued,
                });
            }
        }
        let rerung = still.rerung;
        self.note_rerung(rerung);
        if let Err(SubmitError::Stuck { queues, .. }) = &mut r {
            *queues = self.queue_marks();
        }
        if let Err(e @ SubmitError::Stuck { .. }) = &r {
            tracing::error!(error = %e, "a queue stood still");
        }
        r
    }

    /// Both queues as they stand (a timeline that cannot be read shows 0).
    pub(super) fn queue_marks(&self) -> QueueMarks {
        QueueMarks {
            compute_reached: self.compute.timeline.completed().unwrap_or(0),
            compute_issued: self.compute.issued,
            copy_reached: self.copy.timeline.completed().unwrap_or(0),
            copy_issued: self.copy.issued,
            compute_gp: self.ring_pointers(QueueKind::Compute),
            copy_gp: self.ring_pointers(QueueKind::Copy),
        }
    }

    fn ring_pointers(&self, kind: QueueKind) -> Option<(u32, u32)> {
        ring_pointers(&self.windows, Some(&self.memory), self.queue(kind).userd)
    }

    /// One queue beside what a wait on it watches while it stands still:
    /// split borrows of the actor.
    pub(super) fn queue_and_watch(&mut self, kind: QueueKind) -> (&mut Queue, StandingStill<'_>) {
        // Copied out, not looked up: a wait that never stands still (nearly
        // every one) costs nothing more.
        let channels = [
            (self.compute.userd, self.compute.token),
            (self.copy.userd, self.copy.token),
        ];
        let SubmitActor {
            compute,
            copy,
            gsp,
            fault,
            doorbell,
            windows,
            memory,
            incidents,
            ..
        } = self;
        let q = match kind {
            QueueKind::Compute => compute,
            QueueKind::Copy => copy,
        };
        let still = StandingStill {
            gsp,
            fault,
            incidents,
            doorbell,
            windows,
            memory,
            channels,
            last_ring: None,
            rerung: 0,
        };
        (q, still)
    }

    /// Doorbells a wait rang again: counted, said once a time, and told
    /// to the supervisor as the incident it is (a doorbell the device lost).
    pub(super) fn note_rerung(&mut self, rerung: u64) {
        if rerung > 0 {
            self.stats.doorbells_rerung += rerung;
            tracing::warn!(
                rerung,
                total = self.stats.doorbells_rerung,
                "a queue stood still with GP entries Host had not fetched: its doorbell was rung again"
            );
            self.incidents
                .report(Incident::DoorbellRungAgain { times: rerung });
        }
    }

    /// At a sync point: report lane work that failed since the last one,
    /// and start the next token over when nothing of this one is in flight.
    pub(super) fn at_sync_point(&mut self) -> Result<(), SubmitError> {
        let failure = self.failure.take();
        if failure.is_some() || std::mem::take(&mut self.declined_since_sync) {
            self.arena.standstill();
            self.tokens.standstill();
            self.depth.standstill();
            self.compute_waits_for_copy = None;
        }
        failure.map_or(Ok(()), Err)
    }
}

/// A queue standing still this long, with a channel whose USERD shows GP
/// entries Host has not fetched (GP_GET short of GP_PUT), has that
/// channel's doorbell rung again, and again each time this passes. A
/// doorbell that found the old GP_PUT left the channel idle with work
/// queued, and nothing else would ring for it; ringing again is harmless
/// where Host has the work already (its USERD copy of GP_GET lags).
const RERING_AFTER: Duration = Duration::from_millis(200);

/// What a wait checks while its queue stands still: the channel fault RM
/// reports, and channels with entries Host has not fetched.
pub(super) struct StandingStill<'a> {
    gsp: &'a GspHandle,
    fault: &'a mut Option<Box<ChannelFault>>,
    incidents: &'a IncidentReporter,
    doorbell: &'a Doorbell,
    /// The CPU's views of video memory, where USERD is read; else the
    /// memory actor reads it (through the transport, on a card we boot).
    windows: &'a [DeviceWindow],
    memory: &'a MemoryHandle,
    /// Each channel's USERD address and doorbell token.
    channels: [(u64, u32); 2],
    last_ring: Option<Instant>,
    pub(super) rerung: u64,
}

impl StandingStill<'_> {
    /// Now and then while a wait goes on (`deep` before it gives up);
    /// `still` is how long its timeline has not moved.
    pub(super) fn check(&mut self, deep: bool, still: Duration) -> Result<(), SubmitError> {
        let due = self.last_ring.is_none_or(|t| t.elapsed() >= RERING_AFTER);
        if still >= RERING_AFTER && due {
            self.last_ring = Some(Instant::now());
            for token in unfetched(self.windows, Some(self.memory), &self.channels) {
                self.doorbell.ring(token).map_err(SubmitError::from_gsp)?;
                self.rerung += 1;
            }
        }
        latch_fault(self.gsp, self.fault, deep, self.incidents)
    }
}

/// A channel's GP_GET and GP_PUT as its USERD at `userd` holds them:
/// through one of `windows` that covers it, else read by `memory` where
/// given (the two words are adjacent: one 8-byte read).
fn ring_pointers(
    windows: &[DeviceWindow],
    memory: Option<&MemoryHandle>,
    userd: u64,
) -> Option<(u32, u32)> {
    debug_assert_eq!(USERD_GP_PUT, USERD_GP_GET + 4);
    let at = userd + USERD_GP_GET;
    let mapped = windows
        .iter()
        .find_map(|w| w.offset_of(at, 8).map(|o| (w, o)));
    let both = match mapped {
        Some((w, off)) => w.view.read_u64(off).ok()?,
        None => {
            let bytes = memory?.read_device(at, 8).ok()?;
            u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)
        }
    };
    // CAST: GP_GET is the low half, GP_PUT the high.
    Some((both as u32, (both >> 32) as u32))
}

/// The tokens of the channels whose USERD shows entries Host has not
/// fetched (GP_GET short of GP_PUT); a USERD that neither a window covers
/// nor `memory` reads is left.
fn unfetched(
    windows: &[DeviceWindow],
    memory: Option<&MemoryHandle>,
    channels: &[(u64, u32)],
) -> Vec<u32> {
    channels
        .iter()
        .filter(|(userd, _)| {
            ring_pointers(windows, memory, *userd).is_some_and(|(get, put)| get != put)
        })
        .map(|(_, token)| *token)
        .collect()
}

/// What RM reported against the channels, latched: once faulted, the
/// queues stay stopped until they are reopened. The first report of a
/// fault goes to the supervisor too, which reopens them.
pub(super) fn latch_fault(
    gsp: &GspHandle,
    fault: &mut Option<Box<ChannelFault>>,
    deep: bool,
    incidents: &IncidentReporter,
) -> Result<(), SubmitError> {
    if let Some(f) = fault {
        return Err(SubmitError::ChannelFault(f.clone()));
    }
    match gsp.channel_fault(deep) {
        Ok(Some(f)) => {
            tracing::error!(fault = %f, "RM reported a channel fault");
            incidents.report(Incident::ChannelFault {
                fault: f.to_string(),
            });
            let f = Box::new(f);
            *fault = Some(f.clone());
            Err(SubmitError::ChannelFault(f))
        }
        Ok(None) => Ok(()),
        Err(e) => Err(SubmitError::Gsp(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_gsp::{CpuView, HostMemory};
    use std::sync::Arc;

    #[test]
    fn only_channels_with_entries_host_has_not_fetched_are_rung_again() {
        let view = CpuView::new(Arc::new(HostMemory::zeroed(0x400)));
        let windows = [DeviceWindow {
            va: 0x10_0000,
            bytes: 0x400,
            view: view.clone(),
        }];
        let userd = |at: u64, get: u32, put: u32| {
            view.write_u32(at + USERD_GP_GET, get).unwrap();
            view.write_u32(at + USERD_GP_PUT, put).unwrap();
            0x10_0000 + at
        };
        let channels = [
            (userd(0x000, 3, 5), 0xA),
            (userd(0x200, 7, 7), 0xB),
            // No window covers it: not read, not rung.
            (0x90_0000, 0xC),
        ];
        assert_eq!(unfetched(&windows, None, &channels), vec![0xA]);
    }
}
