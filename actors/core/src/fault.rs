use arc_swap::ArcSwapOption;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What an injected fault does to the actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FaultAction {
    /// The handler panics (caught by the harness, reported with a backtrace).
    Panic,
    /// The request is answered with the actor's typed error, marked fatal.
    Error,
    /// The actor stops answering until it is told to stop.
    Hang,
}

impl fmt::Display for FaultAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultAction::Panic => "panic",
            FaultAction::Error => "error",
            FaultAction::Hang => "hang",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad fault `{input}`: {why}")]
pub struct ParseFaultError {
    pub input: String,
    pub why: &'static str,
}

impl FromStr for FaultAction {
    type Err = ParseFaultError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "panic" => Ok(FaultAction::Panic),
            "error" => Ok(FaultAction::Error),
            "hang" => Ok(FaultAction::Hang),
            _ => Err(ParseFaultError {
                input: s.to_string(),
                why: "expected panic, error or hang",
            }),
        }
    }
}

/// Fail with `action` at the `nth` request (1-based) of a given kind, or of
/// any kind when `kind` is `None`, counted from when the plan is installed.
/// A plan fires once.
#[derive(Debug)]
pub struct FaultPlan {
    pub action: FaultAction,
    pub nth: u64,
    pub kind: Option<String>,
    seen: AtomicU64,
}

impl FaultPlan {
    pub fn new(action: FaultAction, nth: u64) -> Self {
        FaultPlan {
            action,
            nth: nth.max(1),
            kind: None,
            seen: AtomicU64::new(0),
        }
    }

    /// Count only requests of this kind (the request's method name).
    pub fn on_kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = Some(kind.into());
        self
    }

    /// Called by the harness for every request; `Some` exactly once, when the
    /// matching request count reaches `nth`.
    pub(crate) fn check(&self, kind: &str) -> Option<(FaultAction, u64)> {
        if let Some(k) = &self.kind {
            if k != kind {
                return None;
            }
        }
        let n = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
        (n == self.nth).then_some((self.action, n))
    }
}

/// The run-time switch through which a plan is installed or removed while
/// the actor runs. The supervisor keeps one per actor across restarts.
pub type FaultSwitch = Arc<ArcSwapOption<FaultPlan>>;

/// Work an actor takes outside its mailbox that a caller waits on (the
/// submit lane's sync points) counts for the installed plan as a request of
/// `kind`: `Some` when the plan fires at it, which the actor then acts out
/// (a panic, an error at the next reply, a hang).
pub fn fault_at(switch: &FaultSwitch, kind: &str) -> Option<(FaultAction, u64)> {
    switch.load().as_ref().and_then(|plan| plan.check(kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_once_at_nth_of_kind() {
        let plan = FaultPlan::new(FaultAction::Error, 2).on_kind("alloc");
        assert_eq!(plan.check("free"), None);
        assert_eq!(plan.check("alloc"), None);
        assert_eq!(plan.check("free"), None);
        assert_eq!(plan.check("alloc"), Some((FaultAction::Error, 2)));
        assert_eq!(plan.check("alloc"), None);
    }

    #[test]
    fn any_kind_counts_everything() {
        let plan = FaultPlan::new(FaultAction::Hang, 3);
        assert_eq!(plan.check("a"), None);
        assert_eq!(plan.check("b"), None);
        assert_eq!(plan.check("c"), Some((FaultAction::Hang, 3)));
    }

    #[test]
    fn work_outside_the_mailbox_counts_as_a_request() {
        let switch = FaultSwitch::default();
        assert_eq!(fault_at(&switch, "sync_point"), None, "no plan");
        switch.store(Some(Arc::new(FaultPlan::new(FaultAction::Panic, 2))));
        assert_eq!(fault_at(&switch, "sync_point"), None);
        assert_eq!(
            fault_at(&switch, "sync_point"),
            Some((FaultAction::Panic, 2))
        );
    }

    #[test]
    fn parses_actions() {
        assert_eq!("panic".parse::<FaultAction>(), Ok(FaultAction::Panic));
        assert_eq!("hang".parse::<FaultAction>(), Ok(FaultAction::Hang));
        assert!("explode".parse::<FaultAction>().is_err());
    }
}
