use crate::arena::{ArenaError, DescriptorArena};
use crate::chain::OpenChain;
use crate::command::{CommandRegion, CommandSpan};
use crate::encode::{
    qmd_bytes, Bank0Slot, DeviceFormat, KernelDesc, KernelTemplate, LaunchShape, CBANK0_ALIGN,
    QMD_ALIGN,
};
use crate::error::{QueueMarks, SubmitError};
use crate::events::{EventSlot, EventTable, Stamp};
use crate::lane::{
    EventId, KernelId, LaneConsumer, LaneItem, LaneLaunch, LaunchLane, ParamBlock, StreamId,
};
use crate::local::{LocalMemory, LocalSize};
use crate::pushbuf::PushBuffer;
use crate::queue::{Queue, QueueKind};
use crate::records::{LaunchRecord, Submission, SubmitConfig, SubmitStats, UploadReceipt};
use crossbeam_queue::ArrayQueue;
use macuda_core::{actor_protocol, ActorFault, Severity, Waker};
use macuda_gsp::{ChannelFault, ChannelSetup, Channels, Doorbell, GspHandle};
use macuda_hw::gpfifo::ENTRY_BYTES;
use macuda_hw::methods::{compute, host};
use macuda_hw::push::{GpEntry, SUBCHANNEL_COMPUTE, SUBCHANNEL_COPY, USERD_BYTES, USERD_GP_PUT};
use macuda_hw::qmd::Qmd;
use macuda_memory::{DeviceWindow, MemoryHandle};
use macuda_pci::Capabilities;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

/// Starting the actor; it builds the struct below, so it lives under it.
pub(crate) mod setup;

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
}

/// Which kernel's bank-0 template each launch of the current and the last
/// token left in the shadow. Descriptors restart at a standstill, so when a
/// token repeats the last one launch for launch, launch k's slot still holds
/// the template of the same kernel and only its changing words need writing.
#[derive(Default)]
struct TokenTemplates {
    last: Vec<(KernelId, u64)>,
    current: Vec<(KernelId, u64)>,
    /// The current token has matched the last one so far, without wrapping.
    aligned: bool,
    /// The current token wrapped the region: its late launches overwrote
    /// its early slots, so the next token cannot trust any of them.
    wrapped: bool,
}

impl TokenTemplates {
    /// Note a launch; whether its slot already holds the kernel's template.
    fn place(&mut self, kernel: KernelId, offset: u64) -> bool {
        let k = self.current.len();
        if self.current.last().is_some_and(|&(_, prev)| offset < prev) {
            // The region wrapped inside the token: later slots were
            // overwritten by this token's own launches.
            self.aligned = false;
            self.wrapped = true;
        }
        self.aligned &= self.last.get(k) == Some(&(kernel, offset));
        self.current.push((kernel, offset));
        self.aligned
    }

    /// A standstill: the next token starts the region again.
    fn standstill(&mut self) {
        std::mem::swap(&mut self.last, &mut self.current);
        self.current.clear();
        if std::mem::take(&mut self.wrapped) {
            self.last.clear();
        }
        self.aligned = true;
    }
}

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
    /// GPU address the copy engine reads the mirror at (0 on the null
    /// device, which never runs the copies).
    mirror_va: u64,
    commands: CommandRegion,
    compute: Queue,
    copy: Queue,
    /// Copy-queue value the next compute submission must wait for.
    compute_waits_for_copy: Option<u64>,
    /// The chain being built.
    chain: OpenChain,
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

impl SubmitActor {
    fn drain_lane(&mut self) -> bool {
        let mut did = false;
        let started = Instant::now();
        let flush_before = self.flush_ns;
        let wait_before = self.wait_ns;
        let mut launches = 0u64;
        while let Some(item) = self.lane.pop() {
            did = true;
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
                        &l.grid,
                        &l.block,
                        l.dynamic_shared_bytes,
                        l.params.as_slice(),
                    )
                }
                LaneItem::Copy {
                    src, dst, bytes, ..
                } => self.queue_copy(src, 0, dst, 0, bytes, 1, None),
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

