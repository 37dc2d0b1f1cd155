//! From a parsed cubin to what goes onto the GPU: a code region (every
//! `.text` section 128-byte aligned, then a guard page) and a data region
//! (the per-kernel and module constant banks and the device globals, each
//! 256-byte aligned), with relocations applied in the host copy before
//! upload; and, per launch, constant bank 0 with the driver words and the
//! marshalled parameters.

use crate::cubin::{self, reloc, Cubin, Kernel, Param, SectionRole, SymbolKind};
use macuda_hw::cbank0::{self, DriverArea, DriverWords, BANK_SIZE_ALIGN};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Code sections start on this boundary (every `.text` has sh_addralign 128).
pub const CODE_ALIGN: u64 = 128;
/// Readable memory kept mapped after the last instruction: the instruction
/// prefetcher reads past the end of the code and faults without it.
pub const CODE_GUARD_BYTES: u64 = 4096;
/// Banks and globals start on this boundary: bank addresses go into the
/// launch descriptor shifted right by 6, and 256 also suits device data.
pub const DATA_ALIGN: u64 = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Region {
    Code,
    Data,
}

/// No region of one module may exceed this: larger is a corrupt header.
pub const MAX_REGION_BYTES: u64 = 1 << 30;
/// The largest section alignment accepted (nvcc uses at most 128).
pub const MAX_SECTION_ALIGN: u64 = 4096;

/// Where one section of the cubin goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub section: usize,
    pub name: String,
    pub region: Region,
    pub offset: u64,
    pub bytes: u64,
}

/// The sizes and offsets of a module on the GPU, known before any memory is
/// allocated; [`Layout::build`] then produces the bytes for given bases.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub placements: Vec<Placement>,
    /// Code bytes, guard page excluded.
    pub code_bytes: u64,
    /// What to allocate for code: the code and the guard page.
    pub code_reserve: u64,
    pub data_bytes: u64,
}

/// Why a module cannot be laid out, relocated or launched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("relocation type {kind} ({}) at {offset:#x} in `{section}` is not supported", reloc::name(*kind).unwrap_or("unknown"))]
    UnsupportedRelocation {
        kind: u32,
        section: String,
        offset: u64,
    },
    #[error("relocation at {offset:#x} in `{section}` does not fit the section")]
    RelocationOutOfRange { section: String, offset: u64 },
    #[error("symbol `{symbol}` is in section `{section}`, which is not placed on the GPU")]
    UnplacedSymbol { symbol: String, section: String },
    #[error("the module calls `{0}`, which this runtime does not provide")]
    UnresolvedExtern(String),
    #[error("section `{section}` asks for alignment {align}")]
    BadAlignment { section: String, align: u64 },
    #[error("section `{section}` ({bytes} bytes) makes the module larger than any real one")]
    TooLarge { section: String, bytes: u64 },
    #[error("sm_{0} has no known constant-bank-0 layout")]
    UnknownArchitecture(u32),
    #[error("kernel `{kernel}` takes {expected} parameters, {given} given")]
    ParamCount {
        kernel: String,
        expected: usize,
        given: usize,
    },
    #[error("parameter {ordinal} of `{kernel}` is {expected} bytes, {given} given")]
    ParamSize {
        kernel: String,
        ordinal: u16,
        expected: u32,
        given: usize,
    },
    #[error("kernel `{kernel}`: its parameters start at {param_base:#x}, inside the driver area that ends at {driver_end:#x}")]
    ParamsOverlapDriverArea {
        kernel: String,
        param_base: u32,
        driver_end: u32,
    },
}

fn placed(role: &SectionRole) -> Option<Region> {
    match role {
        SectionRole::Code => Some(Region::Code),
        // Bank 0 is built per launch, never uploaded.
        SectionRole::ConstantBank { bank } if *bank != cubin::BANK_PARAMS => Some(Region::Data),
        SectionRole::GlobalInit | SectionRole::GlobalZero => Some(Region::Data),
        _ => None,
    }
}

impl Layout {
    /// Place every section the GPU needs.
    ///
    /// # Errors
    /// A region larger than [`MAX_REGION_BYTES`] or an alignment that is not
    /// a power of two up to [`MAX_SECTION_ALIGN`]: what a corrupt header
    /// looks like, refused before anything is allocated.
    pub fn new(c: &Cubin) -> Result<Layout, ImageError> {
        let mut placements = Vec::new();
        let (mut code, mut data) = (0u64, 0u64);
        for s in &c.sections {
            let Some(region) = placed(&s.role) else {
                continue;
            };
            if s.align > MAX_SECTION_ALIGN || (s.align > 1 && !s.align.is_power_of_two()) {
                return Err(ImageError::BadAlignment {
                    section: s.name.clone(),
                    align: s.align,
                });
            }
            let cursor = match region {
                Region::Code => &mut code,
                Region::Data => &mut data,
            };
            let align = match region {
                Region::Code => CODE_ALIGN.max(s.align),
                Region::Data => DATA_ALIGN.max(s.align),
            };
            let offset = cursor.next_multiple_of(align);
            let end = offset.saturating_add(s.size);
            if end > MAX_REGION_BYTES {
                return Err(ImageError::TooLarge {
                    section: s.name.clone(),
                    bytes: s.size,
                });
            }
            *cursor = end;
            placements.push(Placement {
                section: s.index,
                name: s.name.clone(),
                region,
                offset,
                bytes: s.size,
            });
        }
        let code_bytes = code.next_multiple_of(CODE_ALIGN);
        Ok(Layout {
            placements,
            code_bytes,
            code_reserve: code_bytes + CODE_GUARD_BYTES,
            data_bytes: data.next_multiple_of(DATA_ALIGN),
        })
    }

