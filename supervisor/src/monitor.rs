//! The supervision state shared by the Host and its monitor thread, the
//! recovery contract, and the monitor loop that turns actor reports, missed
//! deadlines and Ctrl-C into exactly one recovery per stack generation, and
//! each incident an actor came through into a contained recovery that
//! leaves the stack up.

use crate::report::{unix_ms, CrashReport, RecoveryStep, ReportCause, REPORT_FORMAT};
use macuda_core::{
    error_chain, ActorJoin, ActorStatus, Failure, Incident, StopOutcome, SupervisorEvent,
};
use macuda_pci::{clear_bus_master, Opener, Transport};
use parking_lot::{Condvar, Mutex};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one run of the recovery contract did.
#[derive(Debug, Clone)]
pub struct RecoveryOutcome {
    pub cause: ReportCause,
    pub steps: Vec<RecoveryStep>,
    /// Where the crash report went, or why it could not be written.
    pub report: Result<PathBuf, String>,
}

enum State {
    Running,
    Recovering,
    Done(Arc<RecoveryOutcome>),
}

/// Everything the monitor and the Host both need. Actors' statuses are read
/// here, never their state: the harness hands the status out on purpose.
pub(crate) struct Supervision {
    pub generation: u64,
    pub deadline: Duration,
    pub report_dir: PathBuf,
    pub exit_on_interrupt: bool,
    pub opener: Arc<dyn Opener>,
    pub device_line: Mutex<String>,
    /// What happens to the GSP firmware at exit on this backend.
    pub firmware_note: Mutex<String>,
    /// On the kernel path: our RM objects, reachable without the gsp actor.
    pub teardown: Mutex<Option<macuda_gsp::RmTeardown>>,
    /// On GSP-RM we booted: what the gsp actor's RM kept of it (last
    /// messages, notices, log lines), for the report.
    pub gsp_journal: Mutex<Option<macuda_gsp::bare::SharedJournal>>,
    /// Bottom-up: pci first.
    pub joins: Mutex<Vec<ActorJoin>>,
    pub statuses: Mutex<Vec<Arc<ActorStatus>>>,
    /// The submit actor, once it runs: a contained recovery asks it for
    /// fresh channels.
    pub submit: Mutex<Option<macuda_submit::SubmitHandle>>,
    /// Every contained recovery this generation ran, oldest first.
    incidents: Mutex<Vec<Arc<RecoveryOutcome>>>,
    state: Mutex<State>,
    changed: Condvar,
}

fn timed(
    steps: &mut Vec<RecoveryStep>,
    action: &str,
    f: impl FnOnce() -> Result<String, String>,
) -> bool {
    let started = Instant::now();
    let result = f();
    let ok = result.is_ok();
    steps.push(RecoveryStep {
        action: action.to_string(),
        ok,
        detail: result.unwrap_or_else(|e| e),
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    });
    ok
}

