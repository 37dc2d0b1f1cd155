//! Submission ordering by execution: the captured command streams of a
//! stream with launches, a pitched copy, a fill and an event record, run by
//! the simulated copy and compute engines under hundreds of interleavings.
//! In every one, stream order holds, each kernel runs after the copy that
//! delivered its descriptors, and the timeline values mark exactly the work
//! before them. With the compute queue's waits removed, some interleaving
//! breaks the order - so the waits, not luck, keep it.

use macuda_hw::cbank0;
use macuda_hw::gpfifo::ENTRY_BYTES;
use macuda_hw::push::{GpEntry, USERD_GP_PUT};
use macuda_hw::qmd::{self, QmdVersion};
use macuda_submit::{
    EventId, KernelDesc, LaneItem, LaneLaunch, ParamBlock, StreamId, Submission, SubmitError,
};
use macuda_supervisor::Host;
use macuda_supervisor::HostError;
use macuda_tests::engines::{Done, Engines, Stall, Step};
use macuda_tests::NullWorld;
use std::time::Duration;

const SM: u32 = 120;
const COPY_DST: u64 = 0x3_0000_0000;
const FILL_DST: u64 = 0x4_0000_0000;
const SEEDS: u64 = 400;

fn kernel_desc() -> KernelDesc {
    KernelDesc {
        name: "k".into(),
        entry: 0x1_0000_0000,
        code_bytes: 512,
        registers: 24,
        barriers: 1,
        shared_bytes: 0,
        local_bytes: 0,
        param_base: cbank0::for_sm(SM).unwrap().param_base,
        param_bytes: 16,
        banks: Vec::new(),
    }
}

struct Captured {
    host: Host,
    subs: Vec<Submission>,
    stream: StreamId,
    event: EventId,
    /// The compute timeline value the capture's flush reached.
    issued: u64,
    /// The event recorded after the second launch: its timeline value.
    event_value: u64,
    _world: NullWorld,
}

fn capture() -> Captured {
    let c = capture_on(NullWorld::swallowing_doorbells(Duration::from_secs(5)));
    assert_eq!(
        c.issued, 3,
        "three chains: the copy closes the first, the event record the second"
    );
    c
}

/// launch 1, pitched copy, fill, launch 2, event, launch 3, launch 4.
fn capture_on(world: NullWorld) -> Captured {
    let host = world.start();
    let kernel = host
        .call(|s| s.submit.register_kernel(kernel_desc()))
        .unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let event = host.call(|s| s.submit.create_event()).unwrap();
    let launch = |i: u32| {
        lane.launch(LaneLaunch {
            stream,
            kernel,
            grid: [i, 1, 1],
            block: [32, 1, 1],
            dynamic_shared_bytes: 0,
            params: ParamBlock::new(&[i as u8; 16]),
        })
        .unwrap();
    };
    launch(1);
    lane.push(LaneItem::Copy2d {
        stream,
        src: 0x2_0000_0000,
        src_pitch: 512,
        dst: COPY_DST,
        dst_pitch: 1024,
        width: 256,
        height: 8,
    })
    .unwrap();
    lane.push(LaneItem::Fill {
        stream,
        dst: FILL_DST,
        bytes: 4096,
        value: 7,
    })
    .unwrap();
    launch(2);
    lane.push(LaneItem::RecordEvent {
        stream,
        event,
        timed: false,
    })
    .unwrap();
    launch(3);
    launch(4);
    let issued = host.call(|s| s.submit.flush()).unwrap();
    let subs = host.call(|s| s.submit.submissions()).unwrap();
    Captured {
        host,
        subs,
        stream,
        event,
        issued,
        event_value: 2,
        _world: world,
    }
}

fn reader(host: &Host) -> impl FnMut(u64) -> qmd::LaunchDescriptor + '_ {
    move |address| {
        let bytes = host.call(|s| s.submit.descriptors(address, 384)).unwrap();
        let words: Vec<u32> = bytes
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        qmd::decode(QmdVersion::V05_00, &words).unwrap()
    }
}

fn position(log: &[Done], what: impl Fn(&Done) -> bool, name: &str) -> usize {
    log.iter()
        .position(what)
        .unwrap_or_else(|| panic!("{name} never ran: {log:?}"))
}

