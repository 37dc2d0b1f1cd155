//! Syncs a caller waits out on its own thread (the submit crate's sync
//! board), against the fake kernel module whose GPU a thread plays: the
//! work before the sync point has run when it returns, the next token
//! starts over as after a mailbox sync, and whatever is not the plain case
//! sends the caller to the actor, which reports it.

use macuda_submit::{CallerSync, KernelId, LaneLaunch, ParamBlock};
use macuda_supervisor::Host;
use macuda_tests::fake_rm::GpuEvent;
use macuda_tests::vector_add::VectorAdd;
use macuda_tests::KernelWorld;
use std::time::Duration;

/// vector_add and three buffers it adds over.
fn vector_add(host: &Host) -> (VectorAdd, [u64; 3]) {
    let v = VectorAdd::load(host);
    let buf = || host.call(|s| s.memory.alloc_device(4 * 1024)).unwrap().va;
    (v, [buf(), buf(), buf()])
}

fn kernels_run(world: &KernelWorld) -> usize {
    let m = world.fake.0.lock();
    m.gpu_log
        .iter()
        .filter(|e| matches!(e, GpuEvent::Kernel { .. }))
        .count()
}

/// 300 launches, a caller's own sync, 300 more, then a mailbox sync: the
/// compute releases that sync returns, and what the first sync said.
fn two_tokens(world: &KernelWorld) -> (CallerSync, u64) {
    let host = world.start();
    let (v, [a, b, c]) = vector_add(&host);
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    for i in 0..300 {
        let l = macuda_submit::lane_launch(stream, &v.record(a, b, c, 1000 - i));
        lane.launch(l).unwrap();
    }
    let first = lane.sync_point();
    if let CallerSync::Done { .. } = first {
        assert_eq!(
            kernels_run(world),
            300,
            "the sync returned after every launch ran"
        );
    }
    for i in 0..300 {
        let l = macuda_submit::lane_launch(stream, &v.record(a, b, c, 1000 - i));
        lane.launch(l).unwrap();
    }
    let releases = host.call(|s| s.submit.synchronize(stream)).unwrap();
    assert_eq!(kernels_run(world), 600);
    (first, releases)
}

#[test]
fn a_caller_waits_out_its_sync_itself_and_the_next_token_starts_over() {
    let world = KernelWorld::new(Duration::from_secs(10));
    let (first, releases) = two_tokens(&world);
    assert_eq!(
        first,
        CallerSync::Done { covered: 301 },
        "300 launches and the sync point"
    );
    assert_eq!(
        releases, 12,
        "each token in chains of 8, 16, 32, 64, 128 and 52: the second started over"
    );
}

#[test]
fn with_the_actor_waiting_the_caller_is_sent_to_it_and_the_tokens_are_the_same() {
    let mut world = KernelWorld::new(Duration::from_secs(10));
    world.config.submit.caller_waits = false;
    let (first, _) = two_tokens(&world);
    assert_eq!(first, CallerSync::AskActor);
}

#[test]
fn lane_work_that_failed_sends_the_caller_to_the_actor_which_reports_it() {
    let world = KernelWorld::new(Duration::from_secs(10));
    let host = world.start();
    let (v, [a, b, c]) = vector_add(&host);
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    lane.launch(macuda_submit::lane_launch(stream, &v.record(a, b, c, 100)))
        .unwrap();
    // A kernel nobody registered: the actor's launch fails in the lane.
    lane.launch(LaneLaunch {
        kernel: KernelId(9999),
        stream,
        grid: [1, 1, 1],
        block: [32, 1, 1],
        dynamic_shared_bytes: 0,
        params: ParamBlock::new(&[0; 8]),
    })
    .unwrap();
    assert_eq!(lane.sync_point(), CallerSync::AskActor);
    let e = host
        .call(|s| s.submit.synchronize(stream))
        .expect_err("the failed launch is reported at the sync point");
    let chain = macuda_core::error_chain(&e).join(": ");
    assert!(chain.contains("9999"), "{chain}");
}
