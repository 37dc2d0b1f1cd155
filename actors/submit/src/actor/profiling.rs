//! The per-kernel GPU timeline's hooks on the actor's paths: a report
//! asked of each launch's QMD, of each chain's start and each copy, and the
//! reports read back at sync points (see `crate::profile`).

use super::SubmitActor;
use crate::error::SubmitError;
use crate::lane::{KernelId, StreamId};
use crate::profile::{Profile, ProfileReport, ProfiledWork};
use crate::pushbuf::PushBuffer;
use crate::queue::QueueKind;
use macuda_hw::qmd::Qmd;

impl SubmitActor {
    /// A launch about to join the open chain: its QMD's second release
    /// reports when its grid completes.
    pub(super) fn profile_launch(
        &mut self,
        kernel: KernelId,
        stream: Option<StreamId>,
        grid: [u32; 3],
        block: [u32; 3],
        qmd: &mut Qmd,
    ) -> Result<(), SubmitError> {
        if self.profile.is_none() {
            return Ok(());
        }
        if self.profile.as_ref().is_some_and(Profile::overrun) {
            // Hand the open chain over, so what waits can be waited for.
            self.flush_chain()?;
            self.make_profile_room(self.compute.issued, self.copy.issued)?;
        }
        let name = self
            .kernels
            .get(kernel.0 as usize)
            .map(|t| t.desc.name.clone())
            .unwrap_or_default();
        let work = ProfiledWork::Kernel {
            kernel,
            name,
            grid,
            block,
            chain: self.stats.chains + 1,
            // CAST: a chain holds far fewer than 2^32 launches.
            position: self.chain.len() as u32,
        };
        let Some(p) = self.profile.as_mut() else {
            return Ok(());
        };
        let (serial, slot) = p.note(work, stream, QueueKind::Compute, None);
        if let Some(slot) = slot {
            self.format
                .stamp_qmd(qmd, slot, Profile::payload(serial))
                .map_err(SubmitError::Format)?;
        }
        Ok(())
    }

    /// A chain closed with compute value `value`: its kernels are covered by
    /// it, and its head's push buffer reports when the queue reaches it.
    pub(super) fn profile_chain_start(
        &mut self,
        value: u64,
        pb: &mut PushBuffer,
    ) -> Result<(), SubmitError> {
        let chain = self.stats.chains;
        if let Some(p) = self.profile.as_mut() {
            p.close_chain(value);
        }
        // This chain is not handed over yet; the ones before it and the
        // descriptor copies are.
        self.make_profile_room(value - 1, self.copy.issued)?;
        let Some(p) = self.profile.as_mut() else {
            return Ok(());
        };
        let (serial, slot) = p.note(
            ProfiledWork::ChainStart { chain },
            None,
            QueueKind::Compute,
            Some(value),
        );
        if let Some(slot) = slot {
            pb.reached_stamp(slot, serial)
                .map_err(SubmitError::Format)?;
        }
        Ok(())
    }

    /// A copy or fill of `bytes` whose copy-queue value is `value`: a report
    /// once the copy engine is done with it.
    pub(super) fn profile_copy(
        &mut self,
        bytes: u64,
        fill: bool,
        value: u64,
        pb: &mut PushBuffer,
    ) -> Result<(), SubmitError> {
        // This copy is not handed over yet; everything before it is.
        self.make_profile_room(self.compute.issued, value - 1)?;
        let Some(p) = self.profile.as_mut() else {
            return Ok(());
        };
        let (serial, slot) = p.note(
            ProfiledWork::Copy { bytes, fill },
            None,
            QueueKind::Copy,
            Some(value),
        );
        if let Some(slot) = slot {
            pb.stamped_release(slot, serial)
                .map_err(SubmitError::Format)?;
        }
        Ok(())
    }

    /// An inline upload of `bytes` whose compute-queue value is `value`: a
    /// report once the engine wrote it.
    pub(super) fn profile_inline_upload(
        &mut self,
        bytes: u64,
        value: u64,
        pb: &mut PushBuffer,
    ) -> Result<(), SubmitError> {
        self.make_profile_room(value - 1, self.copy.issued)?;
        let Some(p) = self.profile.as_mut() else {
            return Ok(());
        };
        let (serial, slot) = p.note(
            ProfiledWork::Upload { bytes },
            None,
            QueueKind::Compute,
            Some(value),
        );
        if let Some(slot) = slot {
            pb.stamped_release(slot, serial)
                .map_err(SubmitError::Format)?;
        }
        Ok(())
    }

    /// Read every report the queues have passed.
    pub(super) fn read_profile(&mut self) -> Result<(), SubmitError> {
        if self.profile.is_none() {
            return Ok(());
        }
        let (compute, copy) = if self.can.submission {
            (
                self.completed(QueueKind::Compute)?,
                self.completed(QueueKind::Copy)?,
            )
        } else {
            // Nothing runs: everything built counts as passed.
            (u64::MAX, u64::MAX)
        };
        if let Some(p) = self.profile.as_mut() {
            p.harvest(compute, copy);
        }
        Ok(())
    }

    /// Before a slot is reused: read what the queues have passed, and if a
    /// ring's worth still waits, wait for the work already handed over
    /// (compute up to `compute`, copies up to `copy`) and read again, so no
    /// report is overwritten unread.
    fn make_profile_room(&mut self, compute: u64, copy: u64) -> Result<(), SubmitError> {
        if !self.profile.as_ref().is_some_and(Profile::overrun) {
            return Ok(());
        }
        self.read_profile()?;
        if self.profile.as_ref().is_some_and(Profile::overrun) {
            if compute > 0 {
                self.wait_compute(compute)?;
            }
            if copy > self.copy_dropped_through {
                self.wait_timeline(QueueKind::Copy, copy)?;
            }
            self.read_profile()?;
        }
        Ok(())
    }

    /// A sync point on `stream` that began at host time `began_ns`, done.
    pub(super) fn profile_sync(
        &mut self,
        stream: Option<StreamId>,
        began_ns: u64,
    ) -> Result<(), SubmitError> {
        self.read_profile()?;
        if let Some(p) = self.profile.as_mut() {
            p.note_sync(stream, began_ns);
        }
        Ok(())
    }

    /// The host clock of the profile, for a sync point's start.
    pub(super) fn profile_now(&self) -> Option<u64> {
        self.profile.as_ref().map(Profile::now_ns)
    }

    /// What the profile holds, everything the queues have passed read.
    pub(super) fn profile_report(&mut self) -> Result<ProfileReport, SubmitError> {
        self.read_profile()?;
        Ok(self
            .profile
            .as_ref()
            .map(Profile::report)
            .unwrap_or_default())
    }
}
