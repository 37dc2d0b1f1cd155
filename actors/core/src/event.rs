use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What an actor failed with, in a form that goes into a crash report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Failure {
    Panic {
        op: Option<String>,
        message: String,
        location: Option<String>,
        backtrace: String,
    },
    Error {
        op: String,
        chain: Vec<String>,
    },
    MissedDeadline {
        op: String,
        after_ms: u64,
    },
}

impl Failure {
    /// One line naming what happened.
    pub fn headline(&self) -> String {
        match self {
            Failure::Panic {
                op,
                message,
                location,
                ..
            } => format!(
                "panic{} at {}: {message}",
                op.as_deref()
                    .map(|o| format!(" in `{o}`"))
                    .unwrap_or_default(),
                location.as_deref().unwrap_or("unknown location")
            ),
            Failure::Error { op, chain } => {
                format!("fatal error in `{op}`: {}", chain.join(": "))
            }
            Failure::MissedDeadline { op, after_ms } => {
                format!("no answer to `{op}` within {after_ms} ms")
            }
        }
    }
}

/// Something the device did that an actor came through with its own state
/// intact, but that leaves the stack short of what it needs to go on as
/// before: the supervisor hears of it as it happens and runs its contained
/// recovery (a report, then whatever the incident needs), where a
/// [`Failure`] takes the whole stack down.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Incident {
    /// RM stopped our channels (an MMU fault, an engine exception): the
    /// work they held will not run, and nothing more runs on them; fresh
    /// channels are needed. `fault` is RM's account, as the actor read it.
    ChannelFault { fault: String },
    /// A queue stood still with entries Host had not fetched, and its
    /// doorbell was rung again `times` times before the wait ended: a
    /// doorbell the device lost.
    DoorbellRungAgain { times: u64 },
}

impl Incident {
    /// One line naming what happened.
    pub fn headline(&self) -> String {
        match self {
            Incident::ChannelFault { fault } => format!("channel fault: {fault}"),
            Incident::DoorbellRungAgain { times } => format!(
                "a queue stood still with work the device had not fetched: its doorbell was rung again ({times} time(s))"
            ),
        }
    }
}

/// Messages that flow up to the supervisor. The channel carrying them is
/// unbounded so that no actor can block on reporting (no bounded cycle).
#[derive(Debug, Clone)]
pub enum SupervisorEvent {
    /// An actor panicked or returned a fatal error; it reports this itself.
    Failed {
        actor: &'static str,
        generation: u64,
        failure: Failure,
    },
    /// A caller waited past the deadline for `actor` to answer `op`. Which
    /// actor is really stuck is the supervisor's decision (see its monitor).
    MissedDeadline {
        actor: &'static str,
        op: &'static str,
        after: Duration,
    },
    /// An actor came through `incident` and goes on; the supervisor runs
    /// its contained recovery.
    Incident {
        actor: &'static str,
        generation: u64,
        incident: Incident,
    },
    /// Ctrl-C, or a host-requested interruption.
    Interrupted,
    /// The Host is shutting down normally; the monitor should end.
    Shutdown,
}
