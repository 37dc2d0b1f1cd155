//! The last messages that crossed the queues, both ways, kept so a failed
//! boot or a dead card can be reported with what was said just before:
//! the crash report's "last RPCs". Bounded, so a long-running
//! conversation costs a fixed few kilobytes.

use macuda_hw::gsp_rpc::{event, function};
use std::collections::VecDeque;
use std::time::Instant;

/// How many messages are kept.
pub const TRANSCRIPT_ENTRIES: usize = 32;

/// Which way a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Direction {
    /// Host to GSP-RM (the command queue).
    Sent,
    /// GSP-RM to host (the status queue), put together from its records.
    Received,
}

/// One message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RpcEntry {
    pub direction: Direction,
    pub seq: u32,
    pub function: u32,
    /// `rpc_result` of a received message (0 for those sent).
    pub result: u32,
    pub payload_bytes: usize,
    /// Microseconds since the queues were set up.
    pub at_us: u64,
}

impl RpcEntry {
    /// One line: time, direction, name, sequence, size, result.
    pub fn line(&self) -> String {
        let arrow = match self.direction {
            Direction::Sent => "->",
            Direction::Received => "<-",
        };
        let result = if self.result == 0 {
            String::new()
        } else {
            format!(" result {:#x}", self.result)
        };
        format!(
            "+{:>9.3} ms {arrow} {} seq {} ({} bytes){result}",
            self.at_us as f64 / 1e3,
            name_of(self.function),
            self.seq,
            self.payload_bytes
        )
    }
}

/// NVIDIA's prefixes of function and event names, left out of lines.
const NAME_PREFIXES: [&str; 2] = ["NV_VGPU_MSG_FUNCTION_", "NV_VGPU_MSG_EVENT_"];

/// A function's or event's NVIDIA name where we know it (the two share no
/// numbers: events start at 0x1000), without its prefix.
pub fn name_of(number: u32) -> String {
    function::ALL
        .iter()
        .chain(event::ALL)
        .find(|(_, n)| *n == number)
        .map_or_else(
            || format!("{number:#x}"),
            |(name, _)| {
                NAME_PREFIXES
                    .iter()
                    .find_map(|p| name.strip_prefix(p))
                    .unwrap_or(name)
                    .to_string()
            },
        )
}

/// The bounded record.
#[derive(Debug, Clone)]
pub struct RpcTranscript {
    since: Instant,
    entries: VecDeque<RpcEntry>,
    /// Messages that fell off the front.
    pub dropped: u64,
}

impl Default for RpcTranscript {
    fn default() -> RpcTranscript {
        RpcTranscript {
            since: Instant::now(),
            entries: VecDeque::with_capacity(TRANSCRIPT_ENTRIES),
            dropped: 0,
        }
    }
}

impl RpcTranscript {
    pub fn note(
        &mut self,
        direction: Direction,
        seq: u32,
        function: u32,
        result: u32,
        payload_bytes: usize,
    ) {
        if self.entries.len() == TRANSCRIPT_ENTRIES {
            self.entries.pop_front();
            self.dropped += 1;
        }
        let at_us = u64::try_from(self.since.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.entries.push_back(RpcEntry {
            direction,
            seq,
            function,
            result,
            payload_bytes,
            at_us,
        });
    }

    /// Oldest first.
    pub fn entries(&self) -> impl Iterator<Item = &RpcEntry> {
        self.entries.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_keeps_the_last_messages_and_counts_the_rest() {
        let mut t = RpcTranscript::default();
        for seq in 0..40 {
            t.note(Direction::Sent, seq, function::GSP_RM_ALLOC, 0, 8);
        }
        assert_eq!(t.entries().count(), TRANSCRIPT_ENTRIES);
        assert_eq!(t.dropped, 8);
        assert_eq!(t.entries().next().unwrap().seq, 8);
        let line = t.entries().last().unwrap().line();
        assert!(line.contains("-> GSP_RM_ALLOC seq 39 (8 bytes)"), "{line}");
    }

    #[test]
    fn events_are_named_as_events_when_received() {
        let mut t = RpcTranscript::default();
        t.note(Direction::Received, 0, event::GSP_INIT_DONE, 0x5, 4);
        let line = t.entries().next().unwrap().line();
        assert!(
            line.contains("<- GSP_INIT_DONE seq 0 (4 bytes) result 0x5"),
            "{line}"
        );
    }
}
