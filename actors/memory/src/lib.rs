//! The memory actor owns device memory: the GPU virtual-address allocator,
//! every live allocation by device pointer, and pinned host memory the GPU
//! reaches by DMA. Bare metal it keeps the VRAM allocator and builds the
//! MMU v3 page tables itself ([`PageTables`], with [`TlsfAllocator`] for
//! VAs, [`SegregatedFitAllocator`] for video memory and [`flush_tlb`] to
//! invalidate the GPU's TLB after the tables change: library pieces,
//! not yet wired into the actor, which waits on the GSP boot; CPU access
//! goes through the transport); over
//! the kernel module RM allocates and UVM maps at the addresses this actor
//! chooses, and CPU access goes through views RM mapped (made on first
//! use). It calls the gsp actor (for RM objects, memory and views) and the
//! pci actor (for DMA memory and video memory through the transport),
//! never anything above it. Every device pointer it hands out is at least
//! 256-byte aligned, as CUDA promises and ggml assumes.

mod actor;
mod allocation;
mod bare_memory;
mod buffers;
mod card_backing;
mod card_memory;
mod error;
mod freed;
mod page_mapping;
mod page_tables;
mod pinned_pool;
mod range;
mod table_memory;
mod table_pool;
mod tlb_flush;
mod tlb_invalidate;
mod va_tlsf;
mod vram_segregated;

pub use actor::{spawn, MemoryHandle, MemoryRequest, MemoryService, NEVER_MAPPED_VA};
pub use allocation::{AllocError, FreeSpace};
pub use bare_memory::{BareLayout, BareMemory, BareMemoryError, Piece, Placement};
pub use buffers::{DeviceBuffer, DeviceWindow, HostBuffer, MemoryStats};
pub use card_memory::{card_tables, CardMemory, CardSlot, PciPort, SharedCardMemory};
pub use error::MemoryError;
pub use freed::{KEEP_BYTES, KEEP_LARGEST};
pub use page_mapping::{AddressKind, Aperture, MappedPage, PageFlags, PageSize, PageTableError};
pub use page_tables::PageTables;
pub use pinned_pool::{PinnedBuffer, PinnedMapping, PinnedPool, FIRST_MAPPING_BYTES};
pub use range::{RangeAllocator, RangeError};
pub use table_memory::{TableMemory, TableMemoryError};
pub use table_pool::TablePoolError;
pub use tlb_flush::{flush_tlb, invalidate_tlb, Bar0, FlushLimit, FlushScope, TlbFlushError};
pub use tlb_invalidate::{PageDirectoryBase, TlbInvalidate};
pub use va_tlsf::{TlsfAllocator, DEVICE_POINTER_ALIGN};
pub use vram_segregated::SegregatedFitAllocator;
