//! MMU version 3's page-table entries and levels (Hopper and Blackwell,
//! GB202 among them): the PDE, the dual PDE of the level above the page
//! tables, the PTE, and which VA bits each level indexes. Declared once
//! for whoever writes page tables (the memory actor on bare metal) and
//! whoever walks them (the simulated GPU); the fields are pinned to
//! NVIDIA's `dev_mmu.h` (gh100) through the oracle (tests/oracle.rs).
//!
//! The same two-bit value means different things in a PDE and a PTE: a
//! PDE's aperture 0 is "no table" and 1 video memory, a PTE's 0 is video
//! memory. Each has its own decoder here so the two are never mixed.

/// A bit field `hi:lo` (inclusive) of an entry of up to 128 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryField {
    pub name: &'static str,
    pub hi: u32,
    pub lo: u32,
}

impl EntryField {
    const fn mask(self) -> u128 {
        let width = self.hi - self.lo + 1;
        ((1u128 << width) - 1) << self.lo
    }

    /// The field's value in `entry`.
    pub const fn get(self, entry: u128) -> u64 {
        // CAST: every field here is at most 44 bits wide.
        ((entry & self.mask()) >> self.lo) as u64
    }

    /// `entry` with the field set to `value` (bits past its width dropped).
    pub const fn set(self, entry: u128, value: u64) -> u128 {
        (entry & !self.mask()) | (((value as u128) << self.lo) & self.mask())
    }
}

const fn field(name: &'static str, hi: u32, lo: u32) -> EntryField {
    EntryField { name, hi, lo }
}

/// `NV_MMU_VER3_PDE`: an 8-byte directory entry (PD4 to PD1).
pub mod pde {
    use super::{field, EntryField};
    pub const SIZE: u64 = 8;
    pub const IS_PTE: EntryField = field("is_pte", 0, 0);
    pub const APERTURE: EntryField = field("aperture", 2, 1);
    pub const PCF: EntryField = field("pcf", 5, 3);
    pub const ADDRESS: EntryField = field("address", 51, 12);
    pub const ADDRESS_SHIFT: u32 = 12;
    pub const ALL: &[EntryField] = &[IS_PTE, APERTURE, PCF, ADDRESS];

    /// PCF of a directory entry pointing at a table: cached, no ATS (a
    /// discrete GPU has no use for address translation services). What
    /// tinygrad and nouveau write for tables in video memory.
    pub const PCF_VALID_CACHED_ATS_NOT_ALLOWED: u64 = 2;
    /// PCF of an empty directory entry: invalid, not sparse (an access
    /// under it faults).
    pub const PCF_INVALID_ATS_ALLOWED: u64 = 0;
}

/// `NV_MMU_VER3_DUAL_PDE`: PD0's 16-byte entry, pointing at a 64 KiB
/// page table (the big half, low qword) and a 4 KiB one (the small half,
/// high qword), or holding a 2 MiB PTE in its low qword.
pub mod dual_pde {
    use super::{field, EntryField};
    pub const SIZE: u64 = 16;
    pub const IS_PTE: EntryField = field("is_pte", 0, 0);
    pub const APERTURE_BIG: EntryField = field("aperture_big", 2, 1);
    pub const PCF_BIG: EntryField = field("pcf_big", 5, 3);
    pub const ADDRESS_BIG: EntryField = field("address_big", 51, 8);
    pub const APERTURE_SMALL: EntryField = field("aperture_small", 66, 65);
    pub const PCF_SMALL: EntryField = field("pcf_small", 69, 67);
    pub const ADDRESS_SMALL: EntryField = field("address_small", 115, 76);
    /// The PCF of each half pointing at a table takes the PDE's values
    /// (`pde::PCF_*`); pinned to both halves' names in the oracle.
    pub const PCF_VALID_CACHED_ATS_NOT_ALLOWED: u64 = super::pde::PCF_VALID_CACHED_ATS_NOT_ALLOWED;
    /// The big table is 256-byte aligned, the small one 4 KiB.
    pub const ADDRESS_BIG_SHIFT: u32 = 8;
    pub const ADDRESS_SHIFT: u32 = 12;
    pub const ALL: &[EntryField] = &[
        IS_PTE,
        APERTURE_BIG,
        PCF_BIG,
        ADDRESS_BIG,
        APERTURE_SMALL,
        PCF_SMALL,
        ADDRESS_SMALL,
    ];
}

