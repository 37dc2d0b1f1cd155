//! Starting the submit actor: the regions it keeps for its life, the CPU
//! windows it streams into, the descriptor mirror, the channels' rings,
//! and the spawn that puts them together and clears what the GPU reads.

use super::{
    Delivery, SubmitActor, SubmitHandle, SubmitRequest, COPY_SEMAPHORE_OFFSET, SEMAPHORE_BYTES,
};
use crate::arena::{DescriptorArena, MirrorStore};
use crate::chain::{ChainDepth, OpenChain};
use crate::command::{CommandRegion, COMMAND_BYTES};
use crate::encode::DeviceFormat;
use crate::error::SubmitError;
use crate::events::EventTable;
use crate::lane::LaneConsumer;
use crate::local::LocalMemory;
use crate::profile::{Profile, SLOT_BYTES as PROFILE_SLOT_BYTES};
use crate::pushbuf::PushBuffer;
use crate::queue::Queue;
use crate::records::{SubmitConfig, SubmitStats};
use crate::ring::GpFifoRing;
use crate::sync_board::SyncBoard;
use crate::templates::TokenTemplates;
use crate::timeline::Timeline;
use crossbeam_queue::ArrayQueue;
use macuda_core::{spawn_with_background, wake_pair, ActorConfig, ActorJoin, Cx};
use macuda_gsp::{
    ChannelSetup, CopyPlacement, CpuView, Doorbell, GspHandle, ObjectHandle, RingSpec,
};
use macuda_hw::gpfifo::ENTRY_BYTES;
use macuda_hw::push::USERD_BYTES;
use macuda_memory::{DeviceBuffer, DeviceWindow, MemoryHandle};
use macuda_pci::Capabilities;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

/// The mirror in pinned host memory the copy engine reads: the process's
/// view of it, taken whole as the arena's buffer.
struct PinnedMirror {
    view: CpuView,
}

impl MirrorStore for PinnedMirror {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the view maps `len` bytes of ordinary pinned host memory
        // that only this actor writes (the GPU only reads it), for as long
        // as `self` holds the view.
        // CAST: a CPU mapping's length is a usize.
        unsafe { std::slice::from_raw_parts(self.view.as_ptr(), self.view.len() as usize) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only slice.
        unsafe { std::slice::from_raw_parts_mut(self.view.as_ptr(), self.view.len() as usize) }
    }
}

/// The regions the actor allocates at start.
struct Regions {
    descriptors: DeviceBuffer,
    commands: DeviceBuffer,
    semaphores: DeviceBuffer,
    rings: DeviceBuffer,
    userd: DeviceBuffer,
}

impl Regions {
    /// The regions this actor keeps for its whole life, from memory.
    fn allocate(memory: &MemoryHandle, submit: &SubmitConfig) -> Result<Regions, SubmitError> {
        let ring_bytes = u64::from(submit.gpfifo_entries) * ENTRY_BYTES;
        // What this actor writes itself must be where the CPU reaches it
        // (inside BAR1 on a small-BAR card); the descriptors travel by
        // copy engine where it does not map them.
        let visible = |bytes| memory.alloc_visible(bytes).map_err(SubmitError::Memory);
        Ok(Regions {
            descriptors: memory
                .alloc_device(submit.descriptor_bytes)
                .map_err(SubmitError::Memory)?,
            commands: visible(COMMAND_BYTES)?,
            semaphores: visible(SEMAPHORE_BYTES)?,
            rings: visible(2 * ring_bytes)?,
            // Our model of each channel's USERD; RM's channel object reads
            // GP_PUT from it.
            userd: visible(2 * USERD_BYTES)?,
        })
    }
}

/// The regions this actor writes itself, where the CPU can reach them
/// directly (the descriptor region's is [`Delivery`]'s).
fn cpu_windows(memory: &MemoryHandle, r: &Regions) -> Result<Vec<DeviceWindow>, SubmitError> {
    let mut windows = Vec::new();
    for b in [&r.commands, &r.semaphores, &r.rings, &r.userd] {
        if let Some(w) = memory.cpu_window(b.va).map_err(SubmitError::Memory)? {
            windows.push(w);
        }
    }
    Ok(windows)
}

