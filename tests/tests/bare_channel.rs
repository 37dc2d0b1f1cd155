//! Channels on a card we booted ourselves: after `boot_through_fsp`, the
//! golden context is built in a private client (its buffers placed in
//! our video memory, mapped in a window of our tables that RM's VA space
//! shares, promoted), then a user client with our page tables makes a
//! channel group with a compute and a copy channel whose rings, USERD,
//! instance blocks and method buffers we placed. Work written into our
//! memory through BAR1 and handed over by the doorbell runs on the
//! simulated card's engines: a semaphore release on the compute channel,
//! a copy on the copy channel. A channel whose ring is not mapped stops
//! with an MMU fault that the debugger object reads back over RPC.

use macuda_gsp::bare::channels::{
    alloc_group, open_channel, ChannelMemory, ChannelParent, Placed, RpcChannel,
    ENGINE_TYPE_GRAPHICS, INSTANCE_BYTES, METHOD_BUFFER_BYTES,
};
use macuda_gsp::bare::debugger::{alloc_debugger, diagnose, read_mmu_faults};
use macuda_gsp::bare::golden::{
    build_golden_context, ContextMemory, GoldenClasses, GoldenContext, GoldenHandles,
    GOLDEN_HANDLES,
};
use macuda_gsp::bare::reserved_pdes::WINDOW_BYTES;
use macuda_gsp::bare::{
    alloc_client_objects, channels, set_page_directory, ClientObjects, GspRpc, TablesOwner,
    USER_OBJECTS,
};
use macuda_hw::methods::{copy, host};
use macuda_hw::page;
use macuda_hw::push::{
    GpEntry, MethodHeader, SUBCHANNEL_COMPUTE, SUBCHANNEL_COPY, USERD_BYTES, USERD_GP_PUT,
};
use macuda_memory::{BareLayout, BareMemory, Piece, PinnedBuffer, PinnedPool, Placement};
use macuda_pci::tinygpu::TinyGpuTransport;
use macuda_pci::Transport;
use macuda_sim::{Card, Server};
use macuda_tests::sim_host::bar1::{
    bare_memory, booted, booted_card, Bar1Window, Registers, Shared, SharedBus,
};
use macuda_tests::sim_host::card_trusting_the_test_key;

const MIB: u64 = 1 << 20;
/// Our tables' pool, the CPU's part of the 256 MiB BAR1 window, and the
/// rest of the window as the test's "above it" (so that the test can read
/// whatever the engines wrote).
const POOL: std::ops::Range<u64> = 2 * MIB..6 * MIB;
const CPU_VISIBLE: std::ops::Range<u64> = 6 * MIB..64 * MIB;
const VRAM: std::ops::Range<u64> = 64 * MIB..200 * MIB;
/// The golden context's window: the first 512 MiB-aligned window of our
/// VA space; the user's VAs start past it.
const WINDOW: u64 = WINDOW_BYTES;
const USER_VA: u64 = 4 << 30;
const USER_VA_END: u64 = 1 << 40;
const RING_ENTRIES: u32 = 64;

const GOLDEN: GoldenHandles = GOLDEN_HANDLES;
const USER: ClientObjects = USER_OBJECTS;
const GROUP: (u32, u32) = (0xC100_0010, 0xC100_0011);
const COMPUTE: (u32, u32) = (0xC100_0020, 0xC100_0021);
const COPY: (u32, u32) = (0xC100_0030, 0xC100_0031);
const DEBUGGER: u32 = 0xC100_0040;

fn classes(server: &Server<Card>) -> GoldenClasses {
    let c = server.device().chip().classes;
    GoldenClasses {
        channel: c.gpfifo,
        compute: c.compute,
        copy: c.copy,
    }
}

struct World {
    server: Server<Card>,
    _dir: tempfile::TempDir,
    t: Shared,
    rpc: GspRpc,
    memory: BareMemory<Bar1Window, Registers>,
}

impl World {
    fn new() -> World {
        World::on(booted())
    }

    fn on((server, dir, t, rpc): (Server<Card>, tempfile::TempDir, Shared, GspRpc)) -> World {
        let memory = bare_memory(
            &t,
            BareLayout {
                table_pool: POOL,
                cpu_visible: CPU_VISIBLE,
                vram: VRAM,
                va: USER_VA..USER_VA_END,
            },
        );
        World {
            server,
            _dir: dir,
            t,
            rpc,
            memory,
        }
    }

    fn mapped(&mut self, bytes: u64) -> Piece {
        self.memory.alloc(bytes).unwrap()
    }

