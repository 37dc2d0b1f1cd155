//! Pins the submission formats (push headers, GP entries, USERD, class
//! methods, QMD layouts) to NVIDIA's headers and to what CUDA wrote on the
//! H200, then checks that encoding and decoding are exact inverses and that
//! every value that does not fit is refused with the field's name.
//!
//! Data (tests/data, each file says where it came from):
//! - submission-oracle.json: entries copied from shared/oracle/nv580.json;
//! - submission-headers.json: NVIDIA/open-gpu-doc transcriptions for what the
//!   oracle lacks (Hopper's QMD V04_00, the Hopper/Blackwell compute and copy
//!   classes, dev_usermode);
//! - h200-cuda-qmds.json: the QMD images CUDA wrote on the H200.

use std::collections::BTreeSet;

use macuda_hw::methods::{self, compute, copy, host, usermode, Method};
use macuda_hw::push::{
    self, gp, header, FormatError, GpControl, GpEntry, GpOpcode, GpWord, Level, MethodHeader,
    MethodKind,
};
use macuda_hw::qmd::{
    self, ApiVisibleCallLimit, BankPrefetch, CacheInvalidate, ConstantBank, CwdMembarType,
    DependentAction, DependentSlot, LaunchDescriptor, ProgramPrefetchType, QmdEnum, QmdField,
    QmdLayout, QmdType, QmdVersion, Reduction, ReductionFormat, ReductionOp, ReleaseMembarType,
    ReleaseSlot, SamplerIndex, SmConfig, StructureSize,
};
use macuda_hw::{gpfifo, Field};
use serde_json::Value;

// ---------------------------------------------------------------------------
// Data

fn load(text: &str) -> Value {
    serde_json::from_str(text).expect("test data parses")
}

fn oracle() -> Value {
    load(include_str!("data/submission-oracle.json"))
}

fn headers() -> Value {
    load(include_str!("data/submission-headers.json"))
}

fn cuda_qmds() -> Value {
    load(include_str!("data/h200-cuda-qmds.json"))
}

/// A `[hi, lo]` pair as (hi, lo), whichever order the file wrote it in.
fn hi_lo(v: &Value) -> Option<(u32, u32)> {
    let a = v.get(0)?.as_u64()? as u32;
    let b = v.get(1)?.as_u64()? as u32;
    Some((a.max(b), a.min(b)))
}

fn constant(table: &Value, key: &str) -> Option<u64> {
    table["constants"][key].as_u64()
}

/// A method's offset: a plain constant, or entry 0 of an `(i)` method.
fn method_offset(table: &Value, key: &str) -> Option<u64> {
    constant(table, key).or_else(|| table["indexed"][key][0].as_u64())
}

fn range(table: &Value, key: &str) -> Option<(u32, u32)> {
    hi_lo(&table["bit_ranges"][key])
}

// ---------------------------------------------------------------------------
// QMD layouts

/// Compares every field of `layout` with `table`, returns how many.
fn check_layout(layout: &QmdLayout, table: &Value, prefix: &str) -> usize {
    let mut seen = BTreeSet::new();
    for f in layout.fields() {
        let key = format!("{prefix}{}", f.name);
        let want = match f.index {
            None => range(table, &key),
            Some(i) => hi_lo(&table["indexed"][&key][usize::from(i)]),
        };
        assert_eq!(
            want,
            Some((f.hi, f.lo)),
            "{:?} {key}{}",
            layout.version,
            f.index.map(|i| format!("({i})")).unwrap_or_default()
        );
        assert!(seen.insert((f.name, f.index)), "{f:?} declared twice");
    }
    seen.len()
}

#[test]
fn qmd_v03_fields_match_the_oracle() {
    let n = check_layout(&qmd::V03_00, &oracle(), "NVC6C0_QMDV03_00_");
    assert_eq!(n, 134);
}

#[test]
fn qmd_v04_fields_match_clcbc0qmd() {
    let h = headers();
    let n = check_layout(
        &qmd::V04_00,
        &h["files"]["classes/compute/clcbc0qmd.h"],
        "NVCBC0_QMDV04_00_",
    );
    assert_eq!(n, 142);
}

#[test]
fn qmd_v05_fields_match_the_oracle() {
    let n = check_layout(&qmd::V05_00, &oracle(), "NVCEC0_QMDV05_00_");
    assert_eq!(n, 142);
}

/// `{prefix}{field}_{suffix}`; V03's REDUCTION_FORMAT enumerants end in _32.
fn enum_value(table: &Value, prefix: &str, field: QmdField, suffix: &str) -> u64 {
    let key = format!("{prefix}{}_{suffix}", field.name);
    constant(table, &key)
        .or_else(|| constant(table, &format!("{key}_32")))
        .unwrap_or_else(|| panic!("{key} not in the headers"))
}

fn check_enum<E: QmdEnum + std::fmt::Debug>(
    table: &Value,
    prefix: &str,
    field: QmdField,
    all: &[(E, &str)],
) -> usize {
    for (value, suffix) in all {
        assert_eq!(
            enum_value(table, prefix, field, suffix),
            u64::from(value.raw()),
            "{prefix}{} {value:?}",
            field.name
        );
        // And the decoder maps the raw value back.
        assert_eq!(E::from_raw(field, value.raw()).unwrap().raw(), value.raw());
    }
    all.len()
}

fn check_layout_enums(l: &QmdLayout, table: &Value, prefix: &str) -> usize {
    let mut n = 0;
    if let Some(f) = l.qmd_type {
        n += check_enum(table, prefix, f, QmdType::ALL);
    }
    if let Some(f) = l.is_queue {
        // V03 has no QMD_TYPE: a grid is IS_QUEUE FALSE, a queue TRUE.
        assert_eq!(constant(table, &format!("{prefix}IS_QUEUE_FALSE")), Some(0));
        assert_eq!(constant(table, &format!("{prefix}IS_QUEUE_TRUE")), Some(1));
        assert_eq!(f.width(), 1);
        n += 2;
    }
    n += check_enum(
        table,
        prefix,
        l.program_prefetch_type,
        ProgramPrefetchType::ALL,
    );
    n += check_enum(
        table,
        prefix,
        l.api_visible_call_limit,
        ApiVisibleCallLimit::ALL,
    );
    n += check_enum(table, prefix, l.sampler_index, SamplerIndex::ALL);
    n += check_enum(table, prefix, l.cwd_membar_type, CwdMembarType::ALL);
    for bank in &l.banks[..1] {
        if let Some(f) = bank.prefetch {
            n += check_enum(table, prefix, f, BankPrefetch::ALL);
        }
    }
    for r in &l.releases {
        n += check_enum(table, prefix, r.structure_size, StructureSize::ALL);
        n += check_enum(table, prefix, r.membar_type, ReleaseMembarType::ALL);
        n += check_enum(table, prefix, r.reduction_op, ReductionOp::ALL);
        n += check_enum(table, prefix, r.reduction_format, ReductionFormat::ALL);
        if l.version != QmdVersion::V03_00 {
            // Indexed fields share one set of enumerant names.
            break;
        }
    }
    for d in &l.dependents {
        n += check_enum(table, prefix, d.action, DependentAction::ALL);
    }
    n
}

#[test]
fn qmd_enumerants_match_the_headers() {
    let o = oracle();
    let h = headers();
    let v03 = check_layout_enums(&qmd::V03_00, &o, "NVC6C0_QMDV03_00_");
    let v04 = check_layout_enums(
        &qmd::V04_00,
        &h["files"]["classes/compute/clcbc0qmd.h"],
        "NVCBC0_QMDV04_00_",
    );
    let v05 = check_layout_enums(&qmd::V05_00, &o, "NVCEC0_QMDV05_00_");
    assert!(v03 >= 60 && v04 >= 40 && v05 >= 40, "{v03} {v04} {v05}");
}

#[test]
fn qmd_major_and_size_match_the_versions() {
    for v in QmdVersion::ALL {
        let l = v.layout();
        let bits = v.dwords() * 32;
        assert!(l.fields().iter().all(|f| (f.hi as usize) < bits));
        assert_eq!(l.major_version.width(), 4);
    }
    assert_eq!(QmdVersion::V03_00.dwords() * 4, 256);
    assert_eq!(QmdVersion::V04_00.dwords() * 4, 384);
    assert_eq!(QmdVersion::V05_00.dwords() * 4, 384);
    // The H200's SET_INLINE_QMD_ADDRESS_A INLINE_SIZE values name the same sizes.
    assert_eq!(compute::SET_INLINE_QMD_ADDRESS_A::INLINE_SIZE_INLINE_384, 1);
}

#[test]
fn qmd_version_follows_the_compute_class() {
    use QmdVersion::*;
    let cases = [
        (compute::AMPERE_COMPUTE_A, Some(V03_00)),
        (compute::AMPERE_COMPUTE_B, Some(V03_00)),
        (compute::ADA_COMPUTE_A, Some(V03_00)),
        (compute::HOPPER_COMPUTE_A, Some(V04_00)),
        (compute::BLACKWELL_COMPUTE_A, Some(V05_00)),
        (compute::BLACKWELL_COMPUTE_B, Some(V05_00)),
        (host::HOPPER_CHANNEL_GPFIFO_A, None),
        (copy::HOPPER_DMA_COPY_A, None),
    ];
    for (class, want) in cases {
        assert_eq!(QmdVersion::for_compute_class(class), want, "{class:#x}");
    }
}

