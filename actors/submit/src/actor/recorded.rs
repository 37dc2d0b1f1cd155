//! Recorded chains: a run of launches (a CUDA graph's kernels) built once
//! into QMDs and banks 0 in video memory of its own and linked as a chain,
//! so that a replay costs one push buffer whatever its length: wait for the
//! chain before it, write this replay's timeline value into the tail's
//! release, launch the head. Built again at every replay, each launch cost
//! the host about 1.4 us on the H200, more than a small kernel runs there
//! (tests/device/chain-variants.sh), so a graph of small kernels ran at the
//! host's pace, not the GPU's.

use super::SubmitActor;
use crate::encode::{qmd_bytes, Bank0Slot, CBANK0_ALIGN, QMD_ALIGN};
use crate::error::SubmitError;
use crate::lane::{LaneLaunch, RecordedChainId};
use crate::link::NextGrid;
use crate::queue::QueueKind;
use macuda_hw::qmd::Qmd;
use std::collections::HashMap;

/// One recorded chain in video memory.
struct RecordedChain {
    /// The allocation that holds every bank 0 and QMD of the chain.
    buffer: u64,
    /// The first QMD: what a replay launches.
    head: u64,
    /// The tail QMD's release payload (two words), which each replay sets
    /// to its own timeline value before it launches the head.
    payload_at: u64,
    launches: u64,
    /// The compute timeline value of its last replay (0: none yet).
    last_value: u64,
}

/// Every chain recorded and not yet forgotten, and the memory of those
/// forgotten while a replay of theirs may still run.
#[derive(Default)]
pub(crate) struct RecordedChains {
    chains: HashMap<RecordedChainId, RecordedChain>,
    next: u32,
    /// (last replay's timeline value, allocation) of forgotten chains.
    retiring: Vec<(u64, u64)>,
}

/// Where one launch's bank 0 and QMD lie in a recorded chain's buffer.
struct Slot {
    bank0: u64,
    bank0_bytes: u64,
    qmd: u64,
}

impl SubmitActor {
    /// Build `launches` into a chain of their own in video memory.
    pub(super) fn record(
        &mut self,
        launches: &[LaneLaunch],
    ) -> Result<RecordedChainId, SubmitError> {
        if launches.is_empty() {
            return Err(SubmitError::NotRecorded {
                reason: "a chain needs at least one launch",
            });
        }
        if self.profile.is_some() {
            return Err(SubmitError::NotRecorded {
                reason: "the GPU timeline gives every launch a report slot of its own, so graphs replay launch by launch while it is on",
            });
        }
        self.free_retired()?;
        let qmd_len = self.format.qmd_bytes();
        let mut slots = Vec::with_capacity(launches.len());
        let mut size = 0u64;
        for l in launches {
            let t = self.template(l.kernel)?;
            super::build::check_launch(t, &l.grid, &l.block, l.params.as_slice())?;
            let bank0 = size.next_multiple_of(CBANK0_ALIGN);
            let bank0_bytes = self.format.cbank0_bytes(&t.desc);
            let qmd = (bank0 + bank0_bytes).next_multiple_of(QMD_ALIGN);
            size = qmd + qmd_len;
            slots.push(Slot {
                bank0,
                bank0_bytes,
                qmd,
            });
        }
        // Written by the CPU: where it reaches (inside BAR1 on a small-BAR
        // card).
        let buffer = self
            .memory
            .alloc_visible(size)
            .map_err(SubmitError::Memory)?
            .va;
        match self.write_recorded(launches, &slots, buffer, size) {
            Ok(payload_at) => {
                let id = RecordedChainId(self.recorded.next);
                self.recorded.next = self.recorded.next.wrapping_add(1);
                self.recorded.chains.insert(
                    id,
                    RecordedChain {
                        buffer,
                        head: buffer + slots[0].qmd,
                        payload_at,
                        launches: launches.len() as u64,
                        last_value: 0,
                    },
                );
                self.stats.recorded_chains += 1;
                Ok(id)
            }
            Err(e) => {
                // Nothing refers to the buffer yet.
                let _ = self.memory.free_device(buffer);
                Err(e)
            }
        }
    }