    /// Run `f` with the conversation and the transport as its bus.
    fn rpc<T>(&mut self, f: impl FnOnce(&mut GspRpc, &mut TinyGpuTransport) -> T) -> T {
        let mut bus = self.t.borrow_mut();
        f(&mut self.rpc, &mut bus)
    }

    fn golden(&mut self) -> GoldenContext {
        let classes = classes(&self.server);
        build_golden_context(
            &mut self.rpc,
            &mut SharedBus(self.t.clone()),
            &mut self.memory,
            GOLDEN,
            classes,
            WINDOW,
        )
        .unwrap()
    }

    /// The user's client over our tables, and its channel group.
    fn user_group(&mut self) -> ChannelParent {
        let root = self.memory.root();
        self.rpc(|rpc, bus| {
            alloc_client_objects(rpc, bus, USER, TablesOwner::Driver).unwrap();
            set_page_directory(rpc, bus, USER, root).unwrap();
            alloc_group(rpc, bus, USER.client, USER.device, USER.va_space, GROUP).unwrap()
        })
    }

    /// A channel over a ring at `ring_va` and fresh USERD, instance block
    /// and method buffer; its USERD's physical address.
    fn channel(
        &mut self,
        under: &ChannelParent,
        handles: (u32, u32),
        engine_class: u32,
        ring_va: u64,
    ) -> (RpcChannel, u64) {
        let userd = self
            .memory
            .video_placed(USERD_BYTES, page::SMALL, Placement::CpuVisible)
            .unwrap();
        let instance = self.memory.video(INSTANCE_BYTES, page::SMALL).unwrap();
        let method_buffer = self.memory.video(METHOD_BUFFER_BYTES, page::SMALL).unwrap();
        let notifier = self.memory.video(page::SMALL, page::SMALL).unwrap();
        let memory = ChannelMemory {
            ring_va,
            entries: RING_ENTRIES,
            userd: Placed::Video(userd),
            userd_bytes: USERD_BYTES,
            instance,
            method_buffer,
            error_notifier: Some((Placed::Video(notifier), page::SMALL)),
        };
        let channel_class = classes(&self.server).channel;
        let ch = self.rpc(|rpc, bus| {
            open_channel(
                rpc,
                bus,
                under,
                (handles.0, channel_class),
                (handles.1, engine_class),
                &memory,
                ENGINE_TYPE_GRAPHICS,
            )
            .unwrap()
        });
        (ch, userd)
    }

    fn write(&self, phys: u64, bytes: &[u8]) {
        self.t.borrow_mut().vram_write(phys, bytes).unwrap();
    }

    fn read(&self, phys: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0; len];
        self.t.borrow_mut().vram_read(phys, &mut out).unwrap();
        out
    }

    /// Put `words` in a push buffer, one GP entry for it at the ring's
    /// slot 0, GP_PUT to 1, and ring the channel's doorbell.
    fn submit(&mut self, ring: &Piece, userd: u64, token: u32, words: &[u32]) {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let push = self.mapped(bytes.len() as u64);
        self.write(push.phys, &bytes);
        let entry = GpEntry::subroutine(push.va, words.len() as u32)
            .unwrap()
            .encode();
        self.write(ring.phys, &entry.to_le_bytes());
        self.write(userd + USERD_GP_PUT, &1u32.to_le_bytes());
        self.t.borrow_mut().doorbell(token).unwrap();
    }
}

fn methods(subchannel: u8, method: u32, data: &[u32]) -> Vec<u32> {
    let mut w = vec![
        MethodHeader::incrementing(subchannel, method, data.len() as u16)
            .unwrap()
            .encode(),
    ];
    w.extend_from_slice(data);
    w
}

