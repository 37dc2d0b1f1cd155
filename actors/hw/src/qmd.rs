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

    pub const fn layout(self) -> &'static QmdLayout {
        match self {
            Self::V03_00 => &V03_00,
            Self::V04_00 => &V04_00,
            Self::V05_00 => &V05_00,
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

// ---------------------------------------------------------------------------
// Fields and layouts

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

const fn f(name: &'static str, hi: u32, lo: u32) -> QmdField {
    QmdField {
        name,
        index: None,
        hi,
        lo,
    }
}

const fn b(name: &'static str, bit: u32) -> QmdField {
    f(name, bit, bit)
}

const fn fi(name: &'static str, i: u32, hi: u32, lo: u32) -> QmdField {
    QmdField {
        name,
        index: Some(i as u8),
        hi,
        lo,
    }
}

/// One constant bank's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BankFields {
    pub valid: QmdField,
    /// V04/V05: CONSTANT_BUFFER_PREFETCH(i), NONE / PRE / POST.
    pub prefetch: Option<QmdField>,
    /// V03: CONSTANT_BUFFER_PREFETCH_POST(i), one bit.
    pub prefetch_post: Option<QmdField>,
    pub invalidate: QmdField,
    pub addr_lower: QmdField,
    pub addr_upper: QmdField,
    pub size_shifted4: QmdField,
}

/// One release-semaphore slot's fields (written when the grid completes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseFields {
    pub enable: QmdField,
    pub structure_size: QmdField,
    pub membar_type: QmdField,
    pub reduction_enable: QmdField,
    pub reduction_op: QmdField,
    pub reduction_format: QmdField,
    pub payload64b: QmdField,
    /// V04/V05.
    pub trap_type: Option<QmdField>,
    /// V03.
    pub non_blocking_intr_type: Option<QmdField>,
    pub addr_lower: QmdField,
    pub addr_upper: QmdField,
    pub payload_lower: QmdField,
    pub payload_upper: QmdField,
}

/// One dependent-QMD slot's fields (acts on another QMD at completion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DependentFields {
    pub enable: QmdField,
    pub action: QmdField,
    pub prefetch: QmdField,
    /// QMD VA >> 8; V03 has no pointer for slot 1.
    pub pointer: Option<QmdField>,
}

/// Every field a launcher sets in one QMD version, plus the fields Host
/// owns that a decoder wants to see (grid resume, HW_ONLY counter).
/// `None` marks a field the version does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QmdLayout {
    pub version: QmdVersion,
    pub major_version: QmdField,
    pub minor_version: QmdField,
    /// V04/V05.
    pub qmd_type: Option<QmdField>,
    /// V03: 0 is a grid, 1 a queue.
    pub is_queue: Option<QmdField>,
    pub group_id: QmdField,
    /// V03 only.
    pub sm_global_caching_enable: Option<QmdField>,
    pub program_address_lower: QmdField,
    pub program_address_upper: QmdField,
    /// The program address is stored `>> program_address_shift`.
    pub program_address_shift: u32,
    pub program_prefetch_addr_lower_shifted: QmdField,
    pub program_prefetch_addr_upper_shifted: QmdField,
    /// In 256-byte units.
    pub program_prefetch_size: QmdField,
    pub program_prefetch_type: QmdField,
    pub sass_version: QmdField,
    pub grid: [QmdField; 3],
    pub grid_resume: [QmdField; 3],
    pub block: [QmdField; 3],
    pub register_count: QmdField,
    pub barrier_count: QmdField,
    pub shared_memory_size: QmdField,
    pub shared_memory_shift: u32,
    pub min_sm_config_shared_mem_size: QmdField,
    pub target_sm_config_shared_mem_size: QmdField,
    pub max_sm_config_shared_mem_size: QmdField,
    pub shared_allocation_enable: QmdField,
    pub local_memory_low_size: QmdField,
    pub local_memory_high_size: QmdField,
    pub local_memory_shift: u32,
    pub api_visible_call_limit: QmdField,
    pub sampler_index: QmdField,
    pub cwd_membar_type: QmdField,
    /// Texture header, texture sampler, texture data, shader data,
    /// instruction, shader constant.
    pub invalidate: [QmdField; 6],
    pub disable_auto_invalidate: QmdField,
    pub dependence_counter: QmdField,
    pub hw_only_dependence_counter: QmdField,
    pub self_copy_on_completion: QmdField,
    /// V04/V05.
    pub enable_program_pre_exit: Option<QmdField>,
    pub arrive_at_latch_valid: Option<QmdField>,
    pub arrive_at_latch_id: Option<QmdField>,
    pub wait_on_latch_valid: Option<QmdField>,
    pub wait_on_latch_id: Option<QmdField>,
    pub gpc_cga: Option<[QmdField; 3]>,
    pub banks: [BankFields; 8],
    /// Bank addresses are stored `>> bank_address_shift`.
    pub bank_address_shift: u32,
    pub releases: [ReleaseFields; 3],
    pub dependents: [DependentFields; 2],
}

impl QmdLayout {
    /// Every field of the layout, for the oracle test and overlap checks.
    pub fn fields(&self) -> Vec<QmdField> {
        let mut v = vec![
            self.major_version,
            self.minor_version,
            self.group_id,
            self.program_address_lower,
            self.program_address_upper,
            self.program_prefetch_addr_lower_shifted,
            self.program_prefetch_addr_upper_shifted,
            self.program_prefetch_size,
            self.program_prefetch_type,
            self.sass_version,
            self.register_count,
            self.barrier_count,
            self.shared_memory_size,
            self.min_sm_config_shared_mem_size,
            self.target_sm_config_shared_mem_size,
            self.max_sm_config_shared_mem_size,
            self.shared_allocation_enable,
            self.local_memory_low_size,
            self.local_memory_high_size,
            self.api_visible_call_limit,
            self.sampler_index,
            self.cwd_membar_type,
            self.disable_auto_invalidate,
            self.dependence_counter,
            self.hw_only_dependence_counter,
            self.self_copy_on_completion,
        ];
        v.extend(self.grid);
        v.extend(self.grid_resume);
        v.extend(self.block);
        v.extend(self.invalidate);
        v.extend(
            [
                self.qmd_type,
                self.is_queue,
                self.sm_global_caching_enable,
                self.enable_program_pre_exit,
                self.arrive_at_latch_valid,
                self.arrive_at_latch_id,
                self.wait_on_latch_valid,
                self.wait_on_latch_id,
            ]
            .into_iter()
            .flatten(),
        );
        v.extend(self.gpc_cga.into_iter().flatten());
        for bank in &self.banks {
            v.extend([
                bank.valid,
                bank.invalidate,
                bank.addr_lower,
                bank.addr_upper,
                bank.size_shifted4,
            ]);
            v.extend([bank.prefetch, bank.prefetch_post].into_iter().flatten());
        }
        for r in &self.releases {
            v.extend([
                r.enable,
                r.structure_size,
                r.membar_type,
                r.reduction_enable,
                r.reduction_op,
                r.reduction_format,
                r.payload64b,
                r.addr_lower,
                r.addr_upper,
                r.payload_lower,
                r.payload_upper,
            ]);
            v.extend(
                [r.trap_type, r.non_blocking_intr_type]
                    .into_iter()
                    .flatten(),
            );
        }
        for d in &self.dependents {
            v.extend([d.enable, d.action, d.prefetch]);
            v.extend(d.pointer);
        }
        v
    }
}

