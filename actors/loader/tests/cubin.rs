//! The cubin parser against what NVIDIA's cuobjdump says about the same
//! files: kernels, register counts, shared and constant-bank-0 sizes,
//! parameter layouts and relocations, for every fixture at sm_90 and sm_120.

use macuda_loader::cubin::{self, Cubin};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/cuda/fixtures"
    ))
}

const SOURCES: [&str; 8] = [
    "vector_add",
    "dims",
    "banks",
    "fnptr",
    "kinds",
    "params",
    "shared",
    "printf",
];
const SMS: [u32; 2] = [90, 120];

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16)
        .unwrap_or_else(|_| panic!("not hex: {s:?}"))
}

/// `cuobjdump --dump-resource-usage`: per function, REG, SHARED, CONSTANT[0].
fn resources(text: &str) -> BTreeMap<String, (u64, u64, u64)> {
    let mut out = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("Function ") {
            current = Some(name.trim_end_matches(':').to_string());
        } else if let (Some(name), true) = (&current, line.starts_with("REG:")) {
            let field = |key: &str| -> u64 {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(key))
                    .unwrap_or_else(|| panic!("no {key} in {line}"))
                    .parse()
                    .unwrap()
            };
            out.insert(
                name.clone(),
                (field("REG:"), field("SHARED:"), field("CONSTANT[0]:")),
            );
        }
    }
    out
}

/// `cuobjdump -elf`: KPARAM_INFO(_V2) triples per `.nv.info.<kernel>`, and
/// relocations as (patched section, offset, symbol, type name).
struct Dump {
    params: BTreeMap<String, BTreeSet<(u64, u64, u64)>>,
    relocations: BTreeSet<(String, u64, String, String)>,
}

fn dump(text: &str) -> Dump {
    let mut params: BTreeMap<String, BTreeSet<(u64, u64, u64)>> = BTreeMap::new();
    let mut relocations = BTreeSet::new();
    let mut info_of: Option<String> = None;
    let mut reloc_of: Option<String> = None;
    for line in text.lines() {
        if let Some(k) = line.strip_prefix(".nv.info.") {
            info_of = Some(k.trim().to_string());
            reloc_of = None;
            continue;
        }
        if let Some(rest) = line.strip_prefix(".section ") {
            info_of = None;
            let mut w = rest.split_whitespace();
            let name = w.next().unwrap_or("");
            reloc_of = name
                .strip_prefix(".rela")
                .or_else(|| name.strip_prefix(".rel"))
                .map(str::to_string);
            continue;
        }
        if line.trim().is_empty() {
            reloc_of = None;
        }
        if let (Some(k), Some(v)) = (&info_of, line.trim().strip_prefix("Value:")) {
            if v.contains("Ordinal") {
                let field = |key: &str| -> u64 {
                    let at = v.find(key).unwrap() + key.len();
                    hex(v[at..]
                        .trim_start_matches([' ', ':', '\t'])
                        .split_whitespace()
                        .next()
                        .unwrap())
                };
                params.entry(k.clone()).or_default().insert((
                    field("Ordinal"),
                    field("Offset"),
                    field("Size"),
                ));
            }
        }
        if let Some(section) = &reloc_of {
            let w: Vec<&str> = line.split_whitespace().collect();
            if w.len() == 4 && w[0].starts_with("0x") && w[2].starts_with("R_CUDA") {
                relocations.insert((
                    section.clone(),
                    hex(w[0]),
                    w[1].to_string(),
                    w[2].to_string(),
                ));
            }
        }
    }
    Dump {
        params,
        relocations,
    }
}

fn load(name: &str, sm: u32) -> (Cubin, String, String) {
    let base = fixtures().join(format!("{name}.sm_{sm}.cubin"));
    let bytes = std::fs::read(&base).expect("fixture cubin");
    let cubin = cubin::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", base.display()));
    let text = std::fs::read_to_string(base.with_extension("cubin.cuobjdump.txt")).unwrap();
    let res = std::fs::read_to_string(base.with_extension("cubin.resources.txt")).unwrap();
    (cubin, text, res)
}

#[test]
fn every_fixture_matches_cuobjdump() {
    let mut kernels_checked = 0;
    let mut params_checked = 0;
    let mut relocations_checked = 0;
    for name in SOURCES {
        for sm in SMS {
            let (c, text, res) = load(name, sm);
            assert_eq!(c.sm, sm, "{name}");
            assert_eq!(c.abi_version, cubin::ELFABIVERSION_CUDA_V2, "{name}");
            let usage = resources(&res);
            let ours: BTreeSet<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
            let theirs: BTreeSet<&str> = usage.keys().map(String::as_str).collect();
            assert_eq!(ours, theirs, "{name} sm_{sm}: kernel set");
            let d = dump(&text);
            for k in &c.kernels {
                let (regs, shared, cbank0) = usage[&k.name];
                assert_eq!(
                    k.registers.map(u64::from),
                    Some(regs),
                    "{name} sm_{sm} {}: registers",
                    k.name
                );
                assert_eq!(k.shared_bytes, shared, "{name} sm_{sm} {}: shared", k.name);
                assert_eq!(
                    u64::from(k.param_base + k.param_bytes),
                    cbank0,
                    "{name} sm_{sm} {}: bank-0 size",
                    k.name
                );
                let expected = d.params.get(&k.name).cloned().unwrap_or_default();
                let got: BTreeSet<(u64, u64, u64)> = k
                    .params
                    .iter()
                    .map(|p| (u64::from(p.ordinal), u64::from(p.offset), u64::from(p.size)))
                    .collect();
                assert_eq!(got, expected, "{name} sm_{sm} {}: parameters", k.name);
                params_checked += got.len();
                kernels_checked += 1;
            }
            let got: BTreeSet<(String, u64, String, String)> = c
                .relocations
                .iter()
                .map(|r| {
                    (
                        c.sections[r.target].name.clone(),
                        r.offset,
                        c.symbols[r.symbol as usize].name.clone(),
                        r.kind_name().unwrap_or("?").to_string(),
                    )
                })
                .collect();
            assert_eq!(got, d.relocations, "{name} sm_{sm}: relocations");
            relocations_checked += got.len();
        }
    }
    assert!(kernels_checked >= 30, "{kernels_checked}");
    assert!(params_checked >= 60, "{params_checked}");
    assert!(relocations_checked >= 10, "{relocations_checked}");
}

