//! Reading a cubin with the `object` crate's ELF layer, then interpreting
//! the CUDA-specific parts ourselves.

use super::eiattr::{self, parse_records, Record};
use super::*;
use object::elf;
use object::read::elf::{FileHeader as _, Rel as _, Rela as _, SectionHeader as _, Sym as _};
use object::LittleEndian as LE;
use std::collections::BTreeMap;

type Header = elf::FileHeader64<LE>;

fn elf_err(e: object::Error) -> CubinError {
    CubinError::Elf(e.to_string())
}

fn section_err(index: usize, name: &str, why: impl Into<String>) -> CubinError {
    CubinError::Section {
        index,
        name: name.to_string(),
        why: why.into(),
    }
}

fn role_of(name: &str, sh_type: u32, flags: u64) -> SectionRole {
    if flags & SHF_CUDA_MERCURY != 0
        || name.starts_with(".nv.merc.")
        || name.starts_with(".nv.capmerc.")
    {
        return SectionRole::Metadata;
    }
    if name.starts_with(".text.") && sh_type == elf::SHT_PROGBITS.0 {
        return SectionRole::Code;
    }
    if let Some(rest) = name.strip_prefix(".nv.constant") {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let tail = &rest[digits.len()..];
        if let Ok(bank) = digits.parse::<u8>() {
            if tail.is_empty() || tail.starts_with('.') {
                return SectionRole::ConstantBank { bank };
            }
        }
    }
    match name {
        ".nv.global.init" => SectionRole::GlobalInit,
        ".nv.global" => SectionRole::GlobalZero,
        _ if name.starts_with(".nv.shared.") && !name.starts_with(".nv.shared.reserved") => {
            SectionRole::Shared
        }
        _ => SectionRole::Metadata,
    }
}

