//! The stack as a program uses it, on a simulated card we boot ourselves:
//! the same Host API the kernel-module path serves, over GSP-RM, our page
//! tables and our channels. A launch that reads an unmapped address stops
//! the channel on the sim; GSP-RM posts the robust-channel notice and
//! keeps the MMU fault, and the stack reports it as a typed channel fault
//! read over RPC (the debugger: SM error states first, MMU fault info as
//! flagged), tells the supervisor, whose contained recovery replaces the
//! channels and writes a report, and runs again. A corrupted
//! reply from GSP-RM takes the stack down through recovery (report, bus
//! mastering off); engines that stop are a bounded typed error; a card
//! off the bus (all ones) is never taken for work done; a dropped
//! doorbell is rung again and the supervisor told; an address the card
//! faults on is named.
//! vector_add's results are the sim's model's (it executes no GPU code).

use macuda_core::Incident;
use macuda_loader::FunctionInfo;
use macuda_pci::DeviceSpec;
use macuda_sim::{Card, Listen, Server, SimChip};
use macuda_submit::{KernelId, LaunchRecord, StreamId, SubmitError};
use macuda_supervisor::{CrashReport, Host, HostConfig, HostError};
use macuda_tests::contained;
use std::time::Duration;

/// The stack on a simulated GB202 this test serves (so it can look at the
/// card), over its unix socket.
fn sim() -> (Host, Server<Card>, tempfile::TempDir) {
    let firmware = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("card.sock");
    let chip = SimChip::by_name("gb202").unwrap();
    let server = Server::start(&Listen::Unix(socket.clone()), Card::new(chip)).unwrap();
    let mut config = HostConfig::new(DeviceSpec::TinyGpu {
        socket: Some(socket),
    });
    config.firmware = Some(firmware.into());
    config.deadline = Duration::from_secs(30);
    config.submit.sync_timeout = Duration::from_secs(5);
    config.report_dir = std::env::temp_dir().join("macuda-sim-stack-reports");
    let host = Host::start(config).expect("the stack boots the simulated card");
    (host, server, dir)
}

fn vector_add(host: &Host) -> (KernelId, FunctionInfo) {
    let fatbin = std::fs::read("cuda/fixtures/vector_add.size.fatbin").unwrap();
    let sm = host.device().chip.chip.sm();
    let module = host.call(|s| s.loader.load_module(fatbin, sm)).unwrap();
    let info = host
        .call(|s| s.loader.function(module, "vector_add".to_string()))
        .unwrap();
    let id = host
        .call(|s| s.submit.register_kernel(info.kernel_desc()))
        .unwrap();
    (id, info)
}

fn launch(
    host: &Host,
    k: &(KernelId, FunctionInfo),
    stream: StreamId,
    [a, b, c]: [u64; 3],
    n: i32,
) {
    let params =
        k.1.marshal(&[
            &a.to_le_bytes(),
            &b.to_le_bytes(),
            &c.to_le_bytes(),
            &n.to_le_bytes(),
        ])
        .unwrap();
    let record = LaunchRecord {
        kernel: k.0,
        grid: [u32::try_from(n).unwrap().div_ceil(256), 1, 1],
        block: [256, 1, 1],
        dynamic_shared_bytes: 0,
        params,
    };
    host.call(|s| s.submit.launch(stream, record)).unwrap();
}