#[test]
fn parameter_base_is_per_architecture() {
    let (c90, _, _) = load("vector_add", 90);
    let (c120, _, _) = load("vector_add", 120);
    assert_eq!(c90.kernel("vector_add").unwrap().param_base, 0x210);
    assert_eq!(c120.kernel("vector_add").unwrap().param_base, 0x380);
    let k = c90.kernel("vector_add").unwrap();
    assert_eq!(
        k.params
            .iter()
            .map(|p| (p.offset, p.size))
            .collect::<Vec<_>>(),
        vec![(0, 8), (8, 8), (16, 8), (24, 4)]
    );
}

#[test]
fn mixed_structs_and_big_blocks_have_the_c_layout() {
    let (c, _, _) = load("params", 90);
    let mixed = c.kernel("mixed_params").unwrap();
    // (float*, const int64_t*, int, struct{int;char;double}, float4, char, double)
    assert_eq!(
        mixed.params.iter().map(|p| p.offset).collect::<Vec<_>>(),
        vec![0x0, 0x8, 0x10, 0x18, 0x30, 0x40, 0x48]
    );
    assert_eq!(mixed.param_bytes, 0x50);
    let big = c.kernel("big_param").unwrap();
    assert_eq!(big.params[1].size, 4800, "KPARAM_INFO_V2 sizes");
    assert!(big
        .attributes
        .iter()
        .any(|r| r.code == cubin::eiattr::EIATTR_KPARAM_INFO_V2));
    let many = c.kernel("many_params").unwrap();
    assert_eq!(many.params.len(), 17);
}

#[test]
fn banks_globals_and_externs() {
    let (c, _, _) = load("banks", 90);
    assert!(
        c.module_bank(cubin::BANK_USER_CONSTANT).is_some(),
        "__constant__ lives in bank 3"
    );
    assert!(
        c.module_bank(cubin::BANK_ADDRESS_TABLE).is_some(),
        "addresses reach kernels through bank 4"
    );
    let names: BTreeSet<&str> = c.globals.iter().map(|g| g.name.as_str()).collect();
    for g in ["scale_table", "calls"] {
        assert!(
            names.iter().any(|n| n.contains(g)),
            "{g} missing from {names:?}"
        );
    }
    let (p, _, _) = load("printf", 120);
    assert_eq!(p.externs, vec!["vprintf".to_string()]);
    assert_eq!(
        p.kernel("say").unwrap().externs,
        vec!["vprintf".to_string()]
    );
}

#[test]
fn local_kernels_are_found() {
    let (c, _, _) = load("kinds", 90);
    let statik = c.kernel("_Z11static_fillPii").expect("static kernel");
    assert!(statik.local);
    assert!(
        c.kernels.iter().any(|k| k.name.contains("_INTERNAL_")),
        "template over a static function"
    );
    assert!(
        c.kernels.iter().any(|k| k.name.contains("_GLOBAL__N_")),
        "anonymous namespace"
    );
}

#[test]
fn mercury_copies_are_not_placed() {
    let (c, _, _) = load("banks", 120);
    for s in &c.sections {
        if s.name.starts_with(".nv.merc.") || s.name.starts_with(".nv.capmerc.") {
            assert_eq!(s.role, cubin::SectionRole::Metadata, "{}", s.name);
        }
    }
    assert_eq!(
        c.banks
            .iter()
            .filter(|b| b.bank == cubin::BANK_ADDRESS_TABLE)
            .count(),
        1
    );
}

#[test]
fn non_cubins_are_typed_errors() {
    assert!(matches!(
        cubin::parse(b"not an elf"),
        Err(cubin::CubinError::Elf(_))
    ));
    let mut bytes = std::fs::read(fixtures().join("vector_add.sm_90.cubin")).unwrap();
    bytes[18] = 62; // e_machine = x86-64
    assert_eq!(cubin::parse(&bytes), Err(cubin::CubinError::NotCuda(62)));
    let mut rel = std::fs::read(fixtures().join("vector_add.sm_90.cubin")).unwrap();
    rel[16] = 1; // ET_REL
    assert_eq!(cubin::parse(&rel), Err(cubin::CubinError::Relocatable));
}