fn kernel(grid_x: u32) -> impl Fn(&Done) -> bool {
    move |d| matches!(d, Done::Kernel { grid, .. } if grid[0] == grid_x)
}

#[test]
fn every_interleaving_keeps_stream_order_and_delivers_descriptors_first() {
    let c = capture();
    let mut read = reader(&c.host);
    let mut compute_semaphore = None;
    for seed in 0..SEEDS {
        let mut e = Engines::new(&c.subs);
        e.run(seed, &mut read).unwrap();
        let log = &e.log;
        let k: Vec<usize> = (1..=4)
            .map(|i| position(log, kernel(i), &format!("kernel {i}")))
            .collect();
        let copied = position(
            log,
            |d| matches!(d, Done::Copy { dst, fill: None, .. } if *dst == COPY_DST),
            "the pitched copy",
        );
        let filled = position(
            log,
            |d| matches!(d, Done::Copy { dst, fill: Some(7), .. } if *dst == FILL_DST),
            "the fill",
        );
        assert!(
            k[0] < copied && copied < filled && filled < k[1] && k[1] < k[2] && k[2] < k[3],
            "seed {seed}: stream order broken: {log:?}"
        );
        if let Done::Copy { bytes, .. } = &log[copied] {
            assert_eq!(*bytes, 256 * 8, "every line of the pitched copy");
        }
        // Each kernel's QMD arrived by an earlier copy.
        for &at in &k {
            let Done::Kernel { qmd_address, .. } = log[at] else {
                unreachable!()
            };
            let delivered = log[..at].iter().any(|d| {
                matches!(d, Done::Copy { dst, bytes, fill: None }
                    if *dst <= qmd_address && qmd_address < dst + bytes)
            });
            assert!(
                delivered,
                "seed {seed}: QMD {qmd_address:#x} ran undelivered: {log:#x?}"
            );
        }
        // The timeline: one value per chain, each written right after the
        // chain's tail kernel (1, then 2 - the event - then 3) and nowhere
        // else; the event is complete exactly when the work before it is.
        let releases: Vec<(usize, u64, u64)> = log
            .iter()
            .enumerate()
            .filter_map(|(i, d)| match d {
                Done::Release { address, value } => Some((i, *address, *value)),
                _ => None,
            })
            .collect();
        let tail = *compute_semaphore.get_or_insert_with(|| {
            releases
                .iter()
                .find(|r| r.0 == k[3] + 1)
                .expect("kernel 4 releases")
                .1
        });
        let timeline: Vec<(usize, u64)> = releases
            .iter()
            .filter(|r| r.1 == tail)
            .map(|r| (r.0, r.2))
            .collect();
        assert_eq!(
            timeline,
            vec![(k[0] + 1, 1), (k[1] + 1, c.event_value), (k[3] + 1, 3)],
            "seed {seed}"
        );
        assert_eq!(e.semaphore(tail), 3);
    }
}

#[test]
fn without_the_compute_waits_some_interleaving_breaks_the_order() {
    let c = capture();
    let mut read = reader(&c.host);
    let mut broken = 0;
    for seed in 0..SEEDS {
        let mut e = Engines::new(&c.subs);
        e.remove_waits("compute");
        e.run(seed, &mut read).unwrap();
        let k2 = position(&e.log, kernel(2), "kernel 2");
        let filled = position(
            &e.log,
            |d| matches!(d, Done::Copy { fill: Some(7), .. }),
            "the fill",
        );
        if k2 < filled {
            broken += 1;
        }
    }
    assert!(broken > 0, "the order held by chance in all {SEEDS} runs");
}

#[test]
fn a_wait_nobody_releases_is_reported_as_a_deadlock() {
    let c = capture();
    let compute_only: Vec<Submission> = c
        .subs
        .iter()
        .filter(|s| s.queue == "compute")
        .cloned()
        .collect();
    let first_wait = macuda_tests::engines::steps(&compute_only[0].words)
        .into_iter()
        .find(|s| matches!(s, Step::Acquire { .. }))
        .expect("the compute queue waits for its delivery");
    let mut e = Engines::new(&compute_only);
    let err = e.run(1, &mut reader(&c.host)).unwrap_err();
    let Step::Acquire { address, value } = first_wait else {
        unreachable!()
    };
    assert_eq!(
        err,
        Stall::Deadlock {
            waiting: vec![("compute".to_string(), address, value)]
        }
    );
    assert!(e.log.is_empty(), "nothing ran before the wait");
}

