//! The fatbin reader against real nvcc 13.2 output (tests/cuda/fixtures,
//! built by tests/cuda/build-fixtures.sh): every fixture fatbin agrees with
//! cuobjdump's listing, decompresses to the cubin nvcc wrote on its own, is
//! found inside ELF and Mach-O host objects, and survives truncation and
//! corruption without panicking.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::OnceLock;

use macuda_loader::fatbin::{
    classify, fatbins_in_host_object, flags, Compression, EntryKind, Fatbin, FatbinError, InputKind,
};
use object::{Object as _, ObjectSection as _};
use proptest::prelude::*;

const NAMES: [&str; 8] = [
    "vector_add",
    "dims",
    "banks",
    "fnptr",
    "kinds",
    "params",
    "shared",
    "printf",
];
const MODES: [&str; 3] = ["none", "size", "speed"];

fn fixture_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/cuda/fixtures/"
    ))
}

fn read(name: &str) -> Vec<u8> {
    let path = fixture_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read_text(name: &str) -> String {
    String::from_utf8(read(name)).expect("listing is UTF-8")
}

type Fixture = (&'static str, &'static str, Vec<u8>);

/// Every fixture fatbin as (name, mode, bytes), read once.
fn fatbins() -> &'static [Fixture] {
    static ALL: OnceLock<Vec<Fixture>> = OnceLock::new();
    ALL.get_or_init(|| {
        NAMES
            .iter()
            .flat_map(|n| MODES.iter().map(move |m| (*n, *m)))
            .map(|(n, m)| (n, m, read(&format!("{n}.{m}.fatbin"))))
            .collect()
    })
}

fn fixtures() -> impl Iterator<Item = (&'static str, &'static str, &'static [u8])> {
    fatbins().iter().map(|(n, m, b)| (*n, *m, b.as_slice()))
}

/// One line of `cuobjdump -lelf -lptx`: kind, its number among entries of
/// that kind, and the SM from the file name (`vector_add.size.1.sm_90.cubin`).
#[derive(Debug, PartialEq, Eq)]
struct Listed {
    kind: EntryKind,
    number: usize,
    sm: u32,
}

fn parse_listing(text: &str) -> Vec<Listed> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let (head, file) = line.split_once(':').expect("`KIND file N: NAME`");
            let mut words = head.split_whitespace();
            let kind = match words.next() {
                Some("ELF") => EntryKind::Elf,
                Some("PTX") => EntryKind::Ptx,
                other => panic!("unexpected listing kind {other:?} in {line:?}"),
            };
            assert_eq!(words.next(), Some("file"), "{line:?}");
            let number = words.next().and_then(|n| n.parse().ok()).expect("number");
            let sm = file
                .trim()
                .split('.')
                .find_map(|part| part.strip_prefix("sm_"))
                .and_then(|sm| sm.parse().ok())
                .unwrap_or_else(|| panic!("no sm_NN in {line:?}"));
            Listed { kind, number, sm }
        })
        .collect()
}

#[test]
fn listing_parser_reads_cuobjdump_lines() {
    let listed = parse_listing(
        "ELF file    1: vector_add.size.1.sm_90.cubin\nPTX file    1: vector_add.size.1.sm_120.ptx\n",
    );
    assert_eq!(
        listed,
        [
            Listed {
                kind: EntryKind::Elf,
                number: 1,
                sm: 90
            },
            Listed {
                kind: EntryKind::Ptx,
                number: 1,
                sm: 120
            }
        ]
    );
}

#[test]
fn entries_agree_with_cuobjdump_listing() {
    for (name, mode, bytes) in fixtures() {
        let fatbin = Fatbin::parse(bytes).unwrap_or_else(|e| panic!("{name}.{mode}: {e}"));
        assert_eq!(fatbin.byte_len(), bytes.len(), "{name}.{mode}");
        assert_eq!(
            Fatbin::container_len(&bytes[..16]),
            Ok(bytes.len()),
            "{name}.{mode}"
        );
        let listed = parse_listing(&read_text(&format!("{name}.{mode}.fatbin.list.txt")));
        for kind in [EntryKind::Elf, EntryKind::Ptx] {
            // cuobjdump numbers each kind from 1 in file order.
            let mut want: Vec<&Listed> = listed.iter().filter(|l| l.kind == kind).collect();
            want.sort_by_key(|l| l.number);
            let want: Vec<u32> = want.iter().map(|l| l.sm).collect();
            let got: Vec<u32> = fatbin
                .entries()
                .iter()
                .filter(|e| e.kind == kind)
                .map(|e| e.sm)
                .collect();
            assert_eq!(got, want, "{name}.{mode} {kind:?} entries");
        }
        assert_eq!(fatbin.entries().len(), listed.len(), "{name}.{mode}");
        let ptx = usize::from(name == "vector_add");
        assert_eq!(fatbin.entries().len(), 2 + ptx, "{name}.{mode}");
    }
}

