//! Waiting on the GPU: the queues' timelines read and waited for, the
//! channel fault RM reports latched, and a sync point's bookkeeping.

use super::SubmitActor;
use crate::error::{QueueMarks, SubmitError};
use crate::queue::{Queue, QueueKind};
use macuda_gsp::{ChannelFault, GspHandle};
use macuda_hw::push::{USERD_GP_GET, USERD_GP_PUT};
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
        let (q, gsp, fault) = self.queue_and_fault(kind);
        let mut r = q.timeline.wait(q.name, value, patience, |deep| {
            latch_fault(gsp, fault, deep)
        });
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

    /// A channel's GP_GET and GP_PUT as its USERD holds them, where a CPU
    /// window covers USERD (the two words are adjacent: one 8-byte read).
    fn ring_pointers(&self, kind: QueueKind) -> Option<(u32, u32)> {
        let at = self.queue(kind).userd + USERD_GP_GET;
        debug_assert_eq!(USERD_GP_PUT, USERD_GP_GET + 4);
        let (w, off) = self.window(at, 8)?;
        let both = w.view.read_u64(off).ok()?;
        // CAST: the low and high halves.
        Some((both as u32, (both >> 32) as u32))
    }

    /// One queue beside what a wait on it checks for faults with: split
    /// borrows of the actor.
    pub(super) fn queue_and_fault(
        &mut self,
        kind: QueueKind,
    ) -> (&mut Queue, &GspHandle, &mut Option<Box<ChannelFault>>) {
        let SubmitActor {
            compute,
            copy,
            gsp,
            fault,
            ..
        } = self;
        let q = match kind {
            QueueKind::Compute => compute,
            QueueKind::Copy => copy,
        };
        (q, gsp, fault)
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

/// What RM reported against the channels, latched: once faulted, the
/// queues stay stopped until they are reopened.
pub(super) fn latch_fault(
    gsp: &GspHandle,
    fault: &mut Option<Box<ChannelFault>>,
    deep: bool,
) -> Result<(), SubmitError> {
    if let Some(f) = fault {
        return Err(SubmitError::ChannelFault(f.clone()));
    }
    match gsp.channel_fault(deep) {
        Ok(Some(f)) => {
            tracing::error!(fault = %f, "RM reported a channel fault");
            let f = Box::new(f);
            *fault = Some(f.clone());
            Err(SubmitError::ChannelFault(f))
        }
        Ok(None) => Ok(()),
        Err(e) => Err(SubmitError::Gsp(e)),
    }
}
