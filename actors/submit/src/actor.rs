use crate::arena::{ArenaError, DescriptorArena};
use crate::chain::{ChainDepth, OpenChain};
use crate::command::CommandRegion;
use crate::encode::{qmd_bytes, DeviceFormat, KernelDesc, KernelTemplate};
use crate::error::SubmitError;
use crate::events::{EventTable, Stamp};
use crate::lane::{
    EventId, KernelId, LaneConsumer, LaneItem, LaneLaunch, LaunchLane, ParamBlock, RecordedChainId,
    StreamId,
};
use crate::link::LinkFields;
use crate::local::LocalMemory;
use crate::profile::{Profile, ProfileReport};
use crate::queue::{Queue, QueueKind};
use crate::records::{LaunchRecord, Submission, SubmitConfig, SubmitStats, UploadReceipt};
use crate::sync_board::{Posted, SyncBoard, SyncWatch};
use crate::templates::TokenTemplates;
use crossbeam_queue::ArrayQueue;
use macuda_core::{
    actor_protocol, fault_at, ActorError, ActorFault, FaultAction, FaultSwitch, IncidentReporter,
    Severity, Waker,
};
use macuda_gsp::{ChannelFault, ChannelSetup, Channels, Doorbell, GspHandle};
use macuda_hw::gpfifo::ENTRY_BYTES;
use macuda_hw::push::USERD_BYTES;
use macuda_hw::qmd::Qmd;
use macuda_memory::{DeviceWindow, MemoryHandle};
use macuda_pci::Capabilities;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

// The actor's jobs, each an `impl SubmitActor` of its own under this file,
// which keeps the state and the dispatch of requests and the lane.
mod binding;
mod build;
mod handover;
mod profiling;
mod recorded;
/// Starting the actor; it builds the struct below, so it lives under it.
pub(crate) mod setup;
mod stamps;
mod waits;

/// How many submissions are kept.
const KEEP_SUBMISSIONS: usize = 64;

actor_protocol! {
    /// The submit actor's handle.
    pub handle SubmitHandle;
    request SubmitRequest;
    service SubmitService;
    error SubmitError;
    CreateStream => fn create_stream() -> StreamId;
    DestroyStream => fn destroy_stream(stream: StreamId) -> ();
    /// Register a kernel once; launches name it by id.
    RegisterKernel => fn register_kernel(kernel: KernelDesc) -> KernelId;
    /// The data-plane lane: push launches, copies and events without waiting.
    Lane => fn lane() -> LaunchLane;
    /// Build launches into a chain of their own in video memory, to be
    /// replayed whole through the lane (`LaneItem::Replay`).
    RecordChain => fn record_chain(launches: Vec<LaneLaunch>) -> RecordedChainId;
    /// Queue a launch; returns how many launches are queued on the stream.
    Launch => fn launch(stream: StreamId, launch: LaunchRecord) -> u64;
    /// Queue a host-to-device copy on the copy queue.
    Upload => fn upload(dst: u64, bytes: Vec<u8>) -> UploadReceipt;
    CreateEvent => fn create_event() -> EventId;
    /// Forget an event; its id may be handed out again.
    DestroyEvent => fn destroy_event(event: EventId) -> ();
    /// Whether the work before the event's record has completed.
    QueryEvent => fn query_event(event: EventId) -> bool;
    /// Wait for the work before the event's record.
    SyncEvent => fn sync_event(event: EventId) -> ();
    /// When a timed record of the event completed, in nanoseconds of the
    /// engine's clock (the host's where the device executes nothing);
    /// `None` while it has not.
    EventTime => fn event_time(event: EventId) -> Option<u64>;
    /// Hand everything queued to the GPU without waiting for it.
    Flush => fn flush() -> u64;
    /// Hand everything queued on `stream` to the GPU and wait for it;
    /// returns the timeline value reached.
    Synchronize => fn synchronize(stream: StreamId) -> u64;
    Stats => fn stats() -> SubmitStats;
    /// The last push buffers handed to the queues, oldest first.
    Submissions => fn submissions() -> Vec<Submission>;
    /// Bytes of the descriptor region as delivered (the mirror), by GPU address.
    Descriptors => fn descriptors(address: u64, len: u64) -> Vec<u8>;
    /// The channel fault that stopped the queues, if one did.
    Fault => fn fault() -> Option<ChannelFault>;
    /// After a channel fault: free the channels, build fresh ones on
    /// cleared rings, and go on from the timelines' current values (the
    /// work the fault cut short is not run again).
    ReopenChannels => fn reopen_channels() -> Channels;
    /// The channels the queues run on.
    ChannelInfo => fn channels() -> Channels;
    /// The per-kernel GPU timeline so far (empty unless the config asked
    /// for one), with every report the queues have passed read.
    Profile => fn profile() -> ProfileReport;
}