    pub fn placement(&self, section: usize) -> Option<&Placement> {
        self.placements.iter().find(|p| p.section == section)
    }

    /// The GPU address of a placed section, given the region bases.
    pub fn address(&self, section: usize, bases: Bases) -> Option<u64> {
        self.placement(section).map(|p| {
            p.offset
                + match p.region {
                    Region::Code => bases.code,
                    Region::Data => bases.data,
                }
        })
    }

    /// The bytes of both regions for these bases, every relocation whose
    /// target is placed applied; `externs` gives addresses for undefined
    /// functions (vprintf, __assertfail) the runtime provides.
    ///
    /// # Errors
    /// An unsupported relocation type, a relocation outside its section, a
    /// symbol in a section that is not placed, or an unresolved extern.
    pub fn build(
        &self,
        c: &Cubin,
        bases: Bases,
        externs: &dyn Fn(&str) -> Option<u64>,
    ) -> Result<ModuleImage, ImageError> {
        let mut code = vec![0u8; self.code_bytes as usize];
        let mut data = vec![0u8; self.data_bytes as usize];
        for p in &self.placements {
            let s = &c.sections[p.section];
            if s.data.is_empty() {
                continue; // NOBITS (.nv.global) stays zero
            }
            let dst = match p.region {
                Region::Code => &mut code,
                Region::Data => &mut data,
            };
            let at = p.offset as usize;
            dst[at..at + s.data.len()].copy_from_slice(&s.data);
        }
        let mut applied = 0usize;
        for r in &c.relocations {
            let Some(target) = self.placement(r.target) else {
                continue; // .debug_frame and other metadata
            };
            let section = &c.sections[r.target];
            if !reloc::supported(r.kind) {
                return Err(ImageError::UnsupportedRelocation {
                    kind: r.kind,
                    section: section.name.clone(),
                    offset: r.offset,
                });
            }
            let sym = &c.symbols[r.symbol as usize];
            let symbol_address = match sym.section {
                Some(s) => {
                    let base =
                        self.address(s, bases)
                            .ok_or_else(|| ImageError::UnplacedSymbol {
                                symbol: sym.name.clone(),
                                section: c.sections[s].name.clone(),
                            })?;
                    // A section symbol stands for its section's start.
                    if sym.kind == SymbolKind::Section {
                        base
                    } else {
                        base + sym.value
                    }
                }
                None => externs(&sym.name)
                    .ok_or_else(|| ImageError::UnresolvedExtern(sym.name.clone()))?,
            };
            let out_of_range = || ImageError::RelocationOutOfRange {
                section: section.name.clone(),
                offset: r.offset,
            };
            if r.offset >= target.bytes {
                return Err(out_of_range());
            }
            let (buf, at) = match target.region {
                Region::Code => (&mut code, target.offset + r.offset),
                Region::Data => (&mut data, target.offset + r.offset),
            };
            let at = usize::try_from(at).map_err(|_| out_of_range())?;
            let addend = match r.addend {
                Some(a) => a,
                None => reloc::implicit_addend(r.kind, buf, at).ok_or_else(out_of_range)?,
            };
            let value = symbol_address.wrapping_add_signed(addend);
            reloc::apply(r.kind, buf, at, value).ok_or_else(out_of_range)?;
            applied += 1;
        }
        Ok(ModuleImage {
            code,
            data,
            relocations_applied: applied,
        })
    }
}

/// GPU base addresses of a module's two regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bases {
    pub code: u64,
    pub data: u64,
}

/// What to upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleImage {
    pub code: Vec<u8>,
    pub data: Vec<u8>,
    pub relocations_applied: usize,
}

/// A constant bank a kernel needs bound, other than bank 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BankBinding {
    pub bank: u8,
    pub address: u64,
    /// Padded to the 16-byte granule the descriptor stores.
    pub bytes: u64,
}