/// How descriptors reach video memory, and the mirror they go through.
/// Where the CPU maps the descriptor region, it stores them there itself
/// and the mirror is ordinary memory. Elsewhere the mirror is pinned host
/// memory the copy engine reads through the GPU's address space; a device
/// without DMA (the null card) has none: descriptors still go shadow ->
/// mirror on the host, and the copies name address 0, never submitted.
/// Where this process has no view of the pinned memory (TinyGPU over
/// TCP), the mirror is ordinary memory whose patches are written to the
/// pinned memory through the memory actor. Host memory without a GPU
/// address cannot be the mirror.
fn descriptor_delivery(
    memory: &MemoryHandle,
    descriptors: &DeviceBuffer,
    dma: bool,
) -> Result<(Delivery, Box<dyn MirrorStore>), SubmitError> {
    let bytes = descriptors.bytes;
    // CAST: the region is allocated, so its size fits in memory.
    let plain = || Box::new(vec![0u8; bytes as usize]) as Box<dyn MirrorStore>;
    if let Some(window) = memory
        .cpu_window(descriptors.va)
        .map_err(SubmitError::Memory)?
    {
        return Ok((Delivery::Mapped(window), plain()));
    }
    if !dma {
        return Ok((
            Delivery::CopyEngine {
                mirror_va: 0,
                unviewed: false,
            },
            plain(),
        ));
    }
    match memory.alloc_host(bytes) {
        Ok(h) => match (h.va, h.view) {
            (Some(va), Some(view)) if view.len() >= bytes => Ok((
                Delivery::CopyEngine {
                    mirror_va: va,
                    unviewed: false,
                },
                Box::new(PinnedMirror { view }),
            )),
            // Mapped for the GPU, and no view of it here: written through
            // the memory actor, patch by patch.
            (Some(va), None) if h.bytes >= bytes => Ok((
                Delivery::CopyEngine {
                    mirror_va: va,
                    unviewed: true,
                },
                plain(),
            )),
            _ => Err(SubmitError::MirrorUnmapped {
                bus: h
                    .dma
                    .and_then(|d| d.segments.first().map(|s| s.bus_addr))
                    .unwrap_or(0),
            }),
        },
        Err(e) => Err(SubmitError::Memory(e)),
    }
}

/// The profile's report ring: pinned host memory the GPU writes and the
/// CPU reads, where the device executes work and reaches host memory;
/// elsewhere a profile of host records only.
fn profile_ring(
    memory: &MemoryHandle,
    slots: u32,
    can: Capabilities,
    doorbell: &Doorbell,
) -> Result<Profile, SubmitError> {
    let slots = u64::from(slots.max(1));
    if !(can.dma && can.submission) {
        return Ok(Profile::new(None, slots, None));
    }
    let bytes = slots * PROFILE_SLOT_BYTES;
    let h = memory.alloc_host(bytes).map_err(SubmitError::Memory)?;
    match (h.va, h.view) {
        (Some(va), Some(view)) if view.len() >= bytes => {
            view.write(0, &vec![0; bytes as usize])
                .map_err(|e| SubmitError::Memory(macuda_memory::MemoryError::View(e)))?;
            Ok(Profile::new(Some((va, view)), slots, doorbell.time_ns()))
        }
        _ => Err(SubmitError::MirrorUnmapped { bus: 0 }),
    }
}

fn ring_specs(r: &Regions, entries: u32, copy_placement: CopyPlacement) -> ChannelSetup {
    let ring_bytes = u64::from(entries) * ENTRY_BYTES;
    let handle = |b: &DeviceBuffer| b.rm_handle.unwrap_or(ObjectHandle::NONE);
    ChannelSetup {
        compute: RingSpec {
            ring_memory: handle(&r.rings),
            ring_va: r.rings.va,
            entries,
            userd_memory: handle(&r.userd),
            userd_offset: 0,
            userd_va: r.userd.va,
        },
        copy: RingSpec {
            ring_memory: handle(&r.rings),
            ring_va: r.rings.va + ring_bytes,
            entries,
            userd_memory: handle(&r.userd),
            userd_offset: USERD_BYTES,
            userd_va: r.userd.va + USERD_BYTES,
        },
        copy_placement,
    }
}