    fn add_launch(
        &mut self,
        kernel: KernelId,
        grid: &[u32; 3],
        block: &[u32; 3],
        dynamic_shared_bytes: u32,
        params: &[u8],
    ) -> Result<(), SubmitError> {
        let t = self
            .kernels
            .get(kernel.0 as usize)
            .ok_or(SubmitError::NoSuchKernel(kernel))?;
        if grid.contains(&0) || block.contains(&0) {
            return Err(SubmitError::EmptyLaunch {
                grid: *grid,
                block: *block,
            });
        }
        if params.len() != t.desc.param_bytes as usize {
            return Err(SubmitError::ParamBlockSize {
                kernel: t.desc.name.clone(),
                expected: t.desc.param_bytes,
                given: params.len(),
            });
        }
        let shape = LaunchShape {
            grid: *grid,
            block: *block,
            dynamic_shared_bytes,
        };
        let cbank0_bytes = self.format.cbank0_bytes(&t.desc);
        let cbank0_offset = self.reserve(cbank0_bytes, CBANK0_ALIGN)?;
        let qmd_offset = self.reserve(self.format.qmd_bytes(), QMD_ALIGN)?;
        let t = &self.kernels[kernel.0 as usize];
        let mut qmd = self.chain.spare_or(self.format.qmd);
        let (format, address) = (&self.format, self.descriptor_base + cbank0_offset);
        let holds_template = self.tokens.place(kernel, cbank0_offset);
        self.arena
            .write_with(cbank0_offset, cbank0_bytes, |cbank0| {
                format.launch(
                    t,
                    &shape,
                    params,
                    &mut qmd,
                    Bank0Slot {
                        address,
                        bytes: cbank0,
                        holds_template,
                    },
                )
            })
            .map_err(SubmitError::Arena)?
            .map_err(SubmitError::Format)?;
        // The previous launch now knows where to hand over to.
        let address = self.descriptor_base + qmd_offset;
        if let Some(mut prev) = self.chain.push(qmd_offset, address, qmd) {
            self.format
                .link_qmd(&mut prev.qmd, address)
                .map_err(SubmitError::Format)?;
            self.write_qmd(prev.qmd_offset, &prev.qmd)?;
            self.chain.recycle(prev.qmd);
        }
        self.stats.launches += 1;
        self.stats.param_bytes += params.len() as u64;
        if self.chain.len() >= self.config.chain_depth {
            self.flush_chain()?;
        }
        Ok(())
    }

    fn reserve(&mut self, len: u64, align: u64) -> Result<u64, SubmitError> {
        match self.arena.reserve(len, align) {
            Ok(o) => Ok(o),
            Err(ArenaError::Busy { value, .. }) => {
                // The region wrapped onto work still in flight: wait for it.
                self.wait_compute(value)?;
                self.arena.retire(value);
                self.arena.reserve(len, align).map_err(SubmitError::Arena)
            }
            Err(e) => Err(SubmitError::Arena(e)),
        }
    }

    fn write_qmd(&mut self, offset: u64, qmd: &Qmd) -> Result<(), SubmitError> {
        let len = self.format.qmd_bytes();
        self.arena
            .write_with(offset, len, |out| {
                qmd_bytes(qmd, out);
                Ok::<(), SubmitError>(())
            })
            .map_err(SubmitError::Arena)?
    }

    /// Close the open chain: release the compute timeline at its tail only,
    /// deliver the descriptors, then launch its head behind that delivery.
    fn flush_chain(&mut self) -> Result<(), SubmitError> {
        let started = Instant::now();
        let wait_before = self.wait_ns;
        let r = self.flush_chain_timed();
        let spent = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.flush_ns += spent.saturating_sub(self.wait_ns - wait_before);
        r
    }

    fn flush_chain_timed(&mut self) -> Result<(), SubmitError> {
        let Some((mut tail, head)) = self.chain.close()? else {
            return Ok(());
        };
        self.compute.issued += 1;
        let value = self.compute.issued;
        self.format
            .release_qmd(&mut tail.qmd, self.compute.timeline.address, value)
            .map_err(SubmitError::Format)?;
        self.write_qmd(tail.qmd_offset, &tail.qmd)?;
        self.stats.chains += 1;
        self.stats.flushes += 1;

        // Deliver: shadow -> mirror (host), mirror -> video memory (copy
        // engine), then a copy-queue release the compute queue waits for.
        self.chain_flush = Some("delivering a chain's descriptors");
        let delivered = self.deliver(value);
        self.chain_flush = None;
        let copy_value = delivered?;
        self.compute_waits_for_copy = Some(copy_value);
        let mut pb = std::mem::take(&mut self.compute.pending);
        if let Some(v) = self.compute_waits_for_copy.take() {
            pb.host_semaphore(self.copy.timeline.address, v, true)
                .map_err(SubmitError::Format)?;
        }
        // Grids launched by separate SEND_PCAS run side by side: the head of
        // this chain waits for the last chain's tail release, or the two
        // overlap (on the H200, four chains of 32 dependent launches came
        // out wrong without this wait).
        if value > 1 {
            pb.host_semaphore(self.compute.timeline.address, value - 1, true)
                .map_err(SubmitError::Format)?;
        }
        if std::mem::take(&mut self.caches_stale) {
            pb.invalidate_shader_caches().map_err(SubmitError::Format)?;
        }
        pb.launch_qmd(head).map_err(SubmitError::Format)?;
        self.submit_compute(pb)
    }