/// The banks to bind for `kernel`: its own bank 2, and the module's 3 and 4.
pub fn bank_bindings(
    c: &Cubin,
    layout: &Layout,
    bases: Bases,
    kernel: &Kernel,
) -> Vec<BankBinding> {
    c.banks
        .iter()
        .filter(|b| b.bank != cubin::BANK_PARAMS)
        .filter(|b| b.kernel.is_none() || b.kernel.as_deref() == Some(kernel.name.as_str()))
        .filter_map(|b| {
            Some(BankBinding {
                bank: b.bank,
                address: layout.address(b.section, bases)?,
                bytes: b.bytes.next_multiple_of(BANK_SIZE_ALIGN),
            })
        })
        .collect()
}

/// The per-launch facts that go into the driver area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchShape {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_shared_bytes: u32,
}

/// Per-channel facts the driver area also carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Windows {
    pub shared: u64,
    pub local: u64,
}

/// Size of bank 0 for `kernel`: the driver area and the parameters,
/// rounded up to the 16-byte granule.
pub fn cbank0_bytes(kernel: &Kernel, area: &DriverArea) -> u64 {
    u64::from((kernel.param_base + kernel.param_bytes).max(area.param_base))
        .next_multiple_of(BANK_SIZE_ALIGN)
}

/// Write the driver words of bank 0 into `out` (at least
/// [`cbank0_bytes`] long): blockDim, gridDim, the windows, the stack top
/// and, where it has a slot, the dynamic shared size. Everything else in
/// the driver area is zero, as CUDA leaves the memory descriptor.
///
/// # Errors
/// An architecture without a known layout, or parameters that would
/// overwrite driver words.
pub fn write_driver_area(
    out: &mut [u8],
    sm: u32,
    kernel: &Kernel,
    shape: &LaunchShape,
    windows: Windows,
) -> Result<DriverArea, ImageError> {
    let area = cbank0::for_sm(sm).ok_or(ImageError::UnknownArchitecture(sm))?;
    if kernel.param_bytes > 0 && kernel.param_base < area.param_base {
        return Err(ImageError::ParamsOverlapDriverArea {
            kernel: kernel.name.clone(),
            param_base: kernel.param_base,
            driver_end: area.param_base,
        });
    }
    let words = DriverWords {
        grid: shape.grid,
        block: shape.block,
        shared_window: windows.shared,
        local_window: windows.local,
        dynamic_shared_bytes: shape.dynamic_shared_bytes,
    };
    area.write(out, &words)
        .ok_or(ImageError::UnknownArchitecture(sm))?;
    Ok(area)
}

/// Copy each argument into the parameter block of bank 0 at the offset the
/// kernel's metadata declares. `args[i]` holds parameter i's bytes, exactly
/// as large as KPARAM_INFO says.
///
/// # Errors
/// A wrong number of arguments, or one of the wrong size.
pub fn marshal_params(out: &mut [u8], kernel: &Kernel, args: &[&[u8]]) -> Result<(), ImageError> {
    let base = kernel.param_base as usize;
    place_params(&mut out[base..], &kernel.name, &kernel.params, args)
}

/// Copy each argument to its offset in a parameter block (`block` starts at
/// the parameter base).
///
/// # Errors
/// A wrong number of arguments, or one of the wrong size.
pub fn place_params(
    block: &mut [u8],
    kernel: &str,
    params: &[Param],
    args: &[&[u8]],
) -> Result<(), ImageError> {
    if args.len() != params.len() {
        return Err(ImageError::ParamCount {
            kernel: kernel.to_string(),
            expected: params.len(),
            given: args.len(),
        });
    }
    for (p, arg) in params.iter().zip(args) {
        if arg.len() != p.size as usize {
            return Err(ImageError::ParamSize {
                kernel: kernel.to_string(),
                ordinal: p.ordinal,
                expected: p.size,
                given: arg.len(),
            });
        }
        let at = usize::from(p.offset);
        block[at..at + arg.len()].copy_from_slice(arg);
    }
    Ok(())
}

/// A whole bank 0 for one launch.
///
/// # Errors
/// As [`write_driver_area`] and [`marshal_params`].
pub fn build_cbank0(
    sm: u32,
    kernel: &Kernel,
    shape: &LaunchShape,
    windows: Windows,
    args: &[&[u8]],
) -> Result<Vec<u8>, ImageError> {
    let area = cbank0::for_sm(sm).ok_or(ImageError::UnknownArchitecture(sm))?;
    let mut out = vec![0u8; cbank0_bytes(kernel, &area) as usize];
    write_driver_area(&mut out, sm, kernel, shape, windows)?;
    marshal_params(&mut out, kernel, args)?;
    Ok(out)
}

/// Where each kernel's code starts, by name.
pub fn entry_points(c: &Cubin, layout: &Layout) -> BTreeMap<String, u64> {
    c.kernels
        .iter()
        .filter_map(|k| Some((k.name.clone(), layout.placement(k.code_section)?.offset)))
        .collect()
}
