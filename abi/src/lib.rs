//! The C ABI of NVIDIA's CUDA runtime, as the host code that nvcc and
//! clang generate (and ggml-cuda) calls it: fat-binary registration,
//! launches, memory, streams, events and graphs, each entry catching
//! panics and answering with a CUDA error code. Built as `libcudart.a`
//! (and, by abi/build-libs.sh, the shared libraries with the sonames
//! NVIDIA's runtime has for CUDA 12 and 13), so a program linked with
//! `-lcudart` gets this runtime.
//!
//! It drives the in-process Host of `macuda-supervisor` (device in
//! `MACUDA_DEVICE`) and nothing else; no crate below it knows the CUDA
//! ABI. `MACUDA_LAUNCH_LOG=FILE` logs every launch as a JSON line.
//!
//! The files are layered one way (tests/tests/layering.rs holds them to
//! it): leaves (`types`, `hash`, `launch_log`, `device`, `error`,
//! `knobs`); the per-process tables (`state`); the [`runtime::Runtime`]
//! that owns them and the Host; the operations on it (`resolve`,
//! `memory`, `work`, `launch`, `graph`); the C entry points (`api`).

pub mod api;
pub mod call_spans;
pub mod call_stats;
pub mod device;
pub mod embed;
pub mod error;
pub mod graph;
pub mod hash;
pub mod knobs;
pub mod launch;
pub mod launch_log;
pub mod memory;
pub mod profile_trace;
pub mod resolve;
pub mod runtime;
pub mod state;
pub mod types;
pub mod work;

pub use error::CudaError;