/// Play the GPU's part of the timeline: write `value` where the engines
/// released it, through the memory actor (the card keeps its memory).
fn gpu_writes(c: &Captured, address: u64, value: u64) {
    c.host
        .call(|s| s.memory.write_device(address, value.to_le_bytes().to_vec()))
        .unwrap();
}

#[test]
fn events_and_sync_complete_when_the_gpu_writes_the_timeline() {
    let c = capture_on(NullWorld::playing_gpu(Duration::from_secs(5)));
    let query = || c.host.call(|s| s.submit.query_event(c.event)).unwrap();
    assert!(!query(), "nothing ran yet: the timeline reads 0");
    // Run the streams, then write what the engines released in the order
    // they released it, checking the event at each step.
    let mut e = Engines::new(&c.subs);
    e.run(3, &mut reader(&c.host)).unwrap();
    let mut released = Vec::new();
    for d in &e.log {
        if let Done::Release { address, value } = *d {
            gpu_writes(&c, address, value);
            released.push((address, value, query()));
        }
    }
    // The event (value 2 on the compute timeline) completes exactly when
    // that timeline reaches 2, not before.
    // The compute timeline is what the kernels' QMDs release.
    let compute = e
        .log
        .windows(2)
        .find_map(|w| match (&w[0], &w[1]) {
            (Done::Kernel { .. }, Done::Release { address, .. }) => Some(*address),
            _ => None,
        })
        .expect("a kernel releases the compute timeline");
    let seen: Vec<(u64, bool)> = released
        .iter()
        .filter(|r| r.0 == compute)
        .map(|r| (r.1, r.2))
        .collect();
    assert_eq!(seen, vec![(1, false), (2, true), (3, true)]);
    let reached = c.host.call(|s| s.submit.synchronize(c.stream)).unwrap();
    assert_eq!(reached, 3);
}

#[test]
fn a_sync_the_gpu_never_completes_reports_the_stuck_queue() {
    let mut world = NullWorld::playing_gpu(Duration::from_secs(5));
    world.config.submit.sync_timeout = Duration::from_millis(100);
    let c = capture_on(world);
    // The GPU finished the first chain only.
    let e = Engines::new(&c.subs);
    let first_tail = e
        .queued("compute")
        .iter()
        .find_map(|s| match s {
            Step::Launch { qmd_address } => Some(*qmd_address),
            _ => None,
        })
        .expect("a launch");
    let release = reader(&c.host)(first_tail).releases[0];
    assert!(release.enable && release.payload == 1);
    gpu_writes(&c, release.address, 1);
    let err = c.host.call(|s| s.submit.synchronize(c.stream)).unwrap_err();
    // A stuck engine is fatal to the submit actor: recovery runs and the
    // error comes wrapped in the failure it caused.
    let cause = match &err {
        HostError::ActorFailed { source, .. } => source.as_ref(),
        e => e,
    };
    let HostError::Submit(
        stuck @ SubmitError::Stuck {
            queue,
            value,
            reached,
            queues,
            ..
        },
    ) = cause
    else {
        panic!("expected a stuck compute queue, got {err:?}");
    };
    assert_eq!((*queue, *value), ("compute", 3));
    // The report says where both queues stood: the first chain's release
    // came, the rest did not.
    assert_eq!(*reached, 1);
    assert_eq!((queues.compute_reached, queues.compute_issued), (1, 3));
    assert!(stuck.to_string().contains("stood at 1"), "{stuck}");
}

#[test]
fn a_sync_waits_past_its_patience_while_the_timeline_keeps_moving() {
    // A GPU shared with other processes finishes a queue slowly; each step
    // comes within the patience, all of them together well after it.
    let mut world = NullWorld::playing_gpu(Duration::from_secs(5));
    world.config.submit.sync_timeout = Duration::from_millis(300);
    let c = capture_on(world);
    let (compute, copy) = timelines(&c);
    let step = Duration::from_millis(150);
    let started = std::time::Instant::now();
    let reached = std::thread::scope(|scope| {
        scope.spawn(|| {
            for value in 1..=5u64 {
                std::thread::sleep(step);
                gpu_writes(&c, compute, value.min(3));
                gpu_writes(&c, copy, value);
            }
        });
        c.host.call(|s| s.submit.synchronize(c.stream))
    })
    .expect("a queue that keeps moving is not stuck");
    assert_eq!(reached, 3);
    assert!(
        started.elapsed() >= step * 5,
        "the sync returned before the last step"
    );
}