#[test]
fn the_golden_context_is_promoted_with_its_buffers_in_the_shared_window() {
    let mut w = World::new();
    let golden = w.golden();
    assert!(golden.device_info.graphics_runlist().is_some());
    // Nine buffers, the virtual ones inside the window, none overlapping.
    assert_eq!(golden.buffers.len(), 9);
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for b in &golden.buffers {
        if let Some(va) = b.va {
            assert!(va >= WINDOW && va + b.need.bytes <= WINDOW + WINDOW_BYTES);
            assert!(spans
                .iter()
                .all(|(s, e)| va >= *e || va + b.need.bytes <= *s));
            spans.push((va, va + b.need.bytes));
        }
    }
    let mut card = w.server.device();
    let promotions = card.gsp_rm().calls().promotions.clone();
    assert_eq!(promotions.len(), 1);
    let p = &promotions[0];
    assert_eq!(
        (p.client, p.object, p.channel, p.under_device),
        (
            GOLDEN.objects.client,
            GOLDEN.objects.subdevice,
            (GOLDEN.objects.client, GOLDEN.channel),
            true
        )
    );
    let ids: Vec<u16> = p.entries.iter().map(|e| e.buffer_id).collect();
    let placed: Vec<u16> = golden.buffers.iter().map(|b| b.need.id).collect();
    assert_eq!(ids, placed);
    // What RM was told matches what was placed: a size and an address
    // only where the buffer is physical, a VA only where it is virtual.
    for (e, b) in p.entries.iter().zip(&golden.buffers) {
        assert_eq!(e.physical, b.need.physical);
        assert_eq!(e.virtual_, b.need.virtual_);
        assert_eq!(e.size, if b.need.physical { b.need.bytes } else { 0 });
    }
    // The window's tables are ours: a buffer's VA walks, through our root,
    // to the video memory we placed it in.
    let root = macuda_sim::mmu::PageDirectory {
        target: macuda_sim::mmu::Target::Video,
        address: w.memory.root(),
    };
    let main = &golden.buffers[0];
    match card.translate(root, main.va.unwrap(), macuda_sim::mmu::Access::Read) {
        Ok(macuda_sim::mmu::Walked::Page(p)) => {
            assert_eq!(p.physical(main.va.unwrap()), main.phys)
        }
        other => panic!("the MAIN buffer walks to {other:?}"),
    }
    let calls = card.gsp_rm().calls();
    // The golden channel and its engine objects are in RM's tree.
    for h in [GOLDEN.channel, GOLDEN.compute, GOLDEN.copy] {
        assert!(
            calls.objects.get(GOLDEN.objects.client, h).is_some(),
            "{h:#x}"
        );
    }
}

#[test]
fn work_in_our_memory_runs_on_the_engines_after_the_doorbell() {
    let mut w = World::new();
    w.golden();
    let under = w.user_group();
    let c = classes(&w.server);
    let rings = (
        w.mapped(u64::from(RING_ENTRIES) * 8),
        w.mapped(u64::from(RING_ENTRIES) * 8),
    );
    let (compute, compute_userd) = w.channel(&under, COMPUTE, c.compute, rings.0.va);
    let (copy_ch, copy_userd) = w.channel(&under, COPY, c.copy, rings.1.va);
    assert_ne!(compute.token, copy_ch.token);
    w.rpc(|rpc, bus| {
        alloc_debugger(rpc, bus, USER.client, USER.device, DEBUGGER, compute.engine).unwrap();
        channels::schedule(rpc, bus, USER.client, GROUP.0, true).unwrap();
    });

    // Compute: bind the engine, release 0x1234_5678 to a semaphore.
    let sem = w.mapped(page::SMALL);
    let mut words = methods(
        SUBCHANNEL_COMPUTE,
        host::SET_OBJECT::BYTE_OFFSET,
        &[c.compute],
    );
    let release = host::SEM_EXECUTE::OPERATION_RELEASE;
    words.extend(methods(
        0,
        host::SEM_ADDR_LO::BYTE_OFFSET,
        &[
            sem.va as u32,
            (sem.va >> 32) as u32,
            0x1234_5678,
            0,
            release,
        ],
    ));
    w.submit(&rings.0, compute_userd, compute.token, &words);
    assert_eq!(w.read(sem.phys, 4), 0x1234_5678u32.to_le_bytes());

    // Copy: 4 KiB from one buffer of ours to another, then a release.
    let (src, dst) = (w.mapped(page::SMALL), w.mapped(page::SMALL));
    let data: Vec<u8> = (0..page::SMALL).map(|i| (i * 7 % 251) as u8).collect();
    w.write(src.phys, &data);
    let mut words = methods(SUBCHANNEL_COPY, host::SET_OBJECT::BYTE_OFFSET, &[c.copy]);
    words.extend(methods(
        SUBCHANNEL_COPY,
        copy::OFFSET_IN_UPPER::BYTE_OFFSET,
        &[
            (src.va >> 32) as u32,
            src.va as u32,
            (dst.va >> 32) as u32,
            dst.va as u32,
        ],
    ));
    words.extend(methods(
        SUBCHANNEL_COPY,
        copy::LINE_LENGTH_IN::BYTE_OFFSET,
        &[page::SMALL as u32],
    ));
    let sem2 = sem.va + 0x100;
    words.extend(methods(
        SUBCHANNEL_COPY,
        copy::SET_SEMAPHORE_A::BYTE_OFFSET,
        &[(sem2 >> 32) as u32, sem2 as u32, 7],
    ));
    words.extend(methods(
        SUBCHANNEL_COPY,
        copy::LAUNCH_DMA::BYTE_OFFSET,
        &[copy::LAUNCH_DMA::DATA_TRANSFER_TYPE_NON_PIPELINED
            | copy::LAUNCH_DMA::SEMAPHORE_TYPE_RELEASE_ONE_WORD_SEMAPHORE << 3],
    ));
    w.submit(&rings.1, copy_userd, copy_ch.token, &words);
    assert_eq!(w.read(dst.phys, data.len()), data);
    assert_eq!(w.read(sem.phys + 0x100, 4), 7u32.to_le_bytes());

    let card = w.server.device();
    for token in [compute.token, copy_ch.token] {
        assert!(card.channel_fault(token).is_none(), "channel {token}");
    }
    assert!(card.tlb().stale_uses().is_empty());
    drop(card);
    // Nothing faulted: no report.
    let report = w.rpc(|rpc, bus| {
        diagnose(
            rpc,
            bus,
            USER.client,
            DEBUGGER,
            (compute.channel, compute.token),
        )
        .unwrap()
    });
    assert!(report.is_none(), "{report:?}");
}

