//! What the supervisor keeps of GSP-RM while the stack runs, for the
//! crash report it writes when something fails: the last messages both
//! ways, what GSP-RM sent unprompted, and its last log lines. The gsp
//! actor's RM writes it after each of its calls; the supervisor reads it
//! after the actor is gone, so it lives behind a lock of its own.

use super::logs::{decode_since, put_of, LogMetadata};
use super::staging::Piece;
use super::{CardBus, GspRpc, Staged};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;

/// How many log lines the journal keeps.
pub const JOURNAL_LOG_LINES: usize = 64;

/// The journal's content.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GspJournal {
    /// The last messages both ways, one line each, oldest first.
    pub rpc: Vec<String>,
    /// What GSP-RM sent unprompted.
    pub notices: Vec<String>,
    /// GSP-RM's last log lines, oldest first, each with its buffer.
    pub log: VecDeque<String>,
}

/// The journal as shared between the gsp actor and the supervisor.
pub type SharedJournal = Arc<Mutex<GspJournal>>;

/// Where a record's metadata is looked up, shared across threads.
pub type SharedLogMetadata = Arc<dyn LogMetadata + Send + Sync>;

/// GSP-RM's log buffers, read as it writes them.
pub struct LogReader {
    buffers: Vec<(&'static str, Piece)>,
    /// Each buffer's put pointer when it was last read.
    seen: Vec<u64>,
    metadata: Option<SharedLogMetadata>,
}

impl LogReader {
    /// The buffers staged for the boot; records decoded through
    /// `metadata` where there is any (GSP-RM's logging metadata is
    /// NVIDIA's, shipped apart from the firmware).
    pub fn new(staged: &Staged, metadata: Option<SharedLogMetadata>) -> LogReader {
        let buffers: Vec<_> = staged
            .log_buffers
            .iter()
            .map(|(region, piece)| (region.name, *piece))
            .collect();
        LogReader {
            seen: vec![0; buffers.len()],
            buffers,
            metadata,
        }
    }

    /// The lines written since the last read, each passed to `tracing`
    /// at its level. A buffer that cannot be read or decoded gives one
    /// line saying why (the card writes these buffers: they are checked,
    /// never trusted).
    pub fn read_new(&mut self, bus: &mut dyn CardBus) -> Vec<String> {
        let mut lines = Vec::new();
        for (i, (name, piece)) in self.buffers.iter().enumerate() {
            let bytes = match bus.dma_read(piece.mapping, piece.offset, piece.bytes) {
                Ok(b) => b,
                Err(e) => {
                    lines.push(format!("{name}: not read: {e}"));
                    continue;
                }
            };
            let Some(metadata) = &self.metadata else {
                if let Ok(put) = put_of(&bytes) {
                    if put > self.seen[i] {
                        lines.push(format!(
                            "{name}: {} words written (no logging metadata to decode them: NVIDIA ships it apart from the firmware)",
                            put - self.seen[i]
                        ));
                        self.seen[i] = put;
                    }
                }
                continue;
            };
            match decode_since(&bytes, metadata.as_ref(), self.seen[i]) {
                Ok((records, put)) => {
                    for r in &records {
                        r.trace(name);
                        lines.push(format!("{name}: {}", r.render()));
                    }
                    self.seen[i] = put;
                }
                Err(e) => lines.push(format!("{name}: {e}")),
            }
        }
        lines
    }
}

impl GspJournal {
    /// Bring the journal up to date with the conversation, and the new
    /// log lines `logs` reads.
    pub fn update(&mut self, rpc: &GspRpc, logs: &mut LogReader, bus: &mut dyn CardBus) {
        self.rpc = rpc.transcript().entries().map(|m| m.line()).collect();
        self.notices = rpc.notices().map(|n| format!("{n:?}")).collect();
        for line in logs.read_new(bus) {
            if self.log.len() == JOURNAL_LOG_LINES {
                self.log.pop_front();
            }
            self.log.push_back(line);
        }
    }
}