/// The most an upload puts in one push buffer when it travels inline.
const UPLOAD_PART_BYTES: usize = 16 << 10;

struct SubmitActor {
    /// Channels, the doorbell, and fault reports.
    gsp: GspHandle,
    doorbell: Doorbell,
    channels: Channels,
    /// The rings the channels were made over, to make them again.
    setup: ChannelSetup,
    /// Reads the timeline semaphores and writes the command streams, which
    /// live in device memory.
    memory: MemoryHandle,
    /// CPU views of the regions this actor writes and reads itself
    /// (commands, rings, USERD, semaphores), where the backend gives them:
    /// stores then go straight to memory, not through the memory actor.
    windows: Vec<DeviceWindow>,
    /// The channel's shader local memory: how much per thread it covers,
    /// and the buffers behind it (kept: launches in flight may use them).
    local: LocalMemory,
    /// A fault RM reported: the queues are stopped until the channels are
    /// reopened, and every sync point reports it.
    fault: Option<Box<ChannelFault>>,
    /// Code or constants were written by the CPU since the last launch:
    /// the next chain head invalidates the shader caches first.
    caches_stale: bool,
    /// What the card takes, from the device description: without memory
    /// access nothing is written to or read from it; without submission
    /// nothing is handed over, and sync points say so.
    can: Capabilities,
    format: DeviceFormat,
    /// How each QMD is linked to the next of its chain, from `format`.
    link: LinkFields,
    config: SubmitConfig,
    kernels: Vec<KernelTemplate>,
    /// Streams are orderings over the shared queues: every stream's work
    /// runs on one compute channel in submission order, which keeps each
    /// stream's order and makes cross-stream event waits hold by position.
    streams: BTreeSet<StreamId>,
    next_stream: u32,
    lane: Arc<ArrayQueue<LaneItem>>,
    /// Alive while this actor is: its lanes refuse pushes once it drops.
    lane_consumer: LaneConsumer,
    waker: Waker,
    arena: DescriptorArena,
    descriptor_base: u64,
    /// How a flushed chain's descriptors reach video memory.
    delivery: Delivery,
    commands: CommandRegion,
    compute: Queue,
    copy: Queue,
    /// Copy-queue value the next compute submission must wait for.
    compute_waits_for_copy: Option<u64>,
    /// The chain being built, and how long it may grow.
    chain: OpenChain,
    depth: ChainDepth,
    /// Set while a chain's descriptors are being delivered: any compute
    /// submission then would let the engine read descriptors that have not
    /// arrived (the bug the seed notes tell of, where the timeline went
    /// backwards by a chain's length).
    chain_flush: Option<&'static str>,
    /// Every event by id: its last record, and where its time is.
    events: EventTable,
    /// The clock host stamps count from (where the device executes
    /// nothing and cannot stamp).
    started: Instant,
    /// The first lane work that failed since the last sync point, reported
    /// there (the lane has no caller to tell).
    failure: Option<SubmitError>,
    /// A submission was built and counted but handed to nothing since the
    /// last sync point (a device whose capabilities take no submission): the
    /// sync point restarts the token, as nothing of it is in flight. Not an
    /// error: the device description says so up front.
    declined_since_sync: bool,
    /// Compute values up to here belong to declined submissions.
    dropped_through: u64,
    /// Copy values up to here likewise.
    copy_dropped_through: u64,
    /// Time spent in flushes, kept apart from descriptor building (waits
    /// inside a flush count as waits).
    flush_ns: u64,
    /// Time spent waiting for the GPU.
    wait_ns: u64,
    recent: std::collections::VecDeque<Submission>,
    tokens: TokenTemplates,
    stats: SubmitStats,
    /// The per-kernel GPU timeline, when the config asks for one.
    profile: Option<Profile>,
    /// Chains recorded once and replayed whole.
    recorded: recorded::RecordedChains,
    /// Where callers that wait on their own threads get the timeline
    /// values of their sync points.
    sync_board: Arc<SyncBoard>,
    /// The fault plan the harness checks requests against, for the sync
    /// points the lane brings (requests by another way).
    faults: FaultSwitch,
    /// This actor's name, as the supervisor gave it.
    actor_name: &'static str,
    /// Tells the supervisor of a channel fault or a lost doorbell as it is
    /// found, so its contained recovery runs (report, fresh channels).
    incidents: IncidentReporter,
    /// A sync point posted for a caller's own wait: once the caller has
    /// seen it done, and nothing was issued since, the next token starts
    /// over as after a mailbox sync.
    posted_sync: Option<PostedSync>,
}