fn chain_text(e: &(dyn std::error::Error + 'static)) -> String {
    error_chain(e).join(": ")
}

impl Supervision {
    pub fn new(
        generation: u64,
        deadline: Duration,
        report_dir: PathBuf,
        exit_on_interrupt: bool,
        opener: Arc<dyn Opener>,
    ) -> Supervision {
        Supervision {
            generation,
            deadline,
            report_dir,
            exit_on_interrupt,
            opener,
            device_line: Mutex::new("device not opened yet".to_string()),
            firmware_note: Mutex::new("no firmware was booted".to_string()),
            teardown: Mutex::new(None),
            gsp_journal: Mutex::new(None),
            joins: Mutex::new(Vec::new()),
            statuses: Mutex::new(Vec::new()),
            submit: Mutex::new(None),
            incidents: Mutex::new(Vec::new()),
            state: Mutex::new(State::Running),
            changed: Condvar::new(),
        }
    }

    pub fn adopt(&self, join: ActorJoin) {
        self.statuses.lock().push(Arc::clone(join.status()));
        self.joins.lock().push(join);
    }

    pub fn outcome(&self) -> Option<Arc<RecoveryOutcome>> {
        match &*self.state.lock() {
            State::Done(o) => Some(Arc::clone(o)),
            _ => None,
        }
    }

    /// Wait until a recovery has finished.
    pub fn wait_done(&self, timeout: Duration) -> Option<Arc<RecoveryOutcome>> {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock();
        loop {
            if let State::Done(o) = &*st {
                return Some(Arc::clone(o));
            }
            if self.changed.wait_until(&mut st, deadline).timed_out() {
                return match &*st {
                    State::Done(o) => Some(Arc::clone(o)),
                    _ => None,
                };
            }
        }
    }

    /// Run the recovery contract once per generation; later callers get the
    /// first run's outcome.
    pub fn recover(&self, cause: ReportCause) -> Arc<RecoveryOutcome> {
        {
            let mut st = self.state.lock();
            match &*st {
                State::Running => *st = State::Recovering,
                State::Done(o) => return Arc::clone(o),
                State::Recovering => {
                    drop(st);
                    // The run in progress is bounded by its own stop budget;
                    // a wait longer than that means it is itself stuck.
                    return self
                        .wait_done(self.stop_budget() * 4 + Duration::from_secs(30))
                        .unwrap_or_else(|| {
                            Arc::new(RecoveryOutcome {
                                cause,
                                steps: Vec::new(),
                                report: Err("another recovery did not finish".to_string()),
                            })
                        });
                }
            }
        }
        match &cause {
            ReportCause::Failure { actor, failure } => {
                tracing::error!(actor = %actor, failure = %failure.headline(), "actor failed; recovering")
            }
            ReportCause::Interrupted => tracing::warn!("interrupted; recovering"),
            ReportCause::Exit => tracing::info!("normal exit"),
            ReportCause::BootFailed { step, .. } => {
                tracing::error!(%step, "our boot stopped; recovering")
            }
            ReportCause::Incident { actor, incident } => {
                tracing::error!(actor = %actor, incident = %incident.headline(), "recovering from an incident")
            }
        }
        let mut steps = Vec::new();
        if self.opener.owns_function() {
            match cause {
                // An incident reaches here only through a contained
                // recovery that could not be done: a failure.
                ReportCause::Failure { .. } | ReportCause::Incident { .. } => {
                    let mut fresh = self.bus_master_off(&mut steps);
                    self.stop_actors(&mut steps);
                    self.function_reset(&mut steps, fresh.as_deref_mut());
                }
                // A boot that stopped has turned bus mastering off itself;
                // doing it again costs nothing and is the contract.
                ReportCause::Interrupted | ReportCause::BootFailed { .. } => {
                    self.bus_master_off(&mut steps);
                    self.stop_actors(&mut steps);
                }
                ReportCause::Exit => {
                    self.stop_actors(&mut steps);
                    self.bus_master_off(&mut steps);
                }
            }
        } else {
            // NVIDIA's module owns the PCI function: we never touch its
            // config space and never reset the GPU. Our part is our RM
            // objects: stop our channels first (the GPU runs none of our
            // work after that), then the actors, then free the client.
            if !matches!(cause, ReportCause::Exit) {
                self.stop_channels(&mut steps);
            }
            self.stop_actors(&mut steps);
            self.free_rm_client(&mut steps);
            timed(
                &mut steps,
                "leave PCI config and reset to the kernel module",
                || {
                    Ok(
                        "bus mastering and reset untouched: the module owns the function"
                            .to_string(),
                    )
                },
            );
        }
        let note = self.firmware_note.lock().clone();
        timed(
            &mut steps,
            "leave GSP firmware resident (never unloaded)",
            || Ok(note),
        );
        match self.opener.end_session() {
            Ok(None) => {}
            ended => {
                timed(&mut steps, "end the transport session", || match ended {
                    Ok(line) => Ok(line.unwrap_or_default()),
                    Err(e) => Err(chain_text(&e)),
                });
            }
        }
        let report = self.write_report(&cause, &steps);
        let outcome = Arc::new(RecoveryOutcome {
            cause,
            steps,
            report,
        });
        *self.state.lock() = State::Done(Arc::clone(&outcome));
        self.changed.notify_all();
        outcome
    }

    /// The crash report of one recovery, written whole into the report
    /// directory: the path, or why it could not be written.
    fn write_report(&self, cause: &ReportCause, steps: &[RecoveryStep]) -> Result<PathBuf, String> {
        let report = CrashReport {
            format: REPORT_FORMAT,
            build_id: crate::BUILD_ID.to_string(),
            written_unix_ms: unix_ms(),
            pid: std::process::id(),
            generation: self.generation,
            device_line: self.device_line.lock().clone(),
            cause: cause.clone(),
            actors: self.statuses.lock().iter().map(|s| s.snapshot()).collect(),
            recovery: steps.to_vec(),
            boot: self.gsp_journal.lock().as_ref().map(|j| {
                let j = j.lock();
                crate::report::BootTranscript {
                    steps: Vec::new(),
                    rpc: j.rpc.clone(),
                    notices: j.notices.clone(),
                    log: j.log.iter().cloned().collect(),
                }
            }),
        };
        let report = report
            .write_into(&self.report_dir)
            .map_err(|e| chain_text(&e));
        match &report {
            Ok(p) => tracing::info!(report = %p.display(), "crash report written"),
            Err(e) => tracing::error!(error = %e, "crash report not written"),
        }
        report
    }

    /// Every contained recovery so far, oldest first.
    pub fn incidents(&self) -> Vec<Arc<RecoveryOutcome>> {
        self.incidents.lock().clone()
    }

    /// The contained recovery of an incident `actor` came through: what the
    /// incident needs (fresh channels after a channel fault; a lost
    /// doorbell was already rung again by the actor that saw its queue
    /// stand still), then a report, and the stack stays up. Where what it
    /// needs cannot be done, the stack cannot go on: the recovery contract
    /// runs as for a failure.
    pub fn contain(&self, actor: &str, incident: Incident) -> Arc<RecoveryOutcome> {
        tracing::warn!(actor = %actor, incident = %incident.headline(), "containing an incident");
        let mut steps = Vec::new();
        let done = match &incident {
            Incident::ChannelFault { .. } => self.fresh_channels(&mut steps),
            Incident::DoorbellRungAgain { times } => timed(
                &mut steps,
                "ring the stalled queue's doorbell again",
                || {
                    Ok(format!(
                        "rung {times} time(s) by `{actor}` as its wait saw the queue stand still; the wait went on"
                    ))
                },
            ),
        };
        let cause = ReportCause::Incident {
            actor: actor.to_string(),
            incident,
        };
        let report = self.write_report(&cause, &steps);
        let outcome = Arc::new(RecoveryOutcome {
            cause,
            steps,
            report,
        });
        self.incidents.lock().push(Arc::clone(&outcome));
        if !done {
            let failed = outcome.steps.iter().find(|s| !s.ok);
            self.recover(ReportCause::Failure {
                actor: actor.to_string(),
                failure: Failure::Error {
                    op: failed.map_or_else(String::new, |s| s.action.clone()),
                    chain: failed.map(|s| vec![s.detail.clone()]).unwrap_or_default(),
                },
            });
        }
        outcome
    }

    /// After a channel fault: the faulted channels destroyed and fresh ones
    /// made, by the submit actor (which owns them), so work runs again.
    fn fresh_channels(&self, steps: &mut Vec<RecoveryStep>) -> bool {
        let submit = self.submit.lock().clone();
        timed(
            steps,
            "replace the faulted channels with fresh ones",
            || match submit {
                None => Err("the submit actor is not running".to_string()),
                Some(s) => s
                    .reopen_channels()
                    .map(|c| {
                        format!(
                            "fresh channels: compute token {:#x}, copy token {:#x}",
                            c.compute.token, c.copy.token
                        )
                    })
                    .map_err(|e| chain_text(&e)),
            },
        )
    }

    /// Step 1: through a connection of our own, never the failed actor's.
    fn bus_master_off(&self, steps: &mut Vec<RecoveryStep>) -> Option<Box<dyn Transport>> {
        let mut fresh = None;
        timed(
            steps,
            "clear bus mastering through a fresh transport",
            || {
                let mut t = self.opener.open().map_err(|e| chain_text(&e))?;
                let change = clear_bus_master(t.as_mut()).map_err(|e| chain_text(&e))?;
                fresh = Some(t);
                if change.after.bus_master() {
                    return Err(format!(
                        "bit 2 still set after the write: command {:#06x}",
                        change.after.0
                    ));
                }
                Ok(format!(
                    "command {:#06x} -> {:#06x}",
                    change.before.0, change.after.0
                ))
            },
        );
        fresh
    }

    /// Kernel path, step 1: our channel groups off the scheduler, through
    /// the control node the teardown handle shares (not the gsp actor).
    fn stop_channels(&self, steps: &mut Vec<RecoveryStep>) {
        let teardown = self.teardown.lock().clone();
        timed(
            steps,
            "stop our channel groups (RM schedule off)",
            || match teardown {
                None => Ok("no RM client was opened".to_string()),
                Some(t) => t
                    .stop_channels()
                    .map(|n| format!("{n} channel group(s) of client {:#x} stopped", t.client()))
                    .map_err(|e| chain_text(&e)),
            },
        );
    }

    /// Kernel path, last step: free our RM client and everything under it
    /// (channels, memory, VA space), unless the gsp actor freed it as it
    /// stopped.
    fn free_rm_client(&self, steps: &mut Vec<RecoveryStep>) {
        let teardown = self.teardown.lock().clone();
        timed(
            steps,
            "free our RM objects (the client and all below)",
            || match teardown {
                None => Ok("no RM client was opened".to_string()),
                Some(t) => match t.free_client() {
                    Ok(true) => Ok(format!("client {:#x} freed", t.client())),
                    Ok(false) => Ok(format!(
                        "client {:#x} already freed by the gsp actor as it stopped",
                        t.client()
                    )),
                    Err(e) => Err(chain_text(&e)),
                },
            },
        );
    }

    /// Long enough for the top layer's deadline to run out, so an actor
    /// blocked on a stuck one below gets its answer and sees the stop.
    fn stop_budget(&self) -> Duration {
        crate::layers::layer_deadline(self.deadline, "loader") + Duration::from_secs(1)
    }

    /// Top-down: every actor is told first, then each is waited for within
    /// one shared budget, so a hung actor costs the budget once.
    fn stop_actors(&self, steps: &mut Vec<RecoveryStep>) {
        let mut joins = std::mem::take(&mut *self.joins.lock());
        for j in joins.iter().rev() {
            j.request_stop();
        }
        let until = Instant::now() + self.stop_budget();
        for j in joins.iter_mut().rev() {
            let name = j.name();
            timed(steps, &format!("stop actor `{name}`"), || {
                match j.wait(until.saturating_duration_since(Instant::now())) {
                    StopOutcome::Stopped => Ok("stopped".to_string()),
                    StopOutcome::Abandoned { busy_with } => Err(format!(
                        "did not stop; thread abandoned while handling {}",
                        busy_with.as_deref().unwrap_or("nothing")
                    )),
                }
            });
        }
    }

    /// Step 2, failures only: a function-level reset quiesces the card.
    fn function_reset(
        &self,
        steps: &mut Vec<RecoveryStep>,
        fresh: Option<&mut (dyn Transport + 'static)>,
    ) {
        timed(steps, "function-level reset", || {
            let mut reopened;
            let t: &mut dyn Transport = match fresh {
                Some(t) => t,
                None => {
                    reopened = self.opener.open().map_err(|e| chain_text(&e))?;
                    reopened.as_mut()
                }
            };
            t.function_reset().map_err(|e| chain_text(&e))?;
            Ok(format!("reset issued over {}", t.backend()))
        });
    }

    /// The actor that is really stuck: the lowest one whose current request
    /// has run for at least half a deadline (calls only go down, so the
    /// deepest busy actor is the one the others wait on), else the one the
    /// caller named.
    fn culprit(&self, named: &'static str, op: &'static str, after: Duration) -> (String, Failure) {
        for s in self.statuses.lock().iter() {
            if let Some(f) = s.in_flight() {
                let busy = f.since.elapsed();
                if busy >= self.deadline / 2 {
                    return (
                        s.name().to_string(),
                        Failure::MissedDeadline {
                            op: f.summary,
                            after_ms: millis(busy),
                        },
                    );
                }
            }
        }
        (
            named.to_string(),
            Failure::MissedDeadline {
                op: op.to_string(),
                after_ms: millis(after),
            },
        )
    }

    /// An actor busy past its deadline that no caller is waiting on: its
    /// own layer's deadline, the one its callers wait (a sync point in
    /// submit may take longer than a request to pci may).
    fn overdue(&self) -> Option<(String, Failure)> {
        let late = self.statuses.lock().iter().any(|s| {
            s.busy_for()
                .is_some_and(|b| b > crate::layers::layer_deadline(self.deadline, s.name()))
        });
        late.then(|| self.culprit("unknown", "unknown", self.deadline))
    }

    fn is_running(&self) -> bool {
        matches!(&*self.state.lock(), State::Running)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The monitor thread: one per Host, ends on `Shutdown`.
pub(crate) fn run_monitor(sup: Arc<Supervision>, events: flume::Receiver<SupervisorEvent>) {
    let tick = (sup.deadline / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        match events.recv_timeout(tick) {
            Ok(SupervisorEvent::Failed {
                actor,
                generation,
                failure,
            }) => {
                if generation == sup.generation {
                    sup.recover(ReportCause::Failure {
                        actor: actor.to_string(),
                        failure,
                    });
                }
            }
            Ok(SupervisorEvent::MissedDeadline { actor, op, after }) => {
                if sup.is_running() {
                    let (actor, failure) = sup.culprit(actor, op, after);
                    sup.recover(ReportCause::Failure { actor, failure });
                }
            }
            Ok(SupervisorEvent::Incident {
                actor,
                generation,
                incident,
            }) => {
                if generation == sup.generation && sup.is_running() {
                    sup.contain(actor, incident);
                }
            }
            Ok(SupervisorEvent::Interrupted) => {
                let outcome = sup.recover(ReportCause::Interrupted);
                if sup.exit_on_interrupt {
                    match &outcome.report {
                        Ok(p) => eprintln!(
                            "macuda: interrupted; bus mastering cleared; crash report: {}",
                            p.display()
                        ),
                        Err(e) => eprintln!("macuda: interrupted; crash report not written: {e}"),
                    }
                    std::process::exit(130);
                }
            }
            Ok(SupervisorEvent::Shutdown) | Err(flume::RecvTimeoutError::Disconnected) => return,
            Err(flume::RecvTimeoutError::Timeout) => {
                if sup.is_running() {
                    if let Some((actor, failure)) = sup.overdue() {
                        sup.recover(ReportCause::Failure { actor, failure });
                    }
                }
            }
        }
    }
}
