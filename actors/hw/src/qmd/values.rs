//! The values QMD fields take, named as NVIDIA's headers name them, and
//! the small records of fields a descriptor is made of.

use super::QmdField;
use crate::push::{FieldName, FormatError};

/// A field value with names from NVIDIA's headers.
pub trait QmdEnum: Sized + Copy {
    fn raw(self) -> u32;
    fn from_raw(field: QmdField, value: u32) -> Result<Self, FormatError>;
}

/// Declares a field's values with the enumerant suffix NVIDIA's headers give
/// each (the full name is `NVxxxx_QMDVxx_00_<FIELD>_<SUFFIX>`).
macro_rules! qmd_enum {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $v:literal => $nv:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        #[repr(u8)]
        pub enum $name {
            $( $(#[$vmeta])* $variant = $v ),+
        }

        impl $name {
            /// Every value with its enumerant suffix in NVIDIA's headers.
            pub const ALL: &'static [($name, &'static str)] = &[ $( ($name::$variant, $nv) ),+ ];
        }

        impl QmdEnum for $name {
            fn raw(self) -> u32 {
                self as u32
            }

            fn from_raw(field: QmdField, value: u32) -> Result<Self, FormatError> {
                Self::ALL
                    .iter()
                    .find(|(v, _)| *v as u32 == value)
                    .map(|(v, _)| *v)
                    .ok_or(FormatError::UnknownValue { field: field.field_name(), value })
            }
        }
    };
}

qmd_enum! {
    /// QMD_TYPE (V04/V05). In V03 only `GridCta` (IS_QUEUE 0) and `Queue`
    /// (IS_QUEUE 1) exist.
    QmdType {
        /// Ignored by the H200 for kernels (reference/submission.md 13.2).
        Queue = 0 => "QUEUE",
        /// Runs no CTAs but releases and chains (CUDA's join QMD).
        GridNull = 1 => "GRID_NULL",
        /// The one that launches a kernel on the H200.
        #[default]
        GridCta = 2 => "GRID_CTA",
        GridGpcCga = 3 => "GRID_GPC_CGA",
        GridGpuCga = 4 => "GRID_GPU_CGA",
        GridGpuGpcCga = 5 => "GRID_GPU_GPC_CGA",
    }
}

qmd_enum! {
    /// PROGRAM_PREFETCH_TYPE (NVIDIA spells the second one PREFTECH).
    ProgramPrefetchType {
        #[default]
        PrefetchLaunch = 0 => "PREFETCH_LAUNCH",
        PrefetchPost = 1 => "PREFTECH_POST",
    }
}

qmd_enum! {
    /// CONSTANT_BUFFER_PREFETCH(i) in V04/V05; V03 has a POST bit only.
    BankPrefetch {
        #[default]
        None = 0 => "PREFETCH_NONE",
        Pre = 1 => "PREFETCH_PRE",
        Post = 2 => "PREFETCH_POST",
    }
}

qmd_enum! {
    /// RELEASE STRUCTURE_SIZE: FOUR_WORDS writes the payload then a 64-bit
    /// timestamp at +8; ONE_WORD 4 bytes; TWO_WORDS 8 bytes.
    StructureSize {
        #[default]
        FourWords = 0 => "SEMAPHORE_FOUR_WORDS",
        OneWord = 1 => "SEMAPHORE_ONE_WORD",
        TwoWords = 2 => "SEMAPHORE_TWO_WORDS",
    }
}

qmd_enum! {
    /// RELEASE MEMBAR_TYPE.
    ReleaseMembarType {
        #[default]
        FeNone = 0 => "FE_NONE",
        FeSysmembar = 1 => "FE_SYSMEMBAR",
    }
}

qmd_enum! {
    /// RELEASE REDUCTION_OP.
    ReductionOp {
        #[default]
        Add = 0 => "RED_ADD",
        Min = 1 => "RED_MIN",
        Max = 2 => "RED_MAX",
        Inc = 3 => "RED_INC",
        Dec = 4 => "RED_DEC",
        And = 5 => "RED_AND",
        Or = 6 => "RED_OR",
        Xor = 7 => "RED_XOR",
    }
}

qmd_enum! {
    /// RELEASE REDUCTION_FORMAT (V03 names end in _32).
    ReductionFormat {
        #[default]
        Unsigned = 0 => "UNSIGNED",
        Signed = 1 => "SIGNED",
    }
}

