//! The module image on real cubins: layout, relocation, bank bindings and
//! constant bank 0, with the driver-area offsets cross-checked against the
//! SASS that reads them.

use macuda_hw::cbank0;
use macuda_loader::cubin::{self, Cubin};
use macuda_loader::image::{
    bank_bindings, build_cbank0, cbank0_bytes, Bases, ImageError, LaunchShape, Layout, Region,
    Windows, CODE_ALIGN, CODE_GUARD_BYTES, DATA_ALIGN,
};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/cuda/fixtures"
    ))
    .join(name)
}

fn load(name: &str, sm: u32) -> Cubin {
    cubin::parse(&std::fs::read(fixture(&format!("{name}.sm_{sm}.cubin"))).unwrap()).unwrap()
}

const BASES: Bases = Bases {
    code: 0x7000_0000_0000,
    data: 0x7100_0000_0000,
};

fn no_externs(_: &str) -> Option<u64> {
    None
}

#[test]
fn layouts_align_code_and_data_and_never_overlap() {
    for name in [
        "vector_add",
        "dims",
        "banks",
        "fnptr",
        "kinds",
        "params",
        "shared",
        "printf",
    ] {
        for sm in [90, 120] {
            let c = load(name, sm);
            let l = Layout::new(&c).unwrap();
            assert_eq!(l.code_reserve, l.code_bytes + CODE_GUARD_BYTES, "{name}");
            let mut spans: Vec<(Region, u64, u64)> = Vec::new();
            for p in &l.placements {
                let s = &c.sections[p.section];
                match p.region {
                    Region::Code => assert_eq!(p.offset % CODE_ALIGN, 0, "{name} {}", p.name),
                    Region::Data => assert_eq!(p.offset % DATA_ALIGN, 0, "{name} {}", p.name),
                }
                assert!(
                    !s.name.starts_with(".nv.constant0"),
                    "bank 0 is per launch, not uploaded"
                );
                assert!(
                    !s.name.starts_with(".nv.merc"),
                    "{name}: mercury copy placed"
                );
                for (r, a, b) in &spans {
                    assert!(
                        *r != p.region || p.offset >= *b || p.offset + p.bytes <= *a,
                        "{name}: overlap"
                    );
                }
                spans.push((p.region, p.offset, p.offset + p.bytes));
            }
            let code_sections = c
                .sections
                .iter()
                .filter(|s| s.role == cubin::SectionRole::Code)
                .count();
            assert_eq!(
                l.placements
                    .iter()
                    .filter(|p| p.region == Region::Code)
                    .count(),
                code_sections
            );
            for k in &c.kernels {
                assert!(
                    l.placement(k.code_section).is_some(),
                    "{name}: {} not placed",
                    k.name
                );
            }
        }
    }
}

#[test]
fn bank4_slots_hold_the_absolute_addresses_of_the_globals() {
    for sm in [90, 120] {
        let c = load("banks", sm);
        let l = Layout::new(&c).unwrap();
        let image = l.build(&c, BASES, &no_externs).unwrap();
        assert_eq!(
            image.relocations_applied, 2,
            "lookup and calls, not the debug frame"
        );
        let bank4 = c.module_bank(cubin::BANK_ADDRESS_TABLE).unwrap();
        let bank4_at = l.placement(bank4.section).unwrap().offset as usize;
        for r in c.relocations.iter().filter(|r| r.target == bank4.section) {
            let sym = &c.symbols[r.symbol as usize];
            let expected = l.address(sym.section.unwrap(), BASES).unwrap() + sym.value;
            let at = bank4_at + r.offset as usize;
            let got = u64::from_le_bytes(image.data[at..at + 8].try_into().unwrap());
            assert_eq!(got, expected, "sm_{sm}: slot for {}", sym.name);
            assert!(got >= BASES.data && got < BASES.data + l.data_bytes);
        }
        // The static table's initial values were copied.
        let lookup = c
            .globals
            .iter()
            .find(|g| g.name.contains("lookup"))
            .unwrap();
        let at = (l.address(lookup.section, BASES).unwrap() - BASES.data + lookup.offset) as usize;
        assert_eq!(
            &image.data[at..at + 4],
            &[3, 0, 1, 0],
            "lookup = {{3, 1, ...}} as u16"
        );
    }
}