    fn deliver(&mut self, retire_at: u64) -> Result<u64, SubmitError> {
        let plan = self.arena.flush(retire_at);
        self.stats.descriptor_bytes += plan.payload_bytes;
        self.stats.descriptor_patches += plan.patches.len() as u64;
        let mut pb = std::mem::take(&mut self.copy.pending);
        for p in &plan.patches {
            pb.copy(
                self.mirror_va + p.offset,
                0,
                self.descriptor_base + p.offset,
                0,
                p.len,
                1,
                None,
            )
            .map_err(SubmitError::Format)?;
        }
        self.copy.issued += 1;
        let v = self.copy.issued;
        pb.host_semaphore(self.copy.timeline.address, v, false)
            .map_err(SubmitError::Format)?;
        self.submit(QueueKind::Copy, pb)?;
        Ok(v)
    }

    /// The only way work reaches the compute queue.
    fn submit_compute(&mut self, pb: PushBuffer) -> Result<(), SubmitError> {
        compute_allowed(self.chain_flush)?;
        self.submit(QueueKind::Compute, pb)
    }

    fn submit(&mut self, kind: QueueKind, pb: PushBuffer) -> Result<(), SubmitError> {
        if pb.is_empty() {
            return Ok(());
        }
        let len = pb.bytes();
        let at = self.commands.place(len)?;
        while let Some((queue, value)) = self.commands.blocker(at, len) {
            // The region wrapped onto a push buffer not yet run: wait for it.
            let done = self.wait_timeline(queue, value)?;
            self.commands.retire(queue, done);
        }
        self.stats.command_bytes += len;
        // CAST: a push buffer is far below 2^21 dwords.
        let entry =
            GpEntry::subroutine(at, pb.words().len() as u32).map_err(SubmitError::Format)?;
        let patience = self.config.sync_timeout;
        // A full ring waits for the engine: that time is the GPU's.
        let waiting_since = (self.queue(kind).ring.free() == 0).then(Instant::now);
        let (q, gsp, fault) = self.queue_and_fault(kind);
        let (entry_address, put) = q.claim_entry(patience, |deep| latch_fault(gsp, fault, deep))?;
        let (userd, issued, name, token) = (q.userd, q.issued, q.name, q.token);
        if let Some(started) = waiting_since {
            self.note_wait(started);
        }
        self.commands.in_flight.push_back(CommandSpan {
            start: at,
            end: at + len,
            queue: kind,
            value: issued,
        });
        if self.can.video_memory {
            // The push buffer, then the entry naming it, then GP_PUT past
            // the entry: each in place before the next makes it reachable
            // (the doorbell fences before it rings).
            let bytes: Vec<u8> = pb.words().iter().flat_map(|w| w.to_le_bytes()).collect();
            self.write_device(at, bytes)?;
            self.write_device(entry_address, entry.encode().to_le_bytes().to_vec())?;
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            self.write_device(userd + USERD_GP_PUT, put.to_le_bytes().to_vec())?;
        }
        self.stats.gp_entries += 1;
        if self.recent.len() == KEEP_SUBMISSIONS {
            self.recent.pop_front();
        }
        self.recent.push_back(Submission {
            queue: name.to_string(),
            address: at,
            gp_entry: entry.encode(),
            gp_entry_address: entry_address,
            gp_put: put,
            userd_address: userd,
            words: pb.words().to_vec(),
        });
        if !self.can.submission {
            // Queuing goes on; the work is counted and handed to nothing.
            self.forget_queued(kind);
            self.declined_since_sync = true;
            return Ok(());
        }
        self.doorbell.ring(token).map_err(|e| {
            self.forget_queued(kind);
            SubmitError::from_gsp(e)
        })
    }