#[test]
fn compression_is_detected_per_mode() {
    for (name, mode, bytes) in fixtures() {
        let fatbin = Fatbin::parse(bytes).unwrap();
        let want = match mode {
            "none" => Compression::None,
            "size" => Compression::Zstd,
            "speed" => Compression::Lz4,
            _ => unreachable!(),
        };
        for e in fatbin.entries() {
            assert_eq!(e.compression, want, "{name}.{mode} entry {}", e.index);
            assert!(!e.arch_specific && !e.family_specific);
            assert_eq!(e.flags & flags::ADDRESS_64, flags::ADDRESS_64);
            if want == Compression::None {
                assert_eq!((e.compressed_size, e.uncompressed_size), (0, 0));
            } else {
                assert!(u64::from(e.compressed_size) <= e.payload.len() as u64);
                assert!(e.uncompressed_size > 0);
            }
        }
    }
}

/// The `.nv.compat` section of a cubin.
fn nv_compat(cubin: &[u8]) -> Vec<u8> {
    let file = object::File::parse(cubin).expect("cubin is ELF");
    let section = file
        .section_by_name(".nv.compat")
        .expect("cubin has .nv.compat");
    section.data().unwrap().to_vec()
}

#[test]
fn elf_payloads_are_the_standalone_cubins() {
    for (name, mode, bytes) in fixtures() {
        let fatbin = Fatbin::parse(bytes).unwrap();
        for sm in [90u32, 120] {
            let cubin = read(&format!("{name}.sm_{sm}.cubin"));
            let entry = fatbin
                .entries()
                .iter()
                .find(|e| e.kind == EntryKind::Elf && e.sm == sm)
                .unwrap_or_else(|| panic!("{name}.{mode}: no sm_{sm} ELF"));
            let payload = fatbin.payload(bytes, entry.index).unwrap();
            assert_eq!(
                matches!(payload, Cow::Borrowed(_)),
                mode == "none",
                "{name}.{mode} sm_{sm}: only uncompressed payloads are borrowed"
            );
            assert_eq!(payload.len(), cubin.len(), "{name}.{mode} sm_{sm} length");
            assert!(
                *payload == cubin[..],
                "{name}.{mode} sm_{sm}: payload differs from {name}.sm_{sm}.cubin"
            );
            assert_eq!(classify(&payload), InputKind::Cubin);
            // sm_100+ entries carry a copy of the cubin's .nv.compat records
            // (28 bytes here) and flag it; sm_90 entries carry neither. The
            // copy starts one byte past the descriptor's blob offset, after
            // a 0 byte, so the descriptor's range is that 0 byte plus all
            // but the last byte of the records.
            if sm >= 100 {
                let records = nv_compat(&cubin);
                assert_eq!(records.len(), 28);
                assert_eq!(entry.flags & flags::COMPAT_BLOB, flags::COMPAT_BLOB);
                assert_eq!(entry.compat.as_deref(), Some(&records[..]));
                let mut shifted = vec![0u8];
                shifted.extend_from_slice(&records[..records.len() - 1]);
                assert_eq!(entry.options.as_deref(), Some(&shifted[..]));
            } else {
                assert_eq!(entry.flags & flags::COMPAT_BLOB, 0);
                assert_eq!((&entry.options, &entry.compat), (&None, &None));
            }
            assert_eq!((entry.major, entry.minor), (1, 8), "{name}.{mode} sm_{sm}");
        }
    }
}

