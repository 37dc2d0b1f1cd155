//! The memory actor owns device memory: the VRAM allocator, the GPU
//! virtual-address allocator and the VA space object, and pinned host
//! memory the GPU reaches by DMA. Bare metal it will build MMU v3 page
//! tables itself; over the kernel module RM manages the mappings. It calls
//! the gsp actor (for RM objects and device facts) and the pci actor (for
//! DMA memory), never anything above it. Every device pointer it hands out
//! is at least 256-byte aligned, as CUDA promises and ggml assumes.

mod actor;
mod error;
mod range;

pub use actor::{spawn, DeviceBuffer, MemoryHandle, MemoryRequest, MemoryService, MemoryStats};
pub use error::MemoryError;
pub use range::{RangeAllocator, RangeError};
