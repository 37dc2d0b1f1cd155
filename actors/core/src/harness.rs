use crate::error::{error_chain, ActorError, ActorFault, Severity};
use crate::event::{Failure, Incident, SupervisorEvent};
use crate::fault::{FaultAction, FaultSwitch};
use crate::status::{ActorStatus, Outcome};
use crossbeam_channel::{bounded, select, Receiver, RecvTimeoutError, SendTimeoutError, Sender};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A request enum as produced by [`crate::actor_protocol!`].
pub trait Request: Send + 'static {
    type Error: ActorFault;
    /// The method name, used for fault plans and request history.
    fn kind(&self) -> &'static str;
    /// A short rendering of the arguments for crash reports.
    fn describe(&self) -> String;
    /// Answer the request with an error without handling it.
    fn reject(self, err: Self::Error);
}

/// The one-shot reply sender carried inside every request. A failed send
/// means the caller gave up (timed out); that is not the actor's problem.
pub struct Reply<T>(Sender<T>);

impl<T> Reply<T> {
    pub fn send(self, value: T) {
        let _ = self.0.send(value);
    }
}

/// Settings for one actor instance.
#[derive(Clone)]
pub struct ActorConfig {
    pub name: &'static str,
    /// Bumped by the supervisor on every restart of the stack.
    pub generation: u64,
    pub mailbox: usize,
    /// How long a caller waits for any one request before giving up.
    pub deadline: Duration,
    /// How many handled requests to keep for crash reports.
    pub keep_recent: usize,
    pub events: flume::Sender<SupervisorEvent>,
    pub faults: FaultSwitch,
}

impl ActorConfig {
    /// What the actor keeps to tell the supervisor of incidents as they
    /// happen, from inside any handler.
    pub fn incidents(&self) -> IncidentReporter {
        IncidentReporter {
            actor: self.name,
            generation: self.generation,
            events: self.events.clone(),
        }
    }
}

/// An actor's line to the supervisor for [`Incident`]s: unlike a fatal
/// error, which the harness reports when a handler returns it, an incident
/// is the actor's own judgement, made where it sees the device misbehave.
#[derive(Clone)]
pub struct IncidentReporter {
    actor: &'static str,
    generation: u64,
    events: flume::Sender<SupervisorEvent>,
}

impl IncidentReporter {
    /// Never blocks (the events channel is unbounded); a supervisor that
    /// has gone hears nothing, which is not the actor's problem.
    pub fn report(&self, incident: Incident) {
        tracing::warn!(actor = self.actor, incident = %incident.headline(), "incident reported to the supervisor");
        let _ = self.events.send(SupervisorEvent::Incident {
            actor: self.actor,
            generation: self.generation,
            incident,
        });
    }
}

/// The blocking, cloneable face of an actor. Every call carries the actor's
/// deadline, so no caller can wait forever on a stuck actor.
pub struct Handle<R> {
    tx: Sender<R>,
    /// Disconnects when the actor's thread ends. A request that reached the
    /// mailbox just before the thread stopped is never answered, and
    /// crossbeam keeps it (and its reply sender) alive as long as any sender
    /// exists, so the caller watches this to learn the actor is gone rather
    /// than waiting out the deadline.
    gone: Receiver<()>,
    actor: &'static str,
    deadline: Duration,
    events: flume::Sender<SupervisorEvent>,
}

impl<R> Clone for Handle<R> {
    fn clone(&self) -> Self {
        Handle {
            tx: self.tx.clone(),
            gone: self.gone.clone(),
            actor: self.actor,
            deadline: self.deadline,
            events: self.events.clone(),
        }
    }
}