/// `NV_MMU_VER3_PTE`: an 8-byte page entry (PT_SMALL, PT_BIG, and the
/// leaf slots of PD0 and PD1).
pub mod pte {
    use super::{field, EntryField};
    pub const SIZE: u64 = 8;
    pub const VALID: EntryField = field("valid", 0, 0);
    pub const APERTURE: EntryField = field("aperture", 2, 1);
    pub const PCF: EntryField = field("pcf", 7, 3);
    pub const KIND: EntryField = field("kind", 11, 8);
    pub const ADDRESS: EntryField = field("address", 51, 12);
    /// For video memory only bits 39:12 carry the address.
    pub const ADDRESS_VID: EntryField = field("address_vid", 39, 12);
    pub const PEER_ID: EntryField = field("peer_id", 63, 61);
    pub const ADDRESS_SHIFT: u32 = 12;
    pub const ALL: &[EntryField] = &[VALID, APERTURE, PCF, KIND, ADDRESS, ADDRESS_VID, PEER_ID];

    /// `KIND_GENERIC_MEMORY`, what every data mapping uses.
    pub const KIND_GENERIC_MEMORY: u64 = 6;

    /// PCF bits of a valid PTE: each an independent flag.
    pub const PCF_UNCACHED: u64 = 1 << 0;
    pub const PCF_PRIVILEGE: u64 = 1 << 1;
    pub const PCF_READ_ONLY: u64 = 1 << 2;
    pub const PCF_NO_ATOMIC: u64 = 1 << 3;
    pub const PCF_ACCESS_COUNTING_DISABLED: u64 = 1 << 4;

    /// PCF values of an invalid PTE.
    pub const PCF_INVALID: u64 = 0;
    pub const PCF_SPARSE: u64 = 1;
    pub const PCF_MAPPING_NOWHERE: u64 = 2;
    /// On an invalid big PTE: no 4 KiB PTEs under it, the walk stops.
    pub const PCF_NO_VALID_4KB_PAGE: u64 = 3;
}

/// Where a directory entry's next table lies (`NV_MMU_VER3_PDE_APERTURE`
/// and the dual PDE's two apertures).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PdeAperture {
    Invalid,
    Video,
    SystemCoherent,
    SystemNonCoherent,
}

impl PdeAperture {
    pub const fn decode(v: u64) -> PdeAperture {
        match v & 3 {
            0 => PdeAperture::Invalid,
            1 => PdeAperture::Video,
            2 => PdeAperture::SystemCoherent,
            _ => PdeAperture::SystemNonCoherent,
        }
    }

    pub const fn encode(self) -> u64 {
        match self {
            PdeAperture::Invalid => 0,
            PdeAperture::Video => 1,
            PdeAperture::SystemCoherent => 2,
            PdeAperture::SystemNonCoherent => 3,
        }
    }
}

/// Where a PTE's page lies (`NV_MMU_VER3_PTE_APERTURE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PteAperture {
    Video,
    Peer,
    SystemCoherent,
    SystemNonCoherent,
}

impl PteAperture {
    pub const fn decode(v: u64) -> PteAperture {
        match v & 3 {
            0 => PteAperture::Video,
            1 => PteAperture::Peer,
            2 => PteAperture::SystemCoherent,
            _ => PteAperture::SystemNonCoherent,
        }
    }

    pub const fn encode(self) -> u64 {
        match self {
            PteAperture::Video => 0,
            PteAperture::Peer => 1,
            PteAperture::SystemCoherent => 2,
            PteAperture::SystemNonCoherent => 3,
        }
    }
}

