//! What the address-range allocators (GPU virtual addresses, video
//! memory) share: why a request was refused, and how fragmented the free
//! space is. Fragmentation is reported so the actor can tell "full" from
//! "full of holes" when an allocation fails.

/// Why an allocator refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    #[error("out of space: {wanted} bytes wanted, the largest free block is {largest}")]
    OutOfSpace { wanted: u64, largest: u64 },
    #[error("a zero-byte allocation")]
    ZeroSize,
    #[error("alignment {align} is not a power of two")]
    BadAlignment { align: u64 },
    #[error("{addr:#x} was freed already")]
    DoubleFree { addr: u64 },
    #[error("{addr:#x} is no allocation of this allocator")]
    Foreign { addr: u64 },
    #[error("a range of {size} bytes at {base:#x} is not whole {granule}-byte units")]
    BadRange { base: u64, size: u64, granule: u64 },
}

/// The free space of an allocator, as a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FreeSpace {
    pub free_bytes: u64,
    /// The largest allocation that could succeed with the smallest
    /// alignment.
    pub largest_free_block: u64,
    /// 1 when all the free space is one block.
    pub free_blocks: u64,
}