// Address and payload words of a release slot: ADDR_LOWER at `base`, then
// ADDR_UPPER (`upper_bits` wide), PAYLOAD_LOWER at base + 64, PAYLOAD_UPPER
// at base + 96; the same shape in every version.
macro_rules! release_words {
    ($addr_lo:expr, $addr_hi:expr, $pay_lo:expr, $pay_hi:expr, $base:expr, $upper_bits:expr) => {
        (
            f($addr_lo, $base + 31, $base),
            f($addr_hi, $base + 31 + $upper_bits, $base + 32),
            f($pay_lo, $base + 95, $base + 64),
            f($pay_hi, $base + 127, $base + 96),
        )
    };
}

/// V03 release slot `k`: flags from `fl` (MEMBAR_TYPE's bit), words from
/// `wb`; NVIDIA names carry the slot number (clc6c0qmd.h, oracle).
macro_rules! v03_release {
    ($k:literal, $fl:expr, $wb:expr) => {{
        let (addr_lower, addr_upper, payload_lower, payload_upper) = release_words!(
            concat!("RELEASE", $k, "_ADDRESS_LOWER"),
            concat!("RELEASE", $k, "_ADDRESS_UPPER"),
            concat!("RELEASE", $k, "_PAYLOAD_LOWER"),
            concat!("RELEASE", $k, "_PAYLOAD_UPPER"),
            $wb,
            8
        );
        ReleaseFields {
            membar_type: b(concat!("RELEASE", $k, "_MEMBAR_TYPE"), $fl),
            reduction_op: f(concat!("RELEASE", $k, "_REDUCTION_OP"), $fl + 3, $fl + 1),
            enable: b(concat!("RELEASE", $k, "_ENABLE"), $fl + 4),
            reduction_format: f(
                concat!("RELEASE", $k, "_REDUCTION_FORMAT"),
                $fl + 6,
                $fl + 5,
            ),
            reduction_enable: b(concat!("RELEASE", $k, "_REDUCTION_ENABLE"), $fl + 7),
            non_blocking_intr_type: Some(f(
                concat!("RELEASE", $k, "_NON_BLOCKING_INTR_TYPE"),
                $fl + 9,
                $fl + 8,
            )),
            payload64b: b(concat!("RELEASE", $k, "_PAYLOAD64B"), $fl + 10),
            structure_size: f(
                concat!("RELEASE", $k, "_STRUCTURE_SIZE"),
                $fl + 12,
                $fl + 11,
            ),
            trap_type: None,
            addr_lower,
            addr_upper,
            payload_lower,
            payload_upper,
        }
    }};
}

/// V04/V05 release slot `k`: indexed flags every 16 bits from `fl`
/// (RELEASE_ENABLE(0)), words named per slot.
macro_rules! v04_release {
    ($k:literal, $fl:expr, $wb:expr) => {{
        let fl = $fl + 16 * $k;
        let (addr_lower, addr_upper, payload_lower, payload_upper) = release_words!(
            concat!("RELEASE_SEMAPHORE", $k, "_ADDR_LOWER"),
            concat!("RELEASE_SEMAPHORE", $k, "_ADDR_UPPER"),
            concat!("RELEASE_SEMAPHORE", $k, "_PAYLOAD_LOWER"),
            concat!("RELEASE_SEMAPHORE", $k, "_PAYLOAD_UPPER"),
            $wb,
            25
        );
        ReleaseFields {
            enable: fi("RELEASE_ENABLE", $k, fl, fl),
            structure_size: fi("RELEASE_STRUCTURE_SIZE", $k, fl + 2, fl + 1),
            membar_type: fi("RELEASE_MEMBAR_TYPE", $k, fl + 3, fl + 3),
            reduction_enable: fi("RELEASE_REDUCTION_ENABLE", $k, fl + 4, fl + 4),
            reduction_op: fi("RELEASE_REDUCTION_OP", $k, fl + 7, fl + 5),
            reduction_format: fi("RELEASE_REDUCTION_FORMAT", $k, fl + 9, fl + 8),
            trap_type: Some(fi("RELEASE_TRAP_TYPE", $k, fl + 11, fl + 10)),
            payload64b: fi("RELEASE_PAYLOAD64B", $k, fl + 12, fl + 12),
            non_blocking_intr_type: None,
            addr_lower,
            addr_upper,
            payload_lower,
            payload_upper,
        }
    }};
}

/// V03 bank i: VALID(i) at 640 + i, the rest in 64-bit groups from 1024.
const fn v03_bank(i: u32) -> BankFields {
    let g = 1024 + 64 * i;
    BankFields {
        valid: fi("CONSTANT_BUFFER_VALID", i, 640 + i, 640 + i),
        prefetch: None,
        prefetch_post: Some(fi("CONSTANT_BUFFER_PREFETCH_POST", i, g + 49, g + 49)),
        invalidate: fi("CONSTANT_BUFFER_INVALIDATE", i, g + 50, g + 50),
        addr_lower: fi("CONSTANT_BUFFER_ADDR_LOWER", i, g + 31, g),
        addr_upper: fi("CONSTANT_BUFFER_ADDR_UPPER", i, g + 48, g + 32),
        size_shifted4: fi("CONSTANT_BUFFER_SIZE_SHIFTED4", i, g + 63, g + 51),
    }
}

/// V04/V05 bank i: a 4-bit flag group at `flags + 4i` (VALID, PREFETCH[2],
/// INVALIDATE) and a 64-bit address/size group at `words + 64i`.
const fn v04_bank(i: u32, flags: u32, words: u32) -> BankFields {
    let fl = flags + 4 * i;
    let g = words + 64 * i;
    BankFields {
        valid: fi("CONSTANT_BUFFER_VALID", i, fl, fl),
        prefetch: Some(fi("CONSTANT_BUFFER_PREFETCH", i, fl + 2, fl + 1)),
        prefetch_post: None,
        invalidate: fi("CONSTANT_BUFFER_INVALIDATE", i, fl + 3, fl + 3),
        addr_lower: fi("CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6", i, g + 31, g),
        addr_upper: fi("CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6", i, g + 50, g + 32),
        size_shifted4: fi("CONSTANT_BUFFER_SIZE_SHIFTED4", i, g + 63, g + 51),
    }
}

/// V04/V05 dependent slot i: ENABLE, ACTION[3], PREFETCH from `base +
/// stride * i` (stride 5 in V04, 8 in V05).
const fn v04_dependent(i: u32, base: u32, stride: u32, pointer: QmdField) -> DependentFields {
    let s = base + stride * i;
    DependentFields {
        enable: fi("DEPENDENT_QMD_ENABLE", i, s, s),
        action: fi("DEPENDENT_QMD_ACTION", i, s + 3, s + 1),
        prefetch: fi("DEPENDENT_QMD_PREFETCH", i, s + 4, s + 4),
        pointer: Some(pointer),
    }
}

