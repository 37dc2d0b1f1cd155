//! Cubins: the ELF files nvcc/ptxas produce for one GPU architecture. This
//! module reads everything a loader needs from one (kernels and their
//! `.nv.info` attributes, constant-bank sections, device globals, symbols
//! and relocations) into a plain [`Cubin`] value, refusing malformed input
//! with a typed [`CubinError`]. Facts: reference/cuda-binary-and-runtime-
//! abi.md section 2.

pub mod eiattr;
mod parse;
pub mod reloc;

pub use parse::parse;

use serde::{Deserialize, Serialize};

/// `e_machine` of CUDA cubins.
pub const EM_CUDA: u16 = 190;
/// `.nv.info*` sections.
pub const SHT_CUDA_INFO: u32 = 0x7000_0000;
/// `.nv.compat`.
pub const SHT_CUDA_COMPAT: u32 = 0x7000_0086;
/// Set on the `.nv.merc.*` / `.nv.capmerc.*` copies sm_100+ cubins carry for
/// a later finalizing step; a loader must skip them or place data twice.
pub const SHF_CUDA_MERCURY: u64 = 0x1000_0000;
/// `st_other` bit marking a kernel entry point.
pub const STO_CUDA_ENTRY: u8 = 0x10;
/// ELF ABI version 7: SM number in `e_flags` bits 0..7 (CUDA <= 12, sm <= 90).
pub const ELFABIVERSION_CUDA_V1: u8 = 7;
/// ELF ABI version 8: SM number in `e_flags` bits 8..15 (CUDA 13, all SMs).
pub const ELFABIVERSION_CUDA_V2: u8 = 8;
/// Constant banks as nvcc uses them.
pub const BANK_PARAMS: u8 = 0;
pub const BANK_KERNEL_LITERALS: u8 = 2;
pub const BANK_USER_CONSTANT: u8 = 3;
pub const BANK_ADDRESS_TABLE: u8 = 4;

/// What a section holds, as the loader sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SectionRole {
    /// `.text.<function>`: SASS, uploaded.
    Code,
    /// `.nv.constantN[.<kernel>]`.
    ConstantBank { bank: u8 },
    /// `.nv.global.init`: initialised device globals.
    GlobalInit,
    /// `.nv.global`: zero-initialised device globals (no file bytes).
    GlobalZero,
    /// `.nv.shared.<kernel>`: its size is the kernel's static shared memory.
    Shared,
    /// `.nv.info*`, `.nv.compat`, notes, symbols, relocations, debug, and
    /// the mercury copies: read or skipped, never uploaded.
    Metadata,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    pub index: usize,
    pub name: String,
    pub sh_type: u32,
    pub flags: u64,
    pub size: u64,
    pub align: u64,
    /// `sh_info`: for per-kernel sections the index of the kernel's code.
    pub info: u32,
    pub role: SectionRole,
    /// File bytes (empty for NOBITS sections).
    #[serde(skip)]
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SymbolKind {
    Function,
    Object,
    Section,
    Other(u8),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Symbol {
    pub index: u32,
    pub name: String,
    pub kind: SymbolKind,
    /// STB_LOCAL: static kernels, anonymous namespaces, most device data.
    pub local: bool,
    pub entry: bool,
    /// `None` for undefined symbols (externs such as `vprintf`).
    pub section: Option<usize>,
    pub value: u64,
    pub size: u64,
}

/// One kernel parameter as KPARAM_INFO (or KPARAM_INFO_V2) describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    pub ordinal: u16,
    /// Relative to the parameter base in constant bank 0.
    pub offset: u16,
    pub size: u32,
    pub pointee_align_log2: u8,
    pub pointee_space: u8,
}

/// A kernel: an entry-point function and everything `.nv.info` says of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kernel {
    pub name: String,
    pub symbol: u32,
    pub local: bool,
    pub code_section: usize,
    pub code_bytes: u64,
    pub registers: Option<u32>,
    pub frame_bytes: Option<u32>,
    /// `0xffffffff` means not statically known (recursion).
    pub min_stack_bytes: Option<u32>,
    pub max_stack_bytes: Option<u32>,
    /// Where the parameters start in constant bank 0 (PARAM_CBANK).
    pub param_base: u32,
    pub param_bytes: u32,
    /// By ordinal.
    pub params: Vec<Param>,
    pub max_threads: Option<[u32; 3]>,
    pub required_threads: Option<[u32; 3]>,
    pub max_registers: Option<u32>,
    /// `.nv.shared.<kernel>`; on sm_90+ it includes the 1 KiB reserve.
    pub shared_bytes: u64,
    pub barriers: Option<u32>,
    pub exit_offsets: Vec<u32>,
    /// Undefined functions it calls (vprintf, __assertfail).
    pub externs: Vec<String>,
    pub cooperative: bool,
    /// Section of its `.nv.constant2.<kernel>`, if any.
    pub literal_bank: Option<usize>,
    /// Every `.nv.info.<kernel>` record, known or not.
    pub attributes: Vec<eiattr::Record>,
}

