//! Kernel-name matching with real names: those clang registers for a macOS
//! host compile of tests/cuda/names.cu (tests/cuda/clang/names.macos.txt,
//! written by tests/cuda/clang/names.sh) against the names in nvcc's
//! sm_90 cubin of the same source. Each of the reference's three
//! differences (4.6) appears, and each is what tells the names apart.

use macuda_loader::names::{comparable, NameIndex};

const CUBIN: &[u8] = include_bytes!("../../tests/cuda/fixtures/names.sm_90.cubin");
const CLANG_MACOS: &str = include_str!("../../tests/cuda/clang/names.macos.txt");

fn cubin_names() -> Vec<String> {
    macuda_loader::cubin::parse(CUBIN)
        .expect("the fixture cubin parses")
        .kernels
        .into_iter()
        .map(|k| k.name)
        .collect()
}

fn clang(name_part: &str) -> &'static str {
    CLANG_MACOS
        .lines()
        .find(|l| l.contains(name_part))
        .unwrap_or_else(|| panic!("clang registered no `{name_part}`: {CLANG_MACOS}"))
}

fn demangled(name: &str) -> String {
    cpp_demangle::Symbol::new(name)
        .unwrap()
        .demangle(&Default::default())
        .unwrap()
}

#[test]
fn every_name_clang_registers_finds_its_kernel() {
    let nvcc = cubin_names();
    let index = NameIndex::new(nvcc.clone());
    let expect = [
        ("k64", "_Z3k64Pll"),
        ("u64", "_Z3u64Pmm"),
        ("static_kern", "_Z11static_kernPi"),
        ("anon_kern", "anon_kern"),
        ("twice", "twice"),
        ("negate", "negate"),
        ("plain_c", "plain_c"),
    ];
    assert_eq!(CLANG_MACOS.lines().count(), expect.len());
    for (part, want) in expect {
        let registered = clang(part);
        let found = index
            .find(registered)
            .unwrap_or_else(|| panic!("`{registered}` matched nothing in {nvcc:?}"));
        assert!(found.contains(want), "`{registered}` matched `{found}`");
        assert!(nvcc.contains(&found));
    }
}

#[test]
fn int64_is_long_long_on_the_mac_and_long_in_the_cubin() {
    let (mac, linux) = (clang("k64"), "_Z3k64Pll");
    assert_eq!(mac, "_Z3k64Pxx");
    assert_ne!(demangled(mac), demangled(linux));
    assert_eq!(comparable(mac), comparable(linux));
    // uint64_t likewise; size_t is unsigned long on both.
    assert_eq!(clang("u64"), "_Z3u64Pym");
    assert_eq!(comparable("_Z3u64Pym"), comparable("_Z3u64Pmm"));
}

#[test]
fn the_internal_linkage_marker_is_not_part_of_the_name() {
    let mac = clang("static_kern");
    assert!(mac.starts_with("_ZL"), "{mac}");
    assert_eq!(comparable(mac), comparable("_Z11static_kernPi"));
}

#[test]
fn nvccs_internal_namespace_is_dropped_and_anonymous_ones_agree() {
    let nvcc = cubin_names();
    for part in ["twice", "negate"] {
        let theirs = nvcc.iter().find(|n| n.contains(part)).unwrap();
        assert!(theirs.contains("_INTERNAL_"), "{theirs}");
        let mac = clang(part);
        assert!(!mac.contains("_INTERNAL_"), "{mac}");
        assert_ne!(demangled(mac), demangled(theirs));
        assert_eq!(comparable(mac), comparable(theirs), "{mac} vs {theirs}");
    }
    let anon = nvcc.iter().find(|n| n.contains("anon_kern")).unwrap();
    assert!(
        anon.contains("_GLOBAL__N__"),
        "nvcc names its anonymous namespace: {anon}"
    );
    assert_eq!(comparable(clang("anon_kern")), comparable(anon));
}