// ---------------------------------------------------------------------------
// Classes and methods

/// Checks one method against the first table (of `sources`) that defines
/// it; returns the keys checked, each with the source that served it.
fn check_method(m: &Method, sources: &[(&Value, &str)]) -> Vec<(String, String)> {
    let mut checked = Vec::new();
    let mut find = |suffix: String, what: &str, get: &dyn Fn(&Value, &str) -> Option<u64>| {
        for (table, prefix) in sources {
            if let Some(v) = get(table, &format!("{prefix}{suffix}")) {
                checked.push((suffix.clone(), prefix.to_string()));
                return Some(v);
            }
        }
        panic!(
            "{what} {suffix} in none of {:?}",
            sources.iter().map(|s| s.1).collect::<Vec<_>>()
        );
    };
    let off = find(m.name.to_string(), "method", &|t, k| method_offset(t, k));
    assert_eq!(off, Some(u64::from(m.offset)), "{} offset", m.name);
    for f in m.fields {
        let key = format!("{}_{}", m.name, f.name);
        let pack =
            |t: &Value, k: &str| range(t, k).map(|(hi, lo)| u64::from(hi) << 32 | u64::from(lo));
        let got = find(key.clone(), "field", &pack);
        assert_eq!(got, Some(u64::from(f.hi) << 32 | u64::from(f.lo)), "{key}");
    }
    for (name, value) in m.values {
        let key = format!("{}_{}", m.name, name);
        let got = find(key.clone(), "value", &|t, k| constant(t, k));
        assert_eq!(got, Some(u64::from(*value)), "{key}");
        // A value belongs to a declared field of the method.
        assert!(
            m.fields.iter().any(|f| name.starts_with(f.name)),
            "{key} names no declared field"
        );
    }
    checked
}

/// The same keys in another class's table must hold the same numbers.
fn check_agreement(m: &Method, other: &Value, prefix: &str) -> usize {
    let mut n = 0;
    let mut same = |suffix: String, ours: u64, get: &dyn Fn(&Value, &str) -> Option<u64>| {
        let theirs = get(other, &format!("{prefix}{suffix}"));
        assert_eq!(theirs, Some(ours), "{prefix}{suffix}");
        n += 1;
    };
    same(m.name.to_string(), u64::from(m.offset), &|t, k| {
        method_offset(t, k)
    });
    for f in m.fields {
        same(
            format!("{}_{}", m.name, f.name),
            u64::from(f.hi) << 32 | u64::from(f.lo),
            &|t, k| range(t, k).map(|(hi, lo)| u64::from(hi) << 32 | u64::from(lo)),
        );
    }
    for (name, value) in m.values {
        same(
            format!("{}_{}", m.name, name),
            u64::from(*value),
            &|t, k| constant(t, k),
        );
    }
    n
}

#[test]
fn classes_match_the_oracle() {
    let o = oracle();
    let mut n = 0;
    for list in [
        usermode::CLASSES,
        host::CLASSES,
        compute::CLASSES,
        copy::CLASSES,
    ] {
        for (name, value) in list {
            assert_eq!(constant(&o, name), Some(u64::from(*value)), "{name}");
            n += 1;
        }
    }
    assert_eq!(n, 16);
}

#[test]
fn host_methods_match_the_oracle() {
    let o = oracle();
    let mut from_c86f = 0;
    let mut total = 0;
    for m in host::ALL {
        // C86F first (the H200's channel class); the oracle leaves some of
        // its methods out, and C56F carries them with the same layout.
        for (key, source) in check_method(m, &[(&o, "NVC86F_"), (&o, "NVC56F_")]) {
            total += 1;
            if source == "NVC86F_" {
                from_c86f += 1;
            }
            // Blackwell's C96F agrees wherever the oracle has it.
            if let Some(v) = o["constants"].get(format!("NVC96F_{key}")) {
                let ours = constant(&o, &format!("{source}{key}"));
                assert_eq!(v.as_u64(), ours, "NVC96F_{key}");
            }
            if let Some(r) = hi_lo(&o["bit_ranges"][format!("NVC96F_{key}")]) {
                assert_eq!(
                    Some(r),
                    range(&o, &format!("{source}{key}")),
                    "NVC96F_{key}"
                );
            }
        }
    }
    assert!(
        total >= 60 && from_c86f >= 25,
        "{total} checked, {from_c86f} from C86F"
    );
    // The one host field that grew: 40-bit semaphore addresses in C56F,
    // 57-bit from C86F on.
    assert_eq!(range(&o, "NVC56F_SEM_ADDR_HI_OFFSET"), Some((7, 0)));
    assert_eq!(
        (host::SEM_ADDR_HI::OFFSET.hi, host::SEM_ADDR_HI::OFFSET.lo),
        (24, 0)
    );
}

/// Keys where HOPPER_COMPUTE_A is wider than the oracle's AMPERE_COMPUTE_A.
const CBC0_WIDER_THAN_C6C0: &[&str] = &[
    "OFFSET_OUT_UPPER_VALUE",
    "SET_REPORT_SEMAPHORE_A_OFFSET_UPPER",
    "SET_SHADER_LOCAL_MEMORY_A_ADDRESS_UPPER",
];
/// SET_INLINE_QMD_ADDRESS_A's upper narrowed to 9 bits (a 41-bit shifted VA).
const CBC0_NARROWER_THAN_C6C0: &[&str] = &["SET_INLINE_QMD_ADDRESS_A_QMD_ADDRESS_SHIFTED8_UPPER"];
/// Keys that AMPERE_COMPUTE_A does not have (C7C0 or CBC0 added them).
const NOT_IN_C6C0: &[&str] = &[
    "SET_REPORT_SEMAPHORE_PAYLOAD_",
    "SET_REPORT_SEMAPHORE_ADDRESS_",
    "REPORT_SEMAPHORE_EXECUTE",
    "SEND_SIGNALING_PCAS2_B_SELECT",
    "SEND_SIGNALING_PCAS2_B_OFFSET_MINUS_ONE",
    "SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INCREMENT_DEPENDENCE",
    "SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INCREMENT_CWD_REF_COUNTER",
    "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C_MAX_PLURAL_TPC_GPC_COUNT",
    "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C_MAX_SINGLETON_TPC_GPC_COUNT",
    "SET_INLINE_QMD_ADDRESS_A_INLINE_SIZE",
];

/// Compares our keys with an older class in the oracle: equal unless listed
/// as changed (then they must differ) or as new (then absent).
fn check_against_older(
    checked: &[(String, String)],
    primary: &Value,
    primary_prefix: &str,
    o: &Value,
    old_prefix: &str,
    changed: &[&str],
    new: &[&str],
) -> usize {
    let mut equal = 0;
    for (key, _) in checked {
        let ours_c = constant(primary, &format!("{primary_prefix}{key}"))
            .or_else(|| method_offset(primary, &format!("{primary_prefix}{key}")));
        let ours_r = range(primary, &format!("{primary_prefix}{key}"));
        let old_c = method_offset(o, &format!("{old_prefix}{key}"));
        let old_r = range(o, &format!("{old_prefix}{key}"));
        if new.iter().any(|p| key.starts_with(p)) {
            assert!(
                old_c.is_none() && old_r.is_none(),
                "{old_prefix}{key} exists"
            );
        } else if changed.contains(&key.as_str()) {
            assert!(
                old_r.is_some() && old_r != ours_r,
                "{old_prefix}{key} did not change"
            );
        } else {
            assert!(
                (ours_r.is_some() && old_r == ours_r) || (ours_c.is_some() && old_c == ours_c),
                "{old_prefix}{key}: oracle {old_c:?}/{old_r:?}, ours {ours_c:?}/{ours_r:?}"
            );
            equal += 1;
        }
    }
    equal
}

#[test]
fn compute_methods_match_clcbc0_the_blackwell_classes_and_the_oracle() {
    let o = oracle();
    let h = headers();
    let cbc0 = &h["files"]["classes/compute/clcbc0.h"];
    let mut checked = Vec::new();
    let mut agreed = 0;
    for m in compute::ALL {
        checked.extend(check_method(m, &[(cbc0, "NVCBC0_")]));
        agreed += check_agreement(m, &h["files"]["classes/compute/clcdc0.h"], "NVCDC0_");
        agreed += check_agreement(m, &h["files"]["classes/compute/clcec0.h"], "NVCEC0_");
    }
    let mut changed = CBC0_WIDER_THAN_C6C0.to_vec();
    changed.extend(CBC0_NARROWER_THAN_C6C0);
    let equal = check_against_older(
        &checked,
        cbc0,
        "NVCBC0_",
        &o,
        "NVC6C0_",
        &changed,
        NOT_IN_C6C0,
    );
    assert!(checked.len() >= 110, "{}", checked.len());
    assert_eq!(agreed, 2 * checked.len());
    assert!(equal >= 70, "only {equal} compared with the oracle");
    // The indexed inline-QMD method steps by one dword.
    for i in 0..8 {
        assert_eq!(
            cbc0["indexed"]["NVCBC0_LOAD_INLINE_QMD_DATA"][i].as_u64(),
            Some(u64::from(compute::load_inline_qmd_data(i as u32)))
        );
    }
}

