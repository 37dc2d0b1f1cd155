//! No entry of our cuBLAS unwinds into C (issue 18). Each is called with
//! a panic injected under it (`cublas::guard::inject_panic`: the next
//! guarded body on this thread panics) and must answer what its guard
//! turns a panic into: `CUBLAS_STATUS_INTERNAL_ERROR`, or for the status
//! strings the words for a status we do not know. The panic must be spent
//! by the call, which proves the entry's work ran inside a guard; and the
//! next call must work, which proves the process went on.
//!
//! The list is held to the sources: every function with a foreign ABI
//! that the library defines (the GEMM and TRSM macros' included) is
//! probed here or named, with its reason, in [`EXEMPT`].
//!
//! The probes call the `#[no_mangle] extern "C"` functions themselves, by
//! their Rust paths: the very symbols C links against, through the C ABI,
//! with the compiler checking each argument's type against the entry's.
//! The injected panic fires first in the body, before the handle is
//! looked up or an argument read, so a null handle, null pointers and
//! zero sizes stand for every argument and no device is needed.

#[path = "../../tests/support/entry_scan.rs"]
mod entry_scan;

// The library reaches the GPU through the CUDA runtime's C entries: link
// ours (none is called here).
use cudart as _;

use cublas::api::{context::*, gemm::*, info::*, trsm::*};
use cublas::enums::property;
use cublas::guard::{disarm_injected_panic, inject_panic, INJECTED_PANIC};
use cublas::status::{Status, UNRECOGNIZED};
use cublas::VERSION;
use std::ffi::c_char;
use std::path::Path;
use std::ptr::{null, null_mut};

/// What an entry answered, whatever its C return type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Status(Status),
    Pointer(usize),
}

impl From<Status> for Answer {
    fn from(s: Status) -> Self {
        Answer::Status(s)
    }
}

impl From<*const c_char> for Answer {
    fn from(p: *const c_char) -> Self {
        Answer::Pointer(p as usize)
    }
}

/// A panic under a status entry.
const INTERNAL: Answer = Answer::Status(Status::INTERNAL_ERROR);

/// One entry, called with a panic armed.
struct Probe {
    family: &'static str,
    name: &'static str,
    call: fn() -> Answer,
    expect: Answer,
}

/// Functions the library defines with the C ABI that no probe calls, and
/// why. None: every one is an exported entry.
const EXEMPT: &[(&str, &str)] = &[];

macro_rules! probes {
    ($( $family:literal => { $( $entry:ident($($arg:expr),*) => $expect:expr; )+ } )+) => {
        vec![$($(Probe {
            family: $family,
            name: stringify!($entry),
            // SAFETY: the armed panic fires before the body reads an
            // argument, so none of these nulls is dereferenced.
            call: || Answer::from(unsafe { $entry($($arg),*) }),
            expect: $expect,
        },)+)+]
    };
}