impl Kernel {
    /// Records whose code the loader has no name for: kept and reported.
    pub fn unknown_attributes(&self) -> impl Iterator<Item = &eiattr::Record> {
        self.attributes.iter().filter(|r| r.name().is_none())
    }

    /// Per-thread local memory the kernel needs: its stack or its frame,
    /// whichever is larger (a stack ptxas could not bound counts as none).
    pub fn local_bytes(&self) -> u32 {
        let stack = self
            .min_stack_bytes
            .filter(|s| *s != UNBOUNDED_STACK)
            .unwrap_or(0);
        stack.max(self.frame_bytes.unwrap_or(0))
    }
}

/// MIN_STACK_SIZE's value for a stack ptxas could not bound (recursion).
pub const UNBOUNDED_STACK: u32 = u32::MAX;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConstantBank {
    pub bank: u8,
    pub section: usize,
    /// The kernel a per-kernel bank (`.nv.constant2.<k>`) belongs to.
    pub kernel: Option<String>,
    pub bytes: u64,
}

/// A device variable: `__device__`, `__constant__`, static tables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Global {
    pub name: String,
    pub symbol: u32,
    pub section: usize,
    pub offset: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relocation {
    /// The section the relocation patches.
    pub target: usize,
    pub offset: u64,
    pub kind: u32,
    pub symbol: u32,
    /// RELA's addend; `None` for REL (the addend is the value in place).
    pub addend: Option<i64>,
}

impl Relocation {
    pub fn kind_name(&self) -> Option<&'static str> {
        reloc::name(self.kind)
    }
}

/// Everything read from one cubin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cubin {
    /// Compute capability as major*10 + minor.
    pub sm: u32,
    pub abi_version: u8,
    pub e_flags: u32,
    /// `.nv.compat` says this is an `sm_XXa` (architecture-specific) cubin.
    pub arch_specific: bool,
    /// The PTX target the SASS came from (`.note.nv.cuinfo`).
    pub virtual_arch: Option<u16>,
    pub sections: Vec<Section>,
    pub symbols: Vec<Symbol>,
    pub kernels: Vec<Kernel>,
    pub banks: Vec<ConstantBank>,
    pub globals: Vec<Global>,
    pub relocations: Vec<Relocation>,
    /// Undefined functions the module needs resolved.
    pub externs: Vec<String>,
}

impl Cubin {
    pub fn kernel(&self, name: &str) -> Option<&Kernel> {
        self.kernels.iter().find(|k| k.name == name)
    }

    pub fn section(&self, index: usize) -> Option<&Section> {
        self.sections.get(index)
    }

    pub fn symbol(&self, index: u32) -> Option<&Symbol> {
        self.symbols.get(index as usize)
    }

    /// The module-wide bank `bank` (3 or 4), if the cubin has one.
    pub fn module_bank(&self, bank: u8) -> Option<&ConstantBank> {
        self.banks
            .iter()
            .find(|b| b.bank == bank && b.kernel.is_none())
    }
}

/// A cubin that cannot be loaded, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CubinError {
    #[error("not a readable ELF file: {0}")]
    Elf(String),
    #[error("not a CUDA cubin: e_machine is {0}, expected 190 (EM_CUDA)")]
    NotCuda(u16),
    #[error("a relocatable (-rdc) cubin: it must be device-linked (nvlink) before loading")]
    Relocatable,
    #[error("unknown CUDA ELF ABI version {0} (expected 7 or 8)")]
    UnknownAbi(u8),
    #[error("section {index} (`{name}`): {why}")]
    Section {
        index: usize,
        name: String,
        why: String,
    },
    #[error("symbol {index}: {why}")]
    Symbol { index: u32, why: String },
    #[error("kernel `{kernel}`: {why}")]
    Kernel { kernel: String, why: String },
}
