//! The C ABI of NVIDIA's CUDA runtime and cuBLAS, as the host code that
//! nvcc and clang generate (and ggml-cuda) calls it: fat-binary
//! registration, launches, memory, streams, events and graphs, each entry
//! catching panics and answering with a CUDA error code. It drives the
//! in-process Host of `macuda-supervisor` and nothing else; no crate below
//! it knows the CUDA ABI. The entry points land with the ABI issue; until
//! then this crate only fixes its place in the workspace.

pub use macuda_supervisor::Host;