#[test]
fn bank_bindings_cover_the_module_banks_padded_to_16() {
    let c = load("banks", 90);
    let l = Layout::new(&c).unwrap();
    let k = c.kernel("scale_by_table").unwrap();
    let b = bank_bindings(&c, &l, BASES, k);
    let banks: Vec<u8> = b.iter().map(|x| x.bank).collect();
    assert!(banks.contains(&3) && banks.contains(&4), "{banks:?}");
    for x in &b {
        assert_eq!(x.address % cbank0::BANK_ADDRESS_ALIGN, 0);
        assert_eq!(x.bytes % cbank0::BANK_SIZE_ALIGN, 0);
    }
}

#[test]
fn externs_must_be_resolved() {
    let c = load("printf", 90);
    let l = Layout::new(&c).unwrap();
    assert_eq!(
        l.build(&c, BASES, &no_externs).unwrap_err(),
        ImageError::UnresolvedExtern("vprintf".into())
    );
    let stub = 0x7200_0000_0000u64;
    let image = l
        .build(&c, BASES, &|n| (n == "vprintf").then_some(stub))
        .unwrap();
    let bank4 = c.module_bank(cubin::BANK_ADDRESS_TABLE).unwrap();
    let r = c
        .relocations
        .iter()
        .find(|r| c.symbols[r.symbol as usize].name == "vprintf")
        .unwrap();
    let at = (l.placement(bank4.section).unwrap().offset + r.offset) as usize;
    assert_eq!(
        u64::from_le_bytes(image.data[at..at + 8].try_into().unwrap()),
        stub
    );
}

#[test]
fn an_unknown_relocation_type_is_refused_by_number() {
    let c = load("banks", 90);
    let mut bent = c.clone();
    let r = bent
        .relocations
        .iter_mut()
        .find(|r| bent.sections[r.target].name == ".nv.constant4")
        .unwrap();
    r.kind = 75;
    let target = r.target;
    let err = Layout::new(&bent)
        .unwrap()
        .build(&bent, BASES, &no_externs)
        .unwrap_err();
    match err {
        ImageError::UnsupportedRelocation { kind, section, .. } => {
            assert_eq!(kind, 75);
            assert_eq!(section, c.sections[target].name);
        }
        other => panic!("{other:?}"),
    }
    assert!(err_text(&bent).contains("R_CUDA_ABS55_16_34"));
}

fn err_text(c: &Cubin) -> String {
    Layout::new(c)
        .unwrap()
        .build(c, BASES, &no_externs)
        .unwrap_err()
        .to_string()
}

/// Every bank-0 word the SASS of `dims` reads below the parameters must be
/// one the launcher writes (or the memory descriptor, which stays 0).
#[test]
fn driver_words_are_where_the_sass_reads_them() {
    for sm in [90, 120] {
        let area = cbank0::for_sm(sm).unwrap();
        let sass =
            std::fs::read_to_string(fixture(&format!("dims.sm_{sm}.cubin.sass.txt"))).unwrap();
        let mut reads = Vec::new();
        for part in sass.split("c[0x0][0x").skip(1) {
            let hex: String = part.chars().take_while(char::is_ascii_hexdigit).collect();
            reads.push(u32::from_str_radix(&hex, 16).unwrap());
        }
        assert!(!reads.is_empty());
        let known = |w: u32| {
            (area.block_dim..area.block_dim + 12).contains(&w)
                || (area.grid_dim..area.grid_dim + 12).contains(&w)
                || w == area.stack_top
                || w == area.memory_descriptor
                || w >= area.param_base
        };
        for w in &reads {
            assert!(
                known(*w),
                "sm_{sm}: SASS reads c[0x0][{w:#x}], which the launcher does not write"
            );
        }
        // The kernel reads gridDim.z and blockDim.z, so those slots are exercised.
        assert!(
            reads.contains(&(area.grid_dim + 8)) && reads.contains(&(area.block_dim + 8)),
            "sm_{sm}"
        );
        assert!(
            reads.contains(&area.stack_top),
            "sm_{sm}: every kernel loads its stack pointer"
        );
    }
}