/// The two timeline addresses, from what the engines released: the compute
/// one right after a kernel, the copy one the other.
fn timelines(c: &Captured) -> (u64, u64) {
    let mut e = Engines::new(&c.subs);
    e.run(1, &mut reader(&c.host)).unwrap();
    let compute = e
        .log
        .windows(2)
        .find_map(|w| match (&w[0], &w[1]) {
            (Done::Kernel { .. }, Done::Release { address, .. }) => Some(*address),
            _ => None,
        })
        .unwrap();
    let copy = e
        .log
        .iter()
        .find_map(|d| match d {
            Done::Release { address, .. } if *address != compute => Some(*address),
            _ => None,
        })
        .unwrap();
    (compute, copy)
}

fn small_rings(world: &mut NullWorld) {
    world.config.submit.chain_depth = 1;
    world.config.submit.gpfifo_entries = 8;
    world.config.submit.sync_timeout = Duration::from_millis(300);
}

fn more_launches(c: &Captured, n: u32) -> Result<u64, HostError> {
    let lane = c.host.call(|s| s.submit.lane()).unwrap();
    let kernel = c
        .host
        .call(|s| s.submit.register_kernel(kernel_desc()))
        .unwrap();
    for i in 0..n {
        lane.launch(LaneLaunch {
            stream: c.stream,
            kernel,
            grid: [i + 1, 1, 1],
            block: [32, 1, 1],
            dynamic_shared_bytes: 0,
            params: ParamBlock::new(&[0; 16]),
        })
        .unwrap();
    }
    c.host.call(|s| s.submit.flush())
}

#[test]
fn a_full_ring_frees_the_entries_the_engine_fetched() {
    let mut world = NullWorld::playing_gpu(Duration::from_secs(5));
    small_rings(&mut world);
    let c = capture_on(world);
    let (compute, copy) = timelines(&c);
    let before = c.host.call(|s| s.submit.stats()).unwrap().gp_entries;
    // The GPU: keeps finishing work, a value at a time on each timeline.
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut v = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                v += 1;
                gpu_writes(&c, compute, v);
                gpu_writes(&c, copy, v);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let r = more_launches(&c, 40);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(r.unwrap(), c.issued + 40, "one chain per launch");
    });
    let after = c.host.call(|s| s.submit.stats()).unwrap().gp_entries;
    assert_eq!(
        after - before,
        80,
        "ten times the 7 usable entries per ring"
    );
}

#[test]
fn a_full_ring_the_engine_never_reads_reports_the_stuck_queue() {
    let mut world = NullWorld::playing_gpu(Duration::from_secs(5));
    small_rings(&mut world);
    let c = capture_on(world);
    let err = more_launches(&c, 40).unwrap_err();
    let cause = match &err {
        HostError::ActorFailed { source, .. } => source.as_ref(),
        e => e,
    };
    let HostError::Submit(SubmitError::Stuck { queue, value, .. }) = cause else {
        panic!("expected a stuck queue, got {err:?}");
    };
    // The copy ring fills first (each chain's delivery precedes its launch):
    // 7 entries, the first of which the copy timeline's value 1 would free.
    assert_eq!((*queue, *value), ("copy", 1));
}

fn read(c: &Captured, address: u64, len: u64) -> Vec<u8> {
    c.host.call(|s| s.memory.read_device(address, len)).unwrap()
}

