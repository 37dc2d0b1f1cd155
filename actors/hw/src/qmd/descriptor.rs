//! The version-neutral launch descriptor, and its encoding into (and
//! decoding from) the words of one QMD version.

use super::values::{
    ApiVisibleCallLimit, BankPrefetch, CacheInvalidate, ConstantBank, CwdMembarType, DependentSlot,
    ProgramPrefetchType, QmdType, Reduction, ReleaseSlot, SamplerIndex, SmConfig,
};
use super::words::Qmd;
use super::{absent, QmdField, QmdVersion, PROGRAM_PREFETCH_SHIFT};
use crate::push::FormatError;

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

/// A flag a version may lack: setting it where absent is an error.
fn set_opt_bool(
    q: &mut Qmd,
    field: Option<QmdField>,
    value: bool,
    name: &'static str,
) -> Result<(), FormatError> {
    match field {
        Some(f) => q.set_bool(f, value),
        None if value => Err(absent(name, q.version())),
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