const C8B5_WIDER_THAN_C6B5: &[&str] = &[
    "SET_SEMAPHORE_A_UPPER",
    "OFFSET_IN_UPPER_UPPER",
    "OFFSET_OUT_UPPER_UPPER",
];
const NOT_IN_C6B5: &[&str] = &[
    "SET_SEMAPHORE_PAYLOAD_UPPER",
    "LAUNCH_DMA_COPY_TYPE",
    "LAUNCH_DMA_MEMORY_SCRUB_ENABLE",
    "LAUNCH_DMA_SEMAPHORE_PAYLOAD_SIZE",
    "LAUNCH_DMA_SEMAPHORE_REDUCTION_FMIN",
    "LAUNCH_DMA_SEMAPHORE_REDUCTION_FMAX",
];

#[test]
fn copy_methods_match_clc8b5_the_blackwell_classes_and_the_oracle() {
    let o = oracle();
    let h = headers();
    let c8b5 = &h["files"]["classes/dma-copy/clc8b5.h"];
    let mut checked = Vec::new();
    let mut agreed = 0;
    for m in copy::ALL {
        checked.extend(check_method(m, &[(c8b5, "NVC8B5_")]));
        agreed += check_agreement(m, &h["files"]["classes/dma-copy/clc9b5.h"], "NVC9B5_");
        agreed += check_agreement(m, &h["files"]["classes/dma-copy/clcab5.h"], "NVCAB5_");
    }
    let equal = check_against_older(
        &checked,
        c8b5,
        "NVC8B5_",
        &o,
        "NVC6B5_",
        C8B5_WIDER_THAN_C6B5,
        NOT_IN_C6B5,
    );
    assert!(checked.len() >= 120, "{}", checked.len());
    assert_eq!(agreed, 2 * checked.len());
    assert!(equal >= 100, "only {equal} compared with the oracle");
}

#[test]
fn usermode_offsets_match_dev_usermode() {
    let h = headers();
    let t = &h["files"]["manuals/turing/tu104/dev_usermode.ref.txt"];
    let base = constant(t, "NV_USERMODE").expect("NV_USERMODE base");
    assert_eq!(base, 0x81_0000);
    for m in usermode::ALL {
        let abs = constant(t, &format!("NV_USERMODE_{}", m.name)).expect(m.name);
        assert_eq!(abs - base, u64::from(m.offset), "{}", m.name);
        for f in m.fields {
            assert_eq!(
                range(t, &format!("NV_USERMODE_{}_{}", m.name, f.name)),
                Some((f.hi, f.lo)),
                "{}.{}",
                m.name,
                f.name
            );
        }
    }
    assert_eq!(usermode::ALL.len(), 3);
    assert!(u64::from(usermode::NOTIFY_CHANNEL_PENDING::BYTE_OFFSET) < usermode::SIZE);
}

#[test]
fn method_lists_are_complete_and_unique() {
    for (module, all) in [
        ("usermode", usermode::ALL),
        ("host", host::ALL),
        ("compute", compute::ALL),
        ("copy", copy::ALL),
    ] {
        let names: BTreeSet<_> = all.iter().map(|m| m.name).collect();
        let offsets: BTreeSet<_> = all.iter().map(|m| m.offset).collect();
        assert_eq!(names.len(), all.len(), "{module}: duplicate name");
        assert_eq!(offsets.len(), all.len(), "{module}: duplicate offset");
        for m in all {
            assert!(
                m.offset <= push::MAX_METHOD,
                "{module}.{} unreachable",
                m.name
            );
        }
    }
    // Host methods live below 0x100, engine methods at or above it.
    assert!(host::ALL.iter().all(|m| m.offset < 0x100));
    assert!(compute::ALL
        .iter()
        .all(|m| m.name == "SET_OBJECT" || m.offset >= 0x100));
    assert!(copy::ALL.iter().all(|m| m.offset >= 0x100));
}

// ---------------------------------------------------------------------------
// Words the reference and the H200 captures show

#[test]
fn semaphore_words_from_the_reference() {
    use host::SEM_EXECUTE as S;
    let word = |parts: &[(Field, u32)]| methods::pack(parts).unwrap();
    // tinygrad's signal: release, WFI, 64-bit, timestamp.
    assert_eq!(
        word(&[
            (S::OPERATION, S::OPERATION_RELEASE),
            (S::RELEASE_WFI, S::RELEASE_WFI_EN),
            (S::PAYLOAD_SIZE, S::PAYLOAD_SIZE_64BIT),
            (S::RELEASE_TIMESTAMP, S::RELEASE_TIMESTAMP_EN),
        ]),
        0x0310_0001
    );
    // tinygrad's wait.
    assert_eq!(
        word(&[
            (S::OPERATION, S::OPERATION_ACQ_CIRC_GEQ),
            (S::PAYLOAD_SIZE, S::PAYLOAD_SIZE_64BIT),
        ]),
        0x0100_0003
    );
    // tinygrad's write, 64- and 32-bit.
    assert_eq!(
        word(&[
            (S::OPERATION, S::OPERATION_RELEASE),
            (S::RELEASE_WFI, S::RELEASE_WFI_EN),
            (S::PAYLOAD_SIZE, S::PAYLOAD_SIZE_64BIT),
        ]),
        0x0110_0001
    );
    assert_eq!(
        word(&[
            (S::OPERATION, S::OPERATION_RELEASE),
            (S::RELEASE_WFI, S::RELEASE_WFI_EN),
        ]),
        0x0010_0001
    );
    // poll_bit.
    assert_eq!(word(&[(S::OPERATION, S::OPERATION_ACQ_AND)]), 4);
    assert_eq!(word(&[(S::OPERATION, S::OPERATION_ACQ_NOR)]), 5);
    // CUDA's acquire on the H200.
    assert_eq!(
        word(&[
            (S::OPERATION, S::OPERATION_ACQ_CIRC_GEQ),
            (S::ACQUIRE_SWITCH_TSG, S::ACQUIRE_SWITCH_TSG_EN),
        ]),
        0x0000_1003
    );
    // A reduction: unsigned increment.
    assert_eq!(
        word(&[
            (S::OPERATION, S::OPERATION_REDUCTION),
            (S::REDUCTION, S::REDUCTION_INC),
            (S::REDUCTION_FORMAT, S::REDUCTION_FORMAT_UNSIGNED),
        ]),
        0xB000_0006
    );
}

#[test]
fn copy_and_compute_words_from_the_reference() {
    use copy::LAUNCH_DMA as D;
    let word = |parts: &[(Field, u32)]| methods::pack(parts).unwrap();
    // 1-D copy (observed on the H200).
    assert_eq!(
        word(&[
            (D::DATA_TRANSFER_TYPE, D::DATA_TRANSFER_TYPE_NON_PIPELINED),
            (D::SRC_MEMORY_LAYOUT, D::SRC_MEMORY_LAYOUT_PITCH),
            (D::DST_MEMORY_LAYOUT, D::DST_MEMORY_LAYOUT_PITCH),
        ]),
        0x182
    );
    // CE semaphore release.
    assert_eq!(
        word(&[
            (D::FLUSH_ENABLE, D::FLUSH_ENABLE_TRUE),
            (
                D::SEMAPHORE_TYPE,
                D::SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE
            ),
        ]),
        0x14
    );
    // First launch of a 4-byte fill without flush.
    assert_eq!(
        word(&[
            (D::DATA_TRANSFER_TYPE, D::DATA_TRANSFER_TYPE_NON_PIPELINED),
            (D::SRC_MEMORY_LAYOUT, D::SRC_MEMORY_LAYOUT_PITCH),
            (D::DST_MEMORY_LAYOUT, D::DST_MEMORY_LAYOUT_PITCH),
            (D::REMAP_ENABLE, D::REMAP_ENABLE_TRUE),
            (D::DST_TYPE, D::DST_TYPE_VIRTUAL),
        ]),
        0x582
    );
    // 8-byte fill components: X <- CONST_A, Y <- CONST_B, 4-byte, 2 dst.
    use copy::SET_REMAP_COMPONENTS as R;
    assert_eq!(
        word(&[
            (R::DST_X, R::DST_X_CONST_A),
            (R::DST_Y, R::DST_Y_CONST_B),
            (R::COMPONENT_SIZE, R::COMPONENT_SIZE_FOUR),
            (R::NUM_DST_COMPONENTS, R::NUM_DST_COMPONENTS_TWO),
        ]),
        0x0103_0054
    );
    // CUDA's I2M: pitch, sysmembar disabled.
    use compute::LAUNCH_DMA as I;
    assert_eq!(
        word(&[
            (I::DST_MEMORY_LAYOUT, I::DST_MEMORY_LAYOUT_PITCH),
            (I::SYSMEMBAR_DISABLE, I::SYSMEMBAR_DISABLE_TRUE),
        ]),
        0x41
    );
    // tinygrad's memory barrier.
    use compute::INVALIDATE_SHADER_CACHES_NO_WFI as N;
    assert_eq!(
        word(&[(N::INSTRUCTION, 1), (N::GLOBAL_DATA, 1), (N::CONSTANT, 1)]),
        0x1011
    );
    // CUDA's fence after a launch: SET_REPORT_SEMAPHORE_D = FLUSH_DISABLE.
    use compute::SET_REPORT_SEMAPHORE_D as RD;
    assert_eq!(word(&[(RD::FLUSH_DISABLE, 1)]), 4);
    assert_eq!(
        word(&[(RD::STRUCTURE_SIZE, RD::STRUCTURE_SIZE_ONE_WORD)]),
        0x1000_0000
    );
    // SET_OBJECT data as CUDA sent it.
    assert_eq!(
        word(&[(host::SET_OBJECT::NVCLASS, compute::HOPPER_COMPUTE_A)]),
        0xCBC0
    );
    assert_eq!(
        word(&[(compute::SET_OBJECT::CLASS_ID, copy::HOPPER_DMA_COPY_A)]),
        0xC8B5
    );
}

