//! The loader actor turns the binaries CUDA host code registers into
//! modules the GPU can run: it places each module's code in device memory
//! (128-byte aligned with a trailing guard page, since instruction prefetch
//! runs past the last instruction) and uploads it through the submit actor's
//! copy queue. Parsing fat binaries and cubins, relocation and constant
//! banks land with the loader issue; today a module image is taken as one
//! opaque code blob. It calls memory and submit, never anything above them.

mod actor;
mod error;

pub use actor::{
    spawn, LoaderHandle, LoaderRequest, LoaderService, LoaderStats, ModuleId, ModuleInfo,
};
pub use error::LoaderError;