#[test]
fn cbank0_holds_the_driver_words_and_the_parameters() {
    for sm in [90, 120] {
        let c = load("vector_add", sm);
        let k = c.kernel("vector_add").unwrap();
        let area = cbank0::for_sm(sm).unwrap();
        let shape = LaunchShape {
            grid: [4096, 2, 3],
            block: [256, 1, 2],
            dynamic_shared_bytes: 512,
        };
        let windows = Windows {
            shared: 0x7F8A_0000_0000,
            local: 0x7F8B_0000_0000,
        };
        let a = 0x1111_2222_3333_4440u64.to_le_bytes();
        let b = 0x5555_6666_7777_8880u64.to_le_bytes();
        let out = 0x9999_aaaa_bbbb_ccc0u64.to_le_bytes();
        let n = 16_777_216i32.to_le_bytes();
        let bank = build_cbank0(sm, k, &shape, windows, &[&a, &b, &out, &n]).unwrap();
        assert_eq!(bank.len() as u64, cbank0_bytes(k, &area));
        assert_eq!(bank.len() % 16, 0);
        let u32_at =
            |o: u32| u32::from_le_bytes(bank[o as usize..o as usize + 4].try_into().unwrap());
        let u64_at =
            |o: u32| u64::from_le_bytes(bank[o as usize..o as usize + 8].try_into().unwrap());
        assert_eq!(
            [
                u32_at(area.block_dim),
                u32_at(area.block_dim + 4),
                u32_at(area.block_dim + 8)
            ],
            [256, 1, 2]
        );
        assert_eq!(
            [
                u32_at(area.grid_dim),
                u32_at(area.grid_dim + 4),
                u32_at(area.grid_dim + 8)
            ],
            [4096, 2, 3]
        );
        assert_eq!(u32_at(area.stack_top), cbank0::STACK_TOP);
        assert_eq!(u64_at(area.local_window), windows.local);
        assert_eq!(u64_at(area.memory_descriptor), 0);
        let base = k.param_base;
        assert_eq!(u64_at(base), 0x1111_2222_3333_4440);
        assert_eq!(u64_at(base + 8), 0x5555_6666_7777_8880);
        assert_eq!(u64_at(base + 16), 0x9999_aaaa_bbbb_ccc0);
        assert_eq!(u32_at(base + 24), 16_777_216);
        if let Some(d) = area.dynamic_shared {
            assert_eq!(u32_at(d), 512);
        }
        assert!(matches!(
            build_cbank0(sm, k, &shape, windows, &[&a, &b, &out]),
            Err(ImageError::ParamCount {
                expected: 4,
                given: 3,
                ..
            })
        ));
        assert!(matches!(
            build_cbank0(sm, k, &shape, windows, &[&a, &b, &out, &a]),
            Err(ImageError::ParamSize {
                ordinal: 3,
                expected: 4,
                given: 8,
                ..
            })
        ));
    }
    let c = load("vector_add", 90);
    assert!(matches!(
        build_cbank0(
            75,
            c.kernel("vector_add").unwrap(),
            &LaunchShape {
                grid: [1; 3],
                block: [1; 3],
                dynamic_shared_bytes: 0
            },
            Windows::default(),
            &[]
        ),
        Err(ImageError::UnknownArchitecture(75))
    ));
}

#[test]
fn structs_and_big_blocks_marshal_at_their_offsets() {
    let c = load("params", 90);
    let k = c.kernel("big_param").unwrap();
    let ptr = 0xdead_beef_0000u64.to_le_bytes();
    let big: Vec<u8> = (0..4800u32).map(|i| (i % 251) as u8).collect();
    let shape = LaunchShape {
        grid: [1; 3],
        block: [32, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let bank = build_cbank0(90, k, &shape, Windows::default(), &[&ptr, &big]).unwrap();
    let at = (k.param_base + u32::from(k.params[1].offset)) as usize;
    assert_eq!(&bank[at..at + 4800], &big[..]);
    assert!(bank.len() >= 0x210 + 8 + 4800);
}