#[test]
fn addresses_split_as_cuda_sent_them() {
    // SET_REPORT_SEMAPHORE_A..D n=4: 00000002 0460fff0 ...
    assert_eq!(
        methods::split_address(compute::SET_REPORT_SEMAPHORE_A::OFFSET_UPPER, 0x2_0460_FFF0),
        Ok((2, 0x0460_FFF0))
    );
    // Shared window 0x7F8A_0000_0000: A = 0x7f8a, B = 0.
    assert_eq!(
        methods::split_address(
            compute::SET_SHADER_SHARED_MEMORY_WINDOW_A::BASE_ADDRESS_UPPER,
            0x7F8A_0000_0000
        ),
        Ok((0x7F8A, 0))
    );
    // The copy engine's OFFSET_IN takes 57 bits on Hopper, 49 on Ampere.
    let top = (1u64 << 57) - 1;
    assert_eq!(
        methods::split_address(copy::OFFSET_IN_UPPER::UPPER, top),
        Ok((0x1FF_FFFF, u32::MAX))
    );
    assert_eq!(
        methods::split_address(copy::OFFSET_IN_UPPER::UPPER, top + 1),
        Err(FormatError::TooWide {
            field: push::FieldName::plain("UPPER"),
            value: 1 << 57,
            bits: 57,
        })
    );
    // SEND_PCAS_A holds QMD VA >> 8: 0x2_04e1_0000 -> 0x0204e100.
    assert_eq!(
        methods::pack(&[(
            compute::SEND_PCAS_A::QMD_ADDRESS_SHIFTED8,
            (0x2_04E1_0000u64 >> 8) as u32
        )]),
        Ok(0x0204_E100)
    );
}

#[test]
fn pack_refuses_values_wider_than_their_field() {
    use host::SEM_EXECUTE as S;
    assert_eq!(
        methods::pack(&[(S::OPERATION, 8)]),
        Err(FormatError::TooWide {
            field: push::FieldName::plain("OPERATION"),
            value: 8,
            bits: 3,
        })
    );
    assert!(methods::pack(&[(S::OPERATION, 7), (S::REDUCTION, 15)]).is_ok());
    assert!(methods::pack(&[(S::REDUCTION, 16)]).is_err());
    assert!(methods::pack(&[(compute::SEND_SIGNALING_PCAS2_B::PCAS_ACTION, 0x10)]).is_err());
}

// ---------------------------------------------------------------------------
// Method headers

#[test]
fn header_fields_match_the_oracle() {
    let o = oracle();
    for f in header::ALL {
        assert_eq!(
            range(&o, &format!("NVC56F_DMA_{}", f.name)),
            Some((f.hi, f.lo)),
            "{}",
            f.name
        );
    }
    for (kind, name) in MethodKind::ALL {
        assert_eq!(
            constant(&o, &format!("NVC56F_DMA_{name}")),
            Some(kind as u64),
            "{name}"
        );
        assert_eq!(MethodKind::from_sec_op(kind as u8), Ok(kind));
    }
    // The oracle's per-kind views of the same bits agree with ours.
    for k in ["INCR", "NONINCR", "ONEINCR", "IMMD"] {
        assert_eq!(
            range(&o, &format!("NVC56F_DMA_{k}_SUBCHANNEL")),
            Some((15, 13))
        );
        let opcode = constant(&o, &format!("NVC56F_DMA_{k}_OPCODE_VALUE")).unwrap();
        assert!(MethodKind::from_sec_op(opcode as u8).is_ok(), "{k}");
    }
    assert_eq!(range(&o, "NVC56F_DMA_INCR_COUNT"), Some((28, 16)));
    assert_eq!(range(&o, "NVC56F_DMA_IMMD_ADDRESS"), Some((11, 0)));
    // SEC_OP 6 is reserved and 0/2 are the legacy groups: all refused.
    assert_eq!(constant(&o, "NVC56F_DMA_SEC_OP_RESERVED6"), Some(6));
    for sec_op in [0u8, 2, 6] {
        assert_eq!(
            MethodKind::from_sec_op(sec_op),
            Err(FormatError::ReservedSecOp { sec_op })
        );
    }
    assert_eq!(
        constant(&o, "NVC56F_DMA_NOP"),
        Some(u64::from(push::NOP_WORD))
    );
    assert_eq!(constant(&o, "NVC56F_NUMBER_OF_SUBCHANNELS"), Some(8));
}

#[test]
fn header_examples_from_the_reference() {
    // SET_OBJECT on subchannel 1 with one data word.
    let h = MethodHeader::decode(0x2001_2000).unwrap();
    assert_eq!(
        (h.kind(), h.subchannel(), h.method(), h.count_or_data()),
        (
            MethodKind::Incrementing,
            1,
            compute::SET_OBJECT::BYTE_OFFSET,
            1
        )
    );
    // Five words from SEM_ADDR_LO on subchannel 0: ADDR_LO .. SEM_EXECUTE.
    let h = MethodHeader::decode(0x2005_0017).unwrap();
    assert_eq!(
        (h.kind(), h.subchannel(), h.method(), h.count_or_data()),
        (MethodKind::Incrementing, 0, 0x5C, 5)
    );
    assert_eq!(h.method(), host::SEM_ADDR_LO::BYTE_OFFSET);
    assert_eq!(h.method() + 4 * 4, host::SEM_EXECUTE::BYTE_OFFSET);
    assert_eq!(h.data_dwords(), 5);
    // Three words from NON_THROTTLED_A on subchannel 1.
    let h = MethodHeader::decode(0x2003_20B9).unwrap();
    assert_eq!(
        h.method(),
        compute::SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A::BYTE_OFFSET
    );
    assert_eq!((h.subchannel(), h.count_or_data()), (1, 3));
    // Immediate PCAS2_B action 9 on subchannel 1.
    let h = MethodHeader::decode(0x8009_20B0).unwrap();
    assert_eq!(
        (h.kind(), h.subchannel(), h.method(), h.count_or_data()),
        (
            MethodKind::Immediate,
            1,
            compute::SEND_SIGNALING_PCAS2_B::BYTE_OFFSET,
            compute::SEND_SIGNALING_PCAS2_B::PCAS_ACTION_PREFETCH_SCHEDULE as u16
        )
    );
    assert_eq!(h.data_dwords(), 0);
    // The copy stream observed on the H200: 20048100 .. 20018106 .. 200180c0.
    for (word, method, count) in [
        (0x2004_8100, copy::OFFSET_IN_UPPER::BYTE_OFFSET, 4),
        (0x2001_8106, copy::LINE_LENGTH_IN::BYTE_OFFSET, 1),
        (0x2001_80C0, copy::LAUNCH_DMA::BYTE_OFFSET, 1),
    ] {
        let h = MethodHeader::decode(word).unwrap();
        assert_eq!(
            (h.kind(), h.subchannel(), h.method(), h.count_or_data()),
            (
                MethodKind::Incrementing,
                push::SUBCHANNEL_COPY,
                method,
                count
            ),
            "{word:#x}"
        );
        assert_eq!(h.encode(), word);
    }
    // Building the same headers gives the same words.
    let built = [
        MethodHeader::incrementing(1, 0x0, 1).unwrap().encode(),
        MethodHeader::incrementing(0, 0x5C, 5).unwrap().encode(),
        MethodHeader::incrementing(1, 0x2E4, 3).unwrap().encode(),
        MethodHeader::immediate(1, 0x2C0, 9).unwrap().encode(),
    ];
    assert_eq!(built, [0x2001_2000, 0x2005_0017, 0x2003_20B9, 0x8009_20B0]);
}

#[test]
fn immediate_when_the_value_fits_13_bits() {
    let pcas = compute::SEND_SIGNALING_PCAS2_B::BYTE_OFFSET;
    let (h, data) = MethodHeader::single(1, pcas, 9).unwrap();
    assert_eq!((h.encode(), data), (0x8009_20B0, None));
    let (h, data) = MethodHeader::single(1, pcas, 0x1FFF).unwrap();
    assert_eq!(
        (h.kind(), h.count_or_data(), data),
        (MethodKind::Immediate, 0x1FFF, None)
    );
    let (h, data) = MethodHeader::single(1, pcas, 0x2000).unwrap();
    assert_eq!(
        (h.kind(), h.count_or_data(), data),
        (MethodKind::Incrementing, 1, Some(0x2000))
    );
    let (h, data) = MethodHeader::single(0, 0x6C, 0x0310_0001).unwrap();
    assert_eq!((h.encode(), data), (0x2001_001B, Some(0x0310_0001)));
}