impl<R: Request> Handle<R> {
    pub fn actor(&self) -> &'static str {
        self.actor
    }

    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Send one request and wait for its reply, at most the deadline in all.
    ///
    /// # Errors
    /// The actor's own error from the reply, or `ActorError::Timeout` when no
    /// reply came in time (also reported to the supervisor as a missed
    /// deadline), or `ActorError::Disconnected` when the actor is gone.
    pub fn call<T, E: From<ActorError>>(
        &self,
        op: &'static str,
        make: impl FnOnce(Reply<Result<T, E>>) -> R,
    ) -> Result<T, E> {
        let started = Instant::now();
        let deadline = started + self.deadline;
        let (reply_tx, reply_rx) = bounded(1);
        let actor = self.actor;
        match self.tx.send_deadline(make(Reply(reply_tx)), deadline) {
            Ok(()) => {}
            Err(SendTimeoutError::Timeout(_)) => return Err(self.missed(op, started).into()),
            Err(SendTimeoutError::Disconnected(_)) => {
                return Err(ActorError::Disconnected { actor, op }.into())
            }
        }
        let gone = || Err(ActorError::Disconnected { actor, op }.into());
        select! {
            recv(reply_rx) -> reply => match reply {
                Ok(result) => result,
                Err(_) => gone(),
            },
            // The thread ended: a reply it sent on its way out still counts.
            recv(self.gone) -> _ => match reply_rx.try_recv() {
                Ok(result) => result,
                Err(_) => gone(),
            },
            default(deadline.saturating_duration_since(Instant::now())) => {
                Err(self.missed(op, started).into())
            }
        }
    }

    fn missed(&self, op: &'static str, started: Instant) -> ActorError {
        let after = started.elapsed();
        let _ = self.events.send(SupervisorEvent::MissedDeadline {
            actor: self.actor,
            op,
            after,
        });
        ActorError::Timeout {
            actor: self.actor,
            op,
            after,
        }
    }
}

/// Per-request context handed to the dispatch code: it records the outcome
/// and reports fatal errors before the reply is sent, so the supervisor
/// always hears of a failure before the caller does.
pub struct Cx {
    actor: &'static str,
    generation: u64,
    events: flume::Sender<SupervisorEvent>,
    status: Arc<ActorStatus>,
    op: &'static str,
}

impl Cx {
    pub fn actor(&self) -> &'static str {
        self.actor
    }

    pub fn finish<T, E: ActorFault>(&mut self, result: &Result<T, E>) {
        match result {
            Ok(_) => self.status.end(Outcome::Ok),
            Err(e) => {
                let chain = error_chain(e);
                self.status.end(Outcome::Err(chain.join(": ")));
                if e.severity() == Severity::Fatal {
                    let _ = self.events.send(SupervisorEvent::Failed {
                        actor: self.actor,
                        generation: self.generation,
                        failure: Failure::Error {
                            op: self.op.to_string(),
                            chain,
                        },
                    });
                }
            }
        }
    }
}

/// How an actor's thread ended when asked to stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopOutcome {
    Stopped,
    /// The thread did not end in time (a hang); it is left detached.
    Abandoned {
        busy_with: Option<String>,
    },
}

/// Owns an actor's thread. Dropping it asks the actor to stop.
pub struct ActorJoin {
    name: &'static str,
    control: Sender<()>,
    done: Receiver<()>,
    thread: Option<JoinHandle<()>>,
    status: Arc<ActorStatus>,
}

impl ActorJoin {
    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn status(&self) -> &Arc<ActorStatus> {
        &self.status
    }

    /// Ask the actor to stop after the request it is handling.
    pub fn request_stop(&self) {
        let _ = self.control.try_send(());
    }

    /// Wait up to `timeout` for the thread to end.
    pub fn wait(&mut self, timeout: Duration) -> StopOutcome {
        match self.done.recv_timeout(timeout) {
            Err(RecvTimeoutError::Disconnected) | Ok(()) => {
                if let Some(t) = self.thread.take() {
                    let _ = t.join();
                }
                StopOutcome::Stopped
            }
            Err(RecvTimeoutError::Timeout) => {
                // The thread stays detached; its JoinHandle is dropped.
                self.thread.take();
                StopOutcome::Abandoned {
                    busy_with: self.status.in_flight().map(|f| f.summary),
                }
            }
        }
    }

