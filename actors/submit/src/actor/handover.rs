//! Handing work to the engines: a chain's descriptors delivered and its
//! push buffer written, copies queued, GPFIFO entries, GP_PUT and the
//! doorbell; what never reached an engine forgotten.

use super::{Delivery, SubmitActor, KEEP_SUBMISSIONS};
use crate::command::CommandSpan;
use crate::error::SubmitError;
use crate::pushbuf::PushBuffer;
use crate::queue::QueueKind;
use crate::records::Submission;
use macuda_hw::push::{GpEntry, USERD_GP_PUT};
use std::time::Instant;

impl SubmitActor {
    /// Close the open chain: release the compute timeline at its tail only,
    /// deliver the descriptors, then launch its head behind that delivery.
    pub(super) fn flush_chain(&mut self) -> Result<(), SubmitError> {
        let started = Instant::now();
        let wait_before = self.wait_ns;
        let r = self.flush_chain_timed();
        let spent = elapsed_ns(started);
        self.flush_ns += spent.saturating_sub(self.wait_ns - wait_before);
        r
    }

    pub(super) fn flush_chain_timed(&mut self) -> Result<(), SubmitError> {
        let Some((mut tail, head)) = self.chain.close()? else {
            return Ok(());
        };
        self.compute.issued += 1;
        self.depth.flushed();
        let value = self.compute.issued;
        self.format
            .release_qmd(&mut tail.qmd, self.compute.timeline.address, value)
            .map_err(SubmitError::Format)?;
        self.write_qmd(tail.qmd_offset, &tail.qmd)?;
        self.stats.chains += 1;
        self.stats.flushes += 1;

        // Deliver: shadow -> mirror (host), mirror -> video memory (by the
        // CPU, or by the copy engine behind a release the compute queue
        // then waits for).
        self.chain_flush = Some("delivering a chain's descriptors");
        let delivered = self.deliver(value);
        self.chain_flush = None;
        if let Some(copy_value) = delivered? {
            self.compute_waits_for_copy = Some(copy_value);
        }
        let mut pb = self.chain_head_push(value)?;
        self.profile_chain_start(value, &mut pb)?;
        pb.launch_qmd(head).map_err(SubmitError::Format)?;
        self.submit_compute(pb)
    }

    /// The push buffer that starts chain `value` (its head is launched
    /// after what the caller adds): the compute queue's pending methods,
    /// a wait for the copies it reads, a wait for the chain before it
    /// (grids launched by separate SEND_PCAS run side by side; on the H200
    /// four chains of 32 dependent launches came out wrong without this
    /// wait), and the shader caches invalidated when the CPU wrote code or
    /// constants since the last chain, or else, unless every launch
    /// invalidates them itself, the constant caches: the chain's banks 0
    /// were written into slots that held other launches' before.
    pub(super) fn chain_head_push(&mut self, value: u64) -> Result<PushBuffer, SubmitError> {
        let mut pb = std::mem::take(&mut self.compute.pending);
        if let Some(v) = self.compute_waits_for_copy.take() {
            pb.host_semaphore(self.copy.timeline.address, v, true)
                .map_err(SubmitError::Format)?;
        }
        if value > 1 {
            pb.host_semaphore(self.compute.timeline.address, value - 1, true)
                .map_err(SubmitError::Format)?;
        }
        if std::mem::take(&mut self.caches_stale) {
            pb.invalidate_shader_caches().map_err(SubmitError::Format)?;
        } else if !self.format.chain.invalidates.constant_banks {
            pb.invalidate_constant_caches()
                .map_err(SubmitError::Format)?;
        }
        Ok(pb)
    }

    /// Deliver the flushed descriptors; returns the copy-queue value the
    /// chain must wait for when the copy engine carries them.
    pub(super) fn deliver(&mut self, retire_at: u64) -> Result<Option<u64>, SubmitError> {
        let started = Instant::now();
        let r = self.deliver_timed(retire_at);
        self.stats.deliver_ns += elapsed_ns(started);
        r
    }