#[test]
fn headers_round_trip() {
    let kinds = MethodKind::ALL.map(|(k, _)| k);
    let mut n = 0;
    for kind in kinds {
        for subchannel in 0..8 {
            for method in [0, 4, 0x5C, 0x2C0, 0x1698, push::MAX_METHOD] {
                for count in [0, 1, 0x1000, push::MAX_COUNT] {
                    let h = MethodHeader::new(kind, subchannel, method, count).unwrap();
                    let w = h.encode();
                    assert_eq!(MethodHeader::decode(w), Ok(h), "{w:#x}");
                    assert_eq!(w >> 29, kind as u32);
                    n += 1;
                }
            }
        }
    }
    assert_eq!(n, 5 * 8 * 6 * 4);
    // Every valid word decodes and encodes back to itself.
    let mut x: u32 = 0x1234_5678;
    let mut valid = 0;
    for _ in 0..20_000 {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        match MethodHeader::decode(x) {
            Ok(h) => {
                assert_eq!(h.encode(), x, "{x:#x}");
                valid += 1;
            }
            Err(FormatError::ReservedSecOp { sec_op }) => assert!([0, 2, 6].contains(&sec_op)),
            Err(FormatError::ReservedBits { .. }) => assert_ne!(x & header::RESERVED_MASK, 0),
            Err(e) => panic!("{x:#x}: {e}"),
        }
    }
    assert!(valid > 5_000, "{valid}");
}

#[test]
fn header_errors_are_typed() {
    use MethodKind::*;
    assert_eq!(
        MethodHeader::new(Incrementing, 8, 0, 1),
        Err(FormatError::SubchannelOutOfRange { subchannel: 8 })
    );
    assert_eq!(
        MethodHeader::new(Incrementing, 0, 0x5E, 1),
        Err(FormatError::MethodUnaligned { method: 0x5E })
    );
    assert_eq!(
        MethodHeader::new(NonIncrementing, 0, 0x4000, 1),
        Err(FormatError::MethodOutOfRange { method: 0x4000 })
    );
    assert_eq!(
        MethodHeader::new(IncrementOnce, 0, 0x3FFC, 0x2000),
        Err(FormatError::CountTooLarge { count: 0x2000 })
    );
    assert_eq!(
        MethodHeader::immediate(1, 0x2C0, 0x2000),
        Err(FormatError::ImmediateTooLarge { data: 0x2000 })
    );
    assert_eq!(
        MethodHeader::decode(0x4001_2000),
        Err(FormatError::ReservedSecOp { sec_op: 2 })
    );
    assert_eq!(
        MethodHeader::decode(push::NOP_WORD),
        Err(FormatError::ReservedSecOp { sec_op: 0 })
    );
    assert_eq!(
        MethodHeader::decode(0x2001_3000),
        Err(FormatError::ReservedBits {
            what: "method header",
            word: 0x1000
        })
    );
    assert_eq!(MethodHeader::end_segment().encode(), 0xE000_0000);
    assert_eq!(
        MethodHeader::decode(0xE000_0000).unwrap().kind(),
        EndSegment
    );
}

// ---------------------------------------------------------------------------
// GP entries and USERD

#[test]
fn gp_fields_and_userd_match_the_oracle() {
    let o = oracle();
    for class in ["NVC86F_", "NVC96F_", "NVC56F_"] {
        for f in gp::ENTRY0.iter().chain(gp::ENTRY1) {
            let key = format!("{class}GP_{}", f.name);
            match range(&o, &key) {
                Some(r) => assert_eq!(r, (f.hi, f.lo), "{key}"),
                // Only the extended base is new in C86F.
                None => assert!(
                    class == "NVC56F_" && f.name == "ENTRY0_PB_EXTENDED_BASE_OPERAND",
                    "{key} missing"
                ),
            }
        }
        assert_eq!(
            constant(&o, &format!("{class}GP_ENTRY__SIZE")),
            Some(gpfifo::ENTRY_BYTES)
        );
    }
    for (op, name) in GpOpcode::ALL {
        assert_eq!(
            constant(&o, &format!("NVC86F_GP_ENTRY1_{name}")),
            Some(op as u64),
            "{name}"
        );
    }
    assert_eq!(
        constant(&o, "NVC86F_GP_ENTRY1_LEVEL_MAIN"),
        Some(Level::Main as u64)
    );
    assert_eq!(
        constant(&o, "NVC86F_GP_ENTRY1_LEVEL_SUBROUTINE"),
        Some(Level::Subroutine as u64)
    );
    assert_eq!(constant(&o, "NVC86F_GP_ENTRY1_SYNC_WAIT"), Some(1));
    assert_eq!(constant(&o, "NVC86F_GP_ENTRY0_FETCH_CONDITIONAL"), Some(1));
    for s in ["struct_Nvc56fControl_struct", "struct_Nvc86fControl_struct"] {
        let st = &o["structs"][s];
        assert_eq!(st["size"].as_u64(), Some(push::USERD_BYTES), "{s}");
        assert_eq!(
            st["fields"]["GPGet"].as_u64(),
            Some(push::USERD_GP_GET),
            "{s}"
        );
        assert_eq!(
            st["fields"]["GPPut"].as_u64(),
            Some(push::USERD_GP_PUT),
            "{s}"
        );
    }
    let c96f = &o["structs"]["struct_Nvc96fControl_struct"];
    assert_eq!(c96f["fields"]["GPPut"].as_u64(), Some(push::USERD_GP_PUT));
    assert_eq!(c96f["size"].as_u64(), Some(push::USERD_BYTES));
}

#[test]
fn gp_examples_from_the_reference() {
    let e = GpEntry::decode(0x0000_4210_0830_0000).unwrap();
    assert_eq!(
        (
            e.address(),
            e.dwords(),
            e.level(),
            e.sync(),
            e.fetch_conditional()
        ),
        (0x10_0830_0000, 16, Level::Subroutine, false, false)
    );
    assert_eq!(
        GpEntry::subroutine(0x10_0830_0000, 16).unwrap().encode(),
        0x0000_4210_0830_0000
    );
    let e = GpEntry::decode(0x0002_3A02_0083_00F4).unwrap();
    assert_eq!(
        (e.address(), e.dwords(), e.level()),
        (0x2_0083_00F4, 142, Level::Subroutine)
    );
    assert_eq!(e.encode(), 0x0002_3A02_0083_00F4);
    // CUDA's first entry of the capture: 220 dwords at 0x2_0080_0000.
    let e = GpEntry::decode(0x0003_7202_0080_0000).unwrap();
    assert_eq!((e.address(), e.dwords()), (0x2_0080_0000, 220));
    assert_eq!(
        GpWord::decode(0x0000_4210_0830_0000),
        Ok(GpWord::Segment(
            GpEntry::subroutine(0x10_0830_0000, 16).unwrap()
        ))
    );
}

#[test]
fn gp_entries_round_trip() {
    let addresses = [0, 4, 0x10_0830_0000, push::GP_ADDRESS_LIMIT - 4];
    let lengths = [1, 16, 142, push::GP_MAX_DWORDS];
    let mut n = 0;
    for address in addresses {
        for dwords in lengths {
            for level in [Level::Main, Level::Subroutine] {
                for sync in [false, true] {
                    for fetch in [false, true] {
                        let e = GpEntry::new(address, dwords, level, sync, fetch).unwrap();
                        let w = e.encode();
                        assert_eq!(GpEntry::decode(w), Ok(e), "{w:#x}");
                        assert_eq!(GpWord::decode(w), Ok(GpWord::Segment(e)));
                        // LENGTH sits at bits 62:42 of the u64, SYNC at 63.
                        assert_eq!((w >> 42) as u32 & push::GP_MAX_DWORDS, dwords);
                        assert_eq!(w >> 63 == 1, sync);
                        assert_eq!(w & 0xFF_FFFF_FFFC, address);
                        n += 1;
                    }
                }
            }
        }
    }
    assert_eq!(n, 4 * 4 * 8);
    for (opcode, _) in GpOpcode::ALL {
        for operand in [0, 1, 0xFFFF_FFFF] {
            let c = GpControl { opcode, operand };
            assert_eq!(GpControl::decode(c.encode()), Ok(c));
            assert_eq!(GpWord::decode(c.encode()), Ok(GpWord::Control(c)));
        }
    }
    let c = GpControl::extended_base(0x1_FFFF).unwrap();
    assert_eq!(c.encode(), 0x0000_0004_01FF_FF00);
}