#[test]
fn vector_add_ptx_entry_decodes_to_the_same_text() {
    let texts: Vec<Vec<u8>> = MODES
        .iter()
        .map(|mode| {
            let bytes = read(&format!("vector_add.{mode}.fatbin"));
            let fatbin = Fatbin::parse(&bytes).unwrap();
            let ptx: Vec<_> = fatbin
                .entries()
                .iter()
                .filter(|e| e.kind == EntryKind::Ptx)
                .collect();
            assert_eq!(ptx.len(), 1, "{mode}");
            assert_eq!(ptx[0].sm, 120);
            assert_eq!(ptx[0].label(), "compute_120 PTX");
            // PTX entries record the PTX ISA version: 9.2 for CUDA 13.2.
            assert_eq!((ptx[0].major, ptx[0].minor), (9, 2));
            // The option blob is present but empty (no ptxas options).
            assert_eq!(ptx[0].options.as_deref(), Some(&[][..]));
            let mut text = fatbin.payload(&bytes, ptx[0].index).unwrap().into_owned();
            while text.last() == Some(&0) {
                text.pop();
            }
            text
        })
        .collect();
    assert_eq!(texts[0], texts[1]);
    assert_eq!(texts[0], texts[2]);
    let text = String::from_utf8(texts[0].clone()).unwrap();
    assert!(text.contains(".version 9.2"), "{text}");
    assert!(text.contains(".target sm_120"), "{text}");
}

#[test]
fn select_picks_the_matching_cubin() {
    for (name, mode, bytes) in fixtures() {
        let fatbin = Fatbin::parse(bytes).unwrap();
        let sm_of = |i: usize| {
            let e = &fatbin.entries()[i];
            assert_eq!(e.kind, EntryKind::Elf);
            e.sm
        };
        assert_eq!(fatbin.select(90).map(sm_of), Ok(90), "{name}.{mode}");
        assert_eq!(fatbin.select(120).map(sm_of), Ok(120), "{name}.{mode}");
        assert_eq!(fatbin.select(121).map(sm_of), Ok(120), "{name}.{mode}");
        let mut available = vec!["sm_90 ELF".to_string(), "sm_120 ELF".to_string()];
        if name == "vector_add" {
            available.insert(1, "compute_120 PTX".to_string());
        }
        for device_sm in [89, 100] {
            let err = fatbin.select(device_sm).unwrap_err();
            assert_eq!(
                err,
                FatbinError::NoMatchingCode {
                    device_sm,
                    available: available.clone()
                }
            );
            let msg = err.to_string();
            assert!(msg.contains(&format!("sm_{device_sm}")), "{msg}");
            for a in &available {
                assert!(msg.contains(a.as_str()), "{msg} lacks {a}");
            }
        }
    }
}

fn elf_host_object(sections: &[(&str, &[u8])]) -> Vec<u8> {
    use object::write;
    let mut obj = write::Object::new(
        object::BinaryFormat::Elf,
        object::Architecture::X86_64,
        object::Endianness::Little,
    );
    let text = obj.section_id(write::StandardSection::Text);
    obj.append_section_data(text, &[0xc3; 16], 16);
    for (name, data) in sections {
        let id = obj.add_section(
            Vec::new(),
            name.as_bytes().to_vec(),
            object::SectionKind::ReadOnlyData,
        );
        obj.append_section_data(id, data, 8);
    }
    obj.write().unwrap()
}

fn macho_host_object(sections: &[(&str, &str, &[u8])]) -> Vec<u8> {
    use object::write;
    let mut obj = write::Object::new(
        object::BinaryFormat::MachO,
        object::Architecture::Aarch64,
        object::Endianness::Little,
    );
    let text = obj.section_id(write::StandardSection::Text);
    obj.append_section_data(text, &[0; 16], 4);
    for (segment, name, data) in sections {
        let id = obj.add_section(
            segment.as_bytes().to_vec(),
            name.as_bytes().to_vec(),
            object::SectionKind::ReadOnlyData,
        );
        obj.append_section_data(id, data, 8);
    }
    obj.write().unwrap()
}