/// The virtual architecture from `.note.nv.cuinfo`: one note, owner
/// "NVIDIA Corp", descriptor `u16 version, u16 virtual arch, u32 toolkit`.
fn cuinfo_virtual_arch(data: &[u8]) -> Option<u16> {
    let word = |i: usize| {
        data.get(i..i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let namesz = usize::try_from(word(0)?).ok()?;
    let descsz = word(4)?;
    let desc_at = namesz.checked_next_multiple_of(4)?.checked_add(12)?;
    if descsz < 4 {
        return None;
    }
    let d = data.get(desc_at.checked_add(2)?..desc_at.checked_add(4)?)?;
    Some(u16::from_le_bytes([d[0], d[1]]))
}

fn sm_from_flags(abi: u8, flags: u32) -> Result<u32, CubinError> {
    match abi {
        ELFABIVERSION_CUDA_V1 => Ok(flags & 0xff),
        ELFABIVERSION_CUDA_V2 => Ok((flags >> 8) & 0xff),
        other => Err(CubinError::UnknownAbi(other)),
    }
}

/// Module-wide `.nv.info` facts, keyed by function symbol.
#[derive(Default)]
struct FunctionFacts {
    registers: Option<u32>,
    frame: Option<u32>,
    min_stack: Option<u32>,
    max_stack: Option<u32>,
}

/// Read a cubin.
///
/// # Errors
/// Anything that is not a loadable, well-formed CUDA ELF: the error names
/// the section, symbol or kernel that is wrong.
pub fn parse(bytes: &[u8]) -> Result<Cubin, CubinError> {
    let header = Header::parse(bytes).map_err(elf_err)?;
    let endian = header.endian().map_err(elf_err)?;
    let machine = header.e_machine(endian).0;
    if machine != EM_CUDA {
        return Err(CubinError::NotCuda(machine));
    }
    match header.e_type(endian) {
        elf::ET_EXEC => {}
        elf::ET_REL => return Err(CubinError::Relocatable),
        other => {
            return Err(CubinError::Elf(format!(
                "e_type {other} is neither ET_EXEC nor ET_REL"
            )))
        }
    }
    let abi_version = header.e_ident().abi_version;
    let e_flags = header.e_flags(endian).0;
    let sm = sm_from_flags(abi_version, e_flags)?;

    // A section table at offset 0, or of no sections, reads as a module
    // with nothing in it; every cubin nvcc writes has one.
    if header.e_shoff(endian) == 0 || header.e_shnum(endian) == 0 {
        return Err(CubinError::Elf(format!(
            "no section table (e_shoff {}, e_shnum {}): a cubin has its code and kernels in sections",
            header.e_shoff(endian),
            header.e_shnum(endian)
        )));
    }
    let table = header.sections(endian, bytes).map_err(elf_err)?;
    let mut sections = Vec::with_capacity(table.len());
    for (index, sh) in table.iter().enumerate() {
        let name =
            String::from_utf8_lossy(table.section_name(endian, sh).map_err(elf_err)?).into_owned();
        let sh_type = sh.sh_type(endian).0;
        let flags = sh.sh_flags(endian).0;
        let data = if sh_type == elf::SHT_NOBITS.0 {
            Vec::new()
        } else {
            sh.data(endian, bytes)
                .map_err(|_| section_err(index, &name, "its bytes lie outside the file"))?
                .to_vec()
        };
        sections.push(Section {
            index,
            role: role_of(&name, sh_type, flags),
            name,
            sh_type,
            flags,
            size: sh.sh_size(endian),
            align: sh.sh_addralign(endian),
            info: sh.sh_info(endian),
            data,
        });
    }

    let symtab = table
        .symbols(endian, bytes, elf::SHT_SYMTAB)
        .map_err(elf_err)?;
    let mut symbols = Vec::with_capacity(symtab.len());
    for (i, sym) in symtab.iter().enumerate() {
        let index = u32::try_from(i).map_err(|_| CubinError::Elf("too many symbols".into()))?;
        let name =
            String::from_utf8_lossy(symtab.symbol_name(endian, sym).map_err(elf_err)?).into_owned();
        let shndx = sym.st_shndx(endian).0;
        let section = match shndx {
            0 => None,
            s if s >= elf::SHN_LORESERVE => None,
            s => {
                let s = usize::from(s);
                if s >= sections.len() {
                    return Err(CubinError::Symbol {
                        index,
                        why: format!("`{name}` names section {s}, which does not exist"),
                    });
                }
                Some(s)
            }
        };
        symbols.push(Symbol {
            index,
            kind: match sym.st_type() {
                elf::STT_FUNC => SymbolKind::Function,
                elf::STT_OBJECT => SymbolKind::Object,
                elf::STT_SECTION => SymbolKind::Section,
                other => SymbolKind::Other(other.0),
            },
            local: sym.st_bind() == elf::STB_LOCAL,
            entry: sym.st_other().0 & STO_CUDA_ENTRY != 0 && sym.st_type() == elf::STT_FUNC,
            section,
            value: sym.st_value(endian),
            size: sym.st_size(endian),
            name,
        });
    }
    let symbol_name = |index: u32| -> Result<String, CubinError> {
        symbols
            .get(index as usize)
            .map(|s| s.name.clone())
            .ok_or(CubinError::Symbol {
                index,
                why: "referenced but not in the symbol table".into(),
            })
    };

    // Module-wide facts per function.
    let mut facts: BTreeMap<u32, FunctionFacts> = BTreeMap::new();
    let mut arch_specific = false;
    let mut virtual_arch = None;
    for s in &sections {
        if s.sh_type == SHT_CUDA_INFO && s.name == ".nv.info" {
            let records = parse_records(&s.data).map_err(|e| {
                section_err(s.index, &s.name, format!("{} at {:#x}", e.why, e.offset))
            })?;
            for r in records {
                let (Some(sym), Some(v)) = (r.u32_at(0), r.u32_at(1)) else {
                    continue;
                };
                let f = facts.entry(sym).or_default();
                match r.code {
                    eiattr::EIATTR_REGCOUNT => f.registers = Some(v),
                    eiattr::EIATTR_FRAME_SIZE => f.frame = Some(v),
                    eiattr::EIATTR_MIN_STACK_SIZE => f.min_stack = Some(v),
                    eiattr::EIATTR_MAX_STACK_SIZE => f.max_stack = Some(v),
                    _ => {}
                }
            }
        } else if s.sh_type == SHT_CUDA_COMPAT
            && s.role == SectionRole::Metadata
            && s.flags & SHF_CUDA_MERCURY == 0
        {
            let records = parse_records(&s.data).map_err(|e| {
                section_err(s.index, &s.name, format!("{} at {:#x}", e.why, e.offset))
            })?;
            arch_specific = records.iter().any(|r| {
                r.code == eiattr::EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET && r.small() == Some(1)
            });
        } else if s.name == ".note.nv.cuinfo" {
            virtual_arch = cuinfo_virtual_arch(&s.data);
        }
    }

    // Per-kernel sections, keyed by the index of the kernel's code.
    let per_kernel = |role_test: &dyn Fn(&Section) -> bool, code: usize| -> Option<&Section> {
        sections
            .iter()
            .find(|s| role_test(s) && s.info as usize == code)
    };

    let mut kernels = Vec::new();
    for sym in symbols.iter().filter(|s| s.entry) {
        let code_section = sym.section.ok_or_else(|| CubinError::Kernel {
            kernel: sym.name.clone(),
            why: "entry point without a code section".into(),
        })?;
        if sections[code_section].role != SectionRole::Code {
            return Err(CubinError::Kernel {
                kernel: sym.name.clone(),
                why: format!("its section `{}` is not code", sections[code_section].name),
            });
        }
        let f = facts.remove(&sym.index).unwrap_or_default();
        let mut k = Kernel {
            name: sym.name.clone(),
            symbol: sym.index,
            local: sym.local,
            code_section,
            code_bytes: sections[code_section].size,
            registers: f.registers,
            frame_bytes: f.frame,
            min_stack_bytes: f.min_stack,
            max_stack_bytes: f.max_stack,
            param_base: 0,
            param_bytes: 0,
            params: Vec::new(),
            max_threads: None,
            required_threads: None,
            max_registers: None,
            shared_bytes: per_kernel(&|s| s.role == SectionRole::Shared, code_section)
                .map_or(0, |s| s.size),
            barriers: None,
            exit_offsets: Vec::new(),
            externs: Vec::new(),
            cooperative: false,
            literal_bank: per_kernel(
                &|s| {
                    s.role
                        == (SectionRole::ConstantBank {
                            bank: BANK_KERNEL_LITERALS,
                        })
                },
                code_section,
            )
            .map(|s| s.index),
            attributes: Vec::new(),
        };
        let info = per_kernel(
            &|s| s.sh_type == SHT_CUDA_INFO && s.name != ".nv.info",
            code_section,
        );
        if let Some(info) = info {
            let records = parse_records(&info.data).map_err(|e| {
                section_err(
                    info.index,
                    &info.name,
                    format!("{} at {:#x}", e.why, e.offset),
                )
            })?;
            read_kernel_records(&mut k, &records, &symbol_name)?;
            k.attributes = records;
        }
        k.params.sort_by_key(|p| p.ordinal);
        kernels.push(k);
    }

    let mut banks = Vec::new();
    for s in &sections {
        if let SectionRole::ConstantBank { bank } = s.role {
            let kernel = if s.flags & elf::SHF_INFO_LINK.0 != 0 {
                kernels
                    .iter()
                    .find(|k| k.code_section == s.info as usize)
                    .map(|k| k.name.clone())
            } else {
                None
            };
            banks.push(ConstantBank {
                bank,
                section: s.index,
                kernel,
                bytes: s.size,
            });
        }
    }

    let globals = symbols
        .iter()
        .filter(|s| s.kind == SymbolKind::Object)
        .filter_map(|s| {
            let section = s.section?;
            matches!(
                sections[section].role,
                SectionRole::GlobalInit
                    | SectionRole::GlobalZero
                    | SectionRole::ConstantBank { .. }
            )
            .then(|| Global {
                name: s.name.clone(),
                symbol: s.index,
                section,
                offset: s.value,
                bytes: s.size,
            })
        })
        .collect();

    let mut relocations = Vec::new();
    for (index, sh) in table.iter().enumerate() {
        let s = &sections[index];
        if s.role != SectionRole::Metadata
            || s.flags & SHF_CUDA_MERCURY != 0
            || s.name.starts_with(".nv.merc.")
        {
            continue;
        }
        let bad = |why: &str| section_err(index, &s.name, why);
        match elf::SectionType(s.sh_type) {
            elf::SHT_RELA => {
                let Some((entries, _)) = sh
                    .rela(endian, bytes)
                    .map_err(|_| bad("malformed RELA entries"))?
                else {
                    continue;
                };
                for r in entries {
                    relocations.push(Relocation {
                        target: s.info as usize,
                        offset: r.r_offset(endian),
                        kind: r.r_type(endian, false).0,
                        symbol: r.r_sym(endian, false),
                        addend: Some(r.r_addend(endian)),
                    });
                }
            }
            elf::SHT_REL => {
                let Some((entries, _)) = sh
                    .rel(endian, bytes)
                    .map_err(|_| bad("malformed REL entries"))?
                else {
                    continue;
                };
                for r in entries {
                    relocations.push(Relocation {
                        target: s.info as usize,
                        offset: r.r_offset(endian),
                        kind: r.r_type(endian).0,
                        symbol: r.r_sym(endian),
                        addend: None,
                    });
                }
            }
            _ => {}
        }
    }
    for r in &relocations {
        if r.target >= sections.len() {
            return Err(CubinError::Elf(format!(
                "a relocation patches section {}, which does not exist",
                r.target
            )));
        }
        symbol_name(r.symbol)?;
    }

    let externs = {
        let mut v: Vec<String> = symbols
            .iter()
            .filter(|s| s.section.is_none() && s.kind == SymbolKind::Function && !s.name.is_empty())
            .map(|s| s.name.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    };

    Ok(Cubin {
        sm,
        abi_version,
        e_flags,
        arch_specific,
        virtual_arch,
        sections,
        symbols,
        kernels,
        banks,
        globals,
        relocations,
        externs,
    })
}

fn three(r: &Record) -> Option<[u32; 3]> {
    Some([r.u32_at(0)?, r.u32_at(1)?, r.u32_at(2)?])
}

fn read_kernel_records(
    k: &mut Kernel,
    records: &[Record],
    symbol_name: &dyn Fn(u32) -> Result<String, CubinError>,
) -> Result<(), CubinError> {
    let bad = |why: String| CubinError::Kernel {
        kernel: k.name.clone(),
        why,
    };
    for r in records {
        match r.code {
            eiattr::EIATTR_PARAM_CBANK => {
                let word = r
                    .u32_at(1)
                    .ok_or_else(|| bad("PARAM_CBANK record too short".into()))?;
                k.param_base = word & 0xffff;
                k.param_bytes = word >> 16;
            }
            eiattr::EIATTR_KPARAM_INFO => {
                let (Some(ord_off), Some(word)) = (r.u32_at(1), r.u32_at(2)) else {
                    return Err(bad("KPARAM_INFO record too short".into()));
                };
                k.params.push(Param {
                    ordinal: (ord_off & 0xffff) as u16,
                    offset: (ord_off >> 16) as u16,
                    size: word >> eiattr::KPARAM_INFO_SIZE_SHIFT,
                    pointee_align_log2: (word & eiattr::KPARAM_INFO_ALIGN_MASK) as u8,
                    pointee_space: ((word >> eiattr::KPARAM_INFO_SPACE_SHIFT)
                        & eiattr::KPARAM_INFO_SPACE_MASK) as u8,
                });
            }
            eiattr::EIATTR_KPARAM_INFO_V2 => {
                let v = r
                    .value
                    .get(..12)
                    .ok_or_else(|| bad("KPARAM_INFO_V2 record too short".into()))?;
                k.params.push(Param {
                    ordinal: u16::from_le_bytes([v[4], v[5]]),
                    offset: u16::from_le_bytes([v[6], v[7]]),
                    size: u32::from(u16::from_le_bytes([v[8], v[9]])),
                    pointee_align_log2: v[10],
                    pointee_space: v[11],
                });
            }
            eiattr::EIATTR_MAX_THREADS => k.max_threads = three(r),
            eiattr::EIATTR_REQNTID => k.required_threads = three(r),
            eiattr::EIATTR_MAXREG_COUNT => k.max_registers = r.small(),
            eiattr::EIATTR_NUM_BARRIERS => k.barriers = r.small(),
            eiattr::EIATTR_EXIT_INSTR_OFFSETS => {
                k.exit_offsets = (0..r.value.len() / 4).filter_map(|i| r.u32_at(i)).collect();
            }
            eiattr::EIATTR_EXTERNS => {
                for i in 0..r.value.len() / 4 {
                    if let Some(sym) = r.u32_at(i) {
                        k.externs.push(symbol_name(sym)?);
                    }
                }
            }
            eiattr::EIATTR_COOP_GROUP_INSTR_OFFSETS => k.cooperative = true,
            eiattr::EIATTR_NEED_CNP_WRAPPER | eiattr::EIATTR_NEED_CNP_PATCH => {
                return Err(bad(
                    "uses dynamic parallelism, which this runtime does not provide".into(),
                ));
            }
            _ => {}
        }
    }
    let mut ordinals: Vec<u16> = k.params.iter().map(|p| p.ordinal).collect();
    ordinals.sort_unstable();
    ordinals.dedup();
    if ordinals.len() != k.params.len() {
        return Err(bad("two KPARAM_INFO records for one parameter".into()));
    }
    for p in &k.params {
        if u32::from(p.offset) + p.size > k.param_bytes {
            return Err(bad(format!(
                "parameter {} ({} bytes at {:#x}) lies outside the {}-byte parameter block",
                p.ordinal, p.size, p.offset, k.param_bytes
            )));
        }
    }
    Ok(())
}