    /// Nothing reached the engine: forget what was queued for it; none of
    /// its descriptors are in flight, and every value issued so far will
    /// never be written.
    fn forget_queued(&mut self, kind: QueueKind) {
        self.stats.refused_submissions += 1;
        self.arena.retire(u64::MAX);
        self.dropped_through = self.compute.issued;
        self.copy_dropped_through = self.copy.issued;
        self.queue_mut(kind).forget_in_flight();
        self.commands.in_flight.clear();
    }

    #[allow(clippy::too_many_arguments)]
    fn queue_copy(
        &mut self,
        src: u64,
        src_pitch: u64,
        dst: u64,
        dst_pitch: u64,
        width: u64,
        height: u64,
        fill: Option<u32>,
    ) -> Result<(), SubmitError> {
        // Stream order: the copy follows the kernels queued before it.
        self.flush_chain_keep_going()?;
        if self.compute.issued > 0 {
            let v = self.compute.issued;
            self.copy
                .pending
                .host_semaphore(self.compute.timeline.address, v, true)
                .map_err(SubmitError::Format)?;
        }
        self.copy
            .pending
            .copy(src, src_pitch, dst, dst_pitch, width, height, fill)
            .map_err(SubmitError::Format)?;
        if fill.is_some() {
            self.stats.fills += 1;
        } else {
            self.stats.copies += 1;
        }
        // ... and the kernels queued after it wait for it.
        self.copy.issued += 1;
        let v = self.copy.issued;
        let mut pb = std::mem::take(&mut self.copy.pending);
        pb.host_semaphore(self.copy.timeline.address, v, false)
            .map_err(SubmitError::Format)?;
        self.compute_waits_for_copy = Some(v);
        self.submit(QueueKind::Copy, pb)
    }

    /// Flush the chain unless a fatal failure waits to be reported (what
    /// the device declines is remembered for the next sync point, so
    /// queuing goes on).
    fn flush_chain_keep_going(&mut self) -> Result<(), SubmitError> {
        if self.broken() {
            return Ok(());
        }
        self.flush_chain()
    }

    fn record_event(&mut self, event: EventId, timed: bool) -> Result<(), SubmitError> {
        self.flush_chain_keep_going()?;
        self.live_event(event)?;
        let stamp = if timed {
            Some(self.stamp(event)?)
        } else {
            None
        };
        let record = (self.compute.issued, self.copy.issued);
        self.events.record(event, record, stamp)?;
        self.stats.events += 1;
        Ok(())
    }

    fn live_event(&self, event: EventId) -> Result<&EventSlot, SubmitError> {
        self.events.live(event)
    }

    fn stamp_address(&self, event: EventId) -> u64 {
        self.compute.timeline.address + STAMPS_OFFSET + u64::from(event.0) * STAMP_BYTES
    }

