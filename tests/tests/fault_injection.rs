//! Actor-level fault injection on the null device: for every actor and
//! each of panic / error / hang, a fault lands mid-workload and the test
//! checks that (a) the Host call returns a typed error naming the actor
//! within a deadline, (b) the card itself saw bus mastering cleared over a
//! fresh connection and then a function-level reset, and (c) a crash report
//! was written that `macuda report` reads back with the failing actor named.

use macuda_core::{FaultAction, FaultPlan, Outcome};
use macuda_supervisor::{workload, HostError, ACTORS};
use macuda_tests::{bus_master_cleared_at, connection_of, macuda_report, reset_after, NullWorld};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Short, so an injected hang is noticed quickly.
const DEADLINE: Duration = Duration::from_millis(300);
/// A failing Host call must come back well within this.
const RETURN_WITHIN: Duration = Duration::from_secs(10);
/// The pci actor's own connection is the first the card sees.
const PCI_ACTOR_CONNECTION: u32 = 1;

/// Requests each actor handles during one clean workload, so the fault can
/// be placed in the middle of it.
fn workload_requests() -> &'static BTreeMap<String, u64> {
    static COUNTS: OnceLock<BTreeMap<String, u64>> = OnceLock::new();
    COUNTS.get_or_init(|| {
        let world = NullWorld::new(Duration::from_secs(5));
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

fn report_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&macuda_report(path, true)).expect("macuda report --json prints JSON")
}

fn report_text(path: &std::path::Path) -> String {
    macuda_report(path, false)
}