    fn deliver_timed(&mut self, retire_at: u64) -> Result<Option<u64>, SubmitError> {
        let plan = self.arena.flush(retire_at);
        self.stats.descriptor_bytes += plan.payload_bytes;
        self.stats.descriptor_patches += plan.patches.len() as u64;
        let mirror_va = match &self.delivery {
            Delivery::Mapped(window) => {
                let mirror = self.arena.mirror();
                for p in &plan.patches {
                    let at = window
                        .offset_of(self.descriptor_base + p.offset, p.len)
                        .ok_or(SubmitError::Invariant {
                            reason: "a descriptor patch lies outside the descriptor window",
                        })?;
                    // CAST: offsets inside the mirror, which is in memory.
                    let bytes = &mirror[p.offset as usize..(p.offset + p.len) as usize];
                    window
                        .view
                        .write(at, bytes)
                        .map_err(|e| SubmitError::Memory(macuda_memory::MemoryError::View(e)))?;
                }
                // Ordered before the hand-over by the fence that comes
                // before GP_PUT moves.
                return Ok(None);
            }
            Delivery::CopyEngine {
                mirror_va,
                unviewed,
            } => {
                if *unviewed {
                    let mirror = self.arena.mirror();
                    for p in &plan.patches {
                        // CAST: offsets inside the mirror, which is in memory.
                        let bytes = mirror[p.offset as usize..(p.offset + p.len) as usize].to_vec();
                        self.memory
                            .write_host(mirror_va + p.offset, bytes)
                            .map_err(SubmitError::Memory)?;
                    }
                }
                *mirror_va
            }
        };
        let mut pb = std::mem::take(&mut self.copy.pending);
        for p in &plan.patches {
            pb.copy(
                mirror_va + p.offset,
                0,
                self.descriptor_base + p.offset,
                0,
                p.len,
                1,
                None,
            )
            .map_err(SubmitError::Format)?;
        }
        self.copy.issued += 1;
        let v = self.copy.issued;
        pb.host_semaphore(self.copy.timeline.address, v, false)
            .map_err(SubmitError::Format)?;
        self.submit(QueueKind::Copy, pb)?;
        Ok(Some(v))
    }

    /// The only way work reaches the compute queue.
    pub(super) fn submit_compute(&mut self, pb: PushBuffer) -> Result<(), SubmitError> {
        compute_allowed(self.chain_flush)?;
        self.submit(QueueKind::Compute, pb)
    }

    pub(super) fn submit(&mut self, kind: QueueKind, pb: PushBuffer) -> Result<(), SubmitError> {
        if pb.is_empty() {
            return Ok(());
        }
        let len = pb.bytes();
        let at = self.commands.place(len)?;
        while let Some((queue, value)) = self.commands.blocker(at, len) {
            // The region wrapped onto a push buffer not yet run: wait for it.
            let done = self.wait_timeline(queue, value)?;
            self.commands.retire(queue, done);
        }
        self.stats.command_bytes += len;
        // CAST: a push buffer is far below 2^21 dwords.
        let entry =
            GpEntry::subroutine(at, pb.words().len() as u32).map_err(SubmitError::Format)?;
        let patience = self.config.sync_timeout;
        // A full ring waits for the engine: that time is the GPU's.
        let waiting_since = (self.queue(kind).ring.free() == 0).then(Instant::now);
        let (q, mut still) = self.queue_and_watch(kind);
        let claimed = q.claim_entry(patience, |deep, for_| still.check(deep, for_));
        let rerung = still.rerung;
        self.note_rerung(rerung);
        let (entry_address, put) = claimed?;
        let publishing = Instant::now();
        let q = self.queue(kind);
        let (userd, issued, name, token) = (q.userd, q.issued, q.name, q.token);
        if let Some(started) = waiting_since {
            self.note_wait(started);
        }
        self.commands.in_flight.push_back(CommandSpan {
            start: at,
            end: at + len,
            queue: kind,
            value: issued,
        });
        if self.can.video_memory {
            // The push buffer, then the entry naming it, then GP_PUT past
            // the entry: each in place before the next makes it reachable
            // (the doorbell fences before it rings).
            let bytes: Vec<u8> = pb.words().iter().flat_map(|w| w.to_le_bytes()).collect();
            self.write_device(at, bytes)?;
            self.write_device(entry_address, entry.encode().to_le_bytes().to_vec())?;
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            let gp_put = Instant::now();
            self.publish_gp_put(userd, put)?;
            self.stats.gp_put_ns += elapsed_ns(gp_put);
        }
        self.stats.gp_entries += 1;
        if self.recent.len() == KEEP_SUBMISSIONS {
            self.recent.pop_front();
        }
        self.recent.push_back(Submission {
            queue: name.to_string(),
            address: at,
            gp_entry: entry.encode(),
            gp_entry_address: entry_address,
            gp_put: put,
            userd_address: userd,
            words: pb.words().to_vec(),
        });
        if !self.can.submission {
            // Queuing goes on; the work is counted and handed to nothing.
            self.forget_queued(kind);
            self.declined_since_sync = true;
            self.stats.publish_ns += elapsed_ns(publishing);
            return Ok(());
        }
        let rung = self.doorbell.ring(token).map_err(|e| {
            self.forget_queued(kind);
            SubmitError::from_gsp(e)
        });
        self.stats.publish_ns += elapsed_ns(publishing);
        rung
    }