#[test]
fn gp_errors_are_typed() {
    use FormatError::*;
    assert_eq!(
        GpEntry::subroutine(0x1002, 1),
        Err(GpAddressUnaligned { address: 0x1002 })
    );
    assert_eq!(
        GpEntry::subroutine(1 << 40, 1),
        Err(GpAddressTooLarge { address: 1 << 40 })
    );
    assert_eq!(GpEntry::subroutine(0, 0), Err(GpLengthZero));
    assert_eq!(
        GpEntry::subroutine(0, 1 << 21),
        Err(GpLengthTooLarge { dwords: 1 << 21 })
    );
    let nop = GpControl {
        opcode: GpOpcode::Nop,
        operand: 0,
    }
    .encode();
    assert_eq!(GpEntry::decode(nop), Err(GpKindMismatch { control: true }));
    assert_eq!(
        GpControl::decode(0x0000_4210_0830_0000),
        Err(GpKindMismatch { control: false })
    );
    // Reserved: ENTRY0 bit 1 (old NO_CONTEXT_SWITCH), ENTRY1 bit 8 (old PRIV).
    assert_eq!(
        GpEntry::decode(0x0000_4210_0830_0002),
        Err(ReservedBits {
            what: "GP entry",
            word: 2
        })
    );
    assert_eq!(
        GpEntry::decode(0x0000_4310_0830_0000),
        Err(ReservedBits {
            what: "GP entry",
            word: 1 << 40
        })
    );
    assert!(matches!(
        GpControl::decode(0x0000_0005_0000_0000),
        Err(UnknownValue { value: 5, .. })
    ));
    assert!(matches!(
        GpControl::decode(0x8000_0000_0000_0000),
        Err(ReservedBits { .. })
    ));
    assert!(matches!(
        GpControl::extended_base(0x2_0000),
        Err(TooWide { bits: 17, .. })
    ));
}

// ---------------------------------------------------------------------------
// QMD encode / decode

/// The largest byte value a (lower, upper) pair stored `>> shift` holds.
fn split_max(lower: QmdField, upper: QmdField, shift: u32) -> u64 {
    ((1u64 << (lower.width() + upper.width())) - 1) << shift
}

fn units_max(field: QmdField, shift: u32) -> u64 {
    u64::from(field.max()) << shift
}

/// Every field at the top of its range, every bank, slot and flag in use.
fn extreme(v: QmdVersion) -> LaunchDescriptor {
    let l = v.layout();
    let v03 = v == QmdVersion::V03_00;
    let bank = |i: usize| {
        let b = &l.banks[i];
        ConstantBank {
            valid: true,
            address: split_max(b.addr_lower, b.addr_upper, l.bank_address_shift)
                - ((i as u64) << (l.bank_address_shift + 4)),
            size: units_max(b.size_shifted4, 4) as u32 - 16 * i as u32,
            prefetch: match (v03, i % 3) {
                (true, 0) => BankPrefetch::None,
                (true, _) => BankPrefetch::Post,
                (false, 0) => BankPrefetch::None,
                (false, 1) => BankPrefetch::Pre,
                (false, _) => BankPrefetch::Post,
            },
            invalidate: i.is_multiple_of(2),
        }
    };
    let release = |k: usize| {
        let r = &l.releases[k];
        ReleaseSlot {
            enable: true,
            address: split_max(r.addr_lower, r.addr_upper, 0) - k as u64,
            payload: u64::MAX - k as u64,
            structure_size: [
                StructureSize::FourWords,
                StructureSize::OneWord,
                StructureSize::TwoWords,
            ][k],
            payload64b: k != 1,
            membar: ReleaseMembarType::FeSysmembar,
            reduction: Some(Reduction {
                op: [ReductionOp::Xor, ReductionOp::Inc, ReductionOp::Dec][k],
                format: ReductionFormat::Signed,
            }),
        }
    };
    let dependent = |k: usize| DependentSlot {
        enable: true,
        action: [
            DependentAction::DecrementDependence,
            DependentAction::InvalidateCopySchedule,
        ][k],
        prefetch: true,
        qmd_address: match l.dependents[k].pointer {
            Some(p) => units_max(p, 8),
            None => 0,
        },
    };
    LaunchDescriptor {
        qmd_type: if v03 {
            QmdType::Queue
        } else {
            QmdType::GridGpuGpcCga
        },
        group_id: l.group_id.max() as u8,
        sass_version: 0xFF,
        program_address: split_max(
            l.program_address_lower,
            l.program_address_upper,
            l.program_address_shift,
        ),
        program_prefetch_address: split_max(
            l.program_prefetch_addr_lower_shifted,
            l.program_prefetch_addr_upper_shifted,
            8,
        ),
        program_prefetch_size: units_max(l.program_prefetch_size, 8) as u32,
        program_prefetch_type: ProgramPrefetchType::PrefetchPost,
        register_count: l.register_count.max(),
        barrier_count: l.barrier_count.max(),
        shared_memory_size: units_max(l.shared_memory_size, l.shared_memory_shift) as u32,
        sm_config: Some(SmConfig {
            min: 0x3F,
            target: 0x3E,
            max: 0x3D,
        }),
        shared_allocation_enable: true,
        local_memory_low_size: units_max(l.local_memory_low_size, l.local_memory_shift) as u32,
        local_memory_high_size: units_max(l.local_memory_high_size, l.local_memory_shift) as u32
            - (1 << l.local_memory_shift),
        grid: l.grid.map(|f| f.max()),
        block: l.block.map(|f| f.max()),
        constant_banks: std::array::from_fn(bank),
        releases: std::array::from_fn(release),
        dependents: std::array::from_fn(dependent),
        invalidate: CacheInvalidate {
            texture_header: true,
            texture_sampler: true,
            texture_data: true,
            shader_data: true,
            instruction: true,
            shader_constant: true,
        },
        api_visible_call_limit: ApiVisibleCallLimit::NoCheck,
        sampler_index: SamplerIndex::ViaHeaderIndex,
        cwd_membar_type: CwdMembarType::L1Membar,
        disable_auto_invalidate: true,
        dependence_counter: l.dependence_counter.max(),
        self_copy_on_completion: true,
        sm_global_caching_enable: v03,
        program_pre_exit: !v03,
        arrive_at_latch: (!v03).then_some(u32::MAX),
        wait_on_latch: (!v03).then_some(0xFFFF_FFFE),
        gpc_cga: if v03 { [0; 3] } else { [0x3F, 0x3E, 0x3D] },
    }
}

/// What CUDA and tinygrad write for a small kernel (reference 7.4, 13.1).
fn typical(v: QmdVersion) -> LaunchDescriptor {
    let mut banks = [ConstantBank::default(); 8];
    banks[0] = ConstantBank {
        valid: true,
        address: 0x7F89_AA28_0000,
        size: 0x220,
        prefetch: BankPrefetch::None,
        invalidate: v != QmdVersion::V03_00,
    };
    let mut releases = [ReleaseSlot::default(); 3];
    releases[0] = ReleaseSlot {
        enable: true,
        address: 0x20_0463_7F30,
        payload: 0x1234,
        structure_size: StructureSize::FourWords,
        ..Default::default()
    };
    let mut dependents = [DependentSlot::default(); 2];
    dependents[0] = DependentSlot {
        enable: true,
        action: DependentAction::Schedule,
        prefetch: true,
        qmd_address: 0x2_04E1_0000,
    };
    LaunchDescriptor {
        qmd_type: QmdType::GridCta,
        group_id: 0x3F,
        sass_version: 0x90,
        program_address: 0x7F89_AB7A_0000,
        program_prefetch_address: 0x7F89_AB7A_0000,
        program_prefetch_size: 0xA00,
        register_count: 16,
        barrier_count: 1,
        shared_memory_size: 0x400,
        sm_config: Some(SmConfig::from_kib(32, 32, 228).unwrap()),
        local_memory_high_size: 0x640,
        grid: [4, 1, 1],
        block: [64, 1, 1],
        constant_banks: banks,
        releases,
        dependents,
        invalidate: CacheInvalidate {
            texture_header: true,
            texture_sampler: true,
            texture_data: true,
            shader_data: true,
            instruction: false,
            shader_constant: true,
        },
        api_visible_call_limit: ApiVisibleCallLimit::NoCheck,
        sampler_index: SamplerIndex::ViaHeaderIndex,
        cwd_membar_type: CwdMembarType::L1Sysmembar,
        ..Default::default()
    }
}

/// The smallest QMD that ran on the H200 (reference 13.1).
fn minimal() -> LaunchDescriptor {
    let mut d = LaunchDescriptor {
        register_count: 0x10,
        grid: [1, 1, 1],
        block: [32, 1, 1],
        program_address: 0x7F89_AB7A_0000,
        ..Default::default()
    };
    d.constant_banks[0] = ConstantBank {
        valid: true,
        address: 0x7F89_AA28_0000,
        size: 0x220,
        ..Default::default()
    };
    d
}

fn round_trip(v: QmdVersion, d: &LaunchDescriptor) -> Vec<u32> {
    let words = qmd::encode(v, d).unwrap_or_else(|e| panic!("{v:?}: {e}"));
    assert_eq!(words.len(), v.dwords());
    assert_eq!(qmd::decode(v, &words).as_ref(), Ok(d), "{v:?}");
    words
}

#[test]
fn qmds_round_trip_in_every_version() {
    for v in QmdVersion::ALL {
        round_trip(v, &LaunchDescriptor::default());
        round_trip(v, &typical(v));
        round_trip(v, &minimal());
        let words = round_trip(v, &extreme(v));
        // The extreme descriptor sets bits in most of the QMD.
        let set: u32 = words.iter().map(|w| w.count_ones()).sum();
        assert!(set > 700, "{v:?}: only {set} bits set");
        // Each bank, release and dependent slot survived separately.
        let back = qmd::decode(v, &words).unwrap();
        let addresses: BTreeSet<_> = back.constant_banks.iter().map(|b| b.address).collect();
        assert_eq!(addresses.len(), 8);
        assert_eq!(back.releases[2].payload, u64::MAX - 2);
    }
}