fn inject_mid_workload(actor: &str, action: FaultAction) {
    let total = workload_requests()[actor];
    assert!(
        total >= 4,
        "{actor} handles only {total} requests in the workload"
    );
    let nth = total / 2;
    let world = NullWorld::new(DEADLINE);
    let host = world.start();
    host.faults()
        .install(actor, FaultPlan::new(action, nth))
        .unwrap();

    let started = Instant::now();
    let result = workload::run(&host, Duration::ZERO);
    let took = started.elapsed();

    // (a) a typed error naming the actor, in bounded time.
    let err = result.expect_err("the injected fault must fail the workload");
    assert!(took < RETURN_WITHIN, "the failing call took {took:?}");
    assert!(
        matches!(err, HostError::ActorFailed { .. }),
        "not ActorFailed: {err}"
    );
    assert_eq!(
        err.failed_actor(),
        Some(actor),
        "blamed the wrong actor: {err}"
    );
    // Later calls are refused at once, not sent to a dead stack.
    assert!(matches!(
        host.call(|s| s.pci.stats()),
        Err(HostError::Down { .. })
    ));

    // (b) what the card itself saw.
    let events = world.card.events();
    let cleared = bus_master_cleared_at(&events).expect("the card never saw bus mastering cleared");
    assert_ne!(
        connection_of(&events[cleared]),
        PCI_ACTOR_CONNECTION,
        "bus mastering was cleared through the pci actor's connection, not a fresh one"
    );
    let reset = reset_after(&events, cleared)
        .expect("no function-level reset after clearing bus mastering");
    assert!(reset > cleared);
    assert_eq!(
        world.card.command() & macuda_hw::pci::Command::BUS_MASTER,
        0
    );

    // (c) the crash report, read back through `macuda report`.
    let path = err
        .report()
        .expect("the error names its crash report")
        .clone();
    assert!(path.exists(), "{} missing", path.display());
    let json = report_json(&path);
    assert_eq!(json["cause"]["Failure"]["actor"], actor);
    let failure = &json["cause"]["Failure"]["failure"];
    let expected_kind = match action {
        FaultAction::Panic => "Panic",
        FaultAction::Error => "Error",
        FaultAction::Hang => "MissedDeadline",
    };
    assert!(
        failure.get(expected_kind).is_some(),
        "failure is not {expected_kind}: {failure}"
    );
    if action == FaultAction::Panic {
        let bt = failure["Panic"]["backtrace"].as_str().unwrap_or("");
        assert!(!bt.is_empty(), "panic report carries no backtrace");
    }
    let steps: Vec<&str> = json["recovery"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["action"].as_str().unwrap())
        .collect();
    let bm = steps
        .iter()
        .position(|s| s.contains("bus mastering"))
        .expect("bus-master step");
    let flr = steps
        .iter()
        .position(|s| s.contains("function-level reset"))
        .expect("FLR step");
    assert!(bm < flr, "recovery steps out of order: {steps:?}");
    assert!(steps.iter().any(|s| s.contains("firmware")));
    // Each actor's recent requests are in the report; the failed one shows
    // the faulted request.
    let actors = json["actors"].as_array().unwrap();
    assert_eq!(
        actors
            .iter()
            .map(|a| a["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ACTORS.to_vec()
    );
    let mine = actors.iter().find(|a| a["name"] == actor).unwrap();
    let last = mine["recent"]
        .as_array()
        .unwrap()
        .last()
        .expect("recent requests kept")
        .clone();
    let outcome: Outcome = serde_json::from_value(last["outcome"].clone()).unwrap();
    match action {
        FaultAction::Panic => assert!(matches!(outcome, Outcome::Panicked(_)), "{outcome:?}"),
        FaultAction::Error => assert!(matches!(outcome, Outcome::Injected(_)), "{outcome:?}"),
        FaultAction::Hang => assert_eq!(outcome, Outcome::Unfinished),
    }
    assert!(report_text(&path).contains(&format!("failure of actor `{actor}`")));

    // Dropping the Host after a failure adds no second report.
    drop(host);
    assert_eq!(world.report_files().len(), 1, "{:?}", world.report_files());
}

// One test for each actor and each way it can fail.
macuda_tests::every_actor_failure!(inject_mid_workload);

#[test]
fn every_actor_gets_work_in_the_workload() {
    for actor in ACTORS {
        assert!(
            workload_requests()[actor] >= 4,
            "{actor}: {:?}",
            workload_requests()
        );
    }
}

#[test]
fn a_hang_below_the_called_actor_blames_the_hung_one() {
    // The Host calls memory; memory calls pci for pinned host memory; pci
    // hangs. The caller's deadline expires on memory, but pci is at fault.
    let world = NullWorld::new(DEADLINE);
    let host = world.start();
    host.faults()
        .install(
            "pci",
            FaultPlan::new(FaultAction::Hang, 1).on_kind("alloc_dma"),
        )
        .unwrap();
    let err = host.call(|s| s.memory.alloc_host(4096)).unwrap_err();
    assert_eq!(err.failed_actor(), Some("pci"), "{err}");
}

#[test]
fn a_fault_on_one_request_kind_fires_there() {
    let world = NullWorld::new(DEADLINE);
    let host = world.start();
    host.faults()
        .install(
            "memory",
            FaultPlan::new(FaultAction::Error, 2).on_kind("free_device"),
        )
        .unwrap();
    let a = host.call(|s| s.memory.alloc_device(4096)).unwrap();
    let b = host.call(|s| s.memory.alloc_device(4096)).unwrap();
    host.call(|s| s.memory.free_device(a.va)).unwrap();
    host.call(|s| s.memory.alloc_device(4096)).unwrap();
    let err = host.call(|s| s.memory.free_device(b.va)).unwrap_err();
    assert_eq!(err.failed_actor(), Some("memory"));
    let json = report_json(err.report().unwrap());
    assert_eq!(
        json["cause"]["Failure"]["failure"]["Error"]["op"],
        "free_device"
    );
}

#[test]
fn normal_exit_clears_bus_mastering_without_a_reset() {
    let world = NullWorld::new(Duration::from_secs(5));
    let host = world.start();
    workload::run(&host, Duration::ZERO).unwrap();
    let outcome = host.shutdown();
    assert!(outcome.steps.iter().all(|s| s.ok), "{:?}", outcome.steps);
    let events = world.card.events();
    let cleared = bus_master_cleared_at(&events).expect("bus mastering cleared at exit");
    assert_ne!(connection_of(&events[cleared]), PCI_ACTOR_CONNECTION);
    assert_eq!(
        reset_after(&events, 0),
        None,
        "a clean exit must not reset the card"
    );
    let json = report_json(outcome.report.as_ref().unwrap());
    assert_eq!(json["cause"], "Exit");
    // Actors stop top-down before bus mastering goes off.
    let steps: Vec<String> = outcome.steps.iter().map(|s| s.action.clone()).collect();
    let stops: Vec<&String> = steps
        .iter()
        .filter(|s| s.starts_with("stop actor"))
        .collect();
    assert_eq!(stops.len(), 5);
    assert!(
        stops[0].contains("loader") && stops[4].contains("pci"),
        "{stops:?}"
    );
}

#[test]
fn an_interrupt_recovers_without_a_reset_and_refuses_later_calls() {
    let world = NullWorld::new(Duration::from_secs(5));
    let host = world.start();
    host.call(|s| s.memory.alloc_device(1 << 20)).unwrap();
    host.interrupt();
    let deadline = Instant::now() + RETURN_WITHIN;
    while host.outcome().is_none() {
        assert!(Instant::now() < deadline, "interrupt not handled");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(matches!(
        host.call(|s| s.memory.alloc_device(4096)),
        Err(HostError::Down { .. })
    ));
    let events = world.card.events();
    assert!(bus_master_cleared_at(&events).is_some());
    assert_eq!(
        reset_after(&events, 0),
        None,
        "an interrupt must not reset the card"
    );
    let outcome = host.outcome().unwrap();
    let json = report_json(outcome.report.as_ref().unwrap());
    assert_eq!(json["cause"], "Interrupted");
}

#[test]
fn a_restart_after_a_failure_runs_clean() {
    let world = NullWorld::new(DEADLINE);
    let host = world.start();
    let first = host.generation();
    host.faults()
        .install("submit", FaultPlan::new(FaultAction::Panic, 1))
        .unwrap();
    assert!(workload::run(&host, Duration::ZERO).is_err());
    host.faults().clear("submit").unwrap();
    let host = host.restart().expect("a fresh stack boots after recovery");
    assert!(host.generation() > first);
    workload::run(&host, Duration::ZERO).expect("the restarted stack runs the workload");
}

#[test]
fn a_boot_failure_runs_recovery_too() {
    let world = NullWorld::new(DEADLINE);
    // gsp's first request is open_device, during boot.
    world
        .config
        .faults
        .install("gsp", FaultPlan::new(FaultAction::Error, 1))
        .unwrap();
    let err = macuda_supervisor::Host::start(world.config.clone())
        .err()
        .expect("boot fails");
    assert_eq!(err.failed_actor(), Some("gsp"), "{err}");
    let events = world.card.events();
    let cleared =
        bus_master_cleared_at(&events).expect("bus mastering cleared after the boot failure");
    assert!(reset_after(&events, cleared).is_some());
    assert!(err.report().is_some_and(|p| p.exists()));
}

/// A caller pushing through the launch lane after the submit actor died:
/// more items than the lane holds come back refused within the deadline
/// (the 4,097th used to spin for ever), and the Host says what failed.
#[test]
fn pushes_through_the_lane_after_submit_died_are_refused_not_hung() {
    let world = NullWorld::new(DEADLINE);
    let host = world.start();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    host.faults()
        .install("submit", FaultPlan::new(FaultAction::Panic, 1))
        .unwrap();
    let failed = host.call(|s| s.submit.synchronize(stream));
    assert!(failed.is_err(), "submit answered after its injected panic");
    let started = Instant::now();
    let capacity = macuda_submit::SubmitConfig::default().lane_capacity;
    let mut refused = None;
    for i in 0..capacity as u64 + 10 {
        let item = macuda_submit::LaneItem::Fill {
            stream,
            dst: i,
            bytes: 4,
            value: 0,
        };
        if let Err(e) = lane.push(item) {
            refused = Some((i, e));
            break;
        }
    }
    let (at, e) = refused.expect("every push was taken with no actor to drain the lane");
    assert!(
        started.elapsed() < RETURN_WITHIN,
        "took {:?}",
        started.elapsed()
    );
    assert!(at <= capacity as u64, "refused only at push {at}");
    assert!(e.to_string().contains("submit actor has stopped"), "{e}");
}
