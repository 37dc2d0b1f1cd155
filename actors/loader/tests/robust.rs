//! Hostile cubins and modules: truncated, corrupted and random inputs go
//! through parsing, layout, relocation and bank-0 building, and must come
//! back as typed errors (or as a module that is still within bounds), never
//! as a panic, an overflow or a runaway allocation.

use macuda_loader::cubin;
use macuda_loader::image::{build_cbank0, Bases, LaunchShape, Layout, Windows};
use macuda_loader::module;
use proptest::prelude::*;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/cuda/fixtures/{}"),
        name
    ))
    .unwrap()
}

/// Everything the loader does with a cubin, on bytes of unknown quality.
fn exercise(bytes: &[u8]) {
    let Ok(c) = cubin::parse(bytes) else { return };
    let Ok(layout) = Layout::new(&c) else { return };
    let bases = Bases {
        code: 0x7000_0000_0000,
        data: 0x7100_0000_0000,
    };
    if let Ok(image) = layout.build(&c, bases, &|_| Some(0)) {
        assert_eq!(image.code.len() as u64, layout.code_bytes);
        assert_eq!(image.data.len() as u64, layout.data_bytes);
    }
    let shape = LaunchShape {
        grid: [1; 3],
        block: [32, 1, 1],
        dynamic_shared_bytes: 0,
    };
    for k in &c.kernels {
        let args: Vec<Vec<u8>> = k
            .params
            .iter()
            .map(|p| vec![0u8; p.size as usize])
            .collect();
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let _ = build_cbank0(c.sm, k, &shape, Windows::default(), &refs);
    }
}

const CUBINS: [&str; 6] = [
    "banks.sm_90.cubin",
    "banks.sm_120.cubin",
    "params.sm_90.cubin",
    "kinds.sm_120.cubin",
    "printf.sm_90.cubin",
    "shared.sm_120.cubin",
];

#[test]
fn every_truncation_of_a_real_cubin_is_handled() {
    for name in CUBINS {
        let bytes = fixture(name);
        for len in 0..bytes.len() {
            exercise(&bytes[..len]);
        }
        // The whole file still works.
        assert!(cubin::parse(&bytes).is_ok(), "{name}");
    }
}

#[test]
fn lying_sizes_in_section_headers_are_refused_without_allocating() {
    let bytes = fixture("banks.sm_90.cubin");
    let c = cubin::parse(&bytes).unwrap();
    // Make .nv.global (NOBITS: its size is not bounded by the file) claim 2^60 bytes.
    let global = c
        .sections
        .iter()
        .find(|s| s.name == ".nv.global")
        .unwrap()
        .index;
    let shoff = u64::from_le_bytes(bytes[0x28..0x30].try_into().unwrap()) as usize;
    let shentsize = u16::from_le_bytes(bytes[0x3a..0x3c].try_into().unwrap()) as usize;
    let mut bent = bytes.clone();
    let size_at = shoff + global * shentsize + 0x20;
    bent[size_at..size_at + 8].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let c = cubin::parse(&bent).unwrap();
    assert!(matches!(
        Layout::new(&c),
        Err(macuda_loader::image::ImageError::TooLarge { .. })
    ));
    // A PROGBITS section whose size runs past the end of the file.
    let text = c
        .sections
        .iter()
        .find(|s| s.name.starts_with(".text."))
        .unwrap()
        .index;
    let mut past = bytes.clone();
    let size_at = shoff + text * shentsize + 0x20;
    past[size_at..size_at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(matches!(
        cubin::parse(&past),
        Err(cubin::CubinError::Section { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn corrupted_cubins_never_panic(which in 0usize..CUBINS.len(), edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut bytes = fixture(CUBINS[which]);
        // Aim at the ELF header, the section headers and the metadata,
        // where a bad byte changes how everything else is read.
        let shoff = u64::from_le_bytes(bytes[0x28..0x30].try_into().unwrap()) as usize;
        for (at, v) in edits {
            let i = if at.index(2) == 0 { at.index(0x40) } else { shoff + at.index(bytes.len() - shoff) };
            bytes[i] = v;
        }
        exercise(&bytes);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        exercise(&bytes);
        let _ = module::prepare(&bytes, 90);
    }

    #[test]
    fn corrupted_fatbins_never_panic(edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), sm in prop::sample::select(vec![90u32, 120, 121, 100])) {
        let mut bytes = fixture("vector_add.size.fatbin");
        for (at, v) in edits {
            let i = at.index(bytes.len().min(512));
            bytes[i] = v;
        }
        let _ = module::prepare(&bytes, sm);
        let _ = macuda_loader::inspect::inspect(&bytes);
    }
}

/// An ELF header whose section table offset or count is zero was taken for
/// a module with no kernels (issue 18): it is refused, naming why.
#[test]
fn a_cubin_without_a_section_table_is_refused() {
    let good = fixture("vector_add.sm_90.cubin");
    assert!(cubin::parse(&good).is_ok());
    // e_shoff at 0x28 (8 bytes), e_shnum at 0x3c (2 bytes), ELF64.
    for (at, width) in [(0x28usize, 8usize), (0x3c, 2)] {
        let mut bad = good.clone();
        bad[at..at + width].fill(0);
        match cubin::parse(&bad) {
            Err(cubin::CubinError::Elf(why)) => assert!(why.contains("no section table"), "{why}"),
            other => panic!("offset {at:#x} zeroed: {other:?}"),
        }
    }
}
