//! How a chain's launches hand over, one to the next, and what each
//! launch invalidates: the choices `MACUDA_CHAIN_*` and
//! `MACUDA_LAUNCH_INVALIDATE` make and the launch benchmark compares.

use macuda_hw::qmd::{CacheInvalidate, CwdMembarType, DependentAction};
use serde::{Deserialize, Serialize};

/// How a chain's launches hand over, one to the next: what the completed
/// grid does to the next QMD, and the memory barrier at the end of each
/// grid a next one follows in its chain. A chain's tail always ends in a
/// system-wide barrier, whatever `membar` says: its release is what the
/// host and the copy engine wait on before they read what the chain
/// wrote. The defaults are what ran on the H200 first; the others are for
/// the launch benchmark and `MACUDA_CHAIN_MEMBAR` to compare, each checked
/// on a dependent chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainTuning {
    pub link: ChainLink,
    pub membar: GridMembar,
    /// The caches every launch invalidates before its grid runs.
    pub invalidates: LaunchInvalidates,
    /// Each grid of a chain prefetches the next one's code and bank 0
    /// while it runs (`NextGrid`), as the QMDs of CUDA's graphs on the
    /// H200 do, instead of the next grid fetching both when it launches.
    pub prefetch_next: bool,
    /// The least carve-out each launch lets its SMs run in. It belongs
    /// here because it decides whether an SM must drain and reconfigure
    /// its shared memory before the next grid of a chain may start there.
    pub carve_out_min: CarveOutMin,
}

impl Default for ChainTuning {
    fn default() -> Self {
        ChainTuning {
            link: ChainLink::InvalidateCopySchedule,
            membar: GridMembar::System,
            invalidates: LaunchInvalidates::CUDA,
            prefetch_next: true,
            carve_out_min: CarveOutMin::Occupancy,
        }
    }
}

/// MIN_SM_CONFIG_SHARED_MEM_SIZE of a launch; its target is always the
/// carve-out that holds every block an SM takes in at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CarveOutMin {
    /// The minimum is the target: an SM configured for any other
    /// carve-out reconfigures before it takes the grid's blocks (what ran
    /// on the H200 first).
    Occupancy,
    /// The minimum is the smallest carve-out that holds one block (CUDA's
    /// graph QMDs ask 8 KiB for a kernel without shared memory): an SM
    /// configured larger may take the grid as it is, so grids of differing
    /// needs follow each other without a reconfiguration between them.
    OneBlock,
}

/// The caches a launch invalidates before its grid runs: five of the
/// QMD's six cache bits and each bound constant bank's own bit. CUDA's
/// stream launches on the H200 set the five (reference/submission.md 5.3),
/// and ours set them and the banks' too: the seed notes saw a chained
/// decode read what the grid before it wrote through the texture path,
/// and its text change, with them off. Fewer is a diagnostic
/// (`MACUDA_LAUNCH_INVALIDATE`), to measure what each costs a chain of
/// small kernels; only a greedy byte-compare can say one is not needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchInvalidates {
    pub texture_header: bool,
    pub texture_sampler: bool,
    pub texture_data: bool,
    pub shader_data: bool,
    pub shader_constant: bool,
    /// CONSTANT_BUFFER_INVALIDATE of every bound bank.
    pub constant_banks: bool,
}

impl LaunchInvalidates {
    /// What ours set by default, as CUDA's graph QMDs on the H200 do: the
    /// texture and data caches, which a grid may hold stale after the grid
    /// before it wrote. Not the constant caches: a chain's banks 0 are all
    /// written before its head launches, and the head's push buffer
    /// invalidates the constant cache once for the whole chain (per launch
    /// it would also throw away the bank 0 the grid before prefetched for
    /// it). The instruction cache is invalidated once, after code is
    /// uploaded.
    pub const CUDA: LaunchInvalidates = LaunchInvalidates {
        texture_header: true,
        texture_sampler: true,
        texture_data: true,
        shader_data: true,
        shader_constant: false,
        constant_banks: false,
    };

    /// Every cache a launch can invalidate, the constant caches included
    /// (the default before chains invalidated constants at their head).
    pub const ALL: LaunchInvalidates = LaunchInvalidates {
        texture_header: true,
        texture_sampler: true,
        texture_data: true,
        shader_data: true,
        shader_constant: true,
        constant_banks: true,
    };

    /// Nothing invalidated per launch.
    pub const NONE: LaunchInvalidates = LaunchInvalidates {
        texture_header: false,
        texture_sampler: false,
        texture_data: false,
        shader_data: false,
        shader_constant: false,
        constant_banks: false,
    };

    /// `all`, `cuda` (the default), `none`, or some of `texture-header`, `texture-sampler`,
    /// `texture-data`, `shader-data`, `shader-constant`, `constant-banks`
    /// joined by commas (the ones left on); `None` for anything else.
    pub fn parse(text: &str) -> Option<LaunchInvalidates> {
        match text.trim() {
            "all" => return Some(Self::ALL),
            "cuda" => return Some(Self::CUDA),
            "none" => return Some(Self::NONE),
            _ => {}
        }
        let mut set = Self::NONE;
        for word in text.split(',').map(str::trim) {
            let bit = match word {
                "texture-header" => &mut set.texture_header,
                "texture-sampler" => &mut set.texture_sampler,
                "texture-data" => &mut set.texture_data,
                "shader-data" => &mut set.shader_data,
                "shader-constant" => &mut set.shader_constant,
                "constant-banks" => &mut set.constant_banks,
                _ => return None,
            };
            *bit = true;
        }
        Some(set)
    }

    pub(crate) fn qmd_bits(self) -> CacheInvalidate {
        CacheInvalidate {
            texture_header: self.texture_header,
            texture_sampler: self.texture_sampler,
            texture_data: self.texture_data,
            shader_data: self.shader_data,
            instruction: false,
            shader_constant: self.shader_constant,
        }
    }
}

/// DEPENDENT_QMD ACTION for a chain's link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChainLink {
    /// Launch the next QMD as the engine holds it.
    Schedule,
    /// Re-read the next QMD from memory, then launch it (the copy engine
    /// delivered it after the engine may have cached the slot).
    InvalidateCopySchedule,
}

/// CWD_MEMBAR_TYPE at the end of a grid another grid of its chain follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GridMembar {
    /// A system-wide barrier: the grid's writes are visible to the host
    /// and the copy engine (what CUDA writes in the QMDs of its stream
    /// launches).
    System,
    /// A GPU-wide barrier: visible to later grids, which is all the next
    /// grid of a chain needs (the tail's system barrier then covers the
    /// host).
    Gpu,
}

impl ChainLink {
    pub(crate) fn action(self) -> DependentAction {
        match self {
            ChainLink::Schedule => DependentAction::Schedule,
            ChainLink::InvalidateCopySchedule => DependentAction::InvalidateCopySchedule,
        }
    }
}

impl GridMembar {
    pub(crate) fn membar(self) -> CwdMembarType {
        match self {
            GridMembar::System => CwdMembarType::L1Sysmembar,
            GridMembar::Gpu => CwdMembarType::L1Membar,
        }
    }
}
