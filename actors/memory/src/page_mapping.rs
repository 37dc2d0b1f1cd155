//! What one mapping of the page tables says: the page size, where the
//! memory is, the access it allows, and why a map or unmap was refused.
//! Kept apart from the builder so callers name these without it.

use crate::table_memory::TableMemoryError;
use crate::table_pool::TablePoolError;
use macuda_hw::mmu::{pte, PteAperture};
use macuda_hw::page;

/// The page sizes the builder writes: a PT_SMALL entry, a PT_BIG entry,
/// or PD0's own slot. (The 512 MiB leaf of PD1 is not written: nothing
/// allocates memory that large and that aligned.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PageSize {
    Small,
    Big,
    Huge,
}

impl PageSize {
    pub const fn bytes(self) -> u64 {
        match self {
            PageSize::Small => page::SMALL,
            PageSize::Big => page::BIG,
            PageSize::Huge => page::HUGE,
        }
    }
}

/// Where a mapped page lies. (Peer memory is not mapped: no peer GPUs.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Aperture {
    Video,
    /// Host memory, by bus address, snooped by the CPU's caches.
    SystemCoherent,
    /// Host memory, by bus address, not snooped.
    SystemNonCoherent,
}

impl Aperture {
    pub(crate) const fn pte(self) -> PteAperture {
        match self {
            Aperture::Video => PteAperture::Video,
            Aperture::SystemCoherent => PteAperture::SystemCoherent,
            Aperture::SystemNonCoherent => PteAperture::SystemNonCoherent,
        }
    }

    pub(crate) const fn of_pte(a: PteAperture) -> Option<Aperture> {
        match a {
            PteAperture::Video => Some(Aperture::Video),
            PteAperture::SystemCoherent => Some(Aperture::SystemCoherent),
            PteAperture::SystemNonCoherent => Some(Aperture::SystemNonCoherent),
            PteAperture::Peer => None,
        }
    }

    /// The PTE address field this aperture's pages are written with:
    /// video memory has fewer address bits than the bus.
    pub(crate) const fn address_field(self) -> macuda_hw::mmu::EntryField {
        match self {
            Aperture::Video => pte::ADDRESS_VID,
            Aperture::SystemCoherent | Aperture::SystemNonCoherent => pte::ADDRESS,
        }
    }

    /// The first physical address past what a PTE of this aperture holds.
    pub(crate) const fn address_limit(self) -> u64 {
        1 << (self.address_field().hi + 1)
    }
}

/// The access a page allows, written as the PTE's PCF. The default is
/// what a CUDA allocation wants: cached, writable, atomics allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PageFlags {
    /// Writes and atomics fault.
    pub read_only: bool,
    /// Atomics fault.
    pub no_atomic: bool,
    /// The GPU's caches do not keep the page (host memory the CPU also
    /// writes, as tinygrad maps it).
    pub uncached: bool,
}

impl PageFlags {
    pub const fn pcf(self) -> u64 {
        let mut pcf = 0;
        if self.read_only {
            pcf |= pte::PCF_READ_ONLY;
        }
        if self.no_atomic {
            pcf |= pte::PCF_NO_ATOMIC;
        }
        if self.uncached {
            pcf |= pte::PCF_UNCACHED;
        }
        pcf
    }

    pub const fn of_pcf(pcf: u64) -> PageFlags {
        PageFlags {
            read_only: pcf & pte::PCF_READ_ONLY != 0,
            no_atomic: pcf & pte::PCF_NO_ATOMIC != 0,
            uncached: pcf & pte::PCF_UNCACHED != 0,
        }
    }
}

/// One mapped page, as the tables hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappedPage {
    /// The page's first VA.
    pub va: u64,
    /// The page's first byte of memory.
    pub pa: u64,
    pub size: PageSize,
    pub aperture: Aperture,
    pub flags: PageFlags,
}

/// Which address of a request broke a page's alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressKind {
    Va,
    Pa,
    Size,
}

/// Why the tables were not changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageTableError {
    #[error("a zero-byte range")]
    Empty,
    #[error("{kind:?} {value:#x} is not a multiple of the {page}-byte page")]
    Misaligned {
        kind: AddressKind,
        value: u64,
        page: u64,
    },
    #[error("VAs {va:#x}+{size:#x} pass the MMU's {bits} bits")]
    VaOutOfRange { va: u64, size: u64, bits: u32 },
    #[error("memory {pa:#x}+{size:#x} does not fit a {aperture:?} page entry")]
    PaOutOfRange {
        pa: u64,
        size: u64,
        aperture: Aperture,
    },
    #[error("VA {va:#x} is already mapped")]
    Overlap { va: u64 },
    #[error("VA {va:#x} is not mapped")]
    NotMapped { va: u64 },
    #[error("the {page}-byte page at {page_va:#x} is only partly inside the range")]
    PartialPage { page_va: u64, page: u64 },
    #[error("no room for page tables")]
    Pool(#[from] TablePoolError),
    #[error("page-table memory")]
    Memory(#[from] TableMemoryError),
    #[error("an invalidation of the VA space at {pdb:#x}, not this one")]
    ForeignInvalidate { pdb: u64 },
    #[error("the entry at {address:#x} reads {found:#x}, not the {expected:#x} written")]
    Diverged {
        address: u64,
        expected: u128,
        found: u128,
    },
    #[error("page tables inconsistent: {reason}")]
    Invariant { reason: &'static str },
}
