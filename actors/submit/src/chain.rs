//! The chain being built: launches whose QMDs hand over to one another on
//! the GPU, from the head the push buffer launches to the tail that
//! releases the timeline. Each launch's QMD waits here for its successor's
//! address; the actor links and writes it.

use crate::error::SubmitError;
use macuda_hw::qmd::{Qmd, QmdVersion};

/// A launch in the open chain whose QMD waits for its successor's address.
pub(crate) struct Pending {
    pub(crate) qmd_offset: u64,
    pub(crate) qmd: Qmd,
}

#[derive(Default)]
pub(crate) struct OpenChain {
    len: usize,
    tail: Option<Pending>,
    /// The first launch's QMD address: what the push buffer launches.
    head: Option<u64>,
    /// A QMD buffer to reuse, so a launch allocates nothing.
    spare: Option<Qmd>,
}

impl OpenChain {
    /// A QMD to build the next launch in.
    pub(crate) fn spare_or(&mut self, version: QmdVersion) -> Qmd {
        self.spare.take().unwrap_or_else(|| Qmd::new(version))
    }

    /// Add a launch whose QMD lies at `qmd_offset` (GPU address `address`):
    /// the previous tail, which must now be linked to it, if there is one.
    pub(crate) fn push(&mut self, qmd_offset: u64, address: u64, qmd: Qmd) -> Option<Pending> {
        if self.tail.is_none() {
            self.head = Some(address);
        }
        self.len += 1;
        self.tail.replace(Pending { qmd_offset, qmd })
    }

    /// A QMD the caller is done with, for the next launch.
    pub(crate) fn recycle(&mut self, qmd: Qmd) {
        self.spare = Some(qmd);
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Close the chain: its tail (to release the timeline) and its head's
    /// address, or nothing for an empty chain.
    pub(crate) fn close(&mut self) -> Result<Option<(Pending, u64)>, SubmitError> {
        let Some(tail) = self.tail.take() else {
            return Ok(None);
        };
        let head = self.head.take().ok_or(SubmitError::Invariant {
            reason: "a chain with launches but no head",
        })?;
        self.len = 0;
        Ok(Some((tail, head)))
    }

    /// Forget the chain (its channel is gone); the spare QMD is kept.
    pub(crate) fn abandon(&mut self) {
        self.tail = None;
        self.head = None;
        self.len = 0;
    }
}

/// Launches in the first chain after a standstill.
const RAMP_START: usize = 8;

/// How long the open chain may grow before it is handed over. After a
/// standstill (a sync point the host waited at: the GPU has nothing left
/// to run) the first chain is short, so the GPU starts after a few builds
/// instead of a whole chain's; each chain after it is twice as long, up to
/// the configured depth, and is built while the one before it runs (a
/// build costs less than a launch runs). Every token after a sync point
/// therefore cuts its chains at the same places, which keeps its
/// descriptors where the last token's were (the arena's alignment). On the
/// H200 a first chain of 128 kept the GPU idle about 150 us a token.
pub(crate) struct ChainDepth {
    limit: usize,
    current: usize,
}

impl ChainDepth {
    pub(crate) fn new(limit: usize) -> ChainDepth {
        let limit = limit.max(1);
        ChainDepth {
            limit,
            current: RAMP_START.min(limit),
        }
    }

    /// Whether a chain of `len` launches is to be handed over now.
    pub(crate) fn reached(&self, len: usize) -> bool {
        len >= self.current
    }

    /// A chain was handed over: the next may be longer.
    pub(crate) fn flushed(&mut self) {
        self.current = (self.current * 2).min(self.limit);
    }

    /// The GPU has run everything: start short again.
    pub(crate) fn standstill(&mut self) {
        self.current = RAMP_START.min(self.limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_start_short_after_a_standstill_and_double_up_to_the_depth() {
        let mut d = ChainDepth::new(128);
        let mut lengths = Vec::new();
        for _ in 0..6 {
            let len = (1..).find(|&n| d.reached(n)).unwrap();
            lengths.push(len);
            d.flushed();
        }
        assert_eq!(lengths, [8, 16, 32, 64, 128, 128]);
        d.standstill();
        assert!(d.reached(8) && !d.reached(7));
        let shallow = ChainDepth::new(4);
        assert!(
            shallow.reached(4) && !shallow.reached(3),
            "never past the depth"
        );
        assert!(ChainDepth::new(0).reached(1), "a depth of 0 is 1");
    }

    #[test]
    fn the_head_is_the_first_launch_and_each_push_hands_back_the_last_tail() {
        let mut c = OpenChain::default();
        assert!(c.close().unwrap().is_none(), "empty");
        let q = c.spare_or(QmdVersion::V04_00);
        assert!(
            c.push(0x100, 0x1100, q).is_none(),
            "the first has nothing to link"
        );
        let q = c.spare_or(QmdVersion::V04_00);
        let prev = c.push(0x200, 0x1200, q).expect("the first launch, to link");
        assert_eq!(prev.qmd_offset, 0x100);
        c.recycle(prev.qmd);
        assert_eq!(c.len(), 2);
        let (tail, head) = c.close().unwrap().unwrap();
        assert_eq!((tail.qmd_offset, head), (0x200, 0x1100));
        assert_eq!(c.len(), 0);
        assert!(c.close().unwrap().is_none());
        let q = c.spare_or(QmdVersion::V04_00);
        assert!(c.spare.is_none(), "the recycled QMD was reused");
        c.push(0x300, 0x1300, q);
        c.abandon();
        assert!(c.close().unwrap().is_none(), "abandoned");
    }
}
