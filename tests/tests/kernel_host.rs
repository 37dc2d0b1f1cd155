//! The whole stack on the kernel-module path, against the fake of the
//! module whose GPU a thread plays: RM objects, memory at the memory
//! actor's addresses, channels over submit's rings, launches the fake GPU
//! walks and records, copies that move real bytes, channel faults reported
//! by Xid and debugger, and reopened channels that run again.

use macuda_core::{FaultAction, FaultPlan, Incident};
use macuda_gsp::{CopyPlacement, RmBackend};
use macuda_hw::rm::{self, MmuFaultEntry, SmErrorState};
use macuda_submit::{LaneItem, SubmitError};
use macuda_supervisor::{Host, HostError};
use macuda_tests::direct_rm::DirectPath;
use macuda_tests::fake_rm::{ArmedFault, FakeCall, GpuEvent};
use macuda_tests::vector_add::VectorAdd;
use macuda_tests::{contained, KernelWorld};
use std::time::Duration;

#[test]
fn the_stack_opens_the_module_and_the_fake_gpu_runs_what_submit_hands_it() {
    let world = KernelWorld::new(Duration::from_secs(10));
    let host = world.start();
    let line = host.device_line();
    assert!(
        line.contains("NVIDIA H200") && line.contains("GH100"),
        "{line}"
    );
    assert!(line.contains("580.159.04"), "{line}");
    assert_eq!(host.device().rm, RmBackend::KernelModule);
    let ch = host.call(|s| s.submit.channels()).unwrap();
    assert_eq!((ch.compute.class, ch.copy.class), (0xCBC0, 0xC8B5));
    assert_eq!((ch.compute.token, ch.copy.token), (0xA, 0xB));

    let v = VectorAdd::load(&host);
    let modules = host.call(|s| s.loader.modules()).unwrap();
    assert!(modules[0].resident, "uploaded through the BAR1 view");
    // The code is in video memory, as the loader laid it out.
    let code = host
        .call(|s| s.memory.read_device(v.info.entry, 16))
        .unwrap();
    assert_ne!(
        code,
        vec![0u8; 16],
        "the kernel's first instruction is there"
    );

    let n = 1000i32;
    let bufs: Vec<_> = (0..3)
        .map(|_| host.call(|s| s.memory.alloc_device(4 * 1024)).unwrap())
        .collect();
    assert!(bufs
        .iter()
        .all(|b| b.va % 256 == 0 && b.rm_handle.is_some()));
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    let launches = 300usize;
    for i in 0..launches {
        let l = v.record(bufs[0].va, bufs[1].va, bufs[2].va, n - i as i32);
        lane.launch(macuda_submit::lane_launch(stream, &l)).unwrap();
    }
    let reached = host.call(|s| s.submit.synchronize(stream)).unwrap();
    assert_eq!(
        reached, 6,
        "300 launches in chains of 8, 16, 32, 64, 128 and 52: six releases"
    );
    // The module maps video memory, so the CPU stored the descriptors in
    // place: nothing went to the copy queue, and no chain waited on it.
    let subs = host.call(|s| s.submit.submissions()).unwrap();
    assert!(
        subs.iter().all(|s| s.queue == "compute"),
        "no descriptor delivery by copy engine: {:?}",
        subs.iter().map(|s| &s.queue).collect::<Vec<_>>()
    );
    let stats = host.call(|s| s.submit.stats()).unwrap();
    assert!(stats.descriptor_bytes > 0, "descriptors were delivered");

    let m = world.fake.0.lock();
    assert!(
        !m.gpu_log
            .iter()
            .any(|e| matches!(e, GpuEvent::Overlap { .. })),
        "each chain waited for the one before"
    );
    let kernels: Vec<_> = m
        .gpu_log
        .iter()
        .filter_map(|e| match e {
            GpuEvent::Kernel {
                program,
                grid,
                block,
                bank0,
                ..
            } => Some((*program, *grid, *block, bank0.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(kernels.len(), launches, "every launch ran, in chains");
    let base = v.info.param_base as usize;
    for (i, (program, grid, block, bank0)) in kernels.iter().enumerate() {
        assert_eq!(*program, v.info.entry);
        assert_eq!(*block, [256, 1, 1]);
        let want = v.record(bufs[0].va, bufs[1].va, bufs[2].va, n - i as i32);
        assert_eq!(*grid, want.grid, "launch {i}");
        assert_eq!(
            &bank0[base..base + want.params.len()],
            &want.params[..],
            "launch {i}: the parameters in bank 0, in order"
        );
        // blockDim.x where sm_90 code reads it.
        assert_eq!(&bank0[0..4], &256u32.to_le_bytes());
    }
}

/// A ring of 8 entries and chains of one launch: every eighth push buffer
/// finds the ring full, waits on the timeline for the oldest fetch and
/// frees what the engine took; all 100 launches run, in order.
#[test]
fn a_full_ring_waits_for_the_engine_and_every_launch_runs() {
    let mut world = KernelWorld::new(Duration::from_secs(10));
    world.config.submit.gpfifo_entries = 8;
    world.config.submit.chain_depth = 1;
    let host = world.start();
    let v = VectorAdd::load(&host);
    let bufs: Vec<_> = (0..3)
        .map(|_| host.call(|s| s.memory.alloc_device(4 * 1024)).unwrap())
        .collect();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    let launches = 100usize;
    for i in 0..launches {
        let l = v.record(bufs[0].va, bufs[1].va, bufs[2].va, 1000 - i as i32);
        lane.launch(macuda_submit::lane_launch(stream, &l)).unwrap();
    }
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    let stats = host.call(|s| s.submit.stats()).unwrap();
    assert!(
        stats.gp_entries > 8 * 4,
        "the ring wrapped several times: {} entries",
        stats.gp_entries
    );
    let m = world.fake.0.lock();
    let banks: Vec<&Vec<u8>> = m
        .gpu_log
        .iter()
        .filter_map(|e| match e {
            GpuEvent::Kernel { bank0, .. } => Some(bank0),
            _ => None,
        })
        .collect();
    assert_eq!(banks.len(), launches);
    let base = v.info.param_base as usize;
    for (i, bank0) in banks.iter().enumerate() {
        let want = v.record(bufs[0].va, bufs[1].va, bufs[2].va, 1000 - i as i32);
        assert_eq!(
            &bank0[base..base + want.params.len()],
            &want.params[..],
            "launch {i}: its own parameters, in order"
        );
    }
}

/// A recorded chain runs whole at each replay, after the work queued before
/// it and before the work after; what cannot be recorded or replayed is
/// refused with what was wrong, and the queues go on.
#[test]
fn a_recorded_chain_replays_whole_in_stream_order_and_bad_ones_are_refused() {
    let world = KernelWorld::new(Duration::from_secs(10));
    let host = world.start();
    let v = VectorAdd::load(&host);
    let bufs: Vec<_> = (0..3)
        .map(|_| host.call(|s| s.memory.alloc_device(4 * 1024)).unwrap())
        .collect();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    let launch = |n: i32| {
        macuda_submit::lane_launch(stream, &v.record(bufs[0].va, bufs[1].va, bufs[2].va, n))
    };
    let recorded: Vec<_> = [11, 12, 13].into_iter().map(launch).collect();
    let chain = host.call(|s| s.submit.record_chain(recorded)).unwrap();
    lane.launch(launch(1)).unwrap();
    lane.push(LaneItem::Replay { stream, chain }).unwrap();
    lane.launch(launch(2)).unwrap();
    lane.push(LaneItem::Replay { stream, chain }).unwrap();
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    let base = v.info.param_base as usize;
    let counts: Vec<i32> = world
        .fake
        .0
        .lock()
        .gpu_log
        .iter()
        .filter_map(|e| match e {
            GpuEvent::Kernel { bank0, .. } => Some(i32::from_le_bytes(
                bank0[base + 24..base + 28].try_into().unwrap(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(counts, [1, 11, 12, 13, 2, 11, 12, 13]);
    assert!(
        !world
            .fake
            .0
            .lock()
            .gpu_log
            .iter()
            .any(|e| matches!(e, GpuEvent::Overlap { .. })),
        "each replay waited for the chain before it"
    );
    // Nothing to record; a launch the kernel does not take.
    let e = host
        .call(|s| s.submit.record_chain(Vec::new()))
        .unwrap_err();
    assert!(format!("{e:?}").contains("NotRecorded"), "{e:?}");
    let mut short = launch(3);
    short.params = macuda_submit::ParamBlock::new(&[0u8; 4]);
    let e = host
        .call(|s| s.submit.record_chain(vec![short]))
        .unwrap_err();
    assert!(format!("{e:?}").contains("ParamBlockSize"), "{e:?}");
    // Forgotten, it cannot be replayed: the sync point says so, and the
    // queues still run what comes after.
    lane.push(LaneItem::ForgetChain { chain }).unwrap();
    lane.push(LaneItem::Replay { stream, chain }).unwrap();
    let e = host.call(|s| s.submit.synchronize(stream)).unwrap_err();
    assert!(format!("{e:?}").contains("NoSuchRecordedChain"), "{e:?}");
    lane.launch(launch(4)).unwrap();
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    assert_eq!(world.fake.0.lock().kernels().len(), 9);
}

#[test]
fn copies_move_real_bytes_in_stream_order_through_pinned_host_memory() {
    let world = KernelWorld::new(Duration::from_secs(10));
    let host = world.start();
    let bytes = 3 << 20;
    let src = host.call(|s| s.memory.alloc_host(bytes)).unwrap();
    let back = host.call(|s| s.memory.alloc_host(bytes)).unwrap();
    let d1 = host.call(|s| s.memory.alloc_device(bytes)).unwrap();
    let d2 = host.call(|s| s.memory.alloc_device(bytes)).unwrap();
    let pattern: Vec<u8> = (0..bytes as usize)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    src.view.as_ref().unwrap().write(0, &pattern).unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    let (s_va, b_va) = (src.va.unwrap(), back.va.unwrap());
    for (from, to) in [(s_va, d1.va), (d1.va, d2.va)] {
        lane.push(LaneItem::Copy {
            stream,
            src: from,
            dst: to,
            bytes,
        })
        .unwrap();
    }
    // A fill over the middle of d2, then a pitched copy of 16 lines of
    // 1000 bytes back out, and the rest 1-D.
    lane.push(LaneItem::Fill {
        stream,
        dst: d2.va + 4096,
        bytes: 4096,
        value: 0xA5A5_5A5A,
    })
    .unwrap();
    lane.push(LaneItem::Copy2d {
        stream,
        src: d2.va,
        src_pitch: 2048,
        dst: b_va,
        dst_pitch: 1024,
        width: 1000,
        height: 16,
    })
    .unwrap();
    lane.push(LaneItem::Copy {
        stream,
        src: d2.va + (1 << 20),
        dst: b_va + (1 << 20),
        bytes: 2 << 20,
    })
    .unwrap();
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    let mut got = vec![0u8; bytes as usize];
    back.view.as_ref().unwrap().read(0, &mut got).unwrap();
    let mut want = pattern.clone();
    for w in want[4096..8192].chunks_mut(4) {
        w.copy_from_slice(&0xA5A5_5A5Au32.to_le_bytes());
    }
    for line in 0..16 {
        let (s, d) = (line * 2048, line * 1024);
        assert_eq!(&got[d..d + 1000], &want[s..s + 1000], "pitched line {line}");
    }
    assert!(
        got[1 << 20..] == want[1 << 20..],
        "the 1-D copy after the fill"
    );
    host.call(|s| s.memory.free_host(s_va)).unwrap();
    host.call(|s| s.memory.free_host(b_va)).unwrap();
    let mstats = host.call(|s| s.memory.stats()).unwrap();
    // The submit actor takes no pinned memory of its own here: the module
    // maps the descriptor region, so no mirror for a copy engine.
    assert_eq!(
        (mstats.host_allocs, mstats.host_frees),
        (2, 2),
        "{mstats:?}"
    );
}

/// test-backend-ops' SOFT_MAX asked cudaMalloc for 8,384,768 bytes and was
/// refused on the H200. The memory actor then took 4 KiB-aligned VA for it
/// and asked RM for huge pages; that these do not map there was our first
/// reading, which the rule probes of kernel_rm.rs later refuted (UVM maps
/// them). The sizes either side of the threshold must still allocate.
#[test]
fn sizes_around_the_huge_page_threshold_get_va_aligned_to_the_page_rm_gives() {
    let world = KernelWorld::new(Duration::from_secs(10));
    let host = world.start();
    for bytes in [
        8_384_768,
        (8 << 20) - 1,
        8 << 20,
        (8 << 20) + 1,
        4095,
        65_537,
    ] {
        let d = host
            .call(|s| s.memory.alloc_device(bytes))
            .unwrap_or_else(|e| panic!("{bytes} bytes: {e}"));
        host.call(|s| s.memory.free_device(d.va)).unwrap();
    }
}

#[test]
fn a_kernel_with_a_stack_gets_local_memory_and_runs() {
    let world = KernelWorld::new(Duration::from_secs(10));
    let host = world.start();
    let v = VectorAdd::load(&host);
    let mut desc = v.info.kernel_desc();
    desc.local_bytes = 0x640;
    let k = host.call(|s| s.submit.register_kernel(desc)).unwrap();
    let buf = host.call(|s| s.memory.alloc_device(4096)).unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let mut l = v.record(buf.va, buf.va, buf.va, 64);
    l.kernel = k;
    host.call(|s| s.submit.launch(stream, l)).unwrap();
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    assert_eq!(world.fake.0.lock().kernels().len(), 1, "SKED let it run");
}

/// Where the armed MMU fault of the channel-fault tests reads.
const FAULTED_VA: u64 = 0x7000_0000_1000;

/// Xid 31: a PTE fault on a read at `va`, as the fake's next launch
/// reports it.
fn mmu_fault_at(va: u64) -> ArmedFault {
    ArmedFault {
        xid: 31,
        sm_errors: Vec::new(),
        mmu_faults: vec![MmuFaultEntry {
            fault_address: va,
            fault_type: 2,
            access_type: 0,
        }],
    }
}

#[test]
fn a_channel_fault_is_reported_with_what_the_debugger_recorded_and_fresh_channels_run_again() {
    let world = KernelWorld::new(Duration::from_secs(10));
    let host = world.start();
    let v = VectorAdd::load(&host);
    let buf = host.call(|s| s.memory.alloc_device(4096)).unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    world.fake.0.lock().armed = Some(mmu_fault_at(FAULTED_VA));
    host.call(|s| {
        s.submit
            .launch(stream, v.record(buf.va, buf.va, buf.va, 64))
    })
    .unwrap();
    let started = std::time::Instant::now();
    let err = host
        .call(|s| s.submit.synchronize(stream))
        .expect_err("the faulted launch never releases");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "reported, not timed out"
    );
    let HostError::Submit(SubmitError::ChannelFault(f)) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(f.xid, 31);
    assert!(f.mmu_fault);
    assert_eq!(f.mmu_faults[0].address, FAULTED_VA);
    let text = f.to_string();
    assert!(
        text.contains("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT")
            && text.contains("PTE fault on a READ at 0x700000001000"),
        "{text}"
    );
    // The submit actor told the supervisor, whose contained recovery
    // replaced the channels and wrote a report; the Host stays up.
    let recovered = contained(
        &host,
        |i| matches!(i, Incident::ChannelFault { fault } if fault.contains("MMU_ERR_FLT")),
    );
    assert!(
        recovered.steps.iter().all(|s| s.ok),
        "{:?}",
        recovered.steps
    );
    assert!(recovered.report.is_ok(), "{:?}", recovered.report);
    assert_eq!(world.report_files().len(), 1, "one report, of the incident");
    assert!(
        host.outcome().is_none(),
        "a GPU fault is not an actor failure"
    );
    let fresh = host.call(|s| s.submit.channels()).unwrap();
    assert_ne!(fresh.compute.token, 0xA, "new channels, new tokens");
    host.call(|s| {
        s.submit
            .launch(stream, v.record(buf.va, buf.va, buf.va, 64))
    })
    .unwrap();
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    let m = world.fake.0.lock();
    assert_eq!(m.kernels().len(), 1, "the fresh channel ran the launch");
    assert_eq!(
        m.groups.len(),
        1,
        "the faulted group was freed, the fresh one lives"
    );
    drop(m);

    // An SM error rather than an MMU fault reads differently.
    world.fake.0.lock().armed = Some(ArmedFault {
        xid: 13,
        sm_errors: vec![(
            5,
            SmErrorState {
                hww_global_esr: 0x10,
                hww_warp_esr: 0x1,
                hww_warp_esr_pc64: 0x400,
                ..SmErrorState::default()
            },
        )],
        mmu_faults: Vec::new(),
    });
    host.call(|s| {
        s.submit
            .launch(stream, v.record(buf.va, buf.va, buf.va, 64))
    })
    .unwrap();
    let err = host.call(|s| s.submit.synchronize(stream)).unwrap_err();
    let HostError::Submit(SubmitError::ChannelFault(f)) = &err else {
        panic!("{err:?}");
    };
    assert_eq!((f.xid, f.mmu_fault, f.sm_errors.len()), (13, false, 1));
    assert!(
        f.to_string()
            .contains("no MMU fault; 1 SM(s) recorded an error (SM 5"),
        "{f}"
    );
}

#[test]
fn a_channel_fault_whose_fresh_channels_cannot_be_made_takes_the_stack_down_through_recovery() {
    let world = KernelWorld::new(Duration::from_secs(10));
    let host = world.start();
    let v = VectorAdd::load(&host);
    let buf = host.call(|s| s.memory.alloc_device(4096)).unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    host.faults()
        .install(
            "submit",
            FaultPlan::new(FaultAction::Error, 1).on_kind("reopen_channels"),
        )
        .unwrap();
    world.fake.0.lock().armed = Some(mmu_fault_at(FAULTED_VA));
    host.call(|s| {
        s.submit
            .launch(stream, v.record(buf.va, buf.va, buf.va, 64))
    })
    .unwrap();
    let err = host.call(|s| s.submit.synchronize(stream)).unwrap_err();
    assert!(
        matches!(err, HostError::Submit(SubmitError::ChannelFault(_))),
        "{err:?}"
    );
    // The contained recovery could not replace the channels: it says so,
    // and the full contract runs (the stack is down, our channels stopped
    // and our RM client freed).
    let tried = contained(&host, |i| matches!(i, Incident::ChannelFault { .. }));
    assert!(
        tried
            .steps
            .iter()
            .any(|s| !s.ok && s.action.contains("fresh")),
        "{:?}",
        tried.steps
    );
    let down = host
        .wait_down(Duration::from_secs(30))
        .expect("the full recovery ran");
    assert!(
        down.steps
            .iter()
            .any(|s| s.action.contains("free our RM objects") && s.ok),
        "{:?}",
        down.steps
    );
    assert!(matches!(
        host.call(|s| s.submit.stats()),
        Err(HostError::Down { .. })
    ));
}

#[test]
fn the_demo_workload_runs_on_the_kernel_path() {
    let world = KernelWorld::new(Duration::from_secs(10));
    let host = world.start();
    let r = macuda_supervisor::workload::run(&host, Duration::ZERO).unwrap();
    let text = r.steps.join("\n");
    assert!(r.refusals.is_empty(), "{:?}", r.refusals);
    assert!(text.contains("kernel module owns the function"), "{text}");
    assert!(
        text.contains("both streams synchronised, 0 submissions handed to nothing"),
        "{text}"
    );
    assert!(
        text.contains("pinned host -> device -> device -> pinned host came back byte-exact"),
        "{text}"
    );
    assert!(text.contains("2 resident"), "{text}");
    // The fake GPU ran all 64 launches (it does not compute them).
    assert_eq!(world.fake.0.lock().kernels().len(), 64);
    let outcome = host.shutdown();
    let steps: Vec<&str> = outcome.steps.iter().map(|s| s.action.as_str()).collect();
    assert!(outcome.steps.iter().all(|s| s.ok), "{:?}", outcome.steps);
    assert!(
        !steps
            .iter()
            .any(|s| s.contains("bus mastering") || s.contains("function-level reset")),
        "{steps:?}"
    );
    assert!(steps.contains(&"leave PCI config and reset to the kernel module"));
    let m = world.fake.0.lock();
    assert!(m.objects.is_empty(), "every RM object freed");
    // Our groups left the scheduler before UVM stopped their channels: RM
    // refuses a schedule control after that (0x40 at every exit on the
    // H200 before the order was fixed).
    assert!(
        !m.calls
            .iter()
            .any(|c| matches!(c, FakeCall::ScheduleRefused { .. })),
        "a schedule control came after UVM stopped the group's channel"
    );
}

/// The benchmark's settings, on the world's fake module.
fn bench_config(world: &KernelWorld) -> macuda_supervisor::HostConfig {
    let mut config = macuda_supervisor::gpu_bench::bench_config(world.config.device.clone());
    config.opener = world.config.opener.clone();
    config.rm_driver = world.config.rm_driver.clone();
    config.report_dir = world.reports.path().to_path_buf();
    config
}

#[test]
fn the_gpu_launch_benchmark_runs_on_the_fake_and_says_when_it_has_no_reference() {
    let world = KernelWorld::new(Duration::from_secs(30));
    let config = bench_config(&world);
    let b = macuda_supervisor::gpu_bench::gpu_bench(config, 3000, None, false).unwrap();
    let o = &b.ours;
    assert!(o.total_ns > 0.0 && o.caller_ns > 0.0, "{b:?}");
    // The hand-over's parts lie inside it: descriptors delivered, and
    // submissions, of which GP_PUT's write and read-back.
    assert!(o.deliver_ns > 0.0 && o.descriptor_bytes > 0.0, "{b:?}");
    assert!(o.gp_put_ns > 0.0 && o.gp_put_ns <= o.publish_ns, "{b:?}");
    assert!(
        o.deliver_ns <= o.flush_ns && o.publish_ns <= o.flush_ns,
        "{b:?}"
    );
    // In tokens with a sync after each, the region starts over at every
    // sync, so a token's launches land where the last token's did and
    // little is delivered again; without syncs every launch lands on
    // fresh words.
    let t = &b.tokens;
    assert!(t.total_ns > 0.0, "{b:?}");
    assert!(
        t.descriptor_bytes * 2.0 < o.descriptor_bytes,
        "{} bytes a launch in tokens, {} without syncs",
        t.descriptor_bytes,
        o.descriptor_bytes
    );
    assert!(b.cuda_loop_ns.is_none());
    let text = b.render();
    assert!(text.contains("gpu-launch: ours_ns="), "{text}");
    assert!(text.contains("GP_PUT written and read back"), "{text}");
    assert!(text.contains("in tokens of 250 launches"), "{text}");
    assert!(text.contains("no reference program given"), "{text}");
    // The fake ran the discarded first run, the timed one and the token
    // run, each with its warm-up: 3 x (2000 + 3000).
    assert_eq!(world.fake.0.lock().kernels().len(), 15_000);
    // A reference that is not there is named, not a crash.
    let missing = std::path::Path::new("/nonexistent/launch_bench");
    let config = bench_config(&world);
    let b = macuda_supervisor::gpu_bench::gpu_bench(config, 10, Some(missing), false).unwrap();
    assert!(
        b.reference_note
            .as_deref()
            .unwrap_or("")
            .contains("cannot run"),
        "{b:?}"
    );
}

#[test]
fn the_device_script_injects_into_the_middle_of_the_demo() {
    // tests/device/run.sh injects at submit's 40th request: on this path
    // that lands inside the workload, neither in boot nor after it.
    let world = KernelWorld::new(Duration::from_secs(10));
    let host = world.start();
    let before = host.snapshots();
    macuda_supervisor::workload::run(&host, Duration::ZERO).unwrap();
    let after = host.snapshots();
    let submit =
        |s: &[macuda_core::ActorSnapshot]| s.iter().find(|a| a.name == "submit").unwrap().handled;
    let (boot, end) = (submit(&before), submit(&after));
    assert!(
        boot < 40 && 40 < end,
        "submit handles {boot} requests in boot, {end} by the end"
    );
}

#[test]
#[ignore = "a measurement, not a check: run by hand to see the actor's costs on the fake"]
fn print_the_launch_costs_on_the_fake() {
    let world = KernelWorld::new(Duration::from_secs(60));
    let config = bench_config(&world);
    let b = macuda_supervisor::gpu_bench::gpu_bench(config, 50_000, None, true).unwrap();
    eprintln!("{}", b.render());
}

#[test]
fn the_fake_gpu_sees_two_chains_launched_without_a_wait_between_them() {
    // The control for the check above: two launches by SEND_PCAS with no
    // semaphore wait between them may run side by side on a GPU, and the
    // fake says so; with the wait, it does not.
    use macuda_gsp::kernel::KernelRm;
    use macuda_hw::methods::host;
    use macuda_hw::push::SUBCHANNEL_COMPUTE;
    use macuda_submit::encode::{qmd_bytes, Bank0Slot};
    use macuda_submit::pushbuf::PushBuffer;
    use macuda_submit::{DeviceFormat, KernelDesc, LaunchShape};
    let fake = macuda_tests::fake_rm::FakeRm::with_gpu(macuda_tests::fake_rm::FakeModule::h200());
    let rm = KernelRm::open(std::sync::Arc::new(fake.clone()), 0).unwrap();
    let user = rm.usermode().unwrap();
    let mut space = rm.va_space().unwrap();
    let group = rm.channel_group(&space).unwrap();
    let mut ch = rm.channel(&mut space, &group, 0xCBC0, 64).unwrap();
    rm.schedule(&group).unwrap();
    let mem = rm.alloc_vram(&mut space, 64 << 10, true).unwrap();
    let view = mem.cpu.as_ref().unwrap();
    let f = DeviceFormat::for_device(90, macuda_hw::methods::compute::HOPPER_COMPUTE_A).unwrap();
    let k = KernelDesc {
        name: "k".into(),
        entry: mem.va + 0x8000,
        code_bytes: 256,
        registers: 8,
        barriers: 0,
        shared_bytes: 0,
        local_bytes: 0,
        param_base: 0x210,
        param_bytes: 0,
        banks: Vec::new(),
    };
    let t = f.template(k.clone()).unwrap();
    let shape = LaunchShape {
        grid: [1, 1, 1],
        block: [32, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let sem = mem.va + 0xF000;
    let put = |at: usize, b: &[u8]| {
        // SAFETY: inside the 64 KiB mapping.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), view.as_ptr().add(at), b.len()) }
    };
    for (i, qmd_at) in [0x1000usize, 0x2000, 0x3000].iter().enumerate() {
        let mut bank = vec![0u8; f.cbank0_bytes(&k) as usize];
        let mut q = macuda_hw::qmd::Qmd::new(f.qmd);
        f.launch(
            &t,
            &shape,
            &[],
            &mut q,
            Bank0Slot {
                address: mem.va + 0x4000 + 0x400 * i as u64,
                bytes: &mut bank,
                holds_template: false,
            },
        )
        .unwrap();
        f.release_qmd(&mut q, sem, i as u64 + 1).unwrap();
        let mut raw = vec![0u8; f.qmd_bytes() as usize];
        qmd_bytes(&q, &mut raw);
        put(*qmd_at, &raw);
        put(0x4000 + 0x400 * i, &bank);
    }
    put(0xF000, &[0; 8]);
    let mut pb = PushBuffer::new();
    pb.method(SUBCHANNEL_COMPUTE, host::SET_OBJECT::BYTE_OFFSET, 0xCBC0)
        .unwrap();
    pb.launch_qmd(mem.va + 0x1000).unwrap();
    pb.launch_qmd(mem.va + 0x2000).unwrap();
    pb.host_semaphore(sem, 2, true).unwrap();
    pb.launch_qmd(mem.va + 0x3000).unwrap();
    let words: Vec<u8> = pb.words().iter().flat_map(|w| w.to_le_bytes()).collect();
    put(0x6000, &words);
    ch.submit(
        &user,
        mem.va + 0x6000,
        u32::try_from(pb.words().len()).unwrap(),
    )
    .unwrap();
    let started = std::time::Instant::now();
    while fake.0.lock().kernels().len() < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the fake GPU ran nothing"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let overlaps: Vec<u64> = fake
        .0
        .lock()
        .gpu_log
        .iter()
        .filter_map(|e| match e {
            GpuEvent::Overlap { head, .. } => Some(*head),
            _ => None,
        })
        .collect();
    assert_eq!(
        overlaps,
        vec![mem.va + 0x2000],
        "the second launch could overlap the first; the third waited"
    );
}

/// With the copy channel placed on a copy engine (as CUDA places its
/// copies), it gets a channel group of its own on that engine, naming the
/// VA space and without a subcontext; both groups are scheduled, the demo's
/// copies and launches run in order across them, and teardown frees both.
#[test]
fn a_copy_channel_on_a_copy_engine_runs_in_a_group_of_its_own() {
    let mut world = KernelWorld::new(Duration::from_secs(10));
    world.config.submit.copy_placement = CopyPlacement::CopyEngine(2);
    let host = world.start();
    let ch = host.call(|s| s.submit.channels()).unwrap();
    assert_ne!(ch.group, ch.copy_group);
    {
        let m = world.fake.0.lock();
        let copy_group = &m.groups[&ch.copy_group.0];
        assert_eq!(copy_group.engine_type, rm::ENGINE_TYPE_COPY[2]);
        assert_ne!(
            copy_group.va_space, 0,
            "a copy-engine group names its VA space"
        );
        assert_eq!(m.groups[&ch.group.0].engine_type, rm::ENGINE_TYPE_GR0);
        assert_eq!(m.channels[&ch.copy.channel.0].group, ch.copy_group.0);
        assert_eq!(m.channels[&ch.compute.channel.0].group, ch.group.0);
        for g in [ch.group.0, ch.copy_group.0] {
            assert!(
                m.calls.contains(&FakeCall::Schedule {
                    group: g,
                    enable: true
                }),
                "group {g:#x} scheduled"
            );
        }
    }
    let r = macuda_supervisor::workload::run(&host, Duration::ZERO).unwrap();
    let text = r.steps.join("\n");
    assert!(
        text.contains("pinned host -> device -> device -> pinned host came back byte-exact"),
        "{text}"
    );
    assert!(
        text.contains("both streams synchronised, 0 submissions handed to nothing"),
        "{text}"
    );
    let outcome = host.shutdown();
    assert!(outcome.steps.iter().all(|s| s.ok), "{:?}", outcome.steps);
    assert!(
        world.fake.0.lock().objects.is_empty(),
        "every RM object freed"
    );
}

/// A copy engine RM has no engine type for is refused by name when the
/// channels are made, and the Host does not start half-built.
#[test]
fn a_copy_engine_rm_does_not_name_is_refused() {
    let mut world = KernelWorld::new(Duration::from_secs(10));
    world.config.submit.copy_placement = CopyPlacement::CopyEngine(12);
    let err = Host::start(world.config.clone()).map(|_| ()).unwrap_err();
    let chain = macuda_core::error_chain(&err).join(": ");
    assert!(
        chain.contains("copy engine 12 is not one RM names"),
        "{chain}"
    );
    assert!(
        world.fake.0.lock().groups.is_empty(),
        "no group left behind"
    );
}

/// The per-kernel GPU timeline on the fake module: every launch of three
/// chains, each chain's start and a copy report the engine's clock, none
/// is missing, a kernel ends no earlier than its chain started and the
/// kernels of a chain end in order; a sync point is noted. A ring smaller
/// than the work between sync points is read as it fills, not overwritten.
#[test]
fn the_gpu_timeline_stamps_every_launch_copy_and_chain_start() {
    use macuda_submit::{ProfiledWork, QueueKind};
    let mut world = KernelWorld::new(Duration::from_secs(10));
    world.config.submit.chain_depth = 4;
    world.config.submit.profile_slots = Some(8);
    let host = world.start();
    let v = VectorAdd::load(&host);
    let bufs: Vec<_> = (0..3)
        .map(|_| host.call(|s| s.memory.alloc_device(4096)).unwrap())
        .collect();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    for i in 0..10 {
        let l = v.record(bufs[0].va, bufs[1].va, bufs[2].va, 1000 - i);
        host.call(|s| s.submit.launch(stream, l)).unwrap();
    }
    lane.push(LaneItem::Copy {
        stream,
        src: bufs[2].va,
        dst: bufs[1].va,
        bytes: 4096,
    })
    .unwrap();
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    let p = host.call(|s| s.submit.profile()).unwrap();
    assert!(p.stamped);
    assert_eq!(p.missing, 0, "{p:?}");
    let kernels: Vec<_> = p
        .records
        .iter()
        .filter_map(|r| match &r.work {
            ProfiledWork::Kernel {
                name,
                chain,
                position,
                ..
            } => Some((name.clone(), *chain, *position, r.gpu_ns.unwrap())),
            _ => None,
        })
        .collect();
    assert_eq!(kernels.len(), 10, "{p:?}");
    assert!(kernels.iter().all(|k| k.0 == "vector_add"));
    let starts: Vec<_> = p
        .records
        .iter()
        .filter_map(|r| match r.work {
            ProfiledWork::ChainStart { chain } => Some((chain, r.gpu_ns.unwrap())),
            _ => None,
        })
        .collect();
    assert_eq!(starts.iter().map(|s| s.0).collect::<Vec<_>>(), [1, 2, 3]);
    for (chain, start) in &starts {
        let mine: Vec<_> = kernels.iter().filter(|k| k.1 == *chain).collect();
        assert!(!mine.is_empty());
        assert!(mine.iter().all(|k| k.3 >= *start), "chain {chain}");
        assert!(mine.windows(2).all(|w| w[0].2 < w[1].2 && w[0].3 <= w[1].3));
    }
    let copies: Vec<_> = p
        .records
        .iter()
        .filter(|r| {
            matches!(
                r.work,
                ProfiledWork::Copy {
                    bytes: 4096,
                    fill: false
                }
            )
        })
        .collect();
    assert_eq!(copies.len(), 1);
    assert_eq!(copies[0].queue, QueueKind::Copy);
    assert!(copies[0].gpu_ns.is_some());
    assert_eq!(p.syncs.len(), 1);
    assert!(p.syncs[0].ended_ns >= p.syncs[0].began_ns);
}

/// Without a profile asked for, QMDs carry no second release and the
/// report is empty.
#[test]
fn without_a_profile_nothing_is_stamped() {
    let world = KernelWorld::new(Duration::from_secs(10));
    let host = world.start();
    let v = VectorAdd::load(&host);
    let b = host.call(|s| s.memory.alloc_device(4096)).unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    host.call(|s| s.submit.launch(stream, v.record(b.va, b.va, b.va, 64)))
        .unwrap();
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    let p = host.call(|s| s.submit.profile()).unwrap();
    assert!(p.records.is_empty() && p.syncs.is_empty() && !p.stamped);
    let releases = world
        .fake
        .0
        .lock()
        .gpu_log
        .iter()
        .filter(|e| matches!(e, GpuEvent::Release { .. }))
        .count();
    // The chain's tail release, and the copy queue's delivery release.
    assert!(releases <= 4, "{releases}");
}

#[test]
fn the_huge_page_threshold_decides_which_allocations_rm_backs_with_2_mib_pages() {
    const MIB: u64 = 1 << 20;
    // What RM was asked for with the module's threshold (8 MiB) and with
    // 2 MiB: the submit actor's 4 MiB descriptor region and a 3 MiB buffer
    // change pages, a 1 MiB one does not; every huge allocation is whole
    // 2 MiB pages and lies at a 2 MiB-aligned VA.
    let asked = |huge_pages_from: Option<u64>| {
        let mut world = KernelWorld::new(Duration::from_secs(30));
        world.config.huge_pages_from = huge_pages_from;
        let host = world.start();
        let vas: Vec<u64> = [MIB, 3 * MIB, 4 * MIB]
            .iter()
            .map(|&b| host.call(|s| s.memory.alloc_device(b)).unwrap().va)
            .collect();
        drop(host.shutdown());
        let video = world.fake.0.lock().video.clone();
        (vas, video)
    };
    let (_, default) = asked(None);
    assert!(
        default
            .iter()
            .all(|&(bytes, huge)| huge == (bytes >= 8 * MIB)),
        "{default:?}"
    );
    let (vas, two) = asked(Some(2 * MIB));
    let huge_of =
        |video: &[(u64, bool)], bytes: u64| video.iter().filter(|v| **v == (bytes, true)).count();
    assert!(
        huge_of(&two, 4 * MIB) >= 2,
        "the region and the 4 MiB buffer: {two:?}"
    );
    assert_eq!(huge_of(&default, 4 * MIB), 0, "{default:?}");
    assert!(
        two.contains(&(4 * MIB, true)) && two.contains(&(MIB, false)),
        "{two:?}"
    );
    assert!(
        two.iter().all(|&(bytes, huge)| huge == (bytes >= 2 * MIB)),
        "{two:?}"
    );
    assert!(
        vas[1].is_multiple_of(2 * MIB) && vas[2].is_multiple_of(2 * MIB),
        "{vas:x?}"
    );
}