/// The name a lane's sync point has in fault plans and crash reports (it
/// travels the lane, not the mailbox, so it is no protocol request).
pub const SYNC_POINT: &str = "sync_point";

/// The sync point last posted, and what had been issued then.
#[derive(Debug, Clone, Copy)]
struct PostedSync {
    ticket: u64,
    compute: u64,
    copy: u64,
}

/// Semaphore memory: two 64-bit timelines, 16 bytes apart, then one stamp
/// slot per event id that can be timed.
const STAMPS_OFFSET: u64 = 4096;
/// What a release with timestamp writes: the payload, then the clock.
const STAMP_BYTES: u64 = 16;
const STAMP_CLOCK_OFFSET: u64 = 8;
/// Event ids below this can take timed records.
pub const TIMED_EVENTS: u32 = 4096;
const SEMAPHORE_BYTES: u64 = STAMPS_OFFSET + TIMED_EVENTS as u64 * STAMP_BYTES;
const COPY_SEMAPHORE_OFFSET: u64 = 16;

/// How a flushed chain's descriptors reach the video memory the engine
/// reads them from.
pub(crate) enum Delivery {
    /// Stored by the CPU through a mapping of the descriptor region (the
    /// kernel module maps video memory at memory speed), before the chain
    /// is handed over, as command buffers are: the chain waits for nothing.
    /// On the H200 the copy-engine way left the compute queue idle about a
    /// millisecond a token, its chain heads waiting on the copy queue.
    Mapped(DeviceWindow),
    /// Copied by the copy engine from the mirror in pinned host memory at
    /// `mirror_va` (where the CPU reaches video memory only through a
    /// transport, store by store: the seed's Thunderbolt link); the chain's
    /// head waits for that copy on the copy queue. `mirror_va` is 0 on a
    /// device without DMA, which never runs the copies. With `unviewed`,
    /// this process has no view of that host memory (TinyGPU over TCP):
    /// the mirror is ordinary memory, and each patch is written to the
    /// host memory through the memory actor before its copy is queued.
    CopyEngine { mirror_va: u64, unviewed: bool },
}

impl SubmitActor {
    fn drain_lane(&mut self) -> bool {
        // The actor polls an empty lane between requests: that costs no
        // clock read.
        if self.lane.is_empty() {
            return false;
        }
        let mut did = false;
        let started = Instant::now();
        let flush_before = self.flush_ns;
        let wait_before = self.wait_ns;
        let mut launches = 0u64;
        while let Some(item) = self.lane.pop() {
            did = true;
            self.standstill_if_seen();
            if let LaneItem::SyncPoint { ticket } = item {
                self.post_sync_point(ticket);
                continue;
            }
            if self.broken() {
                // The command streams are in an unknown state: what follows
                // is dropped, and the next sync point reports the failure.
                continue;
            }
            let r = match item {
                LaneItem::Launch(l) => {
                    self.stats.lane_launches += 1;
                    launches += 1;
                    self.add_launch(
                        l.kernel,
                        Some(l.stream),
                        &l.grid,
                        &l.block,
                        l.dynamic_shared_bytes,
                        l.params.as_slice(),
                    )
                }
                LaneItem::Copy {
                    src, dst, bytes, ..
                } => self.queue_copy(src, 0, dst, 0, bytes, 1, None),
                LaneItem::Upload { dst, data, .. } => self.queue_inline_upload(dst, &data),
                LaneItem::Copy2d {
                    src,
                    src_pitch,
                    dst,
                    dst_pitch,
                    width,
                    height,
                    ..
                } => self.queue_copy(src, src_pitch, dst, dst_pitch, width, height, None),
                LaneItem::Fill {
                    dst, bytes, value, ..
                } => self.queue_copy(0, 0, dst, 0, bytes, 1, Some(value)),
                LaneItem::RecordEvent { event, timed, .. } => self.record_event(event, timed),
                // One compute channel runs every stream in order, so a wait on
                // a compute event is already satisfied by position.
                LaneItem::WaitEvent { .. } => Ok(()),
                LaneItem::SyncPoint { .. } => Ok(()),
                LaneItem::Replay { chain, .. } => self.replay(chain),
                LaneItem::ForgetChain { chain } => self.forget_recorded(chain),
            };
            if let Err(e) = r {
                self.note_failure(e);
            }
        }
        if launches > 0 {
            // Descriptor building only: the flushes the batch caused are
            // timed separately (one clock read per batch, not per launch).
            let spent = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            let other = (self.flush_ns - flush_before) + (self.wait_ns - wait_before);
            self.stats.build_ns += spent.saturating_sub(other);
        }
        did
    }