/// Ampere/Ada QMD: NVC6C0_QMDV03_00 (oracle; clc6c0qmd.h).
pub const V03_00: QmdLayout = QmdLayout {
    version: QmdVersion::V03_00,
    major_version: f("QMD_MAJOR_VERSION", 583, 580),
    minor_version: f("QMD_VERSION", 579, 576),
    qmd_type: None,
    is_queue: Some(b("IS_QUEUE", 136)),
    group_id: f("QMD_GROUP_ID", 133, 128),
    sm_global_caching_enable: Some(b("SM_GLOBAL_CACHING_ENABLE", 134)),
    program_address_lower: f("PROGRAM_ADDRESS_LOWER", 1567, 1536),
    program_address_upper: f("PROGRAM_ADDRESS_UPPER", 1584, 1568),
    program_address_shift: 0,
    program_prefetch_addr_lower_shifted: f("PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED", 287, 256),
    program_prefetch_addr_upper_shifted: f("PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED", 1640, 1632),
    program_prefetch_size: f("PROGRAM_PREFETCH_SIZE", 1649, 1641),
    program_prefetch_type: f("PROGRAM_PREFETCH_TYPE", 1651, 1650),
    sass_version: f("SASS_VERSION", 1663, 1656),
    grid: [
        f("CTA_RASTER_WIDTH", 415, 384),
        f("CTA_RASTER_HEIGHT", 431, 416),
        f("CTA_RASTER_DEPTH", 463, 448),
    ],
    grid_resume: [
        f("CTA_RASTER_WIDTH_RESUME", 223, 192),
        f("CTA_RASTER_HEIGHT_RESUME", 239, 224),
        f("CTA_RASTER_DEPTH_RESUME", 255, 240),
    ],
    block: [
        f("CTA_THREAD_DIMENSION0", 607, 592),
        f("CTA_THREAD_DIMENSION1", 623, 608),
        f("CTA_THREAD_DIMENSION2", 639, 624),
    ],
    register_count: f("REGISTER_COUNT_V", 656, 648),
    barrier_count: f("BARRIER_COUNT", 767, 763),
    shared_memory_size: f("SHARED_MEMORY_SIZE", 561, 544),
    shared_memory_shift: 0,
    min_sm_config_shared_mem_size: f("MIN_SM_CONFIG_SHARED_MEM_SIZE", 567, 562),
    target_sm_config_shared_mem_size: f("TARGET_SM_CONFIG_SHARED_MEM_SIZE", 662, 657),
    max_sm_config_shared_mem_size: f("MAX_SM_CONFIG_SHARED_MEM_SIZE", 574, 569),
    shared_allocation_enable: b("SHARED_ALLOCATION_ENABLE", 663),
    local_memory_low_size: f("SHADER_LOCAL_MEMORY_LOW_SIZE", 759, 736),
    local_memory_high_size: f("SHADER_LOCAL_MEMORY_HIGH_SIZE", 1623, 1600),
    local_memory_shift: 0,
    api_visible_call_limit: b("API_VISIBLE_CALL_LIMIT", 378),
    sampler_index: b("SAMPLER_INDEX", 382),
    cwd_membar_type: f("CWD_MEMBAR_TYPE", 369, 368),
    invalidate: [
        b("INVALIDATE_TEXTURE_HEADER_CACHE", 186),
        b("INVALIDATE_TEXTURE_SAMPLER_CACHE", 187),
        b("INVALIDATE_TEXTURE_DATA_CACHE", 188),
        b("INVALIDATE_SHADER_DATA_CACHE", 189),
        b("INVALIDATE_INSTRUCTION_CACHE", 190),
        b("INVALIDATE_SHADER_CONSTANT_CACHE", 191),
    ],
    disable_auto_invalidate: b("DISABLE_AUTO_INVALIDATE", 383),
    dependence_counter: f("DEPENDENCE_COUNTER", 157, 142),
    // C6C0's layout; CBC0's copy of V03_00 widens it to 1967:1952.
    hw_only_dependence_counter: f("HW_ONLY_DEPENDENCE_COUNTER", 1958, 1952),
    self_copy_on_completion: b("SELF_COPY_ON_COMPLETION", 158),
    enable_program_pre_exit: None,
    arrive_at_latch_valid: None,
    arrive_at_latch_id: None,
    wait_on_latch_valid: None,
    wait_on_latch_id: None,
    gpc_cga: None,
    banks: [
        v03_bank(0),
        v03_bank(1),
        v03_bank(2),
        v03_bank(3),
        v03_bank(4),
        v03_bank(5),
        v03_bank(6),
        v03_bank(7),
    ],
    bank_address_shift: 0,
    releases: [
        v03_release!(0, 819, 768),
        v03_release!(1, 947, 896),
        v03_release!(2, 1715, 1664),
    ],
    dependents: [
        DependentFields {
            enable: b("DEPENDENT_QMD0_ENABLE", 512),
            action: f("DEPENDENT_QMD0_ACTION", 515, 513),
            prefetch: b("DEPENDENT_QMD0_PREFETCH", 516),
            pointer: Some(f("DEPENDENT_QMD0_POINTER", 511, 480)),
        },
        DependentFields {
            enable: b("DEPENDENT_QMD1_ENABLE", 517),
            action: f("DEPENDENT_QMD1_ACTION", 520, 518),
            prefetch: b("DEPENDENT_QMD1_PREFETCH", 521),
            pointer: None,
        },
    ],
};

/// Hopper QMD: NVCBC0_QMDV04_00 (open-gpu-doc clcbc0qmd.h at c8607fe,
/// tabulated in reference/submission.md 7.1-7.3; not in the oracle).
pub const V04_00: QmdLayout = QmdLayout {
    version: QmdVersion::V04_00,
    major_version: f("QMD_MAJOR_VERSION", 583, 580),
    minor_version: f("QMD_MINOR_VERSION", 579, 576),
    qmd_type: Some(f("QMD_TYPE", 25, 23)),
    is_queue: None,
    group_id: f("QMD_GROUP_ID", 21, 16),
    sm_global_caching_enable: None,
    program_address_lower: f("PROGRAM_ADDRESS_LOWER", 1247, 1216),
    program_address_upper: f("PROGRAM_ADDRESS_UPPER", 1272, 1248),
    program_address_shift: 0,
    program_prefetch_addr_lower_shifted: f("PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED", 1375, 1344),
    program_prefetch_addr_upper_shifted: f("PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED", 1392, 1376),
    program_prefetch_size: f("PROGRAM_PREFETCH_SIZE", 1401, 1393),
    program_prefetch_type: f("PROGRAM_PREFETCH_TYPE", 1403, 1402),
    sass_version: f("SASS_VERSION", 543, 536),
    grid: [
        f("GRID_WIDTH", 1055, 1024),
        f("GRID_HEIGHT", 1071, 1056),
        f("GRID_DEPTH", 1103, 1088),
    ],
    grid_resume: [
        f("GRID_WIDTH_RESUME", 1439, 1408),
        f("GRID_HEIGHT_RESUME", 1455, 1440),
        f("GRID_DEPTH_RESUME", 1471, 1456),
    ],
    block: [
        f("CTA_THREAD_DIMENSION0", 1167, 1152),
        f("CTA_THREAD_DIMENSION1", 1183, 1168),
        f("CTA_THREAD_DIMENSION2", 1199, 1184),
    ],
    register_count: f("REGISTER_COUNT", 1208, 1200),
    barrier_count: f("BARRIER_COUNT", 1215, 1211),
    shared_memory_size: f("SHARED_MEMORY_SIZE", 601, 584),
    shared_memory_shift: 0,
    min_sm_config_shared_mem_size: f("MIN_SM_CONFIG_SHARED_MEM_SIZE", 613, 608),
    target_sm_config_shared_mem_size: f("TARGET_SM_CONFIG_SHARED_MEM_SIZE", 625, 620),
    max_sm_config_shared_mem_size: f("MAX_SM_CONFIG_SHARED_MEM_SIZE", 619, 614),
    shared_allocation_enable: b("SHARED_ALLOCATION_ENABLE", 626),
    local_memory_low_size: f("SHADER_LOCAL_MEMORY_LOW_SIZE", 535, 512),
    local_memory_high_size: f("SHADER_LOCAL_MEMORY_HIGH_SIZE", 567, 544),
    local_memory_shift: 0,
    api_visible_call_limit: b("API_VISIBLE_CALL_LIMIT", 568),
    sampler_index: b("SAMPLER_INDEX", 569),
    cwd_membar_type: f("CWD_MEMBAR_TYPE", 1137, 1136),
    invalidate: [
        b("INVALIDATE_TEXTURE_HEADER_CACHE", 602),
        b("INVALIDATE_TEXTURE_SAMPLER_CACHE", 603),
        b("INVALIDATE_TEXTURE_DATA_CACHE", 604),
        b("INVALIDATE_SHADER_DATA_CACHE", 605),
        b("INVALIDATE_INSTRUCTION_CACHE", 606),
        b("INVALIDATE_SHADER_CONSTANT_CACHE", 607),
    ],
    disable_auto_invalidate: b("DISABLE_AUTO_INVALIDATE", 380),
    dependence_counter: f("DEPENDENCE_COUNTER", 15, 0),
    hw_only_dependence_counter: f("HW_ONLY_DEPENDENCE_COUNTER", 303, 288),
    self_copy_on_completion: b("SELF_COPY_ON_COMPLETION", 378),
    enable_program_pre_exit: Some(b("ENABLE_PROGRAM_PRE_EXIT", 1151)),
    arrive_at_latch_valid: Some(b("ARRIVE_AT_LATCH_VALID", 28)),
    arrive_at_latch_id: Some(f("ARRIVE_AT_LATCH_ID", 1503, 1472)),
    wait_on_latch_valid: Some(b("WAIT_ON_LATCH_VALID", 29)),
    wait_on_latch_id: Some(f("WAIT_ON_LATCH_ID", 1535, 1504)),
    gpc_cga: Some([
        f("GPC_CGA_WIDTH", 2149, 2144),
        f("GPC_CGA_HEIGHT", 2157, 2152),
        f("GPC_CGA_DEPTH", 2165, 2160),
    ]),
    banks: [
        v04_bank(0, 416, 1536),
        v04_bank(1, 416, 1536),
        v04_bank(2, 416, 1536),
        v04_bank(3, 416, 1536),
        v04_bank(4, 416, 1536),
        v04_bank(5, 416, 1536),
        v04_bank(6, 416, 1536),
        v04_bank(7, 416, 1536),
    ],
    bank_address_shift: 6,
    releases: [
        v04_release!(0, 320, 640),
        v04_release!(1, 320, 768),
        v04_release!(2, 320, 896),
    ],
    dependents: [
        v04_dependent(0, 368, 5, f("DEPENDENT_QMD0_POINTER", 479, 448)),
        v04_dependent(1, 368, 5, f("DEPENDENT_QMD1_POINTER", 511, 480)),
    ],
};