    /// The chain's image (banks 0 and linked QMDs, the tail releasing the
    /// compute timeline) written at `buffer`; returns where the tail's
    /// release payload lies.
    fn write_recorded(
        &mut self,
        launches: &[LaneLaunch],
        slots: &[Slot],
        buffer: u64,
        size: u64,
    ) -> Result<u64, SubmitError> {
        if !buffer.is_multiple_of(QMD_ALIGN.max(CBANK0_ALIGN)) {
            return Err(SubmitError::Invariant {
                reason: "video memory for a recorded chain is not aligned for QMDs",
            });
        }
        let qmd_len = self.format.qmd_bytes() as usize;
        // CAST: the buffer was allocated, so its size fits in memory.
        let mut image = vec![0u8; size as usize];
        let mut prev: Option<(usize, Qmd)> = None;
        for (l, s) in launches.iter().zip(slots) {
            let t = self.template(l.kernel)?;
            let mut qmd = Qmd::new(self.format.qmd);
            let (b, q) = (s.bank0 as usize, s.qmd as usize);
            self.format
                .launch(
                    t,
                    &l.shape(),
                    l.params.as_slice(),
                    &mut qmd,
                    Bank0Slot {
                        address: buffer + s.bank0,
                        bytes: &mut image[b..b + s.bank0_bytes as usize],
                        holds_template: false,
                    },
                )
                .map_err(SubmitError::Format)?;
            if let Some((at, mut p)) = prev.take() {
                let next = NextGrid {
                    qmd: buffer + s.qmd,
                    program: t.desc.entry,
                    code_bytes: t.desc.code_bytes,
                    bank0: buffer + s.bank0,
                    bank0_bytes: s.bank0_bytes,
                };
                self.link.link(&mut p, &next).map_err(SubmitError::Format)?;
                qmd_bytes(&p, &mut image[at..at + qmd_len]);
            }
            prev = Some((q, qmd));
        }
        let (at, mut tail) = prev.ok_or(SubmitError::Invariant {
            reason: "a recorded chain without launches",
        })?;
        // The payload is set by each replay; 0 until the first.
        self.format
            .release_qmd(&mut tail, self.compute.timeline.address, 0)
            .map_err(SubmitError::Format)?;
        qmd_bytes(&tail, &mut image[at..at + qmd_len]);
        let payload = self
            .format
            .release_payload_offset()
            .map_err(SubmitError::Format)?;
        if self.can.video_memory {
            self.write_device(buffer, image)?;
        }
        Ok(buffer + at as u64 + payload)
    }

    /// Run a recorded chain after everything queued before it.
    pub(super) fn replay(&mut self, chain: RecordedChainId) -> Result<(), SubmitError> {
        let (head, payload_at, launches) = {
            let c = self
                .recorded
                .chains
                .get(&chain)
                .ok_or(SubmitError::NoSuchRecordedChain(chain))?;
            (c.head, c.payload_at, c.launches)
        };
        // Stream order: the open chain goes first.
        self.flush_chain()?;
        self.compute.issued += 1;
        let value = self.compute.issued;
        // After the chain before it, which also means no earlier replay of
        // this chain still reads the tail written next.
        let mut pb = self.chain_head_push(value)?;
        // The tail releases this replay's value: the low word of its payload
        // takes it, the high word stays 0 (one-word releases).
        pb.host_semaphore(payload_at, value, false)
            .map_err(SubmitError::Format)?;
        pb.launch_qmd(head).map_err(SubmitError::Format)?;
        self.submit_compute(pb)?;
        if let Some(c) = self.recorded.chains.get_mut(&chain) {
            c.last_value = value;
        }
        self.stats.chains += 1;
        self.stats.replays += 1;
        self.stats.replayed_launches += launches;
        Ok(())
    }

    /// The chain will not be replayed again: its memory goes back once its
    /// last replay has run.
    pub(super) fn forget_recorded(&mut self, chain: RecordedChainId) -> Result<(), SubmitError> {
        let c = self
            .recorded
            .chains
            .remove(&chain)
            .ok_or(SubmitError::NoSuchRecordedChain(chain))?;
        self.recorded.retiring.push((c.last_value, c.buffer));
        self.free_retired()
    }

    /// Free the memory of forgotten chains whose last replay has run.
    fn free_retired(&mut self) -> Result<(), SubmitError> {
        if self.recorded.retiring.is_empty() {
            return Ok(());
        }
        // Values the device declined never run, and a device without
        // memory access runs nothing.
        let done = if self.can.video_memory {
            self.completed(QueueKind::Compute)?
                .max(self.dropped_through)
        } else {
            u64::MAX
        };
        let (free, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.recorded.retiring)
            .into_iter()
            .partition(|&(value, _)| value <= done);
        self.recorded.retiring = keep;
        for (_, buffer) in free {
            self.memory
                .free_device(buffer)
                .map_err(SubmitError::Memory)?;
        }
        Ok(())
    }
}