    /// A caller waits out a sync point itself: flush what came before and
    /// post the timeline values that cover it, or, in anything but the
    /// plain case, tell it to ask (the mailbox sync reports and recovers).
    fn post_sync_point(&mut self, ticket: u64) {
        self.stats.caller_syncs += 1;
        // A sync point is a request the caller sent through the lane: an
        // installed fault plan counts it (MACUDA_INJECT=submit:...).
        if let Some((action, nth)) = fault_at(&self.faults, SYNC_POINT) {
            match action {
                FaultAction::Panic => panic!("injected panic at request #{nth} (`{SYNC_POINT}`)"),
                FaultAction::Error => self.note_failure(SubmitError::Actor(ActorError::Injected {
                    actor: self.actor_name,
                    op: SYNC_POINT,
                    nth,
                })),
                // Never answered: the caller's wait runs out and its
                // mailbox sync misses the deadline.
                FaultAction::Hang => loop {
                    std::thread::park();
                },
            }
        }
        let plain = !self.broken() && !self.declined_since_sync && self.profile.is_none();
        let flushed = plain
            && match self.flush_chain_keep_going() {
                Ok(()) => true,
                Err(e) => {
                    self.note_failure(e);
                    false
                }
            };
        let answer = if flushed && self.failure.is_none() {
            let (compute, copy) = (self.compute.issued, self.copy.issued);
            self.posted_sync = Some(PostedSync {
                ticket,
                compute,
                copy,
            });
            Posted::Wait {
                // Work the device declined is not outstanding.
                compute: if compute > self.dropped_through {
                    compute
                } else {
                    0
                },
                copy: if copy > self.copy_dropped_through {
                    copy
                } else {
                    0
                },
            }
        } else {
            Posted::AskActor
        };
        self.sync_board.post(ticket, answer);
    }

    /// After a caller saw its sync point done: the host waited for
    /// everything, so the next token lines up again, as after a mailbox
    /// sync. Not when anything was issued since (it may be in flight).
    fn standstill_if_seen(&mut self) {
        let Some(p) = self.posted_sync else {
            return;
        };
        let issued_since = (self.compute.issued, self.copy.issued) != (p.compute, p.copy);
        if issued_since {
            self.posted_sync = None;
        } else if self.sync_board.observed() >= p.ticket {
            self.posted_sync = None;
            self.standstill();
        }
    }

    /// The host waited for everything: the next token starts over.
    fn standstill(&mut self) {
        self.arena.standstill();
        self.tokens.standstill();
        self.depth.standstill();
    }

    /// Lane work has no caller to return errors to: a failure is logged and
    /// waits for the next sync point. While a fatal one waits to be
    /// reported, no more work may be queued.
    fn broken(&self) -> bool {
        self.fault.is_some()
            || self
                .failure
                .as_ref()
                .is_some_and(|e| e.severity() == Severity::Fatal)
    }

    fn note_failure(&mut self, e: SubmitError) {
        tracing::error!(error = %e, "lane work failed");
        // The first failure is the one the next sync point reports.
        if self.failure.is_none() {
            self.failure = Some(e);
        }
    }

