//! The command region: the ring of video memory push buffers are written
//! into, which wraps onto a push buffer only once its queue's timeline
//! says the engine ran it.

use crate::error::SubmitError;
use crate::queue::QueueKind;

/// The command region's size: push buffers of a few chains in flight.
pub(crate) const COMMAND_BYTES: u64 = 2 << 20;

/// Where push buffers go: a ring of command memory in video memory, written
/// by the CPU directly (the register path), never through the descriptor
/// shadow: the engine must find them in place.
pub(crate) struct CommandRegion {
    pub(crate) base: u64,
    pub(crate) bytes: u64,
    pub(crate) cursor: u64,
    /// Push buffers the engines may not have run yet, oldest first: the
    /// region wraps onto them only once their queue's timeline passed.
    pub(crate) in_flight: std::collections::VecDeque<CommandSpan>,
}

pub(crate) struct CommandSpan {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) queue: QueueKind,
    /// The queue's timeline value written after this push buffer ran.
    pub(crate) value: u64,
}

impl CommandRegion {
    pub(crate) fn place(&mut self, len: u64) -> Result<u64, SubmitError> {
        if len > self.bytes {
            return Err(SubmitError::CommandTooLarge { bytes: len });
        }
        if self.cursor + len > self.bytes {
            self.cursor = 0;
        }
        let at = self.base + self.cursor;
        self.cursor = (self.cursor + len).next_multiple_of(16);
        Ok(at)
    }

    /// A push buffer still unread where `[at, at + len)` would go.
    pub(crate) fn blocker(&self, at: u64, len: u64) -> Option<(QueueKind, u64)> {
        self.in_flight
            .iter()
            .find(|s| s.start < at + len && at < s.end)
            .map(|s| (s.queue, s.value))
    }

    /// The queue's timeline reached `done`: its push buffers up to there ran.
    pub(crate) fn retire(&mut self, queue: QueueKind, done: u64) {
        self.in_flight
            .retain(|s| s.queue != queue || s.value > done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_wraps_and_a_push_buffer_not_yet_run_blocks_its_bytes() {
        let mut r = CommandRegion {
            base: 0x1000,
            bytes: 256,
            cursor: 0,
            in_flight: std::collections::VecDeque::new(),
        };
        assert_eq!(r.place(100).unwrap(), 0x1000);
        r.in_flight.push_back(CommandSpan {
            start: 0x1000,
            end: 0x1000 + 100,
            queue: QueueKind::Compute,
            value: 7,
        });
        assert_eq!(r.place(100).unwrap(), 0x1000 + 112, "16-byte aligned");
        // Past the end: back to the start, onto the first push buffer.
        let at = r.place(100).unwrap();
        assert_eq!(at, 0x1000);
        assert_eq!(r.blocker(at, 100), Some((QueueKind::Compute, 7)));
        r.retire(QueueKind::Copy, 7);
        assert!(r.blocker(at, 100).is_some(), "another queue's timeline");
        r.retire(QueueKind::Compute, 6);
        assert!(r.blocker(at, 100).is_some(), "not yet reached");
        r.retire(QueueKind::Compute, 7);
        assert_eq!(r.blocker(at, 100), None);
        assert!(matches!(
            r.place(257),
            Err(SubmitError::CommandTooLarge { bytes: 257 })
        ));
    }

    #[test]
    fn the_region_wraps_only_onto_push_buffers_both_queues_ran() {
        let mut r = CommandRegion {
            base: 0x1000,
            bytes: 256,
            cursor: 0,
            in_flight: std::collections::VecDeque::new(),
        };
        for (queue, value) in [(QueueKind::Copy, 1), (QueueKind::Compute, 1)] {
            let at = r.place(100).unwrap();
            r.in_flight.push_back(CommandSpan {
                start: at,
                end: at + 100,
                queue,
                value,
            });
        }
        let at = r.place(100).unwrap();
        assert_eq!(at, 0x1000, "wrapped");
        assert_eq!(r.blocker(at, 100), Some((QueueKind::Copy, 1)));
        r.retire(QueueKind::Compute, 5);
        assert_eq!(
            r.blocker(at, 100),
            Some((QueueKind::Copy, 1)),
            "other queue"
        );
        r.retire(QueueKind::Copy, 1);
        assert_eq!(r.blocker(at, 100), None);
        assert!(r.place(300).is_err(), "larger than the region");
    }
}