    pub fn stop(&mut self, timeout: Duration) -> StopOutcome {
        self.request_stop();
        self.wait(timeout)
    }
}

impl Drop for ActorJoin {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop(Duration::from_secs(1));
        }
    }
}

struct PanicContext {
    actor: &'static str,
    generation: u64,
    events: flume::Sender<SupervisorEvent>,
    status: Arc<ActorStatus>,
    reported: bool,
}

thread_local! {
    static PANIC_CONTEXT: RefCell<Option<PanicContext>> = const { RefCell::new(None) };
}

/// The hook reports a panic on an actor thread before unwinding starts, so
/// the report is queued before the caller sees its reply channel close.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let handled = PANIC_CONTEXT
                .try_with(|cell| {
                    let Ok(mut slot) = cell.try_borrow_mut() else {
                        return false;
                    };
                    let Some(ctx) = slot.as_mut() else {
                        return false;
                    };
                    let message = info
                        .payload_as_str()
                        .unwrap_or("non-string panic payload")
                        .to_string();
                    let location = info
                        .location()
                        .map(|l| format!("{}:{}", l.file(), l.line()));
                    tracing::error!(actor = ctx.actor, %message, "actor panicked");
                    let _ = ctx.events.send(SupervisorEvent::Failed {
                        actor: ctx.actor,
                        generation: ctx.generation,
                        failure: Failure::Panic {
                            op: ctx.status.in_flight().map(|f| f.kind.to_string()),
                            message,
                            location,
                            backtrace: std::backtrace::Backtrace::force_capture().to_string(),
                        },
                    });
                    ctx.reported = true;
                    true
                })
                .unwrap_or(false);
            if !handled {
                previous(info);
            }
        }));
    });
}

/// Report a caught panic the hook did not report (hook replaced, or a
/// panic in background work after the hook already ran).
fn report_unhooked_panic(config: &ActorConfig, op: &str, payload: &(dyn std::any::Any + Send)) {
    let reported = PANIC_CONTEXT.with(|c| {
        c.borrow_mut()
            .as_mut()
            .map(|ctx| std::mem::replace(&mut ctx.reported, false))
            .unwrap_or(false)
    });
    if reported {
        return;
    }
    let _ = config.events.send(SupervisorEvent::Failed {
        actor: config.name,
        generation: config.generation,
        failure: Failure::Panic {
            op: Some(op.to_string()),
            message: panic_message(payload),
            location: None,
            backtrace: String::new(),
        },
    });
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Start an actor thread. `serve` handles one request; it is normally
/// `|req, cx| req.dispatch(&mut actor_state, cx)`.
///
/// # Errors
/// Only if the OS refuses to create the thread.
pub fn spawn<R: Request>(
    config: ActorConfig,
    mut serve: impl FnMut(R, &mut Cx) + Send + 'static,
) -> std::io::Result<(Handle<R>, ActorJoin)> {
    spawn_inner(
        config,
        (),
        move |_: &mut (), r, cx| serve(r, cx),
        None::<Background<()>>,
    )
}

/// Work an actor does between requests without anyone waiting for it (the
/// submit actor's launch lane). After a short spin with nothing to do the
/// actor parks; producers call [`Waker::wake`] after adding work.
pub struct Parking {
    rx: Receiver<()>,
    parked: Arc<AtomicBool>,
}

/// Wakes an actor parked in [`Parking`]. Cheap when the actor is awake: one
/// atomic load, no system call.
#[derive(Clone)]
pub struct Waker {
    tx: Sender<()>,
    parked: Arc<AtomicBool>,
}

impl Waker {
    pub fn wake(&self) {
        if self.parked.load(Ordering::SeqCst) {
            let _ = self.tx.try_send(());
        }
    }
}

/// A connected waker and parking place.
pub fn wake_pair() -> (Waker, Parking) {
    let (tx, rx) = bounded(1);
    let parked = Arc::new(AtomicBool::new(false));
    (
        Waker {
            tx,
            parked: Arc::clone(&parked),
        },
        Parking { rx, parked },
    )
}

/// Background work and where to park when there is none.
type Background<S> = (fn(&mut S) -> bool, Parking);

/// How many empty polls of the background work before parking: long
/// enough to catch the next launch of a burst without a wake-up.
const SPIN_POLLS: u32 = 2048;

/// Start an actor with background work: `background(&mut state)` runs
/// whenever no request is waiting and returns whether it did anything;
/// requests always go first, so a synchronisation request can drain the
/// background work itself before answering.
///
/// # Errors
/// Only if the OS refuses to create the thread.
pub fn spawn_with_background<R: Request, S: Send + 'static>(
    config: ActorConfig,
    state: S,
    serve: fn(&mut S, R, &mut Cx),
    background: fn(&mut S) -> bool,
    parking: Parking,
) -> std::io::Result<(Handle<R>, ActorJoin)> {
    spawn_inner(config, state, serve, Some((background, parking)))
}