#[test]
fn qmd_fields_land_where_the_headers_put_them() {
    let bits = |words: &[u32], hi: u32, lo: u32| -> u64 {
        // Independent of the crate: assemble the bits one by one.
        (lo..=hi).rev().fold(0u64, |acc, b| {
            (acc << 1) | u64::from((words[(b / 32) as usize] >> (b % 32)) & 1)
        })
    };
    let d = typical(QmdVersion::V04_00);
    let w = qmd::encode(QmdVersion::V04_00, &d).unwrap();
    assert_eq!(bits(&w, 583, 580), 4);
    assert_eq!(bits(&w, 25, 23), 2); // QMD_TYPE GRID_CTA
    assert_eq!(bits(&w, 1055, 1024), 4); // GRID_WIDTH
    assert_eq!(bits(&w, 1167, 1152), 64); // CTA_THREAD_DIMENSION0
    assert_eq!(
        bits(&w, 1567, 1536),
        (0x7F89_AA28_0000u64 >> 6) & 0xFFFF_FFFF
    );
    assert_eq!(bits(&w, 1586, 1568), 0x7F89_AA28_0000u64 >> 38);
    assert_eq!(bits(&w, 1599, 1587), 0x22); // SIZE_SHIFTED4(0)
    assert_eq!(bits(&w, 479, 448), 0x204_E100); // DEPENDENT_QMD0_POINTER
    assert_eq!(bits(&w, 625, 620), 9); // TARGET
    assert_eq!(bits(&w, 619, 614), 0x3A); // MAX

    let d = typical(QmdVersion::V05_00);
    let w = qmd::encode(QmdVersion::V05_00, &d).unwrap();
    assert_eq!(bits(&w, 471, 468), 5);
    assert_eq!(bits(&w, 153, 151), 2);
    assert_eq!(bits(&w, 1055, 1024), 0x7F89_AB7A_0000u64 >> 4 & 0xFFFF_FFFF);
    assert_eq!(bits(&w, 1162, 1152), 0x400 >> 7);
    assert_eq!(bits(&w, 1215, 1200), 0x640 >> 4);
    assert_eq!(bits(&w, 1127, 1120), 1); // CTA_THREAD_DIMENSION2, 8 bits
    assert_eq!(bits(&w, 583, 580), 0, "V05 keeps another field there");

    let d = typical(QmdVersion::V03_00);
    let w = qmd::encode(QmdVersion::V03_00, &d).unwrap();
    assert_eq!(bits(&w, 583, 580), 3);
    assert_eq!(bits(&w, 136, 136), 0); // IS_QUEUE: a grid
    assert_eq!(bits(&w, 1567, 1536), 0xAB7A_0000); // byte address
    assert_eq!(bits(&w, 1055, 1024), 0xAA28_0000); // bank 0, byte address
    assert_eq!(bits(&w, 1623, 1600), 0x640);
    assert_eq!(bits(&w, 807, 800), 0x20); // RELEASE0_ADDRESS_UPPER
}

#[test]
fn cuda_qmds_from_the_h200_decode_and_re_encode_exactly() {
    let data = cuda_qmds();
    let qmds = data["qmds"].as_array().unwrap();
    assert_eq!(qmds.len(), 4);
    let words = |q: &Value| -> Vec<u32> {
        q["words"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_u64().unwrap() as u32)
            .collect()
    };
    for q in qmds {
        let w = words(q);
        let d = qmd::decode(QmdVersion::V04_00, &w).unwrap();
        // Nothing CUDA set lies outside the descriptor.
        assert_eq!(
            qmd::encode(QmdVersion::V04_00, &d).unwrap(),
            w,
            "{}",
            q["what"]
        );
        // And it is not a V05 or V03 QMD.
        assert!(qmd::decode(QmdVersion::V05_00, &w).is_err());
        assert!(matches!(
            qmd::decode(QmdVersion::V03_00, &w),
            Err(FormatError::WrongLength { .. })
        ));
    }

    // add37's join QMD: GRID_NULL, two decrements to go, schedules the next.
    let null = qmd::decode(QmdVersion::V04_00, &words(&qmds[0])).unwrap();
    assert_eq!(null.qmd_type, QmdType::GridNull);
    assert_eq!(null.dependence_counter, 2);
    assert!(null.self_copy_on_completion);
    assert_eq!(
        null.dependents[0],
        DependentSlot {
            enable: true,
            action: DependentAction::Schedule,
            prefetch: false,
            qmd_address: 0x2_04E0_C800,
        }
    );

    // add37's launch (reference 7.4 and the capture's V4 decode line).
    let cta = qmd::decode(QmdVersion::V04_00, &words(&qmds[1])).unwrap();
    assert_eq!(qmds[1]["address"].as_u64(), Some(0x2_04E0_C000));
    assert_eq!(cta.qmd_type, QmdType::GridCta);
    assert_eq!(cta.group_id, 0x3F);
    assert_eq!((cta.grid, cta.block), ([4, 1, 1], [64, 1, 1]));
    assert_eq!((cta.register_count, cta.barrier_count), (0x10, 1));
    assert_eq!(cta.sass_version, 0x90);
    assert_eq!(cta.program_address, 0x7F89_AB7A_0000);
    assert_eq!(
        cta.program_address % 0x1_0000,
        0,
        "CUDA's code is 64 KiB aligned"
    );
    assert_eq!(cta.program_prefetch_address, 0x7F89_AB7A_0000);
    assert_eq!(cta.program_prefetch_size, 0xA * 256);
    assert_eq!(cta.shared_memory_size, 0x400);
    assert_eq!(
        cta.sm_config,
        Some(SmConfig {
            min: 9,
            target: 9,
            max: 0x3A
        })
    );
    assert_eq!(cta.local_memory_high_size, 0x640);
    assert_eq!(cta.api_visible_call_limit, ApiVisibleCallLimit::NoCheck);
    assert_eq!(cta.sampler_index, SamplerIndex::ViaHeaderIndex);
    assert_eq!(cta.cwd_membar_type, CwdMembarType::L1Sysmembar);
    assert_eq!(
        cta.invalidate,
        CacheInvalidate {
            texture_header: true,
            texture_sampler: true,
            texture_data: true,
            shader_data: true,
            instruction: false,
            shader_constant: true,
        }
    );
    assert!(cta.program_pre_exit);
    assert_eq!(cta.arrive_at_latch, Some(8));
    assert_eq!(cta.wait_on_latch, None);
    // Banks 0, 1, 5, 7; bank 5 is bank 0 again with PREFETCH PRE; 7 is 64 KiB.
    let valid: Vec<usize> = (0..8).filter(|&i| cta.constant_banks[i].valid).collect();
    assert_eq!(valid, [0, 1, 5, 7]);
    assert_eq!(cta.constant_banks[0].address, 0x7F89_AA28_0000);
    assert_eq!(cta.constant_banks[0].size, 0x300);
    assert_eq!(cta.constant_banks[5].address, cta.constant_banks[0].address);
    assert_eq!(cta.constant_banks[5].prefetch, BankPrefetch::Pre);
    assert_eq!(cta.constant_banks[7].size, 0x1_0000);
    // RELEASE0 ONE_WORD to the counter; dependent slot 0 decrements the join.
    assert_eq!(
        cta.releases[0],
        ReleaseSlot {
            enable: true,
            address: 0x2_0463_7F3C,
            payload: 6,
            structure_size: StructureSize::OneWord,
            ..Default::default()
        }
    );
    assert_eq!(
        cta.dependents[0],
        DependentSlot {
            enable: true,
            action: DependentAction::DecrementDependence,
            prefetch: true,
            qmd_address: 0x2_04E1_0000,
        }
    );
    assert_eq!(
        qmds[0]["address"].as_u64(),
        Some(cta.dependents[0].qmd_address)
    );

    // dims: grid 3x2x1, block 4x2x1.
    let dims = qmd::decode(QmdVersion::V04_00, &words(&qmds[3])).unwrap();
    assert_eq!((dims.grid, dims.block), ([3, 2, 1], [4, 2, 1]));
    assert_eq!(dims.register_count, 0x12);
}

/// Encodes `d` after `change`, expecting an error that names `field`.
fn refuse(v: QmdVersion, change: impl FnOnce(&mut LaunchDescriptor)) -> FormatError {
    let mut d = typical(v);
    change(&mut d);
    qmd::encode(v, &d).expect_err("encode accepted a value that does not fit")
}

