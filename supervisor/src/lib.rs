//! The supervisor owns the in-process [`Host`]: it picks the device, starts
//! the actors bottom-up (pci, gsp, memory, submit, loader), stops them
//! top-down, and enforces the recovery contract on any actor failure, missed
//! deadline, Ctrl-C or normal exit: bus mastering cleared through a fresh
//! transport, a function-level reset after failures, GSP firmware never
//! unloaded, and a crash report written. It also holds the `macuda` CLI.
//! It may call every actor crate; only `abi` calls it.

pub mod bench;
pub mod cli;
mod host;
mod monitor;
pub mod report;
pub mod workload;

pub use host::{
    layer_deadline, Cause, FaultBoard, Host, HostConfig, HostError, RecoveryOutcome, Stack, ACTORS,
};
pub use report::{CrashReport, RecoveryStep};

/// The build this binary was made from (version + git commit).
pub const BUILD_ID: &str = env!("MACUDA_BUILD_ID");
