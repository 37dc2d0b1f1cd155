//! What `macuda inspect` shows of a fat binary, a cubin, or a host object
//! that embeds fat binaries: every entry, and for every cubin its kernels,
//! parameter layouts, registers, shared memory, banks, globals and
//! relocations, plus the layout the loader would give it.

use crate::cubin::{self, eiattr, Cubin};
use crate::fatbin::{self, Compression, EntryKind, Fatbin, InputKind};
use crate::image::Layout;
use crate::module::ModuleError;
use crate::registrations::{self, Registrations};
use serde::Serialize;
use std::fmt::Write as _;

#[derive(Debug, Clone, Serialize)]
pub struct EntryView {
    pub index: usize,
    pub label: String,
    pub kind: String,
    pub sm: u32,
    pub compression: String,
    pub stored_bytes: u64,
    pub bytes: u64,
    pub identifier: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CubinView {
    /// Where the cubin came from: `file`, or `fatbin F entry E`.
    pub source: String,
    pub cubin: Cubin,
    /// The loader's layout, or why it cannot place the module.
    pub layout: Result<Layout, String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    pub input: String,
    pub fatbins: Vec<Vec<EntryView>>,
    pub cubins: Vec<CubinView>,
    /// For a host object clang compiled: the kernels its registration
    /// code names, checked against the embedded cubins.
    pub registrations: Option<Registrations>,
}

fn view_cubin(source: String, bytes: &[u8]) -> Result<CubinView, ModuleError> {
    let cubin = cubin::parse(bytes)?;
    let layout = match cubin.relocations.iter().find(|r| {
        !cubin::reloc::supported(r.kind) && !cubin.sections[r.target].name.contains("debug")
    }) {
        Some(r) => Err(format!(
            "relocation type {} ({}) in `{}` is not supported",
            r.kind,
            r.kind_name().unwrap_or("unknown"),
            cubin.sections[r.target].name
        )),
        None => Layout::new(&cubin).map_err(|e| e.to_string()),
    };
    Ok(CubinView {
        source,
        cubin,
        layout,
    })
}

/// Read everything in `bytes`.
///
/// # Errors
/// Input that is none of the three kinds, or is malformed.
pub fn inspect(bytes: &[u8]) -> Result<Inspection, ModuleError> {
    let (input, fatbin_blobs) = match fatbin::classify(bytes) {
        InputKind::Cubin => {
            return Ok(Inspection {
                input: "cubin".to_string(),
                fatbins: Vec::new(),
                cubins: vec![view_cubin("file".to_string(), bytes)?],
                registrations: None,
            })
        }
        InputKind::Fatbin => ("fat binary", vec![bytes.to_vec()]),
        InputKind::HostObject => ("host object", fatbin::fatbins_in_host_object(bytes)?),
        _ => {
            return Err(ModuleError::Unrecognised(
                bytes.iter().take(8).copied().collect(),
            ))
        }
    };
    let mut fatbins = Vec::new();
    let mut cubins = Vec::new();
    for (f, blob) in fatbin_blobs.iter().enumerate() {
        let fb = Fatbin::parse(blob)?;
        let mut entries = Vec::new();
        for e in fb.entries() {
            entries.push(EntryView {
                index: e.index,
                label: e.label(),
                kind: match e.kind {
                    EntryKind::Elf => "ELF".to_string(),
                    EntryKind::Ptx => "PTX".to_string(),
                    EntryKind::Unknown(k) => format!("kind {k}"),
                },
                sm: e.sm,
                compression: match e.compression {
                    Compression::None => "none".to_string(),
                    Compression::Zstd => "zstd".to_string(),
                    Compression::Lz4 => "lz4".to_string(),
                    Compression::Unknown(flags) => format!("unknown (flags {flags:#x})"),
                },
                stored_bytes: e.stored_data().len() as u64,
                bytes: e.data_len(),
                identifier: e.identifier.clone(),
            });
            if e.kind == EntryKind::Elf {
                let payload = fb.payload(blob, e.index)?;
                cubins.push(view_cubin(
                    format!("fatbin {f} entry {}", e.index),
                    &payload,
                )?);
            }
        }
        fatbins.push(entries);
    }
    let registrations = registrations::clang_registered(bytes).map(|names| {
        registrations::check(
            &names,
            cubins
                .iter()
                .flat_map(|v| v.cubin.kernels.iter().map(|k| k.name.clone())),
        )
    });
    Ok(Inspection {
        input: input.to_string(),
        fatbins,
        cubins,
        registrations,
    })
}

/// The text `macuda inspect` prints.
pub fn render(i: &Inspection) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "input: {}", i.input);
    for (f, entries) in i.fatbins.iter().enumerate() {
        let _ = writeln!(s, "fat binary {f}: {} entries", entries.len());
        for e in entries {
            let _ = writeln!(
                s,
                "  entry {}: {:<16} {:>8} bytes ({}, {} stored){}",
                e.index,
                e.label,
                e.bytes,
                e.compression,
                e.stored_bytes,
                e.identifier
                    .as_deref()
                    .map(|n| format!(" ident {n}"))
                    .unwrap_or_default()
            );
        }
    }
    for v in &i.cubins {
        let c = &v.cubin;
        let _ = writeln!(
            s,
            "\ncubin ({}): sm_{}{} (ELF ABI {}, e_flags {:#x}), {} kernels, virtual arch {}",
            v.source,
            c.sm,
            if c.arch_specific { "a" } else { "" },
            c.abi_version,
            c.e_flags,
            c.kernels.len(),
            c.virtual_arch
                .map_or("?".to_string(), |a| format!("compute_{a}"))
        );
        for k in &c.kernels {
            let _ = writeln!(
                s,
                "  kernel {}{}\n    code {} bytes, {} registers, shared {} bytes, stack {} / frame {} bytes, bank 0: params at {:#x}, {} bytes",
                k.name,
                if k.local { " (local)" } else { "" },
                k.code_bytes,
                k.registers.map_or("?".into(), |r| r.to_string()),
                k.shared_bytes,
                k.min_stack_bytes.map_or("?".into(), |r| r.to_string()),
                k.frame_bytes.map_or("?".into(), |r| r.to_string()),
                k.param_base,
                k.param_bytes
            );
            for p in &k.params {
                let _ = writeln!(
                    s,
                    "    param {:>2}: offset {:#06x}, {} bytes",
                    p.ordinal, p.offset, p.size
                );
            }
            if let Some(t) = k.max_threads {
                let _ = writeln!(s, "    max threads {}x{}x{}", t[0], t[1], t[2]);
            }
            if let Some(t) = k.required_threads {
                let _ = writeln!(s, "    required block {}x{}x{}", t[0], t[1], t[2]);
            }
            if !k.exit_offsets.is_empty() {
                let offs: Vec<String> = k.exit_offsets.iter().map(|o| format!("{o:#x}")).collect();
                let _ = writeln!(s, "    exits at {}", offs.join(", "));
            }
            if !k.externs.is_empty() {
                let _ = writeln!(s, "    calls externs: {}", k.externs.join(", "));
            }
            let unknown: Vec<String> = k
                .unknown_attributes()
                .map(|r| format!("{:#04x} ({} bytes)", r.code, r.value.len()))
                .collect();
            if !unknown.is_empty() {
                let _ = writeln!(
                    s,
                    "    attributes not known to this loader: {}",
                    unknown.join(", ")
                );
            }
            let known: Vec<&str> = k
                .attributes
                .iter()
                .filter_map(eiattr::Record::name)
                .collect();
            let _ = writeln!(s, "    attributes: {}", known.join(" "));
        }
        for b in &c.banks {
            let _ = writeln!(
                s,
                "  bank {} `{}`: {} bytes{}",
                b.bank,
                c.sections[b.section].name,
                b.bytes,
                if b.bank == 0 {
                    " (per launch; not uploaded)"
                } else {
                    ""
                }
            );
        }
        for g in &c.globals {
            let _ = writeln!(
                s,
                "  global {} in `{}` at {:#x}, {} bytes",
                g.name, c.sections[g.section].name, g.offset, g.bytes
            );
        }
        for r in &c.relocations {
            let _ = writeln!(
                s,
                "  relocation {} at `{}`+{:#x} -> {}{}",
                r.kind_name()
                    .map_or(format!("type {}", r.kind), str::to_string),
                c.sections[r.target].name,
                r.offset,
                c.symbols[r.symbol as usize].name,
                r.addend.map(|a| format!(" + {a:#x}")).unwrap_or_default()
            );
        }
        if !c.externs.is_empty() {
            let _ = writeln!(s, "  undefined externs: {}", c.externs.join(", "));
        }
        match &v.layout {
            Ok(l) => {
                let _ = writeln!(
                    s,
                    "  layout: code {} bytes (+{} guard), data {} bytes in {} placed sections",
                    l.code_bytes,
                    l.code_reserve - l.code_bytes,
                    l.data_bytes,
                    l.placements.len()
                );
            }
            Err(why) => {
                let _ = writeln!(s, "  layout: cannot be loaded: {why}");
            }
        }
    }
    if let Some(r) = &i.registrations {
        if r.unmatched.is_empty() {
            let _ = writeln!(
                s,
                "\nregistered by clang's host code: {} kernels, every one found in the fat binaries",
                r.registered
            );
        } else {
            let _ = writeln!(
                s,
                "\nregistered by clang's host code: {} kernels, {} not found in the fat binaries:",
                r.registered,
                r.unmatched.len()
            );
            for name in &r.unmatched {
                let _ = writeln!(s, "  not found: {name}");
            }
        }
    }
    s
}