#[test]
fn the_streams_in_device_memory_are_the_captured_ones_and_run_the_same() {
    let c = capture_on(NullWorld::playing_gpu(Duration::from_secs(5)));
    // Walk each queue as Host would: GP_PUT from USERD, the entries from
    // the ring up to it, each entry's push buffer from the command region.
    let mut from_memory = Vec::new();
    for queue in ["copy", "compute"] {
        let mine: Vec<&Submission> = c.subs.iter().filter(|s| s.queue == queue).collect();
        let last = mine.last().unwrap();
        let userd = read(&c, last.userd_address + USERD_GP_PUT, 4);
        let gp_put = u32::from_le_bytes(userd.try_into().unwrap());
        assert_eq!(gp_put, last.gp_put, "{queue}: USERD GP_PUT");
        assert_eq!(gp_put as usize, mine.len(), "{queue}: one entry each");
        let ring = mine[0].gp_entry_address;
        for (slot, s) in mine.iter().enumerate() {
            let at = ring + slot as u64 * ENTRY_BYTES;
            let raw = read(&c, at, ENTRY_BYTES);
            let entry = u64::from_le_bytes(raw.try_into().unwrap());
            assert_eq!(entry, s.gp_entry, "{queue} entry {slot}");
            let e = GpEntry::decode(entry).unwrap();
            let bytes = read(&c, e.address(), 4 * u64::from(e.dwords()));
            let words: Vec<u32> = bytes
                .chunks(4)
                .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
                .collect();
            assert_eq!(words, s.words, "{queue} push buffer {slot}");
            from_memory.push(Submission {
                words,
                ..(*s).clone()
            });
        }
    }
    // Executed from memory, the streams do what the captured ones do.
    let mut a = Engines::new(&c.subs);
    a.run(5, &mut reader(&c.host)).unwrap();
    let mut b = Engines::new(&from_memory);
    b.run(5, &mut reader(&c.host)).unwrap();
    assert_eq!(a.log, b.log);
    assert!(
        a.log
            .iter()
            .filter(|d| matches!(d, Done::Kernel { .. }))
            .count()
            == 4
    );
}

#[test]
fn a_timed_record_waits_for_the_work_before_it_then_stamps_the_clock() {
    let world = NullWorld::playing_gpu(Duration::from_secs(5));
    let host = world.start();
    let k = host
        .call(|s| s.submit.register_kernel(kernel_desc()))
        .unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let event = host.call(|s| s.submit.create_event()).unwrap();
    let launch = |i: u32| {
        lane.launch(LaneLaunch {
            stream,
            kernel: k,
            grid: [i, 1, 1],
            block: [32, 1, 1],
            dynamic_shared_bytes: 0,
            params: ParamBlock::new(&[i as u8; 16]),
        })
        .unwrap();
    };
    launch(1);
    lane.push(LaneItem::Copy {
        stream,
        src: 0x2_0000_0000,
        dst: COPY_DST,
        bytes: 4096,
    })
    .unwrap();
    lane.push(LaneItem::RecordEvent {
        stream,
        event,
        timed: true,
    })
    .unwrap();
    launch(2);
    host.call(|s| s.submit.flush()).unwrap();
    let subs = host.call(|s| s.submit.submissions()).unwrap();
    let stamp = Engines::new(&subs)
        .queued("compute")
        .iter()
        .find_map(|s| match *s {
            Step::Release {
                address,
                value,
                stamped: true,
            } => Some((address, value)),
            _ => None,
        })
        .expect("the timed record stamps on the compute queue");
    assert_eq!(
        host.call(|s| s.submit.event_time(event)).unwrap(),
        None,
        "nothing ran: no time yet"
    );
    for seed in 0..SEEDS / 4 {
        let mut e = Engines::new(&subs);
        e.run(seed, &mut reader(&host)).unwrap();
        let at = position(
            &e.log,
            |d| matches!(*d, Done::Release { address, value } if (address, value) == stamp),
            "the stamp",
        );
        let copy = position(
            &e.log,
            |d| matches!(d, Done::Copy { dst, .. } if *dst == COPY_DST),
            "the copy",
        );
        assert!(position(&e.log, kernel(1), "kernel 1") < at, "seed {seed}");
        assert!(copy < at, "seed {seed}: stamped before the copy finished");
        assert!(at < position(&e.log, kernel(2), "kernel 2"), "seed {seed}");
    }
    // The engine writes the payload, then its clock 8 bytes on.
    let clock = 123_456_789u64;
    host.call(|s| {
        s.memory
            .write_device(stamp.0 + 8, clock.to_le_bytes().to_vec())?;
        s.memory
            .write_device(stamp.0, stamp.1.to_le_bytes().to_vec())
    })
    .unwrap();
    assert_eq!(
        host.call(|s| s.submit.event_time(event)).unwrap(),
        Some(clock)
    );
}