/// Blackwell QMD: NVCEC0_QMDV05_00 (oracle; clcec0qmd.h and clcdc0qmd.h
/// agree).
pub const V05_00: QmdLayout = QmdLayout {
    version: QmdVersion::V05_00,
    major_version: f("QMD_MAJOR_VERSION", 471, 468),
    minor_version: f("QMD_MINOR_VERSION", 467, 464),
    qmd_type: Some(f("QMD_TYPE", 153, 151)),
    is_queue: None,
    group_id: f("QMD_GROUP_ID", 149, 144),
    sm_global_caching_enable: None,
    program_address_lower: f("PROGRAM_ADDRESS_LOWER_SHIFTED4", 1055, 1024),
    program_address_upper: f("PROGRAM_ADDRESS_UPPER_SHIFTED4", 1076, 1056),
    program_address_shift: 4,
    program_prefetch_addr_lower_shifted: f("PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED", 1919, 1888),
    program_prefetch_addr_upper_shifted: f("PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED", 1936, 1920),
    program_prefetch_size: f("PROGRAM_PREFETCH_SIZE", 1085, 1077),
    program_prefetch_type: f("PROGRAM_PREFETCH_TYPE", 1087, 1086),
    sass_version: f("SASS_VERSION", 455, 448),
    grid: [
        f("GRID_WIDTH", 1279, 1248),
        f("GRID_HEIGHT", 1295, 1280),
        f("GRID_DEPTH", 1327, 1312),
    ],
    grid_resume: [
        f("GRID_WIDTH_RESUME", 255, 224),
        f("GRID_HEIGHT_RESUME", 271, 256),
        f("GRID_DEPTH_RESUME", 287, 272),
    ],
    block: [
        f("CTA_THREAD_DIMENSION0", 1103, 1088),
        f("CTA_THREAD_DIMENSION1", 1119, 1104),
        // 8 bits here, 16 in V03/V04.
        f("CTA_THREAD_DIMENSION2", 1127, 1120),
    ],
    register_count: f("REGISTER_COUNT", 1136, 1128),
    barrier_count: f("BARRIER_COUNT", 1141, 1137),
    shared_memory_size: f("SHARED_MEMORY_SIZE_SHIFTED7", 1162, 1152),
    shared_memory_shift: 7,
    min_sm_config_shared_mem_size: f("MIN_SM_CONFIG_SHARED_MEM_SIZE", 1168, 1163),
    target_sm_config_shared_mem_size: f("TARGET_SM_CONFIG_SHARED_MEM_SIZE", 1180, 1175),
    max_sm_config_shared_mem_size: f("MAX_SM_CONFIG_SHARED_MEM_SIZE", 1174, 1169),
    shared_allocation_enable: b("SHARED_ALLOCATION_ENABLE", 351),
    local_memory_low_size: f("SHADER_LOCAL_MEMORY_LOW_SIZE_SHIFTED4", 1199, 1184),
    local_memory_high_size: f("SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4", 1215, 1200),
    local_memory_shift: 4,
    api_visible_call_limit: b("API_VISIBLE_CALL_LIMIT", 456),
    sampler_index: b("SAMPLER_INDEX", 457),
    cwd_membar_type: f("CWD_MEMBAR_TYPE", 625, 624),
    invalidate: [
        b("INVALIDATE_TEXTURE_HEADER_CACHE", 472),
        b("INVALIDATE_TEXTURE_SAMPLER_CACHE", 473),
        b("INVALIDATE_TEXTURE_DATA_CACHE", 474),
        b("INVALIDATE_SHADER_DATA_CACHE", 475),
        b("INVALIDATE_INSTRUCTION_CACHE", 476),
        b("INVALIDATE_SHADER_CONSTANT_CACHE", 477),
    ],
    disable_auto_invalidate: b("DISABLE_AUTO_INVALIDATE", 343),
    dependence_counter: f("DEPENDENCE_COUNTER", 143, 128),
    hw_only_dependence_counter: f("HW_ONLY_DEPENDENCE_COUNTER", 207, 192),
    self_copy_on_completion: b("SELF_COPY_ON_COMPLETION", 341),
    enable_program_pre_exit: Some(b("ENABLE_PROGRAM_PRE_EXIT", 639)),
    arrive_at_latch_valid: Some(b("ARRIVE_AT_LATCH_VALID", 730)),
    arrive_at_latch_id: Some(f("ARRIVE_AT_LATCH_ID", 671, 640)),
    wait_on_latch_valid: Some(b("WAIT_ON_LATCH_VALID", 731)),
    wait_on_latch_id: Some(f("WAIT_ON_LATCH_ID", 703, 672)),
    gpc_cga: Some([
        f("GPC_CGA_WIDTH", 2053, 2048),
        f("GPC_CGA_HEIGHT", 2061, 2056),
        f("GPC_CGA_DEPTH", 2069, 2064),
    ]),
    banks: [
        v04_bank(0, 1856, 1344),
        v04_bank(1, 1856, 1344),
        v04_bank(2, 1856, 1344),
        v04_bank(3, 1856, 1344),
        v04_bank(4, 1856, 1344),
        v04_bank(5, 1856, 1344),
        v04_bank(6, 1856, 1344),
        v04_bank(7, 1856, 1344),
    ],
    bank_address_shift: 6,
    releases: [
        v04_release!(0, 288, 480),
        v04_release!(1, 288, 768),
        v04_release!(2, 288, 896),
    ],
    dependents: [
        v04_dependent(0, 336, 8, f("DEPENDENT_QMD0_POINTER", 415, 384)),
        v04_dependent(1, 336, 8, f("DEPENDENT_QMD1_POINTER", 447, 416)),
    ],
};

