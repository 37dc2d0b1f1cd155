//! The harness on a toy actor: replies, deadlines, panics, fatal and
//! recoverable errors, injected faults, request history and stopping.

use macuda_core::{
    actor_protocol, ActorConfig, ActorError, ActorFault, Failure, FaultAction, FaultPlan,
    FaultSwitch, Outcome, Severity, StopOutcome, SupervisorEvent,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum ToyError {
    #[error("actor call failed")]
    Actor(#[from] ActorError),
    #[error("odd numbers are refused")]
    Odd,
    #[error("the counter is corrupt")]
    Corrupt,
}

impl ActorFault for ToyError {
    fn severity(&self) -> Severity {
        match self {
            ToyError::Actor(ActorError::Injected { .. }) | ToyError::Corrupt => Severity::Fatal,
            ToyError::Actor(_) => Severity::Downstream,
            ToyError::Odd => Severity::Recoverable,
        }
    }
}

actor_protocol! {
    pub handle ToyHandle;
    request ToyRequest;
    service ToyService;
    error ToyError;
    Add => fn add(n: u64) -> u64;
    Explode => fn explode() -> ();
    Corrupt => fn corrupt() -> ();
    Sleep => fn sleep(ms: u64) -> ();
}

struct Toy {
    total: u64,
}

impl ToyService for Toy {
    fn add(&mut self, n: u64) -> Result<u64, ToyError> {
        if n % 2 == 1 {
            return Err(ToyError::Odd);
        }
        self.total += n;
        Ok(self.total)
    }
    fn explode(&mut self) -> Result<(), ToyError> {
        panic!("toy exploded");
    }
    fn corrupt(&mut self) -> Result<(), ToyError> {
        Err(ToyError::Corrupt)
    }
    fn sleep(&mut self, ms: u64) -> Result<(), ToyError> {
        std::thread::sleep(Duration::from_millis(ms));
        Ok(())
    }
}

struct World {
    handle: ToyHandle,
    join: macuda_core::ActorJoin,
    events: flume::Receiver<SupervisorEvent>,
    faults: FaultSwitch,
}

fn world(deadline: Duration) -> World {
    let (tx, events) = flume::unbounded();
    let faults = FaultSwitch::default();
    let config = ActorConfig {
        name: "toy",
        generation: 7,
        mailbox: 4,
        deadline,
        keep_recent: 3,
        events: tx,
        faults: Arc::clone(&faults),
    };
    let (handle, join) = ToyHandle::spawn(config, Toy { total: 0 }).unwrap();
    World {
        handle,
        join,
        events,
        faults,
    }
}

#[test]
fn replies_and_keeps_the_last_requests() {
    let w = world(Duration::from_secs(5));
    assert_eq!(w.handle.add(2).unwrap(), 2);
    assert_eq!(w.handle.add(4).unwrap(), 6);
    assert!(matches!(w.handle.add(3), Err(ToyError::Odd)));
    assert_eq!(w.handle.add(10).unwrap(), 16);
    let snap = w.join.status().snapshot();
    assert_eq!(snap.handled, 4);
    assert_eq!(snap.errors, 1);
    let kept: Vec<String> = snap.recent.iter().map(|r| r.summary.clone()).collect();
    assert_eq!(kept, vec!["add(n=4)", "add(n=3)", "add(n=10)"]);
    assert!(matches!(snap.recent[1].outcome, Outcome::Err(ref e) if e.contains("odd")));
    // A recoverable error is the caller's business only.
    assert!(w.events.try_recv().is_err());
}

#[test]
fn a_panic_is_reported_before_the_caller_sees_the_actor_gone() {
    let w = world(Duration::from_secs(5));
    let err = w.handle.explode().unwrap_err();
    assert!(
        matches!(
            err,
            ToyError::Actor(ActorError::Disconnected {
                actor: "toy",
                op: "explode"
            })
        ),
        "{err}"
    );
    // The report was queued by the panic hook before unwinding dropped the reply.
    match w.events.try_recv().expect("panic reported") {
        SupervisorEvent::Failed {
            actor: "toy",
            generation: 7,
            failure:
                Failure::Panic {
                    op,
                    message,
                    backtrace,
                    ..
                },
        } => {
            assert_eq!(op.as_deref(), Some("explode"));
            assert_eq!(message, "toy exploded");
            assert!(!backtrace.is_empty());
        }
        other => panic!("unexpected event {other:?}"),
    }
    // The actor serves nothing more.
    assert!(matches!(
        w.handle.add(2),
        Err(ToyError::Actor(ActorError::Disconnected { .. }))
    ));
}

/// A request still in the mailbox when the actor's thread ends is never
/// answered; its caller must hear at once that the actor is gone, not wait
/// out the deadline (CI once saw this race after a panic: the next call was
/// queued before the dying thread dropped its mailbox).
#[test]
fn a_request_left_in_the_mailbox_when_the_actor_ends_is_refused_at_once() {
    let deadline = Duration::from_secs(5);
    let mut w = world(deadline);
    let busy = w.handle.clone();
    let first = std::thread::spawn(move || busy.sleep(300));
    std::thread::sleep(Duration::from_millis(50));
    let queued = w.handle.clone();
    let second = std::thread::spawn(move || {
        let started = Instant::now();
        (queued.add(2), started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(50));
    // Stop wins over the queued add once the sleep is done.
    assert_eq!(w.join.stop(Duration::from_secs(2)), StopOutcome::Stopped);
    assert!(first.join().unwrap().is_ok());
    let (after, waited) = second.join().unwrap();
    assert!(
        matches!(
            after,
            Err(ToyError::Actor(ActorError::Disconnected { op: "add", .. }))
        ),
        "{after:?}"
    );
    assert!(waited < deadline / 2, "waited {waited:?}");
}

#[test]
fn a_fatal_error_is_reported_and_returned() {
    let w = world(Duration::from_secs(5));
    assert!(matches!(w.handle.corrupt(), Err(ToyError::Corrupt)));
    match w.events.try_recv().expect("fatal error reported") {
        SupervisorEvent::Failed {
            failure: Failure::Error { op, chain },
            ..
        } => {
            assert_eq!(op, "corrupt");
            assert_eq!(chain, vec!["the counter is corrupt".to_string()]);
        }
        other => panic!("unexpected event {other:?}"),
    }
    // A fatal error alone does not stop the actor; the supervisor decides.
    assert_eq!(w.handle.add(2).unwrap(), 2);
}

#[test]
fn injected_faults_fire_at_the_nth_request_of_a_kind() {
    let w = world(Duration::from_secs(5));
    w.faults.store(Some(Arc::new(
        FaultPlan::new(FaultAction::Error, 2).on_kind("add"),
    )));
    w.handle.sleep(0).unwrap();
    assert_eq!(w.handle.add(2).unwrap(), 2);
    let err = w.handle.add(2).unwrap_err();
    assert!(
        matches!(
            err,
            ToyError::Actor(ActorError::Injected {
                nth: 2,
                op: "add",
                ..
            })
        ),
        "{err}"
    );
    assert!(matches!(
        w.events.try_recv(),
        Ok(SupervisorEvent::Failed { .. })
    ));
    // Fires once.
    assert_eq!(w.handle.add(2).unwrap(), 4);
    w.faults
        .store(Some(Arc::new(FaultPlan::new(FaultAction::Panic, 1))));
    assert!(matches!(
        w.handle.add(2),
        Err(ToyError::Actor(ActorError::Disconnected { .. }))
    ));
    assert!(matches!(
        w.events.try_recv(),
        Ok(SupervisorEvent::Failed {
            failure: Failure::Panic { .. },
            ..
        })
    ));
}

#[test]
fn a_hang_times_out_the_caller_and_ends_on_stop() {
    let mut w = world(Duration::from_millis(100));
    w.faults
        .store(Some(Arc::new(FaultPlan::new(FaultAction::Hang, 1))));
    let started = Instant::now();
    let err = w.handle.add(2).unwrap_err();
    let waited = started.elapsed();
    assert!(
        matches!(err, ToyError::Actor(ActorError::Timeout { op: "add", .. })),
        "{err}"
    );
    assert!(
        waited >= Duration::from_millis(100) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    assert!(matches!(
        w.events.try_recv(),
        Ok(SupervisorEvent::MissedDeadline {
            actor: "toy",
            op: "add",
            ..
        })
    ));
    assert_eq!(w.join.status().in_flight().map(|f| f.kind), Some("add"));
    assert_eq!(w.join.stop(Duration::from_secs(2)), StopOutcome::Stopped);
}

#[test]
fn a_thread_that_will_not_stop_is_abandoned_with_what_it_was_doing() {
    let mut w = world(Duration::from_millis(50));
    let h = w.handle.clone();
    let caller = std::thread::spawn(move || h.sleep(1500));
    std::thread::sleep(Duration::from_millis(20));
    match w.join.stop(Duration::from_millis(100)) {
        StopOutcome::Abandoned { busy_with } => {
            assert_eq!(busy_with.as_deref(), Some("sleep(ms=1500)"))
        }
        other => panic!("expected abandonment, got {other:?}"),
    }
    assert!(caller.join().unwrap().is_err());
}

mod background {
    use super::*;
    use macuda_core::{spawn_with_background, wake_pair, Cx, Waker};
    use std::collections::VecDeque;
    use std::sync::Mutex;

    #[derive(Debug, thiserror::Error)]
    pub enum SumError {
        #[error("actor call failed")]
        Actor(#[from] ActorError),
    }
    impl ActorFault for SumError {
        fn severity(&self) -> Severity {
            Severity::Recoverable
        }
    }

    actor_protocol! {
        pub handle SumHandle;
        request SumRequest;
        service SumService;
        error SumError;
        Total => fn total() -> u64;
    }

    /// A lane the test feeds without waiting for the actor.
    type Lane = Arc<Mutex<VecDeque<u64>>>;

    struct Summer {
        lane: Lane,
        total: u64,
        drained_by_background: u64,
    }

    impl Summer {
        fn drain(&mut self) -> bool {
            let mut did = false;
            while let Some(v) = self.lane.lock().unwrap().pop_front() {
                self.total += v;
                did = true;
            }
            did
        }
    }

    impl SumService for Summer {
        fn total(&mut self) -> Result<u64, SumError> {
            // A sync point: everything pushed before it counts.
            self.drain();
            Ok(self.total)
        }
    }

    fn start() -> (SumHandle, macuda_core::ActorJoin, Lane, Waker) {
        let (tx, _rx) = flume::unbounded();
        let config = ActorConfig {
            name: "summer",
            generation: 1,
            mailbox: 4,
            deadline: Duration::from_secs(5),
            keep_recent: 4,
            events: tx,
            faults: FaultSwitch::default(),
        };
        let lane: Lane = Arc::default();
        let (waker, parking) = wake_pair();
        let state = Summer {
            lane: Arc::clone(&lane),
            total: 0,
            drained_by_background: 0,
        };
        let (h, join) = spawn_with_background(
            config,
            state,
            |s: &mut Summer, req: SumRequest, cx: &mut Cx| req.dispatch(s, cx),
            |s: &mut Summer| {
                let before = s.total;
                let did = s.drain();
                if did {
                    s.drained_by_background += s.total - before;
                }
                did
            },
            parking,
        )
        .unwrap();
        (SumHandle::new(h), join, lane, waker)
    }

    #[test]
    fn background_work_runs_between_requests_and_sync_points_see_all_of_it() {
        let (h, _join, lane, waker) = start();
        let mut expected = 0;
        for i in 1..=10_000u64 {
            lane.lock().unwrap().push_back(i);
            waker.wake();
            expected += i;
        }
        assert_eq!(h.total().unwrap(), expected);
    }

    #[test]
    fn a_parked_actor_is_woken_by_new_work() {
        let (h, _join, lane, waker) = start();
        // Long enough for the actor to spin out and park.
        std::thread::sleep(Duration::from_millis(50));
        lane.lock().unwrap().push_back(41);
        waker.wake();
        let deadline = Instant::now() + Duration::from_secs(2);
        // The background drains it without any request arriving.
        while !lane.lock().unwrap().is_empty() {
            assert!(Instant::now() < deadline, "the parked actor was not woken");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(h.total().unwrap(), 41);
    }
}