fn floats(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// vector_add of `n` floats in memory the CPU reaches (inside BAR1),
/// checked against the CPU's sums.
fn runs_right(host: &Host, k: &(KernelId, FunctionInfo), stream: StreamId, n: usize) {
    let bytes = (n * 4) as u64;
    let [a, b, c] = [0, 1, 2].map(|_| host.call(|s| s.memory.alloc_visible(bytes)).unwrap());
    let av: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let bv: Vec<f32> = (0..n).map(|i| 7.0 - i as f32).collect();
    host.call(|s| s.memory.write_device(a.va, floats(&av)))
        .unwrap();
    host.call(|s| s.memory.write_device(b.va, floats(&bv)))
        .unwrap();
    host.call(|s| s.memory.write_device(c.va, vec![0xFF; n * 4]))
        .unwrap();
    launch(
        host,
        k,
        stream,
        [a.va, b.va, c.va],
        i32::try_from(n).unwrap(),
    );
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    let out = host.call(|s| s.memory.read_device(c.va, bytes)).unwrap();
    let bad = out
        .chunks_exact(4)
        .zip(av.iter().zip(&bv))
        .filter(|(got, (x, y))| f32::from_le_bytes([got[0], got[1], got[2], got[3]]) != *x + *y)
        .count();
    assert_eq!(bad, 0, "{bad} of {n} sums differ");
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn an_unmapped_read_is_a_typed_mmu_fault_read_over_rpc_and_fresh_channels_run_again() {
    let (host, server, _dir) = sim();
    let k = vector_add(&host);
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    runs_right(&host, &k, stream, 4096);

    let out = host.call(|s| s.memory.alloc_visible(4096)).unwrap();
    let unmapped = macuda_memory::NEVER_MAPPED_VA;
    launch(&host, &k, stream, [unmapped, unmapped, out.va], 256);
    let err = host
        .call(|s| s.submit.synchronize(stream))
        .expect_err("the faulting launch never completes");
    let HostError::Submit(SubmitError::ChannelFault(f)) = err else {
        panic!("not a channel fault: {err:?}");
    };
    eprintln!("{f}");
    assert!(host.outcome().is_none(), "the stack stays up");
    assert!(f.mmu_fault, "an unmapped read is an MMU fault: {f}");
    assert_eq!(f.debugger.as_deref(), Some("read"), "{f}");
    assert!(
        f.mmu_faults
            .iter()
            .any(|m| m.address >> 12 == unmapped >> 12),
        "the fault names the address: {f:?}"
    );

    // The supervisor heard of it as the submit actor latched it, and its
    // contained recovery replaced the channels: a report, fresh channels,
    // and the stack still up.
    let contained = contained(&host, |i| matches!(i, Incident::ChannelFault { .. }));
    eprintln!("{:?}", contained.steps);
    assert!(host.outcome().is_none(), "the stack stays up");
    assert!(
        contained
            .steps
            .iter()
            .any(|s| s.ok && s.action.contains("fresh")),
        "{:?}",
        contained.steps
    );
    let report = CrashReport::read(contained.report.as_ref().expect("a report")).unwrap();
    assert!(
        report.render().contains("incident in actor `submit`"),
        "{}",
        report.render()
    );
    // The fresh channels are new to the card too: nothing of the old
    // ones' fault is left on them, and they run.
    runs_right(&host, &k, stream, 4096);
    let fresh = host.call(|s| s.submit.channels()).unwrap();
    {
        let card = server.device();
        for token in [fresh.compute.token, fresh.copy.token] {
            assert!(card.channel_fault(token).is_none(), "channel {token}");
        }
    }
    let outcome = host.shutdown();
    assert!(outcome.steps.iter().all(|s| s.ok), "{:?}", outcome.steps);
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn a_corrupted_reply_from_gsp_rm_stops_the_stack_with_a_report_and_the_bus_quiet() {
    let (host, server, _dir) = sim();
    let device = host.device().device;
    server
        .device()
        .inject(macuda_sim::faults::DeviceFault::CorruptReply { nth: 1 });
    let err = host
        .call(|s| s.gsp.alloc(device, macuda_hw::class::NV20_SUBDEVICE_0))
        .expect_err("the reply fails its checksum");
    let chain = macuda_core::error_chain(&err).join(": ");
    assert!(chain.contains("checksum"), "{chain}");
    // The conversation is broken: the gsp actor fails, and the stack goes
    // down through recovery (which the monitor runs on its own thread).
    let waited = std::time::Instant::now();
    let outcome = loop {
        if let Some(o) = host.outcome() {
            break o;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "no recovery: {chain}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(outcome.steps.iter().all(|s| s.ok), "{:?}", outcome.steps);
    // The report says what GSP-RM was last told and said, and what its
    // log buffers held (undecoded here: this card is reached as a plain
    // TinyGPU socket, for which no logging metadata is known).
    let path = outcome.report.as_ref().expect("a report");
    let report = macuda_supervisor::CrashReport::read(path).unwrap();
    let gsp = report.boot.expect("GSP-RM's journal in the report");
    assert!(
        gsp.rpc.iter().any(|l| l.contains("GSP_RM_ALLOC")),
        "{:?}",
        gsp.rpc
    );
    assert!(
        gsp.log
            .iter()
            .any(|l| l.contains("words written (no logging metadata")),
        "{:?}",
        gsp.log
    );
    assert!(!server.device().bus_master(), "bus mastering left on");
    drop(host);
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn engines_that_stop_are_a_bounded_typed_error_not_a_hang() {
    let (host, server, _dir) = sim();
    let k = vector_add(&host);
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    server
        .device()
        .inject(macuda_sim::faults::DeviceFault::HangEngines);
    let out = host.call(|s| s.memory.alloc_visible(4096)).unwrap();
    launch(&host, &k, stream, [out.va, out.va, out.va], 256);
    let started = std::time::Instant::now();
    let err = host
        .call(|s| s.submit.synchronize(stream))
        .expect_err("nothing moves");
    // Within the sync timeout (5 s) and its deep check, never a hang.
    assert!(started.elapsed() < Duration::from_secs(30), "{err:?}");
    assert!(
        matches!(err, HostError::Submit(SubmitError::Stuck { .. })),
        "{err:?}"
    );
    // The command streams are in an unknown state: recovery runs.
    let outcome = recovered(&host);
    assert!(outcome.steps.iter().all(|s| s.ok), "{:?}", outcome.steps);
    assert!(!server.device().bus_master(), "bus mastering left on");
}

/// Wait for the recovery the monitor runs on its own thread.
fn recovered(host: &Host) -> std::sync::Arc<macuda_supervisor::RecoveryOutcome> {
    let waited = std::time::Instant::now();
    loop {
        if let Some(o) = host.outcome() {
            return o;
        }
        assert!(waited.elapsed() < Duration::from_secs(30), "no recovery");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn a_card_that_falls_off_the_bus_is_a_typed_error_and_recovery_runs() {
    let (host, server, _dir) = sim();
    let k = vector_add(&host);
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let out = host.call(|s| s.memory.alloc_visible(4096)).unwrap();
    server
        .device()
        .inject(macuda_sim::faults::DeviceFault::OffTheBus);
    launch(&host, &k, stream, [out.va, out.va, out.va], 256);
    let err = host
        .call(|s| s.submit.synchronize(stream))
        .expect_err("a card off the bus runs nothing");
    // Its timeline reads all ones: never taken for work done.
    let HostError::Submit(SubmitError::ImpossibleTimeline { read, .. }) = err else {
        panic!("not the card gone: {err:?}");
    };
    assert_eq!(read, u64::MAX);
    let outcome = recovered(&host);
    assert!(outcome.report.is_ok(), "{:?}", outcome.report);
    // Recovery ran every step and says which it could not do: a card off
    // the bus takes no command register write.
    let clear = &outcome.steps[0];
    assert!(
        clear.action.contains("clear bus mastering"),
        "{:?}",
        outcome.steps
    );
    assert!(!clear.ok && clear.detail.contains("0xffff"), "{clear:?}");
    assert!(
        outcome.steps[1..].iter().all(|s| s.ok),
        "{:?}",
        outcome.steps
    );
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn an_address_the_card_faults_on_is_a_typed_mmu_fault_naming_it() {
    let (host, server, _dir) = sim();
    let k = vector_add(&host);
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let [a, c] = [0, 1].map(|_| host.call(|s| s.memory.alloc_visible(4096)).unwrap());
    server
        .device()
        .inject(macuda_sim::faults::DeviceFault::FaultAddress { va: c.va });
    launch(&host, &k, stream, [a.va, a.va, c.va], 256);
    let err = host
        .call(|s| s.submit.synchronize(stream))
        .expect_err("the write to c faults");
    let HostError::Submit(SubmitError::ChannelFault(f)) = err else {
        panic!("not a channel fault: {err:?}");
    };
    assert!(f.mmu_fault, "{f}");
    assert!(
        f.mmu_faults.iter().any(|m| m.address >> 12 == c.va >> 12),
        "{f:?}"
    );
    // The supervisor's contained recovery: fresh channels, and the stack
    // runs again without the caller doing anything.
    let contained = contained(
        &host,
        |i| matches!(i, Incident::ChannelFault { fault } if fault.contains("MMU")),
    );
    assert!(contained.report.is_ok(), "{:?}", contained.report);
    assert!(
        host.outcome().is_none(),
        "a channel fault leaves the stack up"
    );
    runs_right(&host, &k, stream, 256);
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn a_dropped_doorbell_is_rung_again_and_the_work_completes() {
    let (host, server, _dir) = sim();
    let k = vector_add(&host);
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    // Everything before the fault has run, so the doorbell lost is the
    // launch's. Without this sync, the doorbell of the module's code
    // upload (an inline upload on the same channel) can still be in the
    // sim server's socket when the fault is armed (a doorbell is a posted
    // write): it is then the one lost, the launch's doorbell fetches both
    // pieces of work, and nothing is left to ring again. Under two busy
    // loops, 4 runs in 30 failed so without the sync, 0 in 30 with it.
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    server
        .device()
        .inject(macuda_sim::faults::DeviceFault::DropDoorbell { nth: 1 });
    runs_right(&host, &k, stream, 4096);
    let stats = host.call(|s| s.submit.stats()).unwrap();
    assert!(stats.doorbells_rerung >= 1, "{stats:?}");
    // The supervisor heard of the lost doorbell and wrote it down; the
    // stack stayed up.
    let contained = contained(
        &host,
        |i| matches!(i, Incident::DoorbellRungAgain { times } if *times >= 1),
    );
    assert!(
        contained.steps.iter().all(|s| s.ok),
        "{:?}",
        contained.steps
    );
    let report = CrashReport::read(contained.report.as_ref().expect("a report")).unwrap();
    assert_eq!(report.cause.word(), "incident");
    assert!(
        host.outcome().is_none(),
        "a lost doorbell leaves the stack up"
    );
}