// ---------------------------------------------------------------------------
// Raw QMD words

/// The words of one QMD with checked, field-at-a-time access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qmd {
    version: QmdVersion,
    words: Vec<u32>,
}

impl Qmd {
    /// An all-zero QMD of `version`'s size.
    pub fn new(version: QmdVersion) -> Self {
        Self {
            version,
            words: vec![0; version.dwords()],
        }
    }

    /// Takes words as read from memory; only their number is checked.
    pub fn from_words(version: QmdVersion, words: &[u32]) -> Result<Self, FormatError> {
        if words.len() != version.dwords() {
            return Err(FormatError::WrongLength {
                expected: version.dwords(),
                found: words.len(),
            });
        }
        Ok(Self {
            version,
            words: words.to_vec(),
        })
    }

    pub fn version(&self) -> QmdVersion {
        self.version
    }

    pub fn words(&self) -> &[u32] {
        &self.words
    }

    pub fn into_words(self) -> Vec<u32> {
        self.words
    }

    /// A field's value. Fields are at most 32 bits and may straddle a dword
    /// boundary; a field beyond this QMD's size reads 0.
    pub fn get(&self, field: QmdField) -> u32 {
        let (word, shift) = ((field.lo / 32) as usize, field.lo % 32);
        let low = u64::from(self.words.get(word).copied().unwrap_or(0));
        let high = u64::from(self.words.get(word + 1).copied().unwrap_or(0));
        (((high << 32 | low) >> shift) as u32) & field.max()
    }

    /// Sets a field, refusing a value wider than it.
    #[inline]
    pub fn set(&mut self, field: QmdField, value: u32) -> Result<(), FormatError> {
        if value > field.max() {
            return Err(too_wide(field, u64::from(value), field.width()));
        }
        if field.hi as usize >= self.words.len() * 32 {
            return Err(absent(field.name, self.version));
        }
        // Every launch sets a few dozen fields, so this is straight-line:
        // the word the field starts in, then the next one only where the
        // field straddles into it (`hi` was checked against the size).
        let (word, shift) = ((field.lo / 32) as usize, field.lo % 32);
        let mask = u64::from(field.max()) << shift;
        let bits = u64::from(value) << shift;
        // CAST: the low and high halves of the shifted mask and value.
        let (m0, b0, m1, b1) = (
            mask as u32,
            bits as u32,
            (mask >> 32) as u32,
            (bits >> 32) as u32,
        );
        if let Some(w) = self.words.get_mut(word) {
            *w = (*w & !m0) | b0;
        }
        if m1 != 0 {
            if let Some(w) = self.words.get_mut(word + 1) {
                *w = (*w & !m1) | b1;
            }
        }
        Ok(())
    }

    /// Binds constant bank `index` as `bank` says (valid, address, size,
    /// prefetch, invalidate).
    ///
    /// # Errors
    /// An index past the version's banks, a prefetch the version cannot
    /// express, or an address or size its fields cannot hold.
    pub fn set_constant_bank(
        &mut self,
        index: usize,
        bank: &ConstantBank,
    ) -> Result<(), FormatError> {
        let version = self.version;
        let l = version.layout();
        let f = *l
            .banks
            .get(index)
            .ok_or_else(|| absent("CONSTANT_BUFFER_VALID(index)", version))?;
        self.set_bool(f.valid, bank.valid)?;
        self.set_bool(f.invalidate, bank.invalidate)?;
        self.set_constant_bank_place(index, bank.address, bank.size)?;
        match (f.prefetch, f.prefetch_post, bank.prefetch) {
            (Some(pf), _, p) => self.set_enum(pf, p),
            (None, Some(post), BankPrefetch::None) => self.set(post, 0),
            (None, Some(post), BankPrefetch::Post) => self.set(post, 1),
            _ => Err(absent("CONSTANT_BUFFER_PREFETCH", version)),
        }
    }

    /// Where constant bank `index` lies and its size, leaving its flags
    /// as they are (a link sets them from a [`QmdPatch`]).
    ///
    /// # Errors
    /// An index past the version's banks, or an address or size its
    /// fields cannot hold.
    pub fn set_constant_bank_place(
        &mut self,
        index: usize,
        address: u64,
        size: u32,
    ) -> Result<(), FormatError> {
        let l = self.version.layout();
        let f = *l
            .banks
            .get(index)
            .ok_or_else(|| absent("CONSTANT_BUFFER_VALID(index)", self.version))?;
        self.set_split(f.addr_lower, f.addr_upper, address, l.bank_address_shift)?;
        self.set_units(f.size_shifted4, u64::from(size), 4)
    }

    /// Whether constant bank `index` is bound (false past the version's
    /// banks).
    pub fn constant_bank_valid(&self, index: usize) -> bool {
        self.version
            .layout()
            .banks
            .get(index)
            .is_some_and(|f| self.get_bool(f.valid))
    }

    /// The code prefetch: `bytes` from `address` (both in 256-byte units),
    /// at this grid's launch or after it (`PrefetchPost`, for the grid a
    /// dependent slot will launch next).
    ///
    /// # Errors
    /// An unaligned address or size, or one its fields cannot hold.
    pub fn set_program_prefetch(
        &mut self,
        address: u64,
        bytes: u32,
        kind: ProgramPrefetchType,
    ) -> Result<(), FormatError> {
        self.set_program_prefetch_range(address, bytes)?;
        self.set_enum(self.version.layout().program_prefetch_type, kind)
    }

    /// The code prefetch's address and size alone, its kind left as it is.
    ///
    /// # Errors
    /// An unaligned address or size, or one its fields cannot hold.
    pub fn set_program_prefetch_range(
        &mut self,
        address: u64,
        bytes: u32,
    ) -> Result<(), FormatError> {
        let l = self.version.layout();
        self.set_split(
            l.program_prefetch_addr_lower_shifted,
            l.program_prefetch_addr_upper_shifted,
            address,
            PROGRAM_PREFETCH_SHIFT,
        )?;
        self.set_units(
            l.program_prefetch_size,
            u64::from(bytes),
            PROGRAM_PREFETCH_SHIFT,
        )
    }

    fn set_bool(&mut self, field: QmdField, value: bool) -> Result<(), FormatError> {
        self.set(field, u32::from(value))
    }

    fn get_bool(&self, field: QmdField) -> bool {
        self.get(field) != 0
    }

    /// Stores `value >> shift` in one field, refusing a value that is not a
    /// multiple of `1 << shift` or does not fit.
    #[inline]
    fn set_units(&mut self, field: QmdField, value: u64, shift: u32) -> Result<(), FormatError> {
        check_align(field, value, shift)?;
        let units = value >> shift;
        if units > u64::from(field.max()) {
            return Err(too_wide(field, value, field.width() + shift));
        }
        self.set(field, units as u32)
    }

