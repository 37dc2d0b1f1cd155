//! The supervisor owns the in-process [`Host`]: it picks the device, starts
//! the actors bottom-up (pci, gsp, memory, submit, loader), stops them
//! top-down, and enforces the recovery contract on any actor failure, missed
//! deadline, Ctrl-C or normal exit: bus mastering cleared through a fresh
//! transport, a function-level reset after failures, GSP firmware never
//! unloaded, and a crash report written (on the kernel-module path, where
//! the module owns the PCI function: our channels stopped and our RM client
//! freed instead, PCI never touched). It also holds the `macuda` CLI.
//! It may call every actor crate; only `abi` calls it.

pub mod bench;
mod boot_cmd;
mod booted_info;
mod card_port;
pub mod cli;
pub mod exit_status;
mod fill_cmd;
mod firmware_cmd;
pub mod gpu_bench;
mod host;
mod input_file;
mod layers;
mod monitor;
mod opener;
pub mod report;
mod run_cmd;
pub mod run_log;
mod sim_device;
mod sim_serve;
pub mod workload;

pub use host::{
    layer_deadline, Cause, FaultBoard, Host, HostConfig, HostError, RecoveryOutcome, Stack, ACTORS,
};
pub use report::{CrashReport, RecoveryStep};

/// The build this binary was made from (version + git commit).
pub const BUILD_ID: &str = env!("MACUDA_BUILD_ID");
