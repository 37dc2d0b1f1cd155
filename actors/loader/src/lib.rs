//! The loader turns the binaries CUDA host code registers into modules the
//! GPU can run. It reads fat binaries (choosing and decompressing the cubin
//! for the device), parses cubins (kernels, parameter layouts, constant
//! banks, globals, relocations), lays a module out as a code region (128-byte
//! aligned sections and a guard page) and a data region (constant banks 2-4
//! and device globals), applies relocations before upload, and builds
//! constant bank 0 for each launch. The actor allocates through the memory
//! actor and uploads through the submit actor, never calling anything above
//! them; the parsing and layout code is plain and also serves `macuda
//! inspect`.

mod actor;
pub mod cubin;
mod error;
pub mod fatbin;
pub mod image;
pub mod inspect;
pub mod module;
pub mod names;
pub mod registrations;

pub use actor::{
    spawn, FunctionInfo, GlobalInfo, LoaderHandle, LoaderRequest, LoaderService, LoaderStats,
    ModuleInfo,
};
pub use error::LoaderError;
pub use module::ModuleId;