fn field_of(e: &FormatError) -> String {
    match e {
        FormatError::TooWide { field, .. }
        | FormatError::Misaligned { field, .. }
        | FormatError::UnknownValue { field, .. } => field.to_string(),
        FormatError::NotInVersion { field, .. } => field.to_string(),
        FormatError::PartialSmConfig { .. } => "SM_CONFIG".into(),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn qmd_values_that_do_not_fit_name_their_field() {
    use QmdVersion::*;
    type Change = fn(&mut LaunchDescriptor);
    let cases: &[(QmdVersion, Change, &str)] = &[
        // Grid and block widths.
        (V05_00, |d| d.block[2] = 256, "CTA_THREAD_DIMENSION2"),
        (V04_00, |d| d.block[2] = 0x1_0000, "CTA_THREAD_DIMENSION2"),
        (V04_00, |d| d.grid[1] = 0x1_0000, "GRID_HEIGHT"),
        (V03_00, |d| d.grid[2] = 0x1_0000, "CTA_RASTER_DEPTH"),
        (V04_00, |d| d.register_count = 512, "REGISTER_COUNT"),
        (V03_00, |d| d.register_count = 512, "REGISTER_COUNT_V"),
        (V05_00, |d| d.barrier_count = 32, "BARRIER_COUNT"),
        (V04_00, |d| d.group_id = 64, "QMD_GROUP_ID"),
        (
            V04_00,
            |d| d.dependence_counter = 0x1_0000,
            "DEPENDENCE_COUNTER",
        ),
        // Constant banks: alignment and size.
        (
            V04_00,
            |d| d.constant_banks[3].address = 0x1020,
            "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(3)",
        ),
        (
            V05_00,
            |d| d.constant_banks[0].address = 0x1010,
            "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)",
        ),
        (
            V04_00,
            |d| d.constant_banks[0].address = 1 << 57,
            "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)",
        ),
        (
            V03_00,
            |d| d.constant_banks[7].address = 1 << 49,
            "CONSTANT_BUFFER_ADDR_UPPER(7)",
        ),
        (
            V04_00,
            |d| d.constant_banks[0].size = 0x221,
            "CONSTANT_BUFFER_SIZE_SHIFTED4(0)",
        ),
        (
            V05_00,
            |d| d.constant_banks[6].size = 0x2_0000,
            "CONSTANT_BUFFER_SIZE_SHIFTED4(6)",
        ),
        (
            V03_00,
            |d| d.constant_banks[1].prefetch = BankPrefetch::Pre,
            "CONSTANT_BUFFER_PREFETCH",
        ),
        // Program and prefetch addresses.
        (
            V05_00,
            |d| d.program_address += 8,
            "PROGRAM_ADDRESS_LOWER_SHIFTED4",
        ),
        (
            V05_00,
            |d| d.program_address = 1 << 57,
            "PROGRAM_ADDRESS_UPPER_SHIFTED4",
        ),
        (
            V04_00,
            |d| d.program_address = 1 << 57,
            "PROGRAM_ADDRESS_UPPER",
        ),
        (
            V03_00,
            |d| d.program_address = 1 << 49,
            "PROGRAM_ADDRESS_UPPER",
        ),
        (
            V04_00,
            |d| d.program_prefetch_address += 0x80,
            "PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED",
        ),
        (
            V04_00,
            |d| d.program_prefetch_size = 0x1FF01,
            "PROGRAM_PREFETCH_SIZE",
        ),
        (
            V04_00,
            |d| d.program_prefetch_size = 0x2_0000,
            "PROGRAM_PREFETCH_SIZE",
        ),
        // Shared and local memory units.
        (
            V05_00,
            |d| d.shared_memory_size = 0x440,
            "SHARED_MEMORY_SIZE_SHIFTED7",
        ),
        (
            V04_00,
            |d| d.shared_memory_size = 1 << 18,
            "SHARED_MEMORY_SIZE",
        ),
        (
            V05_00,
            |d| d.local_memory_high_size = 0x648,
            "SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4",
        ),
        (
            V05_00,
            |d| d.local_memory_low_size = 1 << 20,
            "SHADER_LOCAL_MEMORY_LOW_SIZE_SHIFTED4",
        ),
        (
            V04_00,
            |d| d.local_memory_high_size = 1 << 24,
            "SHADER_LOCAL_MEMORY_HIGH_SIZE",
        ),
        // The SM config triple.
        (
            V04_00,
            |d| {
                d.sm_config = Some(SmConfig {
                    min: 9,
                    target: 0,
                    max: 0x3A,
                })
            },
            "SM_CONFIG",
        ),
        (
            V04_00,
            |d| {
                d.sm_config = Some(SmConfig {
                    min: 0x40,
                    target: 9,
                    max: 9,
                })
            },
            "MIN_SM_CONFIG_SHARED_MEM_SIZE",
        ),
        // Release and dependent slots.
        (
            V03_00,
            |d| d.releases[0].address = 1 << 40,
            "RELEASE0_ADDRESS_UPPER",
        ),
        (
            V04_00,
            |d| d.releases[2].address = 1 << 57,
            "RELEASE_SEMAPHORE2_ADDR_UPPER",
        ),
        (
            V04_00,
            |d| d.dependents[0].qmd_address = 0x2_04E1_0040,
            "DEPENDENT_QMD0_POINTER",
        ),
        (
            V05_00,
            |d| d.dependents[1].qmd_address = 1 << 40,
            "DEPENDENT_QMD1_POINTER",
        ),
        (
            V03_00,
            |d| d.dependents[1].qmd_address = 0x1000,
            "DEPENDENT_QMD1_POINTER",
        ),
        // Fields a version lacks.
        (V03_00, |d| d.qmd_type = QmdType::GridNull, "QMD_TYPE"),
        (
            V03_00,
            |d| d.program_pre_exit = true,
            "ENABLE_PROGRAM_PRE_EXIT",
        ),
        (
            V03_00,
            |d| d.arrive_at_latch = Some(8),
            "ARRIVE_AT_LATCH_VALID",
        ),
        (V03_00, |d| d.wait_on_latch = Some(0), "WAIT_ON_LATCH_VALID"),
        (V03_00, |d| d.gpc_cga = [1, 1, 1], "GPC_CGA_WIDTH"),
        (
            V04_00,
            |d| d.sm_global_caching_enable = true,
            "SM_GLOBAL_CACHING_ENABLE",
        ),
        (V05_00, |d| d.gpc_cga[2] = 64, "GPC_CGA_DEPTH"),
    ];
    for (v, change, want) in cases {
        let e = refuse(*v, *change);
        assert_eq!(field_of(&e), *want, "{v:?}: {e}");
        // The message names the field too.
        if *want != "SM_CONFIG" {
            assert!(e.to_string().contains(want), "{e}");
        }
    }
    assert!(cases.len() >= 40);
}

#[test]
fn qmd_decode_checks_length_version_and_values() {
    use QmdVersion::*;
    let v04 = qmd::encode(V04_00, &typical(V04_00)).unwrap();
    assert_eq!(
        qmd::decode(V04_00, &v04[..64]),
        Err(FormatError::WrongLength {
            expected: 96,
            found: 64
        })
    );
    // A V04 QMD read as V05: the V05 version nibble holds something else.
    assert!(matches!(
        qmd::decode(V05_00, &v04),
        Err(FormatError::WrongVersion {
            expected: (5, 0),
            ..
        })
    ));
    // A V04_01-style minor version is a different layout.
    let mut w = v04.clone();
    w[18] |= 1; // QMD_MINOR_VERSION, bits 579:576
    assert_eq!(
        qmd::decode(V04_00, &w),
        Err(FormatError::WrongVersion {
            expected: (4, 0),
            found: (4, 1)
        })
    );
    // QMD_TYPE 7 names nothing.
    let mut w = v04.clone();
    w[0] |= 7 << 23;
    assert!(matches!(
        qmd::decode(V04_00, &w),
        Err(FormatError::UnknownValue { field, value: 7 }) if field.name == "QMD_TYPE"
    ));
    // CWD_MEMBAR_TYPE 2 names nothing either (bits 1137:1136).
    let mut w = v04.clone();
    w[35] = (w[35] & !(3 << 16)) | (2 << 16);
    assert!(matches!(
        qmd::decode(V04_00, &w),
        Err(FormatError::UnknownValue { field, value: 2 }) if field.name == "CWD_MEMBAR_TYPE"
    ));
    // A partly set SM config is refused on the way in as well.
    let mut w = v04;
    w[19] &= !(0x3F << 6); // MAX_SM_CONFIG_SHARED_MEM_SIZE, bits 619:614
    assert_eq!(
        qmd::decode(V04_00, &w),
        Err(FormatError::PartialSmConfig {
            min: 9,
            target: 9,
            max: 0
        })
    );
}

#[test]
fn sm_config_from_carve_outs() {
    // CUDA on the H200 and tinygrad (reference 7.4).
    assert_eq!(
        SmConfig::from_kib(32, 32, 228),
        Ok(SmConfig {
            min: 9,
            target: 9,
            max: 0x3A
        })
    );
    assert_eq!(
        SmConfig::from_kib(32, 64, 100),
        Ok(SmConfig {
            min: 9,
            target: 17,
            max: 26
        })
    );
    assert!(matches!(
        SmConfig::from_kib(30, 32, 32),
        Err(FormatError::Misaligned { align: 4, .. })
    ));
    assert!(SmConfig::from_kib(32, 32, 256).is_err());
}

#[test]
fn raw_qmd_access_checks_width() {
    let mut q = qmd::Qmd::new(QmdVersion::V05_00);
    let z = qmd::V05_00.block[2];
    q.set(z, 255).unwrap();
    assert_eq!(q.get(z), 255);
    assert_eq!(
        q.set(z, 256),
        Err(FormatError::TooWide {
            field: z.field_name(),
            value: 256,
            bits: 8
        })
    );
    assert_eq!(q.words()[35], 255);
    assert!(qmd::Qmd::from_words(QmdVersion::V03_00, &[0; 96]).is_err());
}
