//! Each QMD version's field positions, as data: one [`QmdLayout`] per
//! version (the sources are in the module's table).

use super::{QmdField, QmdVersion};

impl QmdVersion {
    /// The version's field positions.
    pub const fn layout(self) -> &'static QmdLayout {
        match self {
            Self::V03_00 => &V03_00,
            Self::V04_00 => &V04_00,
            Self::V05_00 => &V05_00,
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
}
