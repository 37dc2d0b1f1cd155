//! The loader's parsers: fat binaries (with their wrapper and the host
//! objects that carry them) and cubins, each followed through everything
//! the loader does with what it parsed (payload decompression, device
//! selection, layout, relocation, constant bank 0), as `macuda inspect`
//! and module loading do.

use crate::common::{finish, fixture, fuzz};
use macuda_fuzz::{combine, outcome, Rng};
use macuda_loader::cubin;
use macuda_loader::fatbin::{self, Fatbin, FatbinWrapper};
use macuda_loader::image::{build_cbank0, Bases, LaunchShape, Layout, Windows};
use macuda_loader::{inspect, module};
use std::time::Duration;

/// Devices a module is prepared for: both fixture architectures, one
/// older and one newer.
const DEVICE_SMS: [u32; 4] = [75, 90, 120, 121];
/// Where the code and data regions are placed when a layout is built.
const BASES: Bases = Bases {
    code: 0x7000_0000_0000,
    data: 0x7100_0000_0000,
};
/// A one-warp launch, for constant bank 0.
const SHAPE: LaunchShape = LaunchShape {
    grid: [1; 3],
    block: [32, 1, 1],
    dynamic_shared_bytes: 0,
};
/// Fatbins of three compression modes and cubins of two architectures:
/// the smallest fixtures, so a mutation lands in a header often.
const FATBINS: [&str; 4] = [
    "empty.size.fatbin",
    "vector_add.size.fatbin",
    "banks.none.fatbin",
    "dims.speed.fatbin",
];
const CUBINS: [&str; 4] = [
    "empty.sm_90.cubin",
    "vector_add.sm_90.cubin",
    "banks.sm_120.cubin",
    "params.sm_90.cubin",
];
/// Inputs per run: both loader targets parse in microseconds.
const INPUTS: u64 = 12_000;
const TIME: Duration = Duration::from_secs(3);

/// ELF64 header fields: e_type, e_machine, e_entry, e_phoff, e_shoff,
/// e_flags, e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum,
/// e_shstrndx.
const ELF_FIELDS: [usize; 12] = [
    0x10, 0x12, 0x18, 0x20, 0x28, 0x30, 0x34, 0x36, 0x38, 0x3a, 0x3c, 0x3e,
];
/// Section header fields (from its start): sh_name, sh_type, sh_flags,
/// sh_addr, sh_offset, sh_size, sh_link, sh_info, sh_addralign,
/// sh_entsize.
const SECTION_FIELDS: [usize; 10] = [0x00, 0x04, 0x08, 0x10, 0x18, 0x20, 0x28, 0x2c, 0x30, 0x38];
/// Where e_shoff, e_shentsize and e_shnum are.
const E_SHOFF: usize = 0x28;
const E_SHENTSIZE: usize = 0x3a;
const E_SHNUM: usize = 0x3c;
/// Fatbin container header fields (magic, version, header size, entries'
/// size) and, from an entry's start, its kind, header size, payload size,
/// compressed size, options and name, flags and uncompressed size.
const CONTAINER_FIELDS: [usize; 4] = [0, 4, 6, 8];
const ENTRY_FIELDS: [usize; 11] = [
    0x00, 0x04, 0x08, 0x10, 0x14, 0x18, 0x20, 0x24, 0x28, 0x30, 0x38,
];
/// Where the first entry of a container starts.
const FIRST_ENTRY: usize = 0x10;
/// The interesting values section and entry fields get.
const EDGES: [u64; 10] = [
    0,
    1,
    0x40,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 32,
    1 << 62,
    u64::MAX - 0x3f,
    u64::MAX,
];

/// Everything the loader does with bytes that may be a fatbin, a host
/// object or a cubin.
fn exercise_image(bytes: &[u8]) -> u64 {
    let kind = fatbin::classify(bytes);
    let wrapper = outcome(&FatbinWrapper::parse(bytes));
    let objects = outcome(&fatbin::fatbins_in_host_object(bytes));
    let _ = Fatbin::container_len(bytes);
    let parsed = Fatbin::parse(bytes);
    let mut outcomes = vec![kind as u64, wrapper, objects, outcome(&parsed)];
    if let Ok(f) = &parsed {
        assert!(
            f.byte_len() <= bytes.len(),
            "a fatbin longer than its bytes"
        );
        for entry in f.entries() {
            let payload = f.payload(bytes, entry.index);
            if let Ok(p) = &payload {
                assert_eq!(p.len() as u64, entry.data_len(), "payload size");
            }
            outcomes.push(outcome(&payload));
        }
        for sm in DEVICE_SMS {
            outcomes.push(outcome(&f.select(sm)));
        }
    }
    for sm in DEVICE_SMS {
        outcomes.push(outcome(&module::prepare(bytes, sm)));
    }
    let inspected = inspect::inspect(bytes);
    if let Ok(i) = &inspected {
        let _ = inspect::render(i);
    }
    outcomes.push(outcome(&inspected));
    combine(&outcomes)
}

