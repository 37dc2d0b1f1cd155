//! The actor harness that every macuda actor (pci, gsp, memory, submit,
//! loader) runs inside, so that naming, deadlines, fault injection, request
//! history and failure reporting behave the same in all of them.
//!
//! An actor is one named thread that owns its state and a bounded mailbox.
//! Its protocol is declared once with [`actor_protocol!`], which produces the
//! request enum (each variant carrying a one-shot [`Reply`]), a service trait
//! the actor implements, and a cloneable blocking handle whose calls carry a
//! deadline. The harness keeps the last N requests for crash reports in an
//! [`ActorStatus`] the supervisor may read, honours a [`FaultPlan`] that can be
//! swapped at run time, and reports panics, fatal errors and missed deadlines
//! to the supervisor as [`SupervisorEvent`]s. This crate may call nothing
//! else in the workspace; every actor crate depends on it.

mod error;
mod event;
mod fault;
mod harness;
mod protocol;
mod status;

pub use error::{error_chain, find_in_chain, ActorError, ActorFault, Severity};
pub use event::{Failure, Incident, SupervisorEvent};
pub use fault::{fault_at, FaultAction, FaultPlan, FaultSwitch, ParseFaultError};
pub use harness::{
    spawn, spawn_with_background, wake_pair, ActorConfig, ActorJoin, Cx, Handle, IncidentReporter,
    Parking, Reply, Request, StopOutcome, Waker,
};
pub use status::{ActorSnapshot, ActorStatus, InFlight, Outcome, RequestRecord};

#[doc(hidden)]
pub mod __private {
    pub use crate::harness::Request;
    pub use crate::protocol::short_debug;
}