#[test]
fn elf_host_object_sections_are_found() {
    let size = read("vector_add.size.fatbin");
    let speed = read("dims.speed.fatbin");
    let wrapper = [0u8; 24];
    let obj = elf_host_object(&[
        (".nvFatBinSegment", &wrapper),
        (".nv_fatbin", &size),
        ("__nv_module_id", b"__NV_MODULE_ID\0"),
    ]);
    assert_eq!(classify(&obj), InputKind::HostObject);
    let found = fatbins_in_host_object(&obj).unwrap();
    assert_eq!(found, vec![size.clone()]);
    let fatbin = Fatbin::parse(&found[0]).unwrap();
    assert_eq!(fatbin, Fatbin::parse(&size).unwrap());

    // -rdc objects use __nv_relfatbin; both kinds are returned in order.
    let obj = elf_host_object(&[("__nv_relfatbin", &speed), (".nv_fatbin", &size)]);
    assert_eq!(fatbins_in_host_object(&obj).unwrap(), vec![speed, size]);

    // An object without CUDA code has no fat binaries.
    let obj = elf_host_object(&[(".rodata.other", b"nothing")]);
    assert_eq!(fatbins_in_host_object(&obj), Ok(Vec::new()));
}

#[test]
fn macho_host_object_sections_are_found() {
    let fat = read("kinds.none.fatbin");
    let obj = macho_host_object(&[
        ("__TEXT", "__nv_fatbin", b"decoy, wrong segment"),
        ("__NV_CUDA", "__fatbin", &[0u8; 24]),
        ("__NV_CUDA", "__nv_fatbin", &fat),
    ]);
    assert_eq!(classify(&obj), InputKind::HostObject);
    let found = fatbins_in_host_object(&obj).unwrap();
    assert_eq!(found, vec![fat.clone()]);
    let fatbin = Fatbin::parse(&found[0]).unwrap();
    assert_eq!(fatbin.select(120).map(|i| fatbin.entries()[i].sm), Ok(120));
}

#[test]
fn inputs_are_classified() {
    for (name, mode, bytes) in fixtures() {
        assert_eq!(classify(bytes), InputKind::Fatbin, "{name}.{mode}");
        assert_eq!(
            fatbins_in_host_object(bytes),
            Ok(vec![bytes.to_vec()]),
            "{name}.{mode}"
        );
    }
    for name in NAMES {
        for sm in [90, 120] {
            let cubin = read(&format!("{name}.sm_{sm}.cubin"));
            assert_eq!(classify(&cubin), InputKind::Cubin, "{name} sm_{sm}");
            assert_eq!(fatbins_in_host_object(&cubin), Err(FatbinError::RawCubin));
            // A cubin is not a fat binary.
            assert!(matches!(
                Fatbin::parse(&cubin),
                Err(FatbinError::BadContainerMagic { offset: 0, .. })
            ));
        }
    }
    let listing = read("vector_add.size.fatbin.list.txt");
    assert_eq!(classify(&listing), InputKind::Unknown);
}

#[test]
fn every_truncation_of_a_fixture_fails_cleanly() {
    for (name, mode, bytes) in fixtures() {
        // Every length through the headers, and every length near the end.
        let head = 0..bytes.len().min(0x200);
        let tail = bytes.len().saturating_sub(0x100)..bytes.len();
        for len in head.chain(tail) {
            let result = Fatbin::parse(&bytes[..len]);
            assert!(
                result.is_err(),
                "{name}.{mode} cut to {len} of {} bytes parsed: {result:?}",
                bytes.len()
            );
        }
    }
}

/// Runs everything a loader would on `bytes`, checking what must hold for
/// any output.
fn exercise(bytes: &[u8]) {
    let _ = classify(bytes);
    let _ = fatbins_in_host_object(bytes);
    let _ = Fatbin::container_len(bytes);
    let Ok(fatbin) = Fatbin::parse(bytes) else {
        return;
    };
    assert!(fatbin.byte_len() <= bytes.len());
    for entry in fatbin.entries() {
        assert!(entry.payload.end <= bytes.len());
        assert!(entry.header_size as usize >= 0x40);
        if let Ok(data) = fatbin.payload(bytes, entry.index) {
            assert_eq!(data.len() as u64, entry.data_len());
        }
    }
    for sm in [75, 90, 100, 120, 121] {
        match fatbin.select(sm) {
            Ok(i) => assert_eq!(fatbin.entries()[i].kind, EntryKind::Elf),
            Err(FatbinError::NoMatchingCode { available, .. }) => {
                assert_eq!(available.len(), fatbin.entries().len())
            }
            Err(other) => panic!("select gave {other:?}"),
        }
    }
}