    fn get_units(&self, field: QmdField, shift: u32) -> u64 {
        u64::from(self.get(field)) << shift
    }

    /// Stores `value >> shift` across a 32-bit LOWER field and an UPPER
    /// field; misalignment names LOWER, overflow names UPPER.
    #[inline]
    fn set_split(
        &mut self,
        lower: QmdField,
        upper: QmdField,
        value: u64,
        shift: u32,
    ) -> Result<(), FormatError> {
        check_align(lower, value, shift)?;
        let units = value >> shift;
        let high = units >> 32;
        if high > u64::from(upper.max()) {
            return Err(too_wide(upper, value, 32 + upper.width() + shift));
        }
        self.set(lower, units as u32)?;
        self.set(upper, high as u32)
    }

    fn get_split(&self, lower: QmdField, upper: QmdField, shift: u32) -> u64 {
        ((u64::from(self.get(upper)) << 32) | u64::from(self.get(lower))) << shift
    }

    fn set_enum<E: QmdEnum>(&mut self, field: QmdField, value: E) -> Result<(), FormatError> {
        self.set(field, value.raw())
    }

    fn get_enum<E: QmdEnum>(&self, field: QmdField) -> Result<E, FormatError> {
        E::from_raw(field, self.get(field))
    }
}

/// Field values known ahead of time, folded into per-word masks: applying
/// them is one read-modify-write per word they touch, where setting the
/// same fields one by one checks and shifts each. For what a hot path
/// writes into every QMD the same way (a chain's link), recorded once from
/// the ordinary checked setters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QmdPatch {
    version: QmdVersion,
    /// (word index, bits written, their values), in word order.
    words: Vec<(usize, u32, u32)>,
}

impl QmdPatch {
    /// What `write` does to a QMD of `version`, whatever the QMD held
    /// before. `write` runs twice (over all-zero and all-one words), so it
    /// must only set fields, never decide from what it reads.
    ///
    /// # Errors
    /// The first error `write` returns.
    pub fn record(
        version: QmdVersion,
        write: impl Fn(&mut Qmd) -> Result<(), FormatError>,
    ) -> Result<QmdPatch, FormatError> {
        let mut zeros = Qmd::new(version);
        let mut ones = Qmd {
            version,
            words: vec![u32::MAX; version.dwords()],
        };
        write(&mut zeros)?;
        write(&mut ones)?;
        // A bit written as 1 shows in `zeros`, one written as 0 in `ones`.
        let words = zeros
            .words
            .iter()
            .zip(&ones.words)
            .enumerate()
            .filter_map(|(i, (&z, &o))| {
                let mask = z | !o;
                (mask != 0).then_some((i, mask, z))
            })
            .collect();
        Ok(QmdPatch { version, words })
    }

    /// Writes the recorded fields into `q`.
    ///
    /// # Errors
    /// A QMD of another version.
    pub fn apply(&self, q: &mut Qmd) -> Result<(), FormatError> {
        if q.version != self.version {
            return Err(FormatError::WrongLength {
                expected: self.version.dwords(),
                found: q.words.len(),
            });
        }
        for &(i, mask, bits) in &self.words {
            if let Some(w) = q.words.get_mut(i) {
                *w = (*w & !mask) | bits;
            }
        }
        Ok(())
    }

    /// How many words applying it touches.
    pub fn words_touched(&self) -> usize {
        self.words.len()
    }
}

#[inline]
fn check_align(field: QmdField, value: u64, shift: u32) -> Result<(), FormatError> {
    let align = 1u64 << shift;
    if !value.is_multiple_of(align) {
        return Err(misaligned(field, value, align));
    }
    Ok(())
}

// The errors are built out of line: the setters run on every launch and
// their error paths almost never.
#[cold]
#[inline(never)]
fn too_wide(field: QmdField, value: u64, bits: u32) -> FormatError {
    FormatError::TooWide {
        field: field.field_name(),
        value,
        bits,
    }
}

#[cold]
#[inline(never)]
fn misaligned(field: QmdField, value: u64, align: u64) -> FormatError {
    FormatError::Misaligned {
        field: field.field_name(),
        value,
        align,
    }
}

// ---------------------------------------------------------------------------
// Enumerated field values

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

// ---------------------------------------------------------------------------
// The version-neutral launch descriptor

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
    fn bits(self) -> [bool; 6] {
        [
            self.texture_header,
            self.texture_sampler,
            self.texture_data,
            self.shader_data,
            self.instruction,
            self.shader_constant,
        ]
    }

    fn from_bits(b: [bool; 6]) -> Self {
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

/// What a launcher says about one launch, in bytes and plain counts; the
/// version's units and field widths are applied by [`encode`].
/// `Default` is the all-zero QMD except `qmd_type` = GRID_CTA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LaunchDescriptor {
    pub qmd_type: QmdType,
    pub group_id: u8,
    /// `0x90` for sm_90: SM major in the high nibble, minor in the low.
    pub sass_version: u8,
    /// VA of the kernel's first instruction; 16-byte aligned in V05.
    pub program_address: u64,
    /// VA to prefetch code from: 256-byte aligned.
    pub program_prefetch_address: u64,
    /// Bytes to prefetch: a multiple of 256, at most 0x1FF00.
    pub program_prefetch_size: u32,
    pub program_prefetch_type: ProgramPrefetchType,
    pub register_count: u32,
    /// Named barriers the kernel uses (CUDA writes 1).
    pub barrier_count: u32,
    /// Bytes of shared memory per CTA: the kernel's static shared memory
    /// plus 1 KiB on sm_90 (CUDA writes 0x400 for none); a multiple of 128
    /// in V05.
    pub shared_memory_size: u32,
    /// None: all three fields 0.
    pub sm_config: Option<SmConfig>,
    pub shared_allocation_enable: bool,
    /// Bytes of local memory per thread; multiples of 16 in V05. The
    /// channel's SET_SHADER_LOCAL_MEMORY must cover them.
    pub local_memory_low_size: u32,
    pub local_memory_high_size: u32,
    /// CTAs in x, y, z (y and z are 16 bits).
    pub grid: [u32; 3],
    /// Threads per CTA in x, y, z (16 bits each; z is 8 bits in V05).
    pub block: [u32; 3],
    pub constant_banks: [ConstantBank; 8],
    pub releases: [ReleaseSlot; 3],
    pub dependents: [DependentSlot; 2],
    pub invalidate: CacheInvalidate,
    pub api_visible_call_limit: ApiVisibleCallLimit,
    pub sampler_index: SamplerIndex,
    pub cwd_membar_type: CwdMembarType,
    pub disable_auto_invalidate: bool,
    /// Decrements this QMD waits for before it runs (16 bits).
    pub dependence_counter: u32,
    pub self_copy_on_completion: bool,
    /// V03 only.
    pub sm_global_caching_enable: bool,
    /// ENABLE_PROGRAM_PRE_EXIT, V04/V05 only.
    pub program_pre_exit: bool,
    /// ARRIVE_AT_LATCH_VALID with ARRIVE_AT_LATCH_ID; V04/V05 only.
    pub arrive_at_latch: Option<u32>,
    /// WAIT_ON_LATCH_VALID with WAIT_ON_LATCH_ID; V04/V05 only.
    pub wait_on_latch: Option<u32>,
    /// GPC_CGA_WIDTH / HEIGHT / DEPTH (6 bits each); V04/V05 only.
    pub gpc_cga: [u32; 3],
}

/// Code prefetch addresses and sizes are kept in 256-byte units.
pub const PROGRAM_PREFETCH_SHIFT: u32 = 8;