#[test]
fn events_are_reused_after_destroy_and_untimed_ones_have_no_time() {
    let world = NullWorld::new(Duration::from_secs(5));
    let host = world.start();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    let a = host.call(|s| s.submit.create_event()).unwrap();
    let b = host.call(|s| s.submit.create_event()).unwrap();
    assert_ne!(a, b);
    lane.push(LaneItem::RecordEvent {
        stream,
        event: a,
        timed: false,
    })
    .unwrap();
    let untimed = host.call(|s| s.submit.event_time(a)).unwrap_err();
    assert!(
        matches!(untimed, HostError::Submit(SubmitError::UntimedEvent { .. })),
        "{untimed:?}"
    );
    // The null device runs nothing: a timed record takes the host's clock,
    // so later records read later times.
    let mut times = Vec::new();
    for _ in 0..2 {
        lane.push(LaneItem::RecordEvent {
            stream,
            event: b,
            timed: true,
        })
        .unwrap();
        times.push(host.call(|s| s.submit.event_time(b)).unwrap().unwrap());
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(times[1] >= times[0] + 2_000_000, "{times:?}");
    host.call(|s| s.submit.destroy_event(a)).unwrap();
    assert!(host.call(|s| s.submit.query_event(a)).is_err());
    let c = host.call(|s| s.submit.create_event()).unwrap();
    assert_eq!(c, a, "the destroyed id is handed out again");
}

/// launch 1, a fill on the copy queue, an inline upload, launch 2: the
/// upload runs on the compute queue after both, and launch 2 after it, in
/// every interleaving; without the compute queue's waits some interleaving
/// writes the upload before the fill it follows.
#[test]
fn an_inline_upload_keeps_its_place_in_stream_order() {
    const UPLOAD_DST: u64 = 0x5_0000_0000;
    let world = NullWorld::swallowing_doorbells(Duration::from_secs(5));
    let host = world.start();
    let kid = host
        .call(|s| s.submit.register_kernel(kernel_desc()))
        .unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let launch = |i: u32| {
        lane.launch(LaneLaunch {
            stream,
            kernel: kid,
            grid: [i, 1, 1],
            block: [32, 1, 1],
            dynamic_shared_bytes: 0,
            params: ParamBlock::new(&[i as u8; 16]),
        })
        .unwrap();
    };
    launch(1);
    lane.push(LaneItem::Fill {
        stream,
        dst: FILL_DST,
        bytes: 4096,
        value: 7,
    })
    .unwrap();
    lane.push(LaneItem::Upload {
        stream,
        dst: UPLOAD_DST,
        data: vec![9u8; 64].into(),
    })
    .unwrap();
    launch(2);
    host.call(|s| s.submit.flush()).unwrap();
    let subs = host.call(|s| s.submit.submissions()).unwrap();
    let stats = host.call(|s| s.submit.stats()).unwrap();
    assert_eq!((stats.inline_uploads, stats.inline_upload_bytes), (1, 64));
    let mut read = reader(&host);
    let mut broken = 0;
    for waits in [true, false] {
        for seed in 0..SEEDS {
            let mut e = Engines::new(&subs);
            if !waits {
                e.remove_waits("compute");
            }
            e.run(seed, &mut read).unwrap();
            let log = &e.log;
            let k1 = position(log, kernel(1), "kernel 1");
            let k2 = position(log, kernel(2), "kernel 2");
            let filled = position(
                log,
                |d| matches!(d, Done::Copy { fill: Some(7), .. }),
                "the fill",
            );
            let uploaded = position(
                log,
                |d| matches!(d, Done::Upload { dst, bytes: 64 } if *dst == UPLOAD_DST),
                "the upload",
            );
            let ordered = k1 < filled && filled < uploaded && uploaded < k2;
            if waits {
                assert!(ordered, "seed {seed}: stream order broken: {log:?}");
            } else if !ordered {
                broken += 1;
            }
        }
    }
    assert!(broken > 0, "the order held by chance in all {SEEDS} runs");
}
