use crate::arena::ArenaError;
use crate::lane::StreamId;
use crate::lane::{EventId, KernelId, LaneError, RecordedChainId};
use crate::ring::RingError;
use macuda_core::{ActorError, ActorFault, Severity};
use macuda_gsp::{ChannelFault, GspError};
use macuda_hw::push::FormatError;
use macuda_memory::MemoryError;
use macuda_pci::PciError;

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("actor call failed")]
    Actor(#[from] ActorError),
    #[error("memory request failed")]
    Memory(#[source] MemoryError),
    #[error("pci request failed")]
    Pci(#[source] PciError),
    #[error("gsp request failed")]
    Gsp(#[source] GspError),
    #[error("RM removed the channels: {0}")]
    ChannelFault(Box<ChannelFault>),
    #[error("no stream {0:?}")]
    NoSuchStream(StreamId),
    #[error("no kernel {0:?} (register it first)")]
    NoSuchKernel(KernelId),
    #[error("no recorded chain {0:?} (it was forgotten, or never recorded)")]
    NoSuchRecordedChain(RecordedChainId),
    #[error("not recorded: {reason}")]
    NotRecorded { reason: &'static str },
    #[error("no event {0:?}")]
    NoSuchEvent(EventId),
    #[error("{event:?} has no timed record (only ids below {limit} take one)")]
    UntimedEvent { event: EventId, limit: u32 },
    #[error("launch has a zero grid or block dimension: grid {grid:?}, block {block:?}")]
    EmptyLaunch { grid: [u32; 3], block: [u32; 3] },
    #[error("`{kernel}` takes a {expected}-byte parameter block, {given} bytes given")]
    ParamBlockSize {
        kernel: String,
        expected: u32,
        given: usize,
    },
    #[error("no launch format for sm_{sm} with compute class {compute_class:#06x}")]
    NoLaunchFormat { sm: u32, compute_class: u32 },
    #[error("descriptor region")]
    Arena(#[source] ArenaError),
    #[error("a value does not fit its hardware field")]
    Format(#[source] FormatError),
    #[error("GPFIFO ring")]
    Ring(#[source] RingError),
    #[error("a push buffer of {bytes} bytes does not fit the command region")]
    CommandTooLarge { bytes: u64 },
    #[error("compute work was submitted while {reason}: the engine could read descriptors that have not arrived")]
    ComputeInsideChainFlush { reason: &'static str },
    #[error(
        "the {queue} queue did not reach timeline value {value}: it stood at {reached} for {after_ms} ms ({queues})"
    )]
    Stuck {
        queue: &'static str,
        value: u64,
        /// What the timeline read when the wait gave up.
        reached: u64,
        after_ms: u64,
        /// Both queues at that moment: a wait that stands still behind
        /// the other queue, or on work never handed over, shows here.
        queues: QueueMarks,
    },
    #[error("cannot read the timeline: {why}")]
    NoTimeline { why: &'static str },
    #[error("the descriptor mirror is host memory at bus address {bus:#x}, but the copy engine reads GPU virtual addresses and the memory actor does not map host memory into the GPU's address space yet")]
    MirrorUnmapped { bus: u64 },
    #[error("internal invariant broken: {reason}")]
    Invariant { reason: &'static str },
    #[error("the {queue} queue's timeline reads {read:#x}, past the {issued} values handed out: the card is not answering (off the bus, every read is all ones)")]
    ImpossibleTimeline {
        queue: &'static str,
        read: u64,
        issued: u64,
    },
    #[error("launch lane")]
    Lane(#[from] LaneError),
    #[error("could not start the submit actor thread")]
    Spawn(#[source] std::io::Error),
}

impl SubmitError {
    /// The transport declined by design (the null card refusing what its
    /// profile leaves out). Counted, never steered by: what a device takes
    /// is in its capabilities.
    pub fn is_refusal(&self) -> bool {
        matches!(self, SubmitError::Pci(e) if e.is_refusal())
    }

    /// A gsp error, with the pci refusal it wraps (the null card declining
    /// a doorbell) kept as the refusal it is.
    pub fn from_gsp(e: GspError) -> SubmitError {
        match e {
            GspError::Pci(p) => SubmitError::Pci(p),
            e => SubmitError::Gsp(e),
        }
    }
}

impl ActorFault for SubmitError {
    fn severity(&self) -> Severity {
        match self {
            SubmitError::Actor(ActorError::Injected { .. }) => Severity::Fatal,
            SubmitError::Actor(_)
            | SubmitError::Memory(_)
            | SubmitError::Pci(_)
            | SubmitError::Gsp(_) => Severity::Downstream,
            // Seen by callers of the lane only: the actor stopped (whatever
            // stopped it was reported) or is stuck (its own deadline says so).
            SubmitError::Lane(_) => Severity::Downstream,
            // The GPU refused our work, not the stack: the queues stay
            // stopped (and say why) until the channels are reopened.
            SubmitError::ChannelFault(_) => Severity::Recoverable,
            SubmitError::NoSuchStream(_)
            | SubmitError::NoSuchKernel(_)
            | SubmitError::NoSuchEvent(_)
            | SubmitError::NoSuchRecordedChain(_)
            | SubmitError::NotRecorded { .. }
            | SubmitError::UntimedEvent { .. }
            | SubmitError::EmptyLaunch { .. }
            | SubmitError::ParamBlockSize { .. }
            | SubmitError::Format(_)
            | SubmitError::CommandTooLarge { .. }
            | SubmitError::NoTimeline { .. } => Severity::Recoverable,
            // A broken invariant, a stuck engine or a region that cannot be
            // reused leave the command streams in an unknown state.
            SubmitError::ComputeInsideChainFlush { .. }
            | SubmitError::Invariant { .. }
            | SubmitError::Stuck { .. }
            | SubmitError::ImpossibleTimeline { .. }
            | SubmitError::Arena(_)
            | SubmitError::Ring(_)
            | SubmitError::NoLaunchFormat { .. }
            | SubmitError::MirrorUnmapped { .. }
            | SubmitError::Spawn(_) => Severity::Fatal,
        }
    }
}

/// Where both queues stood: each timeline as read, and the last value
/// queued on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueMarks {
    pub compute_reached: u64,
    pub compute_issued: u64,
    pub copy_reached: u64,
    pub copy_issued: u64,
    /// Each channel's GP_GET and GP_PUT as USERD held them, where the CPU
    /// can read USERD: GP_GET short of GP_PUT is a channel the host has not
    /// fetched from (not running), GP_GET at GP_PUT one that fetched all
    /// and waits in a method (an acquire) or on its engine.
    pub compute_gp: Option<(u32, u32)>,
    pub copy_gp: Option<(u32, u32)>,
}

impl std::fmt::Display for QueueMarks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "compute at {} of {} queued{}, copy at {} of {}{}",
            self.compute_reached,
            self.compute_issued,
            Gp(self.compute_gp),
            self.copy_reached,
            self.copy_issued,
            Gp(self.copy_gp)
        )
    }
}

/// A channel's ring pointers in a message, or nothing where unread.
struct Gp(Option<(u32, u32)>);

impl std::fmt::Display for Gp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some((get, put)) => write!(f, " (GP_GET {get}, GP_PUT {put})"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_marks_name_ring_pointers_where_read() {
        let mut m = QueueMarks {
            compute_reached: 5,
            compute_issued: 7,
            copy_reached: 2,
            copy_issued: 2,
            ..QueueMarks::default()
        };
        assert_eq!(m.to_string(), "compute at 5 of 7 queued, copy at 2 of 2");
        m.compute_gp = Some((3, 4));
        m.copy_gp = Some((9, 9));
        assert_eq!(
            m.to_string(),
            "compute at 5 of 7 queued (GP_GET 3, GP_PUT 4), copy at 2 of 2 (GP_GET 9, GP_PUT 9)"
        );
    }
}
