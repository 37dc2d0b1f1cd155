//! What the submit actor's records are: a control-plane launch, an
//! upload's receipt, a submission kept for debugging, the tuning the actor
//! runs with, and the counts it keeps.

use crate::chain_tuning::ChainTuning;
use crate::lane::KernelId;
use macuda_gsp::CopyPlacement;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One kernel launch through the control plane (tests, the demo); the hot
/// path is the lane, which carries the same fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchRecord {
    pub kernel: KernelId,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_shared_bytes: u32,
    /// The parameter block, laid out as the kernel's metadata says.
    pub params: Vec<u8>,
}

/// An upload accepted onto the copy queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadReceipt {
    pub dst: u64,
    pub bytes: u64,
    /// Copy-queue position; the copy happens at the next flush.
    pub queued_at: u64,
    /// Whether the bytes reached the device: not on a card that keeps no
    /// memory (the null card), where modules are laid out but not resident.
    pub resident: bool,
}

/// One push buffer handed to a queue, kept for debugging and tests (the
/// command streams can be decoded and compared with NVIDIA's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submission {
    pub queue: String,
    /// Where the push buffer lives on the GPU.
    pub address: u64,
    /// The GPFIFO entry naming it, and where in the ring it goes.
    pub gp_entry: u64,
    pub gp_entry_address: u64,
    /// GP_PUT after this entry (what USERD gets before the doorbell).
    pub gp_put: u32,
    /// The queue's USERD block, whose GP_PUT word gets `gp_put`.
    pub userd_address: u64,
    pub words: Vec<u32>,
}

/// How the submit actor batches work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitConfig {
    /// Launches linked into one chain before it is handed over. 128 was the
    /// measured optimum (seed notes: deeper chains delay their own start,
    /// shallower ones expose more seams).
    pub chain_depth: usize,
    /// Deliver only the words of each descriptor that changed since the
    /// same launch of the previous token.
    pub diffing: bool,
    /// Lane records the callers may run ahead by.
    pub lane_capacity: usize,
    /// Bytes of the descriptor region (QMDs and their bank 0).
    pub descriptor_bytes: u64,
    /// How long a sync point waits with its queue's timeline not moving
    /// before it reports the queue stuck.
    pub sync_timeout: Duration,
    /// Entries of each GPFIFO ring (a power of two).
    pub gpfifo_entries: u32,
    /// How a chain's launches hand over to each other.
    pub chain: ChainTuning,
    /// Which channel group the copy channel joins: the compute channel's,
    /// or its own on a copy engine.
    pub copy_placement: CopyPlacement,
    /// Report slots of the per-kernel GPU timeline (`crate::profile`);
    /// `None`, the default, profiles nothing.
    pub profile_slots: Option<u32>,
    /// Callers wait out their syncs on their own threads where the
    /// timelines are mapped (`crate::sync_board`); off, every sync goes
    /// through the actor's mailbox.
    pub caller_waits: bool,
}

impl Default for SubmitConfig {
    fn default() -> Self {
        SubmitConfig {
            chain_depth: 128,
            diffing: true,
            lane_capacity: 4096,
            // 4 MiB holds a decode token of a few thousand launches without
            // wrapping (so the next token lines up with it), and, with its
            // mirror and shadow, stays in the CPU's caches: on the H200's
            // host 8 MiB cost about 30% more a launch in the comparisons
            // diffing makes.
            descriptor_bytes: 4 << 20,
            sync_timeout: Duration::from_secs(10),
            gpfifo_entries: 1024,
            chain: ChainTuning::default(),
            copy_placement: CopyPlacement::default(),
            profile_slots: None,
            caller_waits: true,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitStats {
    pub streams: u64,
    pub kernels: u64,
    pub launches: u64,
    pub param_bytes: u64,
    pub chains: u64,
    /// Hand-overs: descriptor delivery plus the launch of a chain's head.
    pub flushes: u64,
    /// Descriptor bytes copied shadow -> mirror -> video memory.
    pub descriptor_bytes: u64,
    pub descriptor_patches: u64,
    /// Push-buffer bytes written for both queues.
    pub command_bytes: u64,
    pub uploads: u64,
    pub upload_bytes: u64,
    pub copies: u64,
    /// Uploads written by the compute engine from the push buffer.
    pub inline_uploads: u64,
    pub inline_upload_bytes: u64,
    pub fills: u64,
    pub events: u64,
    pub gp_entries: u64,
    /// Submissions the device declined (the null device declines all).
    pub refused_submissions: u64,
    /// Nanoseconds spent building descriptors (QMD and bank 0) in the actor.
    pub build_ns: u64,
    /// Nanoseconds spent handing chains and copies over (delivery, push
    /// buffers, doorbells), waits excluded.
    pub flush_ns: u64,
    /// Nanoseconds spent waiting for the GPU: for a timeline value, for
    /// ring entries or descriptor space it still uses.
    pub wait_ns: u64,
    /// Of the hand-over: delivering descriptors (the arena's diff, then
    /// the patches written through the CPU's window or queued as copies).
    pub deliver_ns: u64,
    /// Of the hand-over: each submission's push buffer, GPFIFO entry,
    /// GP_PUT and doorbell, waits for ring space excluded (those count as
    /// waits).
    pub publish_ns: u64,
    /// Of `publish_ns`: GP_PUT written and read back through the CPU's
    /// window (a read across the bus where USERD is video memory).
    pub gp_put_ns: u64,
    /// Launches the lane delivered (the rest came through requests).
    pub lane_launches: u64,
    /// Doorbells a wait rang again for a channel that stood still with GP
    /// entries Host had not fetched (0 in a healthy run).
    pub doorbells_rerung: u64,
    /// Sync points posted for callers that wait on their own threads.
    pub caller_syncs: u64,
    /// Chains recorded in video memory of their own (CUDA graphs).
    pub recorded_chains: u64,
    /// Replays of recorded chains, and the launches they ran.
    pub replays: u64,
    pub replayed_launches: u64,
}