#[cold]
#[inline(never)]
fn absent(field: &'static str, version: QmdVersion) -> FormatError {
    FormatError::NotInVersion {
        field,
        version: version.name(),
    }
}

/// A flag a version may lack: setting it where absent is an error.
fn set_opt_bool(
    q: &mut Qmd,
    field: Option<QmdField>,
    value: bool,
    name: &'static str,
) -> Result<(), FormatError> {
    match field {
        Some(f) => q.set_bool(f, value),
        None if value => Err(absent(name, q.version)),
        None => Ok(()),
    }
}

/// Writes `desc` as a QMD of `version`.
pub fn encode(version: QmdVersion, desc: &LaunchDescriptor) -> Result<Vec<u32>, FormatError> {
    let l = version.layout();
    let mut q = Qmd::new(version);
    q.set(l.major_version, u32::from(version.major()))?;
    q.set(l.minor_version, u32::from(version.minor()))?;
    match (l.qmd_type, l.is_queue) {
        (Some(f), _) => q.set_enum(f, desc.qmd_type)?,
        (None, Some(f)) => match desc.qmd_type {
            QmdType::GridCta => q.set(f, 0)?,
            QmdType::Queue => q.set(f, 1)?,
            _ => return Err(absent("QMD_TYPE", version)),
        },
        (None, None) => unreachable!("every layout has QMD_TYPE or IS_QUEUE"),
    }
    q.set(l.group_id, u32::from(desc.group_id))?;
    set_opt_bool(
        &mut q,
        l.sm_global_caching_enable,
        desc.sm_global_caching_enable,
        "SM_GLOBAL_CACHING_ENABLE",
    )?;
    q.set(l.sass_version, u32::from(desc.sass_version))?;

    q.set_split(
        l.program_address_lower,
        l.program_address_upper,
        desc.program_address,
        l.program_address_shift,
    )?;
    q.set_program_prefetch(
        desc.program_prefetch_address,
        desc.program_prefetch_size,
        desc.program_prefetch_type,
    )?;

    for i in 0..3 {
        q.set(l.grid[i], desc.grid[i])?;
        q.set(l.block[i], desc.block[i])?;
    }
    q.set(l.register_count, desc.register_count)?;
    q.set(l.barrier_count, desc.barrier_count)?;

    q.set_units(
        l.shared_memory_size,
        u64::from(desc.shared_memory_size),
        l.shared_memory_shift,
    )?;
    if let Some(c) = desc.sm_config {
        if c.min == 0 || c.target == 0 || c.max == 0 {
            return Err(FormatError::PartialSmConfig {
                min: c.min,
                target: c.target,
                max: c.max,
            });
        }
        q.set(l.min_sm_config_shared_mem_size, u32::from(c.min))?;
        q.set(l.target_sm_config_shared_mem_size, u32::from(c.target))?;
        q.set(l.max_sm_config_shared_mem_size, u32::from(c.max))?;
    }
    q.set_bool(l.shared_allocation_enable, desc.shared_allocation_enable)?;
    q.set_units(
        l.local_memory_low_size,
        u64::from(desc.local_memory_low_size),
        l.local_memory_shift,
    )?;
    q.set_units(
        l.local_memory_high_size,
        u64::from(desc.local_memory_high_size),
        l.local_memory_shift,
    )?;

    q.set_enum(l.api_visible_call_limit, desc.api_visible_call_limit)?;
    q.set_enum(l.sampler_index, desc.sampler_index)?;
    q.set_enum(l.cwd_membar_type, desc.cwd_membar_type)?;
    for (field, on) in l.invalidate.iter().zip(desc.invalidate.bits()) {
        q.set_bool(*field, on)?;
    }
    q.set_bool(l.disable_auto_invalidate, desc.disable_auto_invalidate)?;
    q.set(l.dependence_counter, desc.dependence_counter)?;
    q.set_bool(l.self_copy_on_completion, desc.self_copy_on_completion)?;

    set_opt_bool(
        &mut q,
        l.enable_program_pre_exit,
        desc.program_pre_exit,
        "ENABLE_PROGRAM_PRE_EXIT",
    )?;
    for (latch, valid, id, name) in [
        (
            desc.arrive_at_latch,
            l.arrive_at_latch_valid,
            l.arrive_at_latch_id,
            "ARRIVE_AT_LATCH_VALID",
        ),
        (
            desc.wait_on_latch,
            l.wait_on_latch_valid,
            l.wait_on_latch_id,
            "WAIT_ON_LATCH_VALID",
        ),
    ] {
        match (latch, valid, id) {
            (Some(v), Some(vf), Some(idf)) => {
                q.set_bool(vf, true)?;
                q.set(idf, v)?;
            }
            (Some(_), _, _) => return Err(absent(name, version)),
            (None, _, _) => {}
        }
    }
    match l.gpc_cga {
        Some(fields) => {
            for (f, v) in fields.iter().zip(desc.gpc_cga) {
                q.set(*f, v)?;
            }
        }
        None if desc.gpc_cga != [0; 3] => return Err(absent("GPC_CGA_WIDTH", version)),
        None => {}
    }

    for (i, bank) in desc.constant_banks.iter().enumerate() {
        q.set_constant_bank(i, bank)?;
    }

    for (f, r) in l.releases.iter().zip(&desc.releases) {
        q.set_bool(f.enable, r.enable)?;
        q.set_split(f.addr_lower, f.addr_upper, r.address, 0)?;
        q.set(f.payload_lower, r.payload as u32)?;
        q.set(f.payload_upper, (r.payload >> 32) as u32)?;
        q.set_enum(f.structure_size, r.structure_size)?;
        q.set_bool(f.payload64b, r.payload64b)?;
        q.set_enum(f.membar_type, r.membar)?;
        if let Some(red) = r.reduction {
            q.set_bool(f.reduction_enable, true)?;
            q.set_enum(f.reduction_op, red.op)?;
            q.set_enum(f.reduction_format, red.format)?;
        }
    }

    for (f, d) in l.dependents.iter().zip(&desc.dependents) {
        q.set_bool(f.enable, d.enable)?;
        q.set_enum(f.action, d.action)?;
        q.set_bool(f.prefetch, d.prefetch)?;
        match f.pointer {
            Some(p) => q.set_units(p, d.qmd_address, 8)?,
            None if d.qmd_address != 0 => return Err(absent("DEPENDENT_QMD1_POINTER", version)),
            None => {}
        }
    }
    Ok(q.into_words())
}