    fn queue(&self, kind: QueueKind) -> &Queue {
        match kind {
            QueueKind::Compute => &self.compute,
            QueueKind::Copy => &self.copy,
        }
    }

    fn queue_mut(&mut self, kind: QueueKind) -> &mut Queue {
        match kind {
            QueueKind::Compute => &mut self.compute,
            QueueKind::Copy => &mut self.copy,
        }
    }

    /// The CPU view holding `[address, address + len)`, and its offset there.
    fn window(&self, address: u64, len: u64) -> Option<(&DeviceWindow, u64)> {
        self.windows
            .iter()
            .find_map(|w| w.offset_of(address, len).map(|o| (w, o)))
    }
    #[inline]
    fn write_qmd(&mut self, offset: u64, qmd: &Qmd) -> Result<(), SubmitError> {
        let len = self.format.qmd_bytes();
        self.arena
            .write_with(offset, len, |out| {
                qmd_bytes(qmd, out);
                Ok::<(), SubmitError>(())
            })
            .map_err(SubmitError::Arena)?
    }

    fn write_device(&self, address: u64, bytes: Vec<u8>) -> Result<(), SubmitError> {
        if let Some((w, off)) = self.window(address, bytes.len() as u64) {
            return w
                .view
                .write(off, &bytes)
                .map_err(|e| SubmitError::Memory(macuda_memory::MemoryError::View(e)));
        }
        self.memory
            .write_device(address, bytes)
            .map_err(SubmitError::Memory)
    }
}

impl SubmitService for SubmitActor {
    fn create_stream(&mut self) -> Result<StreamId, SubmitError> {
        self.next_stream += 1;
        let id = StreamId(self.next_stream);
        self.streams.insert(id);
        self.stats.streams += 1;
        Ok(id)
    }

    fn destroy_stream(&mut self, stream: StreamId) -> Result<(), SubmitError> {
        // Streams share the queues in order; a destroyed stream's work still
        // completes in place.
        if !self.streams.remove(&stream) {
            return Err(SubmitError::NoSuchStream(stream));
        }
        Ok(())
    }

    fn register_kernel(&mut self, kernel: KernelDesc) -> Result<KernelId, SubmitError> {
        let id =
            KernelId(
                u32::try_from(self.kernels.len()).map_err(|_| SubmitError::Invariant {
                    reason: "too many kernels",
                })?,
            );
        let local = self.format.local_bytes_per_thread(&kernel);
        let template = self.format.template(kernel).map_err(SubmitError::Format)?;
        // A kernel with a stack needs the channel's local memory to cover
        // it, or SKED removes the channel (Xid 13) at its first launch.
        self.cover_local(local)?;
        self.kernels.push(template);
        self.stats.kernels += 1;
        Ok(id)
    }

    fn lane(&mut self) -> Result<LaunchLane, SubmitError> {
        // The profiler records each sync in the actor: those go through it.
        let caller_waits = self.config.caller_waits && self.profile.is_none();
        let watch = match (self.compute.timeline.mapped(), self.copy.timeline.mapped()) {
            (Some(compute), Some(copy)) if caller_waits => {
                Some(SyncWatch::new(Arc::clone(&self.sync_board), compute, copy))
            }
            _ => None,
        };
        Ok(LaunchLane::new(
            Arc::clone(&self.lane),
            self.waker.clone(),
            &self.lane_consumer,
            // As long as a sync point waits before it calls the queue stuck.
            self.config.sync_timeout,
            watch,
        ))
    }

    fn record_chain(&mut self, launches: Vec<LaneLaunch>) -> Result<RecordedChainId, SubmitError> {
        self.record(&launches)
    }

    fn launch(&mut self, stream: StreamId, launch: LaunchRecord) -> Result<u64, SubmitError> {
        if !self.streams.contains(&stream) {
            return Err(SubmitError::NoSuchStream(stream));
        }
        // Keep order with what the lane already holds.
        self.drain_lane();
        let started = Instant::now();
        let flush_before = self.flush_ns;
        let wait_before = self.wait_ns;
        let r = self.add_launch(
            launch.kernel,
            Some(stream),
            &launch.grid,
            &launch.block,
            launch.dynamic_shared_bytes,
            &launch.params,
        );
        let spent = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let other = (self.flush_ns - flush_before) + (self.wait_ns - wait_before);
        self.stats.build_ns += spent.saturating_sub(other);
        r?;
        Ok(self.chain.len() as u64)
    }

