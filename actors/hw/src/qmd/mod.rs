//! QMDs (Queue Meta Data): the launch descriptors a compute class reads
//! from memory when SEND_PCAS_A / SEND_SIGNALING_PCAS2_B name them.
//!
//! Three layouts are declared as data, one [`QmdLayout`] per version, each
//! listing the fields a launcher sets as (NVIDIA name, hi, lo) with bit
//! positions counted from bit 0 of the QMD (dword n holds bits 32n..32n+31):
//!
//! | version | dwords | classes | source of the bit positions |
//! |---|---|---|---|
//! | V03_00 | 64 | AMPERE_COMPUTE_A/B, ADA_COMPUTE_A | oracle `NVC6C0_QMDV03_00_*` |
//! | V04_00 | 96 | HOPPER_COMPUTE_A | open-gpu-doc clcbc0qmd.h (not in the oracle), reference/submission.md 7 |
//! | V05_00 | 96 | BLACKWELL_COMPUTE_A/B | oracle `NVCEC0_QMDV05_00_*` (clcdc0qmd.h is identical) |
//!
//! On top sits a version-neutral [`LaunchDescriptor`]: [`encode`] turns it
//! into the words of one version and [`decode`] reads them back, doing the
//! unit conversions on the way (V05 program address >> 4, shared size >> 7,
//! local sizes >> 4; V04/V05 bank address >> 6; bank sizes >> 4; prefetch
//! address and QMD pointers >> 8) and refusing values that are misaligned
//! or too wide with an error naming the field.
//!
//! What the H200 accepts (reference/submission.md 0, 7, 13; observed):
//! HOPPER_COMPUTE_A silently ignores a V03_00 QMD, and a V04_00 QMD whose
//! QMD_TYPE is 0 (QUEUE); a V04_00 QMD with QMD_TYPE GRID_CTA (2) launches.
//! Encoding either is allowed here (the layouts are facts), so the caller
//! picks the version with [`QmdVersion::for_compute_class`] and keeps
//! [`QmdType::GridCta`], the default.
//!
//! The module's files, one job each: `layout` (each version's field
//! positions), `words` (a QMD's words, field by field, and patches of
//! them), `values` (the named values and small records of fields) and
//! `descriptor` (the version-neutral descriptor and its encoding).

mod descriptor;
mod layout;
mod values;
mod words;

pub use descriptor::{decode, encode, LaunchDescriptor};
pub use layout::{BankFields, DependentFields, QmdLayout, ReleaseFields, V03_00, V04_00, V05_00};
pub use values::*;
pub use words::{Qmd, QmdPatch};

use crate::methods::compute;
use crate::push::{FieldName, FormatError};

/// A QMD layout version, named as NVIDIA's headers name them.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QmdVersion {
    V03_00,
    V04_00,
    V05_00,
}

impl QmdVersion {
    pub const ALL: [QmdVersion; 3] = [Self::V03_00, Self::V04_00, Self::V05_00];

    pub const fn major(self) -> u8 {
        match self {
            Self::V03_00 => 3,
            Self::V04_00 => 4,
            Self::V05_00 => 5,
        }
    }

    /// All three layouts declared here are minor version 0.
    pub const fn minor(self) -> u8 {
        0
    }

    /// 2048 bits for V03, 3072 for V04 and V05.
    pub const fn dwords(self) -> usize {
        match self {
            Self::V03_00 => 64,
            Self::V04_00 | Self::V05_00 => 96,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Self::V03_00 => "V03_00",
            Self::V04_00 => "V04_00",
            Self::V05_00 => "V05_00",
        }
    }

    /// The version a compute class reads: V03 for Ampere and Ada, V04 for
    /// Hopper, V05 for Blackwell (what Mesa and CUDA use; tinygrad HEAD's V03
    /// on Hopper is ignored by the H200).
    pub fn for_compute_class(class: u32) -> Option<Self> {
        match class {
            compute::AMPERE_COMPUTE_A | compute::AMPERE_COMPUTE_B | compute::ADA_COMPUTE_A => {
                Some(Self::V03_00)
            }
            compute::HOPPER_COMPUTE_A => Some(Self::V04_00),
            compute::BLACKWELL_COMPUTE_A | compute::BLACKWELL_COMPUTE_B => Some(Self::V05_00),
            _ => None,
        }
    }
}

/// One QMD field: bits `hi:lo` counted from bit 0 of the QMD. `index` is set
/// for NVIDIA's `(i)` fields (V04/V05 banks, release and dependent slots;
/// V03 banks); V03 release and dependent fields carry the slot in the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QmdField {
    pub name: &'static str,
    pub index: Option<u8>,
    pub hi: u32,
    pub lo: u32,
}

impl QmdField {
    pub const fn width(self) -> u32 {
        self.hi - self.lo + 1
    }

    /// Largest value the field holds (every QMD field is at most 32 bits).
    pub const fn max(self) -> u32 {
        if self.width() >= 32 {
            u32::MAX
        } else {
            (1 << self.width()) - 1
        }
    }

    pub const fn field_name(self) -> FieldName {
        FieldName {
            name: self.name,
            index: self.index,
        }
    }
}

/// Code prefetch addresses and sizes are kept in 256-byte units.
pub const PROGRAM_PREFETCH_SHIFT: u32 = 8;

/// A field the version lacks (out of line, as the setters' other errors:
/// see `words`).
#[cold]
#[inline(never)]
fn absent(field: &'static str, version: QmdVersion) -> FormatError {
    FormatError::NotInVersion {
        field,
        version: version.name(),
    }
}