/// Header byte positions of a fixture: the container header and every
/// entry header.
fn header_positions(bytes: &[u8]) -> Vec<usize> {
    let fatbin = Fatbin::parse(bytes).unwrap();
    let mut at: Vec<usize> = (0..16).collect();
    for e in fatbin.entries() {
        at.extend(e.offset..e.offset + e.header_size as usize);
    }
    at
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(
        prefix in 0usize..4,
        mut bytes in proptest::collection::vec(any::<u8>(), 0..1024),
    ) {
        // Start some inputs like a fatbin, an x86-64 ELF object or a
        // Mach-O object so the deeper paths see random bytes too.
        let start: &[u8] = match prefix {
            0 => &[],
            1 => &[0x50, 0xed, 0x55, 0xba],
            2 => &[0x7f, b'E', b'L', b'F', 2, 1, 1, 0],
            _ => &[0xcf, 0xfa, 0xed, 0xfe],
        };
        let n = start.len().min(bytes.len());
        bytes[..n].copy_from_slice(&start[..n]);
        exercise(&bytes);
    }

    #[test]
    fn random_entries_in_a_valid_container_never_panic(
        body in proptest::collection::vec(any::<u8>(), 0..512),
        mut entry_start in proptest::collection::vec(any::<u8>(), 0x40),
        header_extra in 0u32..0x40,
        exact_fit in any::<bool>(),
        payload_size in 0u64..600,
        compressed_size in 0u32..600,
        scheme in prop::sample::select(vec![0u64, 0x2000, 0x8000, 0xa000, 0x1000]),
        tail_offsets in (
            prop::option::of(0x3cu32..0x90),
            prop::option::of(0x3cu32..0x90),
            0u32..0x40,
        ),
        uncompressed_size in 0u64..2048,
    ) {
        // A well-formed container header, then one entry whose fixed header
        // is random but with sizes and offsets near real ones (half the
        // time sized to fill the container exactly, so parsing can
        // succeed), then random bytes for its tail and payload.
        let (options_offset, name_offset, name_len) = tail_offsets;
        let (options_offset, name_offset) =
            (options_offset.unwrap_or(0), name_offset.unwrap_or(0));
        let payload_size = if exact_fit {
            (body.len() as u64).saturating_sub(u64::from(header_extra))
        } else {
            payload_size
        };
        let compressed_size = if exact_fit {
            compressed_size.min(payload_size as u32)
        } else {
            compressed_size
        };
        entry_start[4..8].copy_from_slice(&(0x40 + header_extra).to_le_bytes());
        entry_start[8..16].copy_from_slice(&payload_size.to_le_bytes());
        entry_start[0x10..0x14].copy_from_slice(&compressed_size.to_le_bytes());
        entry_start[0x14..0x18].copy_from_slice(&options_offset.to_le_bytes());
        entry_start[0x20..0x24].copy_from_slice(&name_offset.to_le_bytes());
        entry_start[0x24..0x28].copy_from_slice(&name_len.to_le_bytes());
        entry_start[0x38..0x40].copy_from_slice(&uncompressed_size.to_le_bytes());
        let flags = u64::from_le_bytes(entry_start[0x28..0x30].try_into().unwrap());
        let flags = (flags & !0xf000) | scheme;
        entry_start[0x28..0x30].copy_from_slice(&flags.to_le_bytes());
        let mut entries = entry_start;
        entries.extend_from_slice(&body);
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&0xBA55_ED50u32.to_le_bytes());
        bytes.extend_from_slice(&1u16.to_le_bytes());
        bytes.extend_from_slice(&0x10u16.to_le_bytes());
        bytes.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&entries);
        exercise(&bytes);
    }

    #[test]
    fn truncated_fixtures_never_panic(which in 0usize..24, cut in any::<prop::sample::Index>()) {
        let (_, _, bytes) = &fatbins()[which];
        let len = cut.index(bytes.len());
        exercise(&bytes[..len]);
        prop_assert!(Fatbin::parse(&bytes[..len]).is_err());
    }

    #[test]
    fn corrupted_headers_never_panic(
        which in 0usize..24,
        pick in any::<prop::sample::Index>(),
        value in any::<u8>(),
    ) {
        let (_, _, original) = &fatbins()[which];
        let positions = header_positions(original);
        let at = positions[pick.index(positions.len())];
        let mut bytes = original.clone();
        bytes[at] = value;
        exercise(&bytes);
    }
}