    fn upload(&mut self, dst: u64, bytes: Vec<u8>) -> Result<UploadReceipt, SubmitError> {
        let n = bytes.len() as u64;
        if !self.can.video_memory {
            return Ok(UploadReceipt {
                dst,
                bytes: n,
                queued_at: self.stats.uploads,
                resident: false,
            });
        }
        // Code and constants land before any launch that can reach them
        // (the loader uploads a module before it hands out its kernels),
        // written by the CPU; the next chain head invalidates the caches
        // that may hold what was there before. Memory the CPU does not
        // reach (above a small BAR1) takes them from the push buffer, on
        // the compute queue ahead of every launch that follows.
        match self.write_device(dst, bytes.clone()) {
            Err(SubmitError::Memory(macuda_memory::MemoryError::NotCpuVisible { .. })) => {
                let mut at = dst;
                for part in bytes.chunks(UPLOAD_PART_BYTES) {
                    self.queue_inline_upload(at, part)?;
                    at += part.len() as u64;
                }
                self.stats.uploads += 1;
                self.stats.upload_bytes += n;
                return Ok(UploadReceipt {
                    dst,
                    bytes: n,
                    queued_at: self.stats.uploads,
                    resident: true,
                });
            }
            r => r?,
        }
        self.caches_stale = true;
        self.stats.uploads += 1;
        self.stats.upload_bytes += n;
        Ok(UploadReceipt {
            dst,
            bytes: n,
            queued_at: self.stats.uploads,
            resident: true,
        })
    }

    fn create_event(&mut self) -> Result<EventId, SubmitError> {
        self.events.create()
    }

    fn destroy_event(&mut self, event: EventId) -> Result<(), SubmitError> {
        self.drain_lane();
        self.events.destroy(event)
    }

    fn query_event(&mut self, event: EventId) -> Result<bool, SubmitError> {
        self.drain_lane();
        self.at_sync_point()?;
        let (compute, copy) = self.live_event(event)?.record.unwrap_or((0, 0));
        let compute_done =
            compute <= self.dropped_through || self.completed(QueueKind::Compute)? >= compute;
        let copy_done =
            copy <= self.copy_dropped_through || self.completed(QueueKind::Copy)? >= copy;
        Ok(compute_done && copy_done)
    }

    fn sync_event(&mut self, event: EventId) -> Result<(), SubmitError> {
        let began = self.profile_now();
        self.drain_lane();
        self.flush_chain_keep_going()?;
        self.at_sync_point()?;
        let (compute, copy) = self.live_event(event)?.record.unwrap_or((0, 0));
        if compute > 0 {
            self.wait_compute(compute)?;
        }
        if copy > self.copy_dropped_through {
            self.wait_timeline(QueueKind::Copy, copy)?;
        }
        if let Some(began) = began {
            self.profile_sync(None, began)?;
        }
        Ok(())
    }

    fn event_time(&mut self, event: EventId) -> Result<Option<u64>, SubmitError> {
        self.drain_lane();
        match self.live_event(event)?.stamp {
            None => Err(SubmitError::UntimedEvent {
                event,
                limit: TIMED_EVENTS,
            }),
            Some(Stamp::Host { ns }) => Ok(Some(ns)),
            Some(Stamp::Gpu { value }) => {
                let slot = self.read_engine_memory(self.stamp_address(event), STAMP_BYTES)?;
                let word = |at: usize| {
                    let b: [u8; 8] = slot[at..at + 8].try_into().unwrap_or([0; 8]);
                    u64::from_le_bytes(b)
                };
                Ok((word(0) == value).then(|| word(STAMP_CLOCK_OFFSET as usize)))
            }
        }
    }

    fn flush(&mut self) -> Result<u64, SubmitError> {
        self.drain_lane();
        self.flush_chain_keep_going()?;
        self.at_sync_point()?;
        Ok(self.compute.issued)
    }

