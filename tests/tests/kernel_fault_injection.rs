//! Actor-level fault injection on the kernel-module path, against the fake
//! of the module (its GPU played by a thread): for every actor and each of
//! panic / error / hang, a fault lands mid-workload and the test checks,
//! from the fake module's own record and the transport's own count, that
//! (a) the Host call returns a typed error naming the actor within a
//! deadline, (b) recovery stopped our channel group before it freed our RM
//! client, nothing of ours is left in the module, and nothing touched PCI
//! (no config access, no reset: the module owns the function), and (c) a
//! crash report was written that `macuda report` reads back with the
//! failing actor named.

use macuda_core::{FaultAction, FaultPlan};
use macuda_supervisor::{workload, HostError, ACTORS};
use macuda_tests::fake_rm::FakeCall;
use macuda_tests::{macuda_report, KernelWorld};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Short, so an injected hang is noticed quickly, but long enough that the
/// fake module's real work (zeroing a 64 MiB allocation) on a loaded
/// two-core machine does not pass for a hang (at 400 ms it sometimes did).
const DEADLINE: Duration = Duration::from_millis(1500);
const RETURN_WITHIN: Duration = Duration::from_secs(10);

/// Requests each actor handles during one clean workload on this path.
fn workload_requests() -> &'static BTreeMap<String, u64> {
    static COUNTS: OnceLock<BTreeMap<String, u64>> = OnceLock::new();
    COUNTS.get_or_init(|| {
        let world = KernelWorld::new(Duration::from_secs(10));
        let host = world.start();
        let before = host.snapshots();
        workload::run(&host, Duration::ZERO).expect("clean workload runs");
        let after = host.snapshots();
        before
            .iter()
            .zip(&after)
            .map(|(b, a)| (a.name.clone(), a.handled - b.handled))
            .collect()
    })
}

fn inject_mid_workload(actor: &str, action: FaultAction) {
    let total = workload_requests()[actor];
    // On this path the pci actor only answers statistics: NVIDIA's module
    // owns the function. The fault still lands inside the workload.
    let nth = (total / 2).max(1);
    let world = KernelWorld::new(DEADLINE);
    let host = world.start();
    let client = world.fake.0.lock().clients()[0];
    host.faults()
        .install(actor, FaultPlan::new(action, nth))
        .unwrap();
    let started = Instant::now();
    let result = workload::run(&host, Duration::ZERO);
    let took = started.elapsed();

    // (a)
    let err = result.expect_err("the injected fault must fail the workload");
    assert!(took < RETURN_WITHIN, "the failing call took {took:?}");
    assert!(matches!(err, HostError::ActorFailed { .. }), "{err}");
    assert_eq!(err.failed_actor(), Some(actor), "{err}");
    assert!(matches!(
        host.call(|s| s.memory.stats()),
        Err(HostError::Down { .. })
    ));

    // (b) what the module saw, in its order.
    let m = world.fake.0.lock();
    assert!(
        m.objects.is_empty(),
        "RM objects left behind: {:?}",
        m.objects
    );
    let stop = m
        .calls
        .iter()
        .rposition(|c| matches!(c, FakeCall::Schedule { enable: false, .. }))
        .expect("our channel group was taken off the scheduler");
    let free = m
        .calls
        .iter()
        .position(|c| matches!(c, FakeCall::Free { handle, .. } if *handle == client))
        .expect("our client was freed");
    assert!(stop < free, "stopped after freeing: {:?}", m.calls);
    drop(m);
    assert_eq!(world.opener.attempts(), 0, "something asked for PCI access");

    // (c)
    let path = err
        .report()
        .expect("the error names its crash report")
        .clone();
    let json: Value = serde_json::from_str(&macuda_report(&path, true)).unwrap();
    assert_eq!(json["cause"]["Failure"]["actor"], actor);
    let steps: Vec<&str> = json["recovery"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["action"].as_str().unwrap())
        .collect();
    let pos = |needle: &str| steps.iter().position(|s| s.contains(needle));
    let (stop, free) = (
        pos("stop our channel groups").expect("stop step"),
        pos("free our RM objects").expect("free step"),
    );
    assert!(stop < free, "{steps:?}");
    assert!(pos("bus mastering").is_none() && pos("function-level reset").is_none());
    assert!(pos("leave PCI config and reset to the kernel module").is_some());
    assert!(macuda_report(&path, false).contains(&format!("failure of actor `{actor}`")));
    drop(host);
    assert_eq!(world.report_files().len(), 1, "{:?}", world.report_files());
}

// One test for each actor and each way it can fail.
macuda_tests::every_actor_failure!(inject_mid_workload);

#[test]
fn every_actor_but_pci_gets_real_work_on_this_path() {
    let counts = workload_requests();
    for actor in ACTORS {
        let want = if actor == "pci" { 1 } else { 4 };
        assert!(counts[actor] >= want, "{actor}: {counts:?}");
    }
}

#[test]
fn a_restart_after_a_failure_opens_a_fresh_client_and_runs_clean() {
    let world = KernelWorld::new(DEADLINE);
    let host = world.start();
    let first = world.fake.0.lock().clients();
    host.faults()
        .install("submit", FaultPlan::new(FaultAction::Panic, 3))
        .unwrap();
    assert!(workload::run(&host, Duration::ZERO).is_err());
    assert!(world.fake.0.lock().objects.is_empty());
    host.faults().clear("submit").unwrap();
    let host = host.restart().expect("a fresh stack boots after recovery");
    let second = world.fake.0.lock().clients();
    assert_eq!(second.len(), 1);
    assert_ne!(first, second, "a new client");
    workload::run(&host, Duration::ZERO).expect("the restarted stack runs the workload");
}

#[test]
fn an_interrupt_stops_the_channels_and_frees_the_client() {
    let world = KernelWorld::new(Duration::from_secs(5));
    let host = world.start();
    host.call(|s| s.memory.alloc_device(1 << 20)).unwrap();
    host.interrupt();
    let deadline = Instant::now() + RETURN_WITHIN;
    while host.outcome().is_none() {
        assert!(Instant::now() < deadline, "interrupt not handled");
        std::thread::sleep(Duration::from_millis(5));
    }
    let m = world.fake.0.lock();
    assert!(m.objects.is_empty());
    assert!(m
        .calls
        .iter()
        .any(|c| matches!(c, FakeCall::Schedule { enable: false, .. })));
    drop(m);
    assert_eq!(world.opener.attempts(), 0);
}