fn spawn_inner<R: Request, S: Send + 'static>(
    config: ActorConfig,
    mut state: S,
    mut serve: impl FnMut(&mut S, R, &mut Cx) + Send + 'static,
    background: Option<Background<S>>,
) -> std::io::Result<(Handle<R>, ActorJoin)> {
    install_panic_hook();
    let (tx, inbox) = bounded::<R>(config.mailbox.max(1));
    let (control_tx, control) = bounded::<()>(1);
    let (done_tx, done) = bounded::<()>(0);
    let status = Arc::new(ActorStatus::new(
        config.name,
        config.generation,
        config.keep_recent,
    ));
    let handle = Handle {
        tx,
        gone: done.clone(),
        actor: config.name,
        deadline: config.deadline,
        events: config.events.clone(),
    };
    let thread_status = Arc::clone(&status);
    let name = config.name;
    let thread = std::thread::Builder::new()
        .name(format!("macuda-{}", config.name))
        .spawn(move || {
            let _done = done_tx;
            let span =
                tracing::info_span!("actor", name = config.name, generation = config.generation);
            let _entered = span.enter();
            PANIC_CONTEXT.with(|c| {
                *c.borrow_mut() = Some(PanicContext {
                    actor: config.name,
                    generation: config.generation,
                    events: config.events.clone(),
                    status: Arc::clone(&thread_status),
                    reported: false,
                })
            });
            run(
                &config,
                &thread_status,
                &inbox,
                &control,
                &mut state,
                &mut serve,
                background,
            );
            PANIC_CONTEXT.with(|c| c.borrow_mut().take());
            tracing::debug!("actor stopped");
        })?;
    Ok((
        handle,
        ActorJoin {
            name,
            control: control_tx,
            done,
            thread: Some(thread),
            status,
        },
    ))
}

enum Next<R> {
    Request(R),
    Stop,
}