/// Start the submit actor for a device of compute capability `sm`: its
/// regions from memory, its channels and doorbell from gsp.
///
/// # Errors
/// An architecture without a launch format, memory for the rings and
/// regions, channels RM refuses, or the thread.
pub fn spawn(
    config: ActorConfig,
    submit: SubmitConfig,
    sm: u32,
    memory: MemoryHandle,
    gsp: GspHandle,
) -> Result<(SubmitHandle, ActorJoin), SubmitError> {
    let ring_bytes = u64::from(submit.gpfifo_entries) * ENTRY_BYTES;
    let regions = Regions::allocate(&memory, &submit)?;
    let windows = cpu_windows(&memory, &regions)?;
    let can = gsp.device_info().map_err(SubmitError::Gsp)?.can;
    let (delivery, mirror) = descriptor_delivery(&memory, &regions.descriptors, can.dma)?;
    let (waker, parking) = wake_pair();
    let setup = ring_specs(&regions, submit.gpfifo_entries, submit.copy_placement);
    let channels = gsp.create_channels(setup).map_err(SubmitError::Gsp)?;
    let compute_class = channels.compute.class;
    let mut format = DeviceFormat::for_device(sm, compute_class)
        .ok_or(SubmitError::NoLaunchFormat { sm, compute_class })?;
    format.chain = submit.chain;
    let link = format.link_fields().map_err(SubmitError::Format)?;
    let doorbell = gsp.doorbell().map_err(SubmitError::Gsp)?;
    let profile = submit
        .profile_slots
        .map(|slots| profile_ring(&memory, slots, can, &doorbell))
        .transpose()?;
    let queue = |name, token, semaphore, ring_address, userd| -> Result<Queue, SubmitError> {
        Ok(Queue {
            name,
            ring: GpFifoRing::new(submit.gpfifo_entries).map_err(SubmitError::Ring)?,
            fetched_at: std::collections::VecDeque::new(),
            ring_address,
            userd,
            token,
            timeline: Timeline::new(semaphore, &windows, &memory, can.video_memory),
            issued: 0,
            pending: PushBuffer::new(),
        })
    };
    let compute = queue(
        "compute",
        channels.compute.token,
        regions.semaphores.va,
        regions.rings.va,
        regions.userd.va,
    )?;
    let copy = queue(
        "copy",
        channels.copy.token,
        regions.semaphores.va + COPY_SEMAPHORE_OFFSET,
        regions.rings.va + ring_bytes,
        regions.userd.va + USERD_BYTES,
    )?;
    let mut actor = SubmitActor {
        gsp,
        doorbell,
        channels,
        setup,
        memory,
        windows,
        local: LocalMemory::default(),
        fault: None,
        caches_stale: true,
        recorded: Default::default(),
        can,
        format,
        link,
        config: submit,
        kernels: Vec::new(),
        streams: BTreeSet::new(),
        next_stream: 0,
        lane: Arc::new(ArrayQueue::new(submit.lane_capacity.max(1))),
        lane_consumer: LaneConsumer::default(),
        waker,
        arena: DescriptorArena::with_mirror(submit.descriptor_bytes, submit.diffing, mirror),
        descriptor_base: regions.descriptors.va,
        delivery,
        commands: CommandRegion {
            base: regions.commands.va,
            bytes: regions.commands.bytes,
            cursor: 0,
            in_flight: std::collections::VecDeque::new(),
        },
        compute,
        copy,
        compute_waits_for_copy: None,
        chain: OpenChain::default(),
        depth: ChainDepth::new(submit.chain_depth),
        chain_flush: None,
        events: EventTable::default(),
        started: Instant::now(),
        failure: None,
        declined_since_sync: false,
        dropped_through: 0,
        copy_dropped_through: 0,
        flush_ns: 0,
        wait_ns: 0,
        recent: std::collections::VecDeque::new(),
        tokens: TokenTemplates::default(),
        stats: SubmitStats::default(),
        profile,
        sync_board: Arc::new(SyncBoard::new()),
        posted_sync: None,
        faults: config.faults.clone(),
        actor_name: config.name,
        incidents: config.incidents(),
    };
    // Video memory is not zeroed: the timelines start at 0 or a stale
    // value would mark work done that never ran, and USERD starts empty.
    // A card without memory access has no timelines to read either.
    if can.video_memory {
        actor.clear_control_memory(&regions)?;
    }
    actor.prologue()?;
    let (handle, join) = spawn_with_background(
        config,
        actor,
        |a: &mut SubmitActor, req: SubmitRequest, cx: &mut Cx| req.dispatch(a, cx),
        SubmitActor::drain_lane,
        parking,
    )
    .map_err(SubmitError::Spawn)?;
    Ok((SubmitHandle::new(handle), join))
}

impl SubmitActor {
    /// Zero the timelines, USERD and the rings.
    fn clear_control_memory(&self, r: &Regions) -> Result<(), SubmitError> {
        self.write_device(
            r.semaphores.va,
            vec![0; (2 * COPY_SEMAPHORE_OFFSET) as usize],
        )?;
        self.write_device(r.userd.va, vec![0; (2 * USERD_BYTES) as usize])?;
        // CAST: two rings of at most a few MiB.
        self.write_device(r.rings.va, vec![0; r.rings.bytes as usize])
    }
}