    /// A compute-queue push buffer that waits for everything queued so far
    /// (kernels and copies), then releases a fresh timeline value into the
    /// event's slot with the engine's clock, then on the timeline.
    fn stamp(&mut self, event: EventId) -> Result<Stamp, SubmitError> {
        if event.0 >= TIMED_EVENTS {
            return Err(SubmitError::UntimedEvent {
                event,
                limit: TIMED_EVENTS,
            });
        }
        let host = Stamp::Host {
            ns: u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX),
        };
        // A device that runs nothing stamps nothing: the host's clock it is.
        if self.broken() || !self.can.submission {
            return Ok(host);
        }
        let mut pb = std::mem::take(&mut self.compute.pending);
        if let Some(v) = self.compute_waits_for_copy.take() {
            pb.host_semaphore(self.copy.timeline.address, v, true)
                .map_err(SubmitError::Format)?;
        }
        if self.compute.issued > 0 {
            pb.host_semaphore(self.compute.timeline.address, self.compute.issued, true)
                .map_err(SubmitError::Format)?;
        }
        self.compute.issued += 1;
        let value = self.compute.issued;
        pb.stamped_release(self.stamp_address(event), value)
            .map_err(SubmitError::Format)?;
        pb.host_semaphore(self.compute.timeline.address, value, false)
            .map_err(SubmitError::Format)?;
        self.submit_compute(pb)?;
        Ok(Stamp::Gpu { value })
    }

    /// Read `len` bytes the engines write (semaphores, stamps).
    fn read_engine_memory(&mut self, address: u64, len: u64) -> Result<Vec<u8>, SubmitError> {
        if let Some((w, off)) = self.window(address, len) {
            let mut out = vec![0u8; len as usize];
            w.view
                .read(off, &mut out)
                .map_err(|e| SubmitError::Memory(macuda_memory::MemoryError::View(e)))?;
            return Ok(out);
        }
        self.memory
            .read_device(address, len)
            .map_err(SubmitError::Memory)
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

    /// The value a queue's timeline semaphore holds: what the GPU wrote.
    fn completed(&self, q: QueueKind) -> Result<u64, SubmitError> {
        self.queue(q).timeline.completed()
    }

    /// The CPU view holding `[address, address + len)`, and its offset there.
    fn window(&self, address: u64, len: u64) -> Option<(&DeviceWindow, u64)> {
        self.windows
            .iter()
            .find_map(|w| w.offset_of(address, len).map(|o| (w, o)))
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

    fn wait_compute(&mut self, value: u64) -> Result<(), SubmitError> {
        // Work the device declined is not outstanding: nothing to wait for.
        if value <= self.dropped_through {
            return Ok(());
        }
        self.wait_timeline(QueueKind::Compute, value).map(|_| ())
    }

    /// Wait until a queue's timeline reaches `value`; returns what it read.
    /// While it waits it asks RM, now and then, whether the channels were
    /// removed: a faulted channel never releases, and the fault names why.
    fn wait_timeline(&mut self, kind: QueueKind, value: u64) -> Result<u64, SubmitError> {
        let started = Instant::now();
        let r = self.wait_timeline_untimed(kind, value);
        self.note_wait(started);
        r
    }

    fn note_wait(&mut self, started: Instant) {
        let spent = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.wait_ns += spent;
    }

    fn wait_timeline_untimed(&mut self, kind: QueueKind, value: u64) -> Result<u64, SubmitError> {
        let patience = self.config.sync_timeout;
        let (q, gsp, fault) = self.queue_and_fault(kind);
        let mut r = q.timeline.wait(q.name, value, patience, |deep| {
            latch_fault(gsp, fault, deep)
        });
        if let Err(SubmitError::Stuck { queues, .. }) = &mut r {
            *queues = self.queue_marks();
        }
        r
    }

    /// Both queues as they stand (a timeline that cannot be read shows 0).
    fn queue_marks(&self) -> QueueMarks {
        QueueMarks {
            compute_reached: self.compute.timeline.completed().unwrap_or(0),
            compute_issued: self.compute.issued,
            copy_reached: self.copy.timeline.completed().unwrap_or(0),
            copy_issued: self.copy.issued,
        }
    }

    /// One queue beside what a wait on it checks for faults with: split
    /// borrows of the actor.
    fn queue_and_fault(
        &mut self,
        kind: QueueKind,
    ) -> (&mut Queue, &GspHandle, &mut Option<Box<ChannelFault>>) {
        let SubmitActor {
            compute,
            copy,
            gsp,
            fault,
            ..
        } = self;
        let q = match kind {
            QueueKind::Compute => compute,
            QueueKind::Copy => copy,
        };
        (q, gsp, fault)
    }

    /// At a sync point: report lane work that failed since the last one,
    /// and start the next token over when nothing of this one is in flight.
    fn at_sync_point(&mut self) -> Result<(), SubmitError> {
        let failure = self.failure.take();
        if failure.is_some() || std::mem::take(&mut self.declined_since_sync) {
            self.arena.standstill();
            self.tokens.standstill();
            self.compute_waits_for_copy = None;
        }
        failure.map_or(Ok(()), Err)
    }
}

/// What RM reported against the channels, latched: once faulted, the
/// queues stay stopped until they are reopened.
fn latch_fault(
    gsp: &GspHandle,
    fault: &mut Option<Box<ChannelFault>>,
    deep: bool,
) -> Result<(), SubmitError> {
    if let Some(f) = fault {
        return Err(SubmitError::ChannelFault(f.clone()));
    }
    match gsp.channel_fault(deep) {
        Ok(Some(f)) => {
            tracing::error!(fault = %f, "RM reported a channel fault");
            let f = Box::new(f);
            *fault = Some(f.clone());
            Err(SubmitError::ChannelFault(f))
        }
        Ok(None) => Ok(()),
        Err(e) => Err(SubmitError::Gsp(e)),
    }
}

/// The runtime invariant: no compute submission while a chain's
/// descriptors are being delivered.
fn compute_allowed(chain_flush: Option<&'static str>) -> Result<(), SubmitError> {
    match chain_flush {
        Some(reason) => Err(SubmitError::ComputeInsideChainFlush { reason }),
        None => Ok(()),
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
        Ok(LaunchLane::new(
            Arc::clone(&self.lane),
            self.waker.clone(),
            &self.lane_consumer,
            // As long as a sync point waits before it calls the queue stuck.
            self.config.sync_timeout,
        ))
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
        // that may hold what was there before.
        self.write_device(dst, bytes)?;
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
        self.arena.standstill();
        self.tokens.standstill();
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

impl SubmitActor {
    /// What a fresh channel needs before its first work: the engine
    /// objects bound on their subchannels, and the compute channel's
    /// shared and local windows.
    fn prologue(&mut self) -> Result<(), SubmitError> {
        let (shared, local) = self.format.windows;
        self.compute
            .pending
            .bind_compute(self.channels.compute.class, shared, local)
            .map_err(SubmitError::Format)?;
        self.copy
            .pending
            .method(
                SUBCHANNEL_COPY,
                host::SET_OBJECT::BYTE_OFFSET,
                host::SET_OBJECT::NVCLASS.set(0, self.channels.copy.class),
            )
            .map_err(SubmitError::Format)?;
        if !self.local.buffers.is_empty() {
            // A reopened channel gets the local memory the old one had.
            let per_thread = std::mem::take(&mut self.local.per_thread);
            self.cover_local(per_thread)?;
        }
        self.caches_stale = true;
        Ok(())
    }

    /// Make the channel's shader local memory cover `per_thread` bytes a
    /// thread: a buffer for every TPC slot the engine has, then the
    /// methods naming it, ahead of the next launch.
    fn cover_local(&mut self, per_thread: u32) -> Result<(), SubmitError> {
        if per_thread <= self.local.per_thread {
            return Ok(());
        }
        let LocalSize {
            per_thread,
            per_tpc,
            total,
        } = LocalSize::for_threads(per_thread, self.channels.gr);
        let buffer = self
            .memory
            .alloc_device(total)
            .map_err(SubmitError::Memory)?;
        let pb = &mut self.compute.pending;
        let m = |pb: &mut PushBuffer, method: u32, value: u32| {
            pb.method(SUBCHANNEL_COMPUTE, method, value)
                .map_err(SubmitError::Format)
        };
        // CAST: the two halves of an address and of a size.
        m(
            pb,
            compute::SET_SHADER_LOCAL_MEMORY_A::BYTE_OFFSET,
            (buffer.va >> 32) as u32,
        )?;
        m(
            pb,
            compute::SET_SHADER_LOCAL_MEMORY_B::BYTE_OFFSET,
            buffer.va as u32,
        )?;
        m(
            pb,
            compute::SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A::BYTE_OFFSET,
            (per_tpc >> 32) as u32,
        )?;
        m(
            pb,
            compute::SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B::BYTE_OFFSET,
            per_tpc as u32,
        )?;
        tracing::debug!(per_thread, per_tpc, total, "shader local memory");
        self.local.per_thread = per_thread;
        self.local.buffers.push(buffer);
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_work_inside_a_chain_flush_is_refused_with_the_reason() {
        let err = compute_allowed(Some("delivering a chain's descriptors")).unwrap_err();
        assert!(matches!(err, SubmitError::ComputeInsideChainFlush { .. }));
        assert!(err.to_string().contains("delivering a chain's descriptors"));
        assert!(compute_allowed(None).is_ok());
    }

    #[test]
    fn the_command_region_wraps_only_onto_push_buffers_that_ran() {
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

    #[test]
    fn a_repeated_token_reuses_templates_until_it_diverges() {
        let (a, b) = (KernelId(0), KernelId(1));
        let mut t = TokenTemplates::default();
        t.standstill();
        assert!(!t.place(a, 0), "first token: nothing written before");
        assert!(!t.place(b, 512));
        t.standstill();
        assert!(t.place(a, 0));
        assert!(t.place(b, 512));
        t.standstill();
        assert!(t.place(a, 0));
        assert!(!t.place(a, 512), "another kernel held this slot");
        assert!(!t.place(b, 1024), "no trust after a divergence");
    }

    #[test]
    fn a_token_that_wrapped_leaves_nothing_to_reuse() {
        let (a, b) = (KernelId(0), KernelId(1));
        let mut t = TokenTemplates::default();
        t.standstill();
        t.place(a, 0);
        t.place(b, 512);
        // Wraps: b's launch overwrote slot 0 after a's launch wrote it.
        t.place(b, 0);
        t.standstill();
        assert!(!t.place(a, 0), "slot 0 last held b's template");
    }
}