/// One directory level of the walk, from the root down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    pub name: &'static str,
    /// The lowest VA bit the level's index takes.
    pub va_shift: u32,
    pub index_bits: u32,
    pub entry_bytes: u64,
    /// The page an entry of this level maps when it holds a PTE (`None`:
    /// it never does, on GB202 and GH100).
    pub leaf_page: Option<u64>,
}

impl Level {
    /// The index of `va`'s entry in a table of this level.
    pub const fn index(&self, va: u64) -> u64 {
        (va >> self.va_shift) & ((1 << self.index_bits) - 1)
    }
}

/// VA bits the MMU translates (VA[56:0]).
pub const VA_BITS: u32 = 57;

/// PD4 (the root, two entries) down to PD0 (dual PDEs). A 256 GiB leaf at
/// PD2 exists on GB100-class chips only, not on GB202 or GH100.
pub const DIRECTORY_LEVELS: [Level; 5] = [
    Level {
        name: "PD4",
        va_shift: 56,
        index_bits: 1,
        entry_bytes: pde::SIZE,
        leaf_page: None,
    },
    Level {
        name: "PD3",
        va_shift: 47,
        index_bits: 9,
        entry_bytes: pde::SIZE,
        leaf_page: None,
    },
    Level {
        name: "PD2",
        va_shift: 38,
        index_bits: 9,
        entry_bytes: pde::SIZE,
        leaf_page: None,
    },
    Level {
        name: "PD1",
        va_shift: 29,
        index_bits: 9,
        entry_bytes: pde::SIZE,
        leaf_page: Some(512 << 20),
    },
    Level {
        name: "PD0",
        va_shift: 21,
        index_bits: 8,
        entry_bytes: dual_pde::SIZE,
        leaf_page: Some(crate::page::HUGE),
    },
];

/// The 64 KiB page table under a dual PDE's big half (256 bytes).
pub const PT_BIG: Level = Level {
    name: "PT_BIG",
    va_shift: 16,
    index_bits: 5,
    entry_bytes: pte::SIZE,
    leaf_page: Some(crate::page::BIG),
};

/// The 4 KiB page table under a dual PDE's small half.
pub const PT_SMALL: Level = Level {
    name: "PT_SMALL",
    va_shift: 12,
    index_bits: 9,
    entry_bytes: pte::SIZE,
    leaf_page: Some(crate::page::SMALL),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_levels_cover_the_va_once_each() {
        let mut next = VA_BITS;
        for l in DIRECTORY_LEVELS.iter().chain([&PT_SMALL]) {
            assert_eq!(l.va_shift + l.index_bits, next, "{}", l.name);
            next = l.va_shift;
        }
        assert_eq!(next, 12, "4 KiB pages below the last table");
        assert_eq!(PT_BIG.va_shift + PT_BIG.index_bits, 21);
        // PD0 holds 256 sixteen-byte entries: one 4 KiB page, as the rest.
        let pd0 = DIRECTORY_LEVELS[4];
        assert_eq!((1u64 << pd0.index_bits) * pd0.entry_bytes, 4096);
        assert_eq!((1u64 << PT_BIG.index_bits) * PT_BIG.entry_bytes, 256);
    }

    #[test]
    fn fields_round_trip_and_stay_inside_their_bits() {
        let e = dual_pde::ADDRESS_SMALL.set(0, 0x204);
        assert_eq!(e, 0x204u128 << 76);
        assert_eq!(dual_pde::ADDRESS_SMALL.get(e), 0x204);
        assert_eq!(pte::KIND.set(u128::MAX, 6) >> 8 & 0xF, 6);
        assert_eq!(pde::APERTURE.set(0, 7), 0b110, "wider values are cut");
        for a in [
            PdeAperture::Invalid,
            PdeAperture::Video,
            PdeAperture::SystemCoherent,
            PdeAperture::SystemNonCoherent,
        ] {
            assert_eq!(PdeAperture::decode(a.encode()), a);
        }
        assert_eq!(PteAperture::decode(0), PteAperture::Video);
        assert_eq!(PdeAperture::decode(0), PdeAperture::Invalid);
    }
}