#[test]
fn a_ring_we_never_mapped_stops_the_channel_and_the_debugger_names_the_address() {
    let mut w = World::new();
    w.golden();
    let under = w.user_group();
    let c = classes(&w.server);
    // The ring's VA has no page behind it.
    let unmapped = USER_VA_END + 0x1000_0000;
    let (ch, userd) = w.channel(&under, COMPUTE, c.compute, unmapped);
    w.rpc(|rpc, bus| {
        alloc_debugger(rpc, bus, USER.client, USER.device, DEBUGGER, ch.engine).unwrap();
        channels::schedule(rpc, bus, USER.client, GROUP.0, true).unwrap();
    });
    w.write(userd + USERD_GP_PUT, &1u32.to_le_bytes());
    w.t.borrow_mut().doorbell(ch.token).unwrap();
    // A read behind the posted doorbell: the card has taken it when this
    // returns.
    w.read(userd, 4);
    assert!(w.server.device().channel_fault(ch.token).is_some());
    // The report as the kernel path gives it: the Xid GSP-RM sent
    // unprompted, then the debugger: no SM error, an MMU fault, its page.
    let fault = w
        .rpc(|rpc, bus| diagnose(rpc, bus, USER.client, DEBUGGER, (ch.channel, ch.token)))
        .unwrap()
        .expect("a fault to report");
    assert_eq!(fault.xid, macuda_hw::rm::XID_MMU_FAULT, "{fault}");
    assert_eq!(fault.debugger.as_deref(), Some("read"));
    assert!(fault.mmu_fault && fault.sm_errors.is_empty(), "{fault}");
    assert_eq!(fault.mmu_faults.len(), 1, "{fault}");
    assert_eq!(fault.mmu_faults[0].address & !(page::SMALL - 1), unmapped);
    assert!(fault.to_string().contains("MMU fault"), "{fault}");
    // Read once: RM hands each fault out once, and the flag goes with it.
    let again = w.rpc(|rpc, bus| read_mmu_faults(rpc, bus, USER.client, DEBUGGER).unwrap());
    assert!(again.is_empty());
}

/// Write `data` at byte `offset` of a pinned buffer, mapping by mapping.
fn write_pinned(t: &Shared, buffer: &PinnedBuffer, offset: u64, data: &[u8]) {
    let mut done = 0;
    while done < data.len() {
        let (m, at) = buffer.locate(offset + done as u64).unwrap();
        let n = ((m.bytes - at) as usize).min(data.len() - done);
        t.borrow_mut()
            .dma_write(m.region.id, at, &data[done..done + n])
            .unwrap();
        done += n;
    }
}

fn read_pinned(t: &Shared, buffer: &PinnedBuffer, offset: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0; len];
    let mut done = 0;
    while done < len {
        let (m, at) = buffer.locate(offset + done as u64).unwrap();
        let n = ((m.bytes - at) as usize).min(len - done);
        t.borrow_mut()
            .dma_read(m.region.id, at, &mut out[done..done + n])
            .unwrap();
        done += n;
    }
    out
}