/// Parse a cubin and lay it out, relocate it and build bank 0 for each
/// kernel, as loading a module does.
fn exercise_cubin(bytes: &[u8]) -> u64 {
    let parsed = cubin::parse(bytes);
    let Ok(c) = &parsed else {
        return combine(&[outcome(&parsed), exercise_image(bytes)]);
    };
    let layout = Layout::new(c);
    let mut outcomes = vec![outcome(&parsed), outcome(&layout)];
    if let Ok(layout) = &layout {
        let built = layout.build(c, BASES, &|_| Some(0));
        if let Ok(image) = &built {
            assert_eq!(image.code.len() as u64, layout.code_bytes);
            assert_eq!(image.data.len() as u64, layout.data_bytes);
        }
        outcomes.push(outcome(&built));
    }
    for k in &c.kernels {
        let args: Vec<Vec<u8>> = k
            .params
            .iter()
            .map(|p| vec![0u8; p.size as usize])
            .collect();
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        outcomes.push(outcome(&build_cbank0(
            c.sm,
            k,
            &SHAPE,
            Windows::default(),
            &refs,
        )));
    }
    outcomes.push(exercise_image(bytes));
    combine(&outcomes)
}

fn le_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

fn le_u16(bytes: &[u8], at: usize) -> Option<usize> {
    Some(usize::from(u16::from_le_bytes(
        bytes.get(at..at + 2)?.try_into().ok()?,
    )))
}

/// Write `value`'s low bytes at `at`, if they fit.
fn put(bytes: &mut [u8], at: usize, width: usize, value: u64) {
    if let Some(slot) = bytes.get_mut(at..at + width) {
        slot.copy_from_slice(&value.to_le_bytes()[..width]);
    }
}

/// An edge value into one field of one section header: what the ELF
/// header says, the section table then lies about.
fn mutate_section_header(rng: &mut Rng, bytes: &mut [u8]) {
    let (Some(shoff), Some(entsize), Some(count)) = (
        le_u64(bytes, E_SHOFF),
        le_u16(bytes, E_SHENTSIZE),
        le_u16(bytes, E_SHNUM),
    ) else {
        return;
    };
    let Ok(shoff) = usize::try_from(shoff) else {
        return;
    };
    let index = rng.below(count.max(1));
    let field = *rng.pick(&SECTION_FIELDS).unwrap_or(&0);
    let at = shoff + index * entsize + field;
    let width = if field == 0x04 || field == 0x28 || field == 0x2c || field == 0x00 {
        4
    } else {
        8
    };
    let value = *rng.pick(&EDGES).unwrap_or(&0);
    put(bytes, at, width, value);
}

/// An edge value into a field of the container header or of an entry
/// header (the second entry's start found from the first's sizes).
fn mutate_entry_header(rng: &mut Rng, bytes: &mut [u8]) {
    let mut starts = vec![FIRST_ENTRY];
    if let (Some(header), Some(size)) = (
        le_u16(bytes, FIRST_ENTRY + 4),
        le_u64(bytes, FIRST_ENTRY + 8),
    ) {
        if let Ok(size) = usize::try_from(size) {
            starts.push(FIRST_ENTRY.saturating_add(header).saturating_add(size));
        }
    }
    let value = *rng.pick(&EDGES).unwrap_or(&0);
    if rng.one_in(4) {
        let at = *rng.pick(&CONTAINER_FIELDS).unwrap_or(&0);
        put(bytes, at, if at == 8 { 8 } else { 2 }, value);
        return;
    }
    let start = *rng.pick(&starts).unwrap_or(&FIRST_ENTRY);
    let field = *rng.pick(&ENTRY_FIELDS).unwrap_or(&0);
    let width = if matches!(field, 0x08 | 0x28 | 0x30 | 0x38) {
        8
    } else {
        4
    };
    put(bytes, start + field, width, value);
}

#[test]
fn fatbin() {
    let seeds: Vec<Vec<u8>> = FATBINS.iter().map(|n| fixture(n)).collect();
    let mut fields: Vec<usize> = CONTAINER_FIELDS.to_vec();
    fields.extend(ENTRY_FIELDS.iter().map(|f| FIRST_ENTRY + f));
    let summary = fuzz("fatbin")
        .seeds(seeds)
        .fields(fields)
        .mutate(|rng, input| mutate_entry_header(rng, input))
        .budget(INPUTS, TIME)
        .run(exercise_image);
    finish(&summary);
}

#[test]
fn cubin() {
    let seeds: Vec<Vec<u8>> = CUBINS.iter().map(|n| fixture(n)).collect();
    let summary = fuzz("cubin")
        .seeds(seeds)
        .fields(ELF_FIELDS)
        .mutate(|rng, input| mutate_section_header(rng, input))
        .budget(INPUTS, TIME)
        .run(exercise_cubin);
    finish(&summary);
}