/// Wait for the next request, doing background work meanwhile.
fn next_request<R, S>(
    inbox: &Receiver<R>,
    control: &Receiver<()>,
    state: &mut S,
    background: &mut Option<Background<S>>,
    report_panic: &mut dyn FnMut(Box<dyn std::any::Any + Send>),
) -> Next<R> {
    let Some((work, parking)) = background else {
        return select! {
            recv(control) -> _ => Next::Stop,
            recv(inbox) -> msg => match msg {
                Ok(r) => Next::Request(r),
                Err(_) => Next::Stop,
            },
        };
    };
    let mut idle = 0u32;
    loop {
        if !control.is_empty() {
            return Next::Stop;
        }
        match inbox.try_recv() {
            Ok(r) => return Next::Request(r),
            Err(crossbeam_channel::TryRecvError::Disconnected) => return Next::Stop,
            Err(crossbeam_channel::TryRecvError::Empty) => {}
        }
        let did = match catch_unwind(AssertUnwindSafe(|| work(state))) {
            Ok(d) => d,
            Err(payload) => {
                report_panic(payload);
                return Next::Stop;
            }
        };
        if did {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle < SPIN_POLLS {
            std::hint::spin_loop();
            continue;
        }
        // Park; a producer that sees the flag wakes us. Check once more after
        // raising it, so work added in between is not slept through.
        parking.parked.store(true, Ordering::SeqCst);
        let did = catch_unwind(AssertUnwindSafe(|| work(state))).unwrap_or(false);
        if !did {
            select! {
                recv(control) -> _ => {
                    parking.parked.store(false, Ordering::SeqCst);
                    return Next::Stop;
                }
                recv(inbox) -> msg => {
                    parking.parked.store(false, Ordering::SeqCst);
                    return match msg {
                        Ok(r) => Next::Request(r),
                        Err(_) => Next::Stop,
                    };
                }
                recv(parking.rx) -> _ => {}
            }
        }
        parking.parked.store(false, Ordering::SeqCst);
        idle = 0;
    }
}

fn run<R: Request, S>(
    config: &ActorConfig,
    status: &Arc<ActorStatus>,
    inbox: &Receiver<R>,
    control: &Receiver<()>,
    state: &mut S,
    serve: &mut impl FnMut(&mut S, R, &mut Cx),
    mut background: Option<Background<S>>,
) {
    let mut seq = 0u64;
    loop {
        // Control before data: a stop request wins over queued work.
        if !control.is_empty() {
            return;
        }
        let mut background_panic = |payload: Box<dyn std::any::Any + Send>| {
            report_unhooked_panic(config, "background work", payload.as_ref());
        };
        let req = match next_request(
            inbox,
            control,
            state,
            &mut background,
            &mut background_panic,
        ) {
            Next::Request(r) => r,
            Next::Stop => return,
        };
        seq += 1;
        let kind = req.kind();
        status.begin(seq, kind, req.describe());
        let fault = config
            .faults
            .load()
            .as_ref()
            .and_then(|plan| plan.check(kind));
        let mut inject_panic = None;
        match fault {
            Some((FaultAction::Error, nth)) => {
                let injected = ActorError::Injected {
                    actor: config.name,
                    op: kind,
                    nth,
                };
                tracing::warn!(op = kind, nth, "injecting error");
                let _ = config.events.send(SupervisorEvent::Failed {
                    actor: config.name,
                    generation: config.generation,
                    failure: Failure::Error {
                        op: kind.to_string(),
                        chain: vec![injected.to_string()],
                    },
                });
                status.end(Outcome::Injected(injected.to_string()));
                req.reject(injected.into());
                continue;
            }
            Some((FaultAction::Hang, nth)) => {
                tracing::warn!(op = kind, nth, "injecting hang");
                // Hold the request so its caller waits out the deadline
                // rather than seeing the actor vanish; only a stop ends this.
                let _ = control.recv();
                drop(req);
                return;
            }
            Some((FaultAction::Panic, nth)) => inject_panic = Some(nth),
            None => {}
        }
        let mut cx = Cx {
            actor: config.name,
            generation: config.generation,
            events: config.events.clone(),
            status: Arc::clone(status),
            op: kind,
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            if let Some(nth) = inject_panic {
                panic!("injected panic at request #{nth} (`{kind}`)");
            }
            serve(state, req, &mut cx)
        }));
        if let Err(payload) = result {
            let message = panic_message(payload.as_ref());
            // Reported by the hook already, unless another hook replaced ours.
            report_unhooked_panic(config, kind, payload.as_ref());
            status.end(Outcome::Panicked(message));
            // State may be half-updated: serve nothing more.
            return;
        }
    }
}