    /// GP_PUT into USERD, and, where the CPU writes USERD through a window
    /// (video memory over BAR1), read back before the doorbell rings: the
    /// CPU's stores through the window are posted, and a read on the same
    /// path returns only after every earlier one has landed, so Host, told
    /// by the doorbell to look, finds the new GP_PUT and the push buffer,
    /// entry and descriptors written before it. A doorbell that overtakes
    /// them finds the old GP_PUT and leaves the channel idle with work
    /// queued that nothing will ring for again.
    fn publish_gp_put(&self, userd: u64, put: u32) -> Result<(), SubmitError> {
        let at = userd + USERD_GP_PUT;
        let Some((w, off)) = self.window(at, 4) else {
            return self.write_device(at, put.to_le_bytes().to_vec());
        };
        let view_error = |e| SubmitError::Memory(macuda_memory::MemoryError::View(e));
        w.view.write_u32(off, put).map_err(view_error)?;
        let landed = w.view.read_u32(off).map_err(view_error)?;
        if landed != put {
            return Err(SubmitError::Invariant {
                reason: "GP_PUT read back through the CPU window differs from what was written",
            });
        }
        Ok(())
    }

    /// Nothing reached the engine: forget what was queued for it; none of
    /// its descriptors are in flight, and every value issued so far will
    /// never be written.
    pub(super) fn forget_queued(&mut self, kind: QueueKind) {
        self.stats.refused_submissions += 1;
        self.arena.retire(u64::MAX);
        self.dropped_through = self.compute.issued;
        self.copy_dropped_through = self.copy.issued;
        self.queue_mut(kind).forget_in_flight();
        self.commands.in_flight.clear();
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn queue_copy(
        &mut self,
        src: u64,
        src_pitch: u64,
        dst: u64,
        dst_pitch: u64,
        width: u64,
        height: u64,
        fill: Option<u32>,
    ) -> Result<(), SubmitError> {
        // Stream order: the copy follows the kernels queued before it.
        self.flush_chain_keep_going()?;
        if self.compute.issued > 0 {
            let v = self.compute.issued;
            self.copy
                .pending
                .host_semaphore(self.compute.timeline.address, v, true)
                .map_err(SubmitError::Format)?;
        }
        self.copy
            .pending
            .copy(src, src_pitch, dst, dst_pitch, width, height, fill)
            .map_err(SubmitError::Format)?;
        if fill.is_some() {
            self.stats.fills += 1;
        } else {
            self.stats.copies += 1;
        }
        // ... and the kernels queued after it wait for it.
        self.copy.issued += 1;
        let v = self.copy.issued;
        let mut pb = std::mem::take(&mut self.copy.pending);
        self.profile_copy(width * height, fill.is_some(), v, &mut pb)?;
        pb.host_semaphore(self.copy.timeline.address, v, false)
            .map_err(SubmitError::Format)?;
        self.compute_waits_for_copy = Some(v);
        self.submit(QueueKind::Copy, pb)
    }

    /// A small upload in the compute queue's own order: after the kernels
    /// queued before it have finished (a grid still running may read what
    /// it overwrites), the engine writes the bytes from the push buffer,
    /// then releases a timeline value of its own, which the next chain's
    /// head waits for and a sync covers.
    pub(super) fn queue_inline_upload(&mut self, dst: u64, data: &[u8]) -> Result<(), SubmitError> {
        self.flush_chain_keep_going()?;
        let value = self.compute.issued + 1;
        let mut pb = self.chain_head_push(value)?;
        pb.inline_to_memory(dst, data)
            .map_err(SubmitError::Format)?;
        self.compute.issued = value;
        let bytes = data.len() as u64;
        self.profile_inline_upload(bytes, value, &mut pb)?;
        pb.host_semaphore(self.compute.timeline.address, value, false)
            .map_err(SubmitError::Format)?;
        self.stats.inline_uploads += 1;
        self.stats.inline_upload_bytes += bytes;
        self.submit_compute(pb)
    }

    /// Flush the chain unless a fatal failure waits to be reported (what
    /// the device declines is remembered for the next sync point, so
    /// queuing goes on).
    pub(super) fn flush_chain_keep_going(&mut self) -> Result<(), SubmitError> {
        if self.broken() {
            return Ok(());
        }
        self.flush_chain()
    }
}

/// The runtime invariant: no compute submission while a chain's
/// descriptors are being delivered.
pub(super) fn compute_allowed(chain_flush: Option<&'static str>) -> Result<(), SubmitError> {
    match chain_flush {
        Some(reason) => Err(SubmitError::ComputeInsideChainFlush { reason }),
        None => Ok(()),
    }
}

/// Nanoseconds since `since`, saturating.
fn elapsed_ns(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn compute_work_inside_a_chain_flush_is_refused_with_the_reason() {
        let err = compute_allowed(Some("delivering a chain's descriptors")).unwrap_err();
        assert!(matches!(err, SubmitError::ComputeInsideChainFlush { .. }));
        assert!(err.to_string().contains("delivering a chain's descriptors"));
        assert!(compute_allowed(None).is_ok());
    }
}