#[test]
fn pinned_host_memory_spans_mappings_of_at_most_32_segments_that_the_copy_engine_reaches() {
    // Host memory in 1 MiB segments: a mapping holds 32 MiB at most.
    let card = Card::with_segments(card_trusting_the_test_key(), MIB);
    let mut w = World::on(booted_card(card));
    w.golden();
    let under = w.user_group();
    let c = classes(&w.server);
    let ring = w.mapped(u64::from(RING_ENTRIES) * 8);
    let (ch, userd) = w.channel(&under, COPY, c.copy, ring.va);
    w.rpc(|rpc, bus| channels::schedule(rpc, bus, USER.client, GROUP.0, true).unwrap());

    let mut pool = PinnedPool::default();
    let pinned = w
        .memory
        .alloc_pinned(&mut pool, &mut SharedBus(w.t.clone()), 80 * MIB)
        .unwrap();
    assert_eq!(pinned.bytes, 80 * MIB);
    assert_eq!(pool.largest_mapping(), 32 * MIB);
    assert_eq!(pinned.mappings.len(), 3, "{:?}", pinned.mappings);
    for m in &pinned.mappings {
        assert!(m.region.segments.len() <= 32, "{m:?}");
    }
    let total: u64 = pinned.mappings.iter().map(|m| m.bytes).sum();
    assert_eq!(total, pinned.bytes);

    // A page straddling the first two mappings goes host -> video memory
    // -> another place in host memory, in the third mapping.
    let from = pinned.mappings[1].va - pinned.va - 0x800;
    let to = pinned.mappings[2].va - pinned.va + 0x1234;
    let data: Vec<u8> = (0..page::SMALL).map(|i| (i * 13 % 253) as u8).collect();
    write_pinned(&w.t, &pinned, from, &data);
    let dst = w.mapped(page::SMALL);
    let copy_of = |src: u64, dst: u64| {
        let mut words = methods(
            SUBCHANNEL_COPY,
            copy::OFFSET_IN_UPPER::BYTE_OFFSET,
            &[
                (src >> 32) as u32,
                src as u32,
                (dst >> 32) as u32,
                dst as u32,
            ],
        );
        words.extend(methods(
            SUBCHANNEL_COPY,
            copy::LINE_LENGTH_IN::BYTE_OFFSET,
            &[page::SMALL as u32],
        ));
        words.extend(methods(
            SUBCHANNEL_COPY,
            copy::LAUNCH_DMA::BYTE_OFFSET,
            &[copy::LAUNCH_DMA::DATA_TRANSFER_TYPE_NON_PIPELINED],
        ));
        words
    };
    let mut words = methods(SUBCHANNEL_COPY, host::SET_OBJECT::BYTE_OFFSET, &[c.copy]);
    words.extend(copy_of(pinned.va + from, dst.va));
    words.extend(copy_of(dst.va, pinned.va + to));
    w.submit(&ring, userd, ch.token, &words);
    assert_eq!(w.read(dst.phys, data.len()), data);
    assert_eq!(read_pinned(&w.t, &pinned, to, data.len()), data);
    assert!(w.server.device().channel_fault(ch.token).is_none());

    // Unmapped again: the card faults where the buffer was.
    w.memory.free_pinned(&pinned).unwrap();
    let root = macuda_sim::mmu::PageDirectory {
        target: macuda_sim::mmu::Target::Video,
        address: w.memory.root(),
    };
    assert!(w
        .server
        .device()
        .translate(root, pinned.va, macuda_sim::mmu::Access::Read)
        .is_err());
}

#[test]
fn a_mapping_the_platform_refuses_for_its_segments_is_asked_again_smaller() {
    // 256 KiB segments: the boot's own 16 MiB mappings need 64 of them
    // and are asked again smaller; the first pinned request (the whole
    // 20 MiB, 80 segments) is declined, then 10 MiB (40), then 5 MiB
    // (20) passes and the pool learns 32 segments' worth, 8 MiB.
    let card = Card::with_segments(card_trusting_the_test_key(), 256 << 10);
    let mut w = World::on(booted_card(card));
    let mut pool = PinnedPool::default();
    let pinned = w
        .memory
        .alloc_pinned(&mut pool, &mut SharedBus(w.t.clone()), 20 * MIB)
        .unwrap();
    assert_eq!(pool.largest_mapping(), 8 * MIB);
    let sizes: Vec<u64> = pinned.mappings.iter().map(|m| m.bytes).collect();
    assert_eq!(sizes, [5 * MIB, 8 * MIB, 7 * MIB]);
    assert!(pinned
        .mappings
        .iter()
        .all(|m| m.region.segments.len() <= 32));
}