/// Reads a QMD of `version` back into a descriptor. Checks the word count
/// and the version fields; fields outside the descriptor are not read.
pub fn decode(version: QmdVersion, words: &[u32]) -> Result<LaunchDescriptor, FormatError> {
    let l = version.layout();
    let q = Qmd::from_words(version, words)?;
    let found = (q.get(l.major_version) as u8, q.get(l.minor_version) as u8);
    if found != (version.major(), version.minor()) {
        return Err(FormatError::WrongVersion {
            expected: (version.major(), version.minor()),
            found,
        });
    }
    let qmd_type = match (l.qmd_type, l.is_queue) {
        (Some(f), _) => q.get_enum(f)?,
        (None, Some(f)) if q.get_bool(f) => QmdType::Queue,
        _ => QmdType::GridCta,
    };
    let opt_bool = |f: Option<QmdField>| f.is_some_and(|f| q.get_bool(f));
    let latch = |valid: Option<QmdField>, id: Option<QmdField>| match (valid, id) {
        (Some(v), Some(i)) if q.get_bool(v) => Some(q.get(i)),
        _ => None,
    };
    let sm = [
        q.get(l.min_sm_config_shared_mem_size) as u8,
        q.get(l.target_sm_config_shared_mem_size) as u8,
        q.get(l.max_sm_config_shared_mem_size) as u8,
    ];
    let sm_config = match sm {
        [0, 0, 0] => None,
        [min, target, max] if min != 0 && target != 0 && max != 0 => {
            Some(SmConfig { min, target, max })
        }
        [min, target, max] => return Err(FormatError::PartialSmConfig { min, target, max }),
    };

    let mut constant_banks = [ConstantBank::default(); 8];
    for (f, bank) in l.banks.iter().zip(constant_banks.iter_mut()) {
        *bank = ConstantBank {
            valid: q.get_bool(f.valid),
            address: q.get_split(f.addr_lower, f.addr_upper, l.bank_address_shift),
            size: q.get_units(f.size_shifted4, 4) as u32,
            prefetch: match (f.prefetch, f.prefetch_post) {
                (Some(pf), _) => q.get_enum(pf)?,
                (None, Some(post)) if q.get_bool(post) => BankPrefetch::Post,
                _ => BankPrefetch::None,
            },
            invalidate: q.get_bool(f.invalidate),
        };
    }
    let mut releases = [ReleaseSlot::default(); 3];
    for (f, r) in l.releases.iter().zip(releases.iter_mut()) {
        *r = ReleaseSlot {
            enable: q.get_bool(f.enable),
            address: q.get_split(f.addr_lower, f.addr_upper, 0),
            payload: (u64::from(q.get(f.payload_upper)) << 32) | u64::from(q.get(f.payload_lower)),
            structure_size: q.get_enum(f.structure_size)?,
            payload64b: q.get_bool(f.payload64b),
            membar: q.get_enum(f.membar_type)?,
            reduction: if q.get_bool(f.reduction_enable) {
                Some(Reduction {
                    op: q.get_enum(f.reduction_op)?,
                    format: q.get_enum(f.reduction_format)?,
                })
            } else {
                None
            },
        };
    }
    let mut dependents = [DependentSlot::default(); 2];
    for (f, d) in l.dependents.iter().zip(dependents.iter_mut()) {
        *d = DependentSlot {
            enable: q.get_bool(f.enable),
            action: q.get_enum(f.action)?,
            prefetch: q.get_bool(f.prefetch),
            qmd_address: f.pointer.map_or(0, |p| q.get_units(p, 8)),
        };
    }

    Ok(LaunchDescriptor {
        qmd_type,
        group_id: q.get(l.group_id) as u8,
        sass_version: q.get(l.sass_version) as u8,
        program_address: q.get_split(
            l.program_address_lower,
            l.program_address_upper,
            l.program_address_shift,
        ),
        program_prefetch_address: q.get_split(
            l.program_prefetch_addr_lower_shifted,
            l.program_prefetch_addr_upper_shifted,
            PROGRAM_PREFETCH_SHIFT,
        ),
        program_prefetch_size: q.get_units(l.program_prefetch_size, PROGRAM_PREFETCH_SHIFT) as u32,
        program_prefetch_type: q.get_enum(l.program_prefetch_type)?,
        register_count: q.get(l.register_count),
        barrier_count: q.get(l.barrier_count),
        shared_memory_size: q.get_units(l.shared_memory_size, l.shared_memory_shift) as u32,
        sm_config,
        shared_allocation_enable: q.get_bool(l.shared_allocation_enable),
        local_memory_low_size: q.get_units(l.local_memory_low_size, l.local_memory_shift) as u32,
        local_memory_high_size: q.get_units(l.local_memory_high_size, l.local_memory_shift) as u32,
        grid: l.grid.map(|f| q.get(f)),
        block: l.block.map(|f| q.get(f)),
        constant_banks,
        releases,
        dependents,
        invalidate: CacheInvalidate::from_bits(l.invalidate.map(|f| q.get_bool(f))),
        api_visible_call_limit: q.get_enum(l.api_visible_call_limit)?,
        sampler_index: q.get_enum(l.sampler_index)?,
        cwd_membar_type: q.get_enum(l.cwd_membar_type)?,
        disable_auto_invalidate: q.get_bool(l.disable_auto_invalidate),
        dependence_counter: q.get(l.dependence_counter),
        self_copy_on_completion: q.get_bool(l.self_copy_on_completion),
        sm_global_caching_enable: opt_bool(l.sm_global_caching_enable),
        program_pre_exit: opt_bool(l.enable_program_pre_exit),
        arrive_at_latch: latch(l.arrive_at_latch_valid, l.arrive_at_latch_id),
        wait_on_latch: latch(l.wait_on_latch_valid, l.wait_on_latch_id),
        gpc_cga: l.gpc_cga.map_or([0; 3], |fs| fs.map(|f| q.get(f))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_lie_inside_their_qmd_and_never_overlap() {
        for v in QmdVersion::ALL {
            let l = v.layout();
            assert_eq!(l.version, v);
            let fields = l.fields();
            let mut owner = vec![None; v.dwords() * 32];
            for f in &fields {
                assert!(f.lo <= f.hi && f.width() <= 32, "{v:?} {f:?}");
                assert!(
                    (f.hi as usize) < v.dwords() * 32,
                    "{v:?} {f:?} beyond the QMD"
                );
                for bit in f.lo..=f.hi {
                    if let Some(prev) = owner[bit as usize].replace(*f) {
                        panic!("{v:?}: bit {bit} in both {prev:?} and {f:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn get_and_set_straddle_dwords_and_refuse_wide_values() {
        let mut q = Qmd::new(QmdVersion::V04_00);
        let f = QmdField {
            name: "X",
            index: None,
            hi: 40,
            lo: 28,
        };
        q.set(f, 0x1ABC).unwrap();
        assert_eq!(q.get(f), 0x1ABC);
        assert_eq!(q.words()[0], 0xC000_0000);
        assert_eq!(q.words()[1], 0x1AB);
        assert!(matches!(
            q.set(f, 0x2000),
            Err(FormatError::TooWide { bits: 13, .. })
        ));
        // Neighbours are untouched.
        q.set(f, 0).unwrap();
        assert!(q.words().iter().all(|w| *w == 0));
    }

    #[test]
    fn a_patch_writes_what_its_setters_wrote_and_nothing_else() {
        let f = QmdField {
            name: "X",
            index: None,
            hi: 40,
            lo: 28,
        };
        let g = QmdField {
            name: "Y",
            index: None,
            hi: 3,
            lo: 2,
        };
        let p = QmdPatch::record(QmdVersion::V04_00, |q| {
            q.set(f, 0x1A05)?;
            q.set(g, 0)
        })
        .unwrap();
        assert_eq!(p.words_touched(), 2);
        for start in [0u32, u32::MAX, 0x5A5A_5A5A] {
            let mut by_setters = Qmd::from_words(QmdVersion::V04_00, &[start; 96]).unwrap();
            by_setters.set(f, 0x1A05).unwrap();
            by_setters.set(g, 0).unwrap();
            let mut patched = Qmd::from_words(QmdVersion::V04_00, &[start; 96]).unwrap();
            p.apply(&mut patched).unwrap();
            assert_eq!(patched, by_setters, "from {start:#x}");
        }
        // A setter's error is the recording's, and a patch fits one version.
        assert!(QmdPatch::record(QmdVersion::V04_00, |q| q.set(g, 4)).is_err());
        assert!(p.apply(&mut Qmd::new(QmdVersion::V03_00)).is_err());
    }
}
