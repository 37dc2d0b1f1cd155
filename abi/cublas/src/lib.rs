//! The C ABI of NVIDIA's cuBLAS, the part ggml-cuda calls (and what a user
//! of those calls expects beside them): handles and their settings, GEMM
//! in every type combination ggml uses (f16, bf16, f32 with tf32, f64;
//! single, batched through pointer arrays, strided), triangular solves,
//! status strings and the logger. Built as `libcublas.a` (and, by
//! abi/build-libs.sh, the shared libraries with NVIDIA's sonames for CUDA
//! 12 and 13).
//!
//! The library is itself a CUDA program: its kernels are our CUDA sources
//! (kernels/), compiled by nvcc into one fat binary embedded here and
//! registered with the CUDA runtime the process links (ours), and every
//! call launches them on the handle's stream through `cudaLaunchKernel`.
//! It knows nothing of the runtime's insides.

pub mod api;
pub mod argument;
pub mod enums;
pub mod gemm;
pub mod guard;
pub mod handle;
pub mod kernels;
pub mod log;
pub mod runtime;
pub mod status;
pub mod trsm;
pub mod workspace;

pub use status::{Error, Status};

// The unit tests drop handles, whose memory goes back through the CUDA
// runtime: link ours into them (the library itself links whichever the
// program does).
#[cfg(test)]
use cudart as _;

/// The cuBLAS version whose headers our declarations are checked against
/// (tests/values.rs), reported by cublasGetVersion and cublasGetProperty.
pub const VERSION: (i32, i32, i32) = (13, 1, 0);
