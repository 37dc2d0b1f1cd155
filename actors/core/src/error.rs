use std::error::Error as StdError;
use std::time::Duration;

/// Failures of the plumbing between actors, as opposed to failures of the
/// work an actor was asked to do. Every crate's error enum wraps this one so
/// that the supervisor can tell "the actor is gone" from "the request was
/// refused" by walking the error chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActorError {
    #[error("{actor}: no reply to `{op}` within {after:?}")]
    Timeout {
        actor: &'static str,
        op: &'static str,
        after: Duration,
    },
    #[error("{actor} is not running (request `{op}` was not answered)")]
    Disconnected {
        actor: &'static str,
        op: &'static str,
    },
    #[error("{actor}: injected error at request #{nth} (`{op}`)")]
    Injected {
        actor: &'static str,
        op: &'static str,
        nth: u64,
    },
}

impl ActorError {
    pub fn actor(&self) -> &'static str {
        match self {
            ActorError::Timeout { actor, .. }
            | ActorError::Disconnected { actor, .. }
            | ActorError::Injected { actor, .. } => actor,
        }
    }
}

/// How the harness treats an error an actor's handler returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The request failed but the actor's state is intact (bad argument,
    /// refusal by the device). Returned to the caller; nothing is reported.
    Recoverable,
    /// The actor can no longer be trusted: reported to the supervisor, which
    /// runs the recovery contract.
    Fatal,
    /// The error came from an actor further down and was passed through; that
    /// actor reports for itself, so this one does not.
    Downstream,
}

/// Implemented by each actor crate's error enum so the harness can classify
/// results and inject typed errors.
pub trait ActorFault: StdError + From<ActorError> + Send + Sync + 'static {
    fn severity(&self) -> Severity;
}

/// Every message in an error's source chain, outermost first.
pub fn error_chain(err: &(dyn StdError + 'static)) -> Vec<String> {
    let mut out = vec![err.to_string()];
    let mut cur = err.source();
    while let Some(e) = cur {
        out.push(e.to_string());
        cur = e.source();
    }
    out
}

/// The innermost error of type `T` in `err`'s source chain (itself included).
pub fn find_in_chain<'a, T: StdError + 'static>(
    err: &'a (dyn StdError + 'static),
) -> Option<&'a T> {
    let mut found = None;
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(t) = e.downcast_ref::<T>() {
            found = Some(t);
        }
        cur = e.source();
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("while calling inner")]
        Inner(#[source] ActorError),
    }

    #[test]
    fn chain_lists_outer_then_inner() {
        let e = Outer::Inner(ActorError::Disconnected {
            actor: "pci",
            op: "config_read",
        });
        let chain = error_chain(&e);
        assert_eq!(chain.len(), 2);
        assert_eq!(chain[0], "while calling inner");
        assert!(chain[1].contains("pci is not running"));
        let found = find_in_chain::<ActorError>(&e).expect("actor error in chain");
        assert_eq!(found.actor(), "pci");
    }
}