qmd_enum! {
    /// DEPENDENT_QMD ACTION: what a completed grid does to the QMD its slot
    /// points at.
    DependentAction {
        #[default]
        IncrementPut = 0 => "QMD_INCREMENT_PUT",
        /// Launch it (tinygrad's chains).
        Schedule = 1 => "QMD_SCHEDULE",
        /// Re-read it from memory, then launch.
        InvalidateCopySchedule = 3 => "QMD_INVALIDATE_COPY_SCHEDULE",
        /// Decrement its DEPENDENCE_COUNTER (CUDA's join).
        DecrementDependence = 4 => "QMD_DECREMENT_DEPENDENCE",
    }
}

qmd_enum! {
    /// API_VISIBLE_CALL_LIMIT (NVIDIA's `_32` enumerant gives `__32`).
    ApiVisibleCallLimit {
        #[default]
        Limit32 = 0 => "_32",
        NoCheck = 1 => "NO_CHECK",
    }
}

qmd_enum! {
    /// SAMPLER_INDEX.
    SamplerIndex {
        #[default]
        Independently = 0 => "INDEPENDENTLY",
        ViaHeaderIndex = 1 => "VIA_HEADER_INDEX",
    }
}

qmd_enum! {
    /// CWD_MEMBAR_TYPE.
    CwdMembarType {
        #[default]
        L1None = 0 => "L1_NONE",
        L1Sysmembar = 1 => "L1_SYSMEMBAR",
        L1Membar = 3 => "L1_MEMBAR",
    }
}

/// MIN, TARGET and MAX_SM_CONFIG_SHARED_MEM_SIZE, always set together: each
/// is `carve-out KiB / 4 + 1` (6 bits, non-zero). CUDA on the H200 writes
/// 9 / 9 / 0x3A (32 KiB / 32 KiB / 228 KiB), tinygrad 9 / 17 / 26.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SmConfig {
    pub min: u8,
    pub target: u8,
    pub max: u8,
}

impl SmConfig {
    /// From carve-outs in KiB (multiples of 4).
    pub fn from_kib(min: u32, target: u32, max: u32) -> Result<Self, FormatError> {
        let one = |name: &'static str, kib: u32| -> Result<u8, FormatError> {
            let field = FieldName::plain(name);
            if !kib.is_multiple_of(4) {
                return Err(FormatError::Misaligned {
                    field,
                    value: u64::from(kib),
                    align: 4,
                });
            }
            let v = kib / 4 + 1;
            if v > 0x3F {
                return Err(FormatError::TooWide {
                    field,
                    value: u64::from(kib),
                    bits: 8,
                });
            }
            Ok(v as u8)
        };
        Ok(Self {
            min: one("MIN_SM_CONFIG_SHARED_MEM_SIZE", min)?,
            target: one("TARGET_SM_CONFIG_SHARED_MEM_SIZE", target)?,
            max: one("MAX_SM_CONFIG_SHARED_MEM_SIZE", max)?,
        })
    }
}

/// One constant bank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ConstantBank {
    pub valid: bool,
    /// GPU VA; 64-byte aligned in V04/V05.
    pub address: u64,
    /// Bytes, a multiple of 16 (at most 0x1FFF0).
    pub size: u32,
    /// `Pre` does not exist in V03.
    pub prefetch: BankPrefetch,
    pub invalidate: bool,
}

/// A reduction instead of a plain write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Reduction {
    pub op: ReductionOp,
    pub format: ReductionFormat,
}

/// One release-semaphore slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReleaseSlot {
    pub enable: bool,
    /// GPU VA: 40 bits in V03, 57 in V04/V05.
    pub address: u64,
    pub payload: u64,
    pub structure_size: StructureSize,
    pub payload64b: bool,
    pub membar: ReleaseMembarType,
    pub reduction: Option<Reduction>,
}

/// One dependent-QMD slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DependentSlot {
    pub enable: bool,
    pub action: DependentAction,
    pub prefetch: bool,
    /// VA of the QMD acted on: 256-byte aligned, below 2^40 (stored >> 8).
    /// V03 has no pointer for slot 1.
    pub qmd_address: u64,
}

/// The six per-launch cache invalidates. CUDA on the H200 sets all but
/// `instruction` (reference/submission.md 5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CacheInvalidate {
    pub texture_header: bool,
    pub texture_sampler: bool,
    pub texture_data: bool,
    pub shader_data: bool,
    pub instruction: bool,
    pub shader_constant: bool,
}

impl CacheInvalidate {
    pub(super) fn bits(self) -> [bool; 6] {
        [
            self.texture_header,
            self.texture_sampler,
            self.texture_data,
            self.shader_data,
            self.instruction,
            self.shader_constant,
        ]
    }

    pub(super) fn from_bits(b: [bool; 6]) -> Self {
        Self {
            texture_header: b[0],
            texture_sampler: b[1],
            texture_data: b[2],
            shader_data: b[3],
            instruction: b[4],
            shader_constant: b[5],
        }
    }
}