/// Every entry, by family. A GEMM's or solve's arguments are, in order:
/// the handle, the operations, the sizes, then each scalar, matrix and
/// leading dimension (and stride, type, count) as the entry takes them.
// The macro wraps safe and unsafe entries alike in `unsafe`.
#[allow(unused_unsafe)]
fn probes() -> Vec<Probe> {
    probes! {
        "handles" => {
            cublasCreate_v2(null_mut()) => INTERNAL;
            cublasDestroy_v2(null_mut()) => INTERNAL;
        }
        "stream" => {
            cublasSetStream_v2(null_mut(), null_mut()) => INTERNAL;
            cublasGetStream_v2(null_mut(), null_mut()) => INTERNAL;
        }
        "modes" => {
            cublasSetMathMode(null_mut(), 0) => INTERNAL;
            cublasGetMathMode(null_mut(), null_mut()) => INTERNAL;
            cublasSetPointerMode_v2(null_mut(), 0) => INTERNAL;
            cublasGetPointerMode_v2(null_mut(), null_mut()) => INTERNAL;
            cublasSetAtomicsMode(null_mut(), 0) => INTERNAL;
            cublasGetAtomicsMode(null_mut(), null_mut()) => INTERNAL;
        }
        "workspace" => {
            cublasSetWorkspace_v2(null_mut(), null_mut(), 0) => INTERNAL;
        }
        "versions" => {
            cublasGetVersion_v2(null_mut(), null_mut()) => INTERNAL;
            cublasGetProperty(property::MAJOR_VERSION, null_mut()) => INTERNAL;
        }
        "typed gemm" => {
            cublasSgemm_v2(
                null_mut(), 0, 0, 0, 0, 0, null(), null(), 0, null(), 0, null(), null_mut(), 0
            ) => INTERNAL;
            cublasDgemm_v2(
                null_mut(), 0, 0, 0, 0, 0, null(), null(), 0, null(), 0, null(), null_mut(), 0
            ) => INTERNAL;
            cublasHgemm(
                null_mut(), 0, 0, 0, 0, 0, null(), null(), 0, null(), 0, null(), null_mut(), 0
            ) => INTERNAL;
        }
        "batched gemm" => {
            cublasSgemmBatched(
                null_mut(), 0, 0, 0, 0, 0, null(), null(), 0, null(), 0, null(), null(), 0, 0
            ) => INTERNAL;
            cublasDgemmBatched(
                null_mut(), 0, 0, 0, 0, 0, null(), null(), 0, null(), 0, null(), null(), 0, 0
            ) => INTERNAL;
            cublasHgemmBatched(
                null_mut(), 0, 0, 0, 0, 0, null(), null(), 0, null(), 0, null(), null(), 0, 0
            ) => INTERNAL;
        }
        "strided gemm" => {
            cublasSgemmStridedBatched(
                null_mut(), 0, 0, 0, 0, 0,
                null(), null(), 0, 0, null(), 0, 0, null(), null_mut(), 0, 0, 0
            ) => INTERNAL;
            cublasDgemmStridedBatched(
                null_mut(), 0, 0, 0, 0, 0,
                null(), null(), 0, 0, null(), 0, 0, null(), null_mut(), 0, 0, 0
            ) => INTERNAL;
            cublasHgemmStridedBatched(
                null_mut(), 0, 0, 0, 0, 0,
                null(), null(), 0, 0, null(), 0, 0, null(), null_mut(), 0, 0, 0
            ) => INTERNAL;
        }
        "gemm typed by argument" => {
            cublasSgemmEx(
                null_mut(), 0, 0, 0, 0, 0,
                null(), null(), 0, 0, null(), 0, 0, null(), null_mut(), 0, 0
            ) => INTERNAL;
            cublasGemmEx(
                null_mut(), 0, 0, 0, 0, 0,
                null(), null(), 0, 0, null(), 0, 0, null(), null_mut(), 0, 0, 0, 0
            ) => INTERNAL;
            cublasGemmBatchedEx(
                null_mut(), 0, 0, 0, 0, 0,
                null(), null(), 0, 0, null(), 0, 0, null(), null(), 0, 0, 0, 0, 0
            ) => INTERNAL;
            cublasGemmStridedBatchedEx(
                null_mut(), 0, 0, 0, 0, 0,
                null(), null(), 0, 0, 0, null(), 0, 0, 0, null(), null_mut(), 0, 0, 0, 0, 0, 0
            ) => INTERNAL;
        }
        "triangular solves" => {
            cublasStrsm_v2(null_mut(), 0, 0, 0, 0, 0, 0, null(), null(), 0, null_mut(), 0)
                => INTERNAL;
            cublasDtrsm_v2(null_mut(), 0, 0, 0, 0, 0, 0, null(), null(), 0, null_mut(), 0)
                => INTERNAL;
            cublasStrsmBatched(null_mut(), 0, 0, 0, 0, 0, 0, null(), null(), 0, null(), 0, 0)
                => INTERNAL;
            cublasDtrsmBatched(null_mut(), 0, 0, 0, 0, 0, 0, null(), null(), 0, null(), 0, 0)
                => INTERNAL;
        }
        "status strings" => {
            cublasGetStatusString(Status::SUCCESS) => Answer::Pointer(UNRECOGNIZED.as_ptr() as usize);
            cublasGetStatusName(Status::SUCCESS) => Answer::Pointer(UNRECOGNIZED.as_ptr() as usize);
        }
        "logger" => {
            cublasLoggerConfigure(0, 0, 0, null()) => INTERNAL;
        }
    }
}

/// What went wrong with one probe, if anything.
fn check(p: &Probe) -> Option<String> {
    inject_panic();
    let answer = (p.call)();
    if disarm_injected_panic() {
        return Some(format!(
            "{}: the panic was not spent: the entry ran no guarded body",
            p.name
        ));
    }
    if answer != p.expect {
        return Some(format!(
            "{}: answered {answer:?}, not {:?}",
            p.name, p.expect
        ));
    }
    // The process goes on: the next call does its work.
    let mut major = 0;
    // SAFETY: a writable int.
    let next = unsafe { cublasGetProperty(property::MAJOR_VERSION, &mut major) };
    if (next, major) != (Status::SUCCESS, VERSION.0) {
        return Some(format!(
            "{}: the next call answered {next:?} (major version {major})",
            p.name
        ));
    }
    None
}

#[test]
fn a_panic_under_any_entry_comes_back_as_its_status() {
    entry_scan::hush_panics_carrying(INJECTED_PANIC);
    let probes = probes();
    let failures: Vec<String> = probes.iter().filter_map(check).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let families = entry_scan::by_family(probes.iter().map(|p| p.family));
    println!(
        "{} entries in {} families: {families:?}",
        probes.len(),
        families.len()
    );
}

#[test]
fn every_entry_is_probed_or_exempt() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let probed: Vec<&str> = probes().iter().map(|p| p.name).collect();
    entry_scan::assert_probed_or_exempt(&src, &probed, EXEMPT);
}
