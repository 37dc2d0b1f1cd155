//! The submit actor turns kernel launches, copies and synchronisation into
//! the command streams the GPU executes. Launches arrive on a lock-free
//! lane (callers never wait for the actor) or as requests; each becomes a
//! launch descriptor (QMD, in the version the compute class takes) and a
//! constant bank 0, built into a host shadow of the descriptor region.
//! Launches are chained (128 by default) so the engine walks from one to
//! the next with no host submission between them, with the timeline
//! release only at the chain's tail. At a flush the changed parts of the
//! shadow are copied to a mirror and moved to video memory by the copy
//! engine, and the compute queue launches the chain's head behind that
//! delivery; command buffers take the direct path in a region of their
//! own. Copies, fills and events order against launches through 64-bit
//! timeline semaphores on both queues; each chain's head waits for the
//! last chain's tail. It calls memory (for its regions and the CPU views
//! it streams into) and gsp (for its channels, the doorbell and what RM
//! reports after a fault), never anything above it; on a device that takes
//! no submission (the null card, as its capabilities say) it builds and
//! counts everything, hands nothing over, and says so at sync points.

mod actor;
pub mod arena;
mod chain;
mod chain_tuning;
mod command;
pub mod encode;
mod error;
mod events;
pub mod lane;
mod link;
mod local;
pub mod profile;
pub mod pushbuf;
pub use pushbuf::INLINE_WORD_BYTES;
mod queue;
mod records;
pub mod ring;
mod sync_board;
mod templates;
mod timeline;

pub use actor::setup::spawn;
pub use actor::{lane_launch, SubmitHandle, SubmitRequest, SubmitService, SYNC_POINT};
pub use chain_tuning::{CarveOutMin, ChainLink, ChainTuning, GridMembar, LaunchInvalidates};
pub use encode::{BankDesc, DeviceFormat, KernelDesc, LaunchShape};
pub use error::{QueueMarks, SubmitError};
pub use lane::{
    EventId, KernelId, LaneError, LaneItem, LaneLaunch, LaunchLane, ParamBlock, RecordedChainId,
    StreamId, INLINE_PARAM_BYTES,
};
pub use link::{LinkFields, NextGrid, NEXT_BANK0_SLOT};
pub use profile::{
    host_clock_ns, host_ns_at, ProfileRecord, ProfileReport, ProfiledSync, ProfiledWork,
};
pub use queue::QueueKind;
pub use records::{LaunchRecord, Submission, SubmitConfig, SubmitStats, UploadReceipt};
pub use sync_board::{CallerSync, CALLER_PATIENCE};
