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

/// A request as both allocators take it: `bytes` rounded up to the
/// granule and an alignment of at least the granule; a zero size, an
/// alignment not a power of two, or a size past the address space
/// refused (the last as out of space, with the largest free block that
/// `largest` reports).
///
/// # Errors
/// As said.
pub(crate) fn granular_request(
    bytes: u64,
    align: u64,
    granule: u64,
    largest: impl FnOnce() -> u64,
) -> Result<(u64, u64), AllocError> {
    if bytes == 0 {
        return Err(AllocError::ZeroSize);
    }
    if !align.is_power_of_two() {
        return Err(AllocError::BadAlignment { align });
    }
    let len = bytes
        .checked_next_multiple_of(granule)
        .ok_or_else(|| AllocError::OutOfSpace {
            wanted: bytes,
            largest: largest(),
        })?;
    Ok((len, align.max(granule)))
}
