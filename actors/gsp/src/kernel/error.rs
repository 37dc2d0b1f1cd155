//! What can go wrong talking to the kernel module: a node that does not
//! open, an ioctl that fails, RM refusing, a driver of another version.

use macuda_hw::rm::{self};
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum KernelRmError {
    #[error("cannot open {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("ioctl {what} failed")]
    Ioctl {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("RM refused {what}: status {status:#x} ({})", rm::status::name(*.status))]
    Status { what: &'static str, status: u32 },
    #[error("cannot map {len} bytes of object {object:#x}")]
    Map {
        object: u32,
        len: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("the GPU offers none of the {kind} classes we drive ({wanted:x?})")]
    NoClass {
        kind: &'static str,
        wanted: &'static [u32],
    },
    #[error("no GPU virtual addresses left for {bytes} bytes")]
    VaExhausted { bytes: u64 },
    #[error("no GPU {index}: the kernel module lists {found}")]
    NoGpu { index: u32, found: usize },
    #[error("the kernel module is {found}; these structures are declared for {declared}")]
    DriverVersion { found: String, declared: u32 },
}