    fn synchronize(&mut self, stream: StreamId) -> Result<u64, SubmitError> {
        if !self.streams.contains(&stream) {
            return Err(SubmitError::NoSuchStream(stream));
        }
        let began = self.profile_now();
        self.drain_lane();
        self.flush_chain_keep_going()?;
        self.at_sync_point()?;
        let value = self.compute.issued;
        if value > 0 {
            self.wait_compute(value)?;
        }
        // Copies queued after the last kernel (a read-back) finish on the
        // copy timeline.
        let copies = self.copy.issued;
        if copies > self.copy_dropped_through {
            self.wait_timeline(QueueKind::Copy, copies)?;
        }
        // The host waited for everything: the next token lines up again.
        self.posted_sync = None;
        self.standstill();
        if let Some(began) = began {
            self.profile_sync(Some(stream), began)?;
        }
        Ok(value)
    }

    fn stats(&mut self) -> Result<SubmitStats, SubmitError> {
        self.drain_lane();
        self.stats.flush_ns = self.flush_ns;
        self.stats.wait_ns = self.wait_ns;
        Ok(self.stats)
    }

    fn submissions(&mut self) -> Result<Vec<Submission>, SubmitError> {
        Ok(self.recent.iter().cloned().collect())
    }

    fn fault(&mut self) -> Result<Option<ChannelFault>, SubmitError> {
        Ok(self.fault.as_deref().cloned())
    }

    fn channels(&mut self) -> Result<Channels, SubmitError> {
        Ok(self.channels)
    }

    fn profile(&mut self) -> Result<ProfileReport, SubmitError> {
        self.profile_report()
    }

    fn reopen_channels(&mut self) -> Result<Channels, SubmitError> {
        // Whatever the lane holds was meant for the dead channels.
        while self.lane.pop().is_some() {}
        self.gsp.destroy_channels().map_err(SubmitError::Gsp)?;
        // Every value handed out so far is done: what the fault cut short
        // will not run. The timelines go on from there.
        let (compute_done, copy_done) = (self.compute.issued, self.copy.issued);
        let sem = self.compute.timeline.address;
        // The compute timeline's high word stays 0 (one-word releases).
        self.write_device(sem, compute_done.to_le_bytes().to_vec())?;
        self.write_device(self.copy.timeline.address, copy_done.to_le_bytes().to_vec())?;
        for q in [&self.compute, &self.copy] {
            self.write_device(q.userd, vec![0; USERD_BYTES as usize])?;
            self.write_device(
                q.ring_address,
                vec![0; (u64::from(q.ring.entries()) * ENTRY_BYTES) as usize],
            )?;
        }
        for q in [&mut self.compute, &mut self.copy] {
            q.restart()?;
        }
        self.commands.in_flight.clear();
        self.commands.cursor = 0;
        self.arena.forget_delivered();
        self.tokens = TokenTemplates::default();
        self.chain.abandon();
        self.compute_waits_for_copy = None;
        self.failure = None;
        self.declined_since_sync = false;
        self.dropped_through = compute_done;
        self.copy_dropped_through = copy_done;
        let channels = self
            .gsp
            .create_channels(self.setup)
            .map_err(SubmitError::Gsp)?;
        self.compute.token = channels.compute.token;
        self.copy.token = channels.copy.token;
        self.channels = channels;
        self.fault = None;
        self.prologue()?;
        Ok(channels)
    }

    fn descriptors(&mut self, address: u64, len: u64) -> Result<Vec<u8>, SubmitError> {
        let offset = address.checked_sub(self.descriptor_base);
        let mirror = self.arena.mirror();
        match offset {
            Some(o)
                if o.checked_add(len)
                    .is_some_and(|end| end <= mirror.len() as u64) =>
            {
                Ok(mirror[o as usize..(o + len) as usize].to_vec())
            }
            _ => Err(SubmitError::Arena(ArenaError::OutOfRange {
                offset: address,
                len,
            })),
        }
    }
}

/// Make a lane launch record.
pub fn lane_launch(stream: StreamId, launch: &LaunchRecord) -> LaneLaunch {
    LaneLaunch {
        stream,
        kernel: launch.kernel,
        grid: launch.grid,
        block: launch.block,
        dynamic_shared_bytes: launch.dynamic_shared_bytes,
        params: ParamBlock::new(&launch.params),
    }
}
