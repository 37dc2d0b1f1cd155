//! No entry point of the CUDA runtime unwinds into C (issue 18). Each is
//! called with a panic injected under it (`cudart::error::inject_panic`:
//! the next guarded body on this thread panics) and must answer what its
//! guard turns a panic into: `cudaErrorUnknown`, latched for
//! `cudaGetLastError`, or for the entries in the quiet guard (the error
//! queries, registration, the call-configuration push) their fallback,
//! with nothing latched. The panic must be spent by the call, which
//! proves the entry's work ran inside a guard; and the next call must
//! work, which proves the process went on.
//!
//! The list is held to the sources: every function with a foreign ABI
//! that the library defines is probed here or named, with its reason, in
//! [`EXEMPT`].
//!
//! The probes call the `#[no_mangle] extern "C"` functions themselves, by
//! their Rust paths: the very symbols C links against, through the C ABI,
//! with the compiler checking each argument's type against the entry's.
//! The injected panic fires first in the body, before an argument is
//! read, so null pointers and handles stand for every argument and no
//! device is needed.

#[path = "support/entry_scan.rs"]
mod entry_scan;

use cudart::api::{
    device::*, errors::*, graph::*, launch::*, memory::*, registration::*, streams::*,
};
use cudart::error::{disarm_injected_panic, inject_panic, INJECTED_PANIC};
use cudart::types::{Dim3, RUNTIME_VERSION};
use cudart::CudaError;
use std::ffi::{c_char, c_uint, c_void};
use std::path::Path;
use std::ptr::null_mut;

/// What an entry answered, whatever its C return type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Code(CudaError),
    Pointer(usize),
    Number(i64),
    Nothing,
}

impl From<CudaError> for Answer {
    fn from(e: CudaError) -> Self {
        Answer::Code(e)
    }
}

impl From<*const c_char> for Answer {
    fn from(p: *const c_char) -> Self {
        Answer::Pointer(p as usize)
    }
}

impl From<*mut *mut c_void> for Answer {
    fn from(p: *mut *mut c_void) -> Self {
        Answer::Pointer(p as usize)
    }
}

impl From<c_uint> for Answer {
    fn from(v: c_uint) -> Self {
        Answer::Number(v.into())
    }
}

impl From<c_char> for Answer {
    fn from(v: c_char) -> Self {
        Answer::Number(v.into())
    }
}

impl From<()> for Answer {
    fn from((): ()) -> Self {
        Answer::Nothing
    }
}

/// What a panic under the entry must come back as.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// `guard`: `cudaErrorUnknown`, latched as the thread's last error.
    Unknown,
    /// `guard_quiet`: this fallback, with the last error left alone.
    Quiet(Answer),
}

use Expect::{Quiet, Unknown};

/// One entry, called with a panic armed.
struct Probe {
    family: &'static str,
    name: &'static str,
    call: fn() -> Answer,
    expect: Expect,
}

/// A launch shape: any value does, the body never reads it.
const DIM: Dim3 = Dim3 { x: 1, y: 1, z: 1 };

/// Functions the library defines with the C ABI that no probe calls, and
/// why.
const EXEMPT: &[(&str, &str)] = &[(
    "on_exit",
    "private to runtime.rs: libc calls it once, at exit, and it shuts the \
     runtime down for the process; its body runs in guard_quiet",
)];

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

/// Every entry point, by family (the order of the files under src/api).
// The macro wraps safe and unsafe entries alike in `unsafe`.
#[allow(unused_unsafe)]
fn probes() -> Vec<Probe> {
    probes! {
        "device" => {
            cudaGetDeviceCount(null_mut()) => Unknown;
            cudaGetDevice(null_mut()) => Unknown;
            cudaSetDevice(0) => Unknown;
            cudaSetDeviceFlags(0) => Unknown;
            cudaGetDeviceFlags(null_mut()) => Unknown;
            cudaGetDeviceProperties(null_mut(), 0) => Unknown;
            cudaGetDeviceProperties_v2(null_mut(), 0) => Unknown;
            cudaDeviceGetAttribute(null_mut(), 0, 0) => Unknown;
            cudaDeviceGetPCIBusId(null_mut(), 0, 0) => Unknown;
            cudaMemGetInfo(null_mut(), null_mut()) => Unknown;
            cudaDeviceSynchronize() => Unknown;
            cudaDeviceReset() => Unknown;
            cudaDeviceGetStreamPriorityRange(null_mut(), null_mut()) => Unknown;
            cudaDeviceCanAccessPeer(null_mut(), 0, 0) => Unknown;
            cudaDeviceEnablePeerAccess(0, 0) => Unknown;
        }
        "versions" => {
            cudaRuntimeGetVersion(null_mut()) => Unknown;
            cudaDriverGetVersion(null_mut()) => Unknown;
        }
        "function attributes and occupancy" => {
            cudaFuncGetAttributes(null_mut(), null_mut()) => Unknown;
            cudaFuncSetAttribute(null_mut(), 0, 0) => Unknown;
            cudaFuncSetCacheConfig(null_mut(), 0) => Unknown;
            cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(null_mut(), null_mut(), 0, 0, 0)
                => Unknown;
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(null_mut(), null_mut(), 0, 0) => Unknown;
        }
        "errors" => {
            cudaGetLastError() => Quiet(Answer::Code(CudaError::UNKNOWN));
            cudaPeekAtLastError() => Quiet(Answer::Code(CudaError::UNKNOWN));
            cudaGetErrorString(CudaError::SUCCESS)
                => Quiet(Answer::Pointer(CudaError::UNKNOWN.text_ptr() as usize));
            cudaGetErrorName(CudaError::SUCCESS)
                => Quiet(Answer::Pointer(CudaError::UNKNOWN.name_ptr() as usize));
        }
        "capture and graphs" => {
            cudaStreamBeginCapture(null_mut(), 0) => Unknown;
            cudaStreamEndCapture(null_mut(), null_mut()) => Unknown;
            cudaStreamIsCapturing(null_mut(), null_mut()) => Unknown;
            cudaThreadExchangeStreamCaptureMode(null_mut()) => Unknown;
            cudaGraphInstantiate(null_mut(), null_mut(), 0) => Unknown;
            cudaGraphInstantiateWithFlags(null_mut(), null_mut(), 0) => Unknown;
            cudaGraphExecUpdate(null_mut(), null_mut(), null_mut()) => Unknown;
            cudaGraphLaunch(null_mut(), null_mut()) => Unknown;
            cudaGraphDestroy(null_mut()) => Unknown;
            cudaGraphExecDestroy(null_mut()) => Unknown;
            cudaGraphGetNodes(null_mut(), null_mut(), null_mut()) => Unknown;
        }
        "launch" => {
            // Its fallback is the failure nvcc's stub checks for (non-zero).
            __cudaPushCallConfiguration(DIM, DIM, 0, null_mut()) => Quiet(Answer::Number(1));
            __cudaPopCallConfiguration(null_mut(), null_mut(), null_mut(), null_mut()) => Unknown;
            __cudaGetKernel(null_mut(), null_mut()) => Unknown;
            __cudaLaunchKernel(null_mut(), DIM, DIM, null_mut(), 0, null_mut()) => Unknown;
            __cudaLaunchKernel_ptsz(null_mut(), DIM, DIM, null_mut(), 0, null_mut()) => Unknown;
            cudaLaunchKernel(null_mut(), DIM, DIM, null_mut(), 0, null_mut()) => Unknown;
            cudaLaunchKernel_ptsz(null_mut(), DIM, DIM, null_mut(), 0, null_mut()) => Unknown;
            cudaLaunchKernelExC(null_mut(), null_mut(), null_mut()) => Unknown;
            cudaLaunchCooperativeKernel(null_mut(), DIM, DIM, null_mut(), 0, null_mut()) => Unknown;
            cudaConfigureCall(DIM, DIM, 0, null_mut()) => Unknown;
            cudaSetupArgument(null_mut(), 0, 0) => Unknown;
            cudaLaunch(null_mut()) => Unknown;
        }
        "memory" => {
            cudaMalloc(null_mut(), 0) => Unknown;
            cudaMallocPitch(null_mut(), null_mut(), 0, 0) => Unknown;
            cudaFree(null_mut()) => Unknown;
            cudaMallocManaged(null_mut(), 0, 0) => Unknown;
            cudaMallocHost(null_mut(), 0) => Unknown;
            cudaHostAlloc(null_mut(), 0, 0) => Unknown;
            cudaFreeHost(null_mut()) => Unknown;
            cudaHostGetDevicePointer(null_mut(), null_mut(), 0) => Unknown;
            cudaHostRegister(null_mut(), 0, 0) => Unknown;
            cudaHostUnregister(null_mut()) => Unknown;
            cudaPointerGetAttributes(null_mut(), null_mut()) => Unknown;
        }
        "copies and fills" => {
            cudaMemcpy(null_mut(), null_mut(), 0, 0) => Unknown;
            cudaMemcpyAsync(null_mut(), null_mut(), 0, 0, null_mut()) => Unknown;
            cudaMemcpyPeerAsync(null_mut(), 0, null_mut(), 0, 0, null_mut()) => Unknown;
            cudaMemcpyPeer(null_mut(), 0, null_mut(), 0, 0) => Unknown;
            cudaMemcpy2D(null_mut(), 0, null_mut(), 0, 0, 0, 0) => Unknown;
            cudaMemcpy2DAsync(null_mut(), 0, null_mut(), 0, 0, 0, 0, null_mut()) => Unknown;
            cudaMemset(null_mut(), 0, 0) => Unknown;
            cudaMemsetAsync(null_mut(), 0, 0, null_mut()) => Unknown;
        }
        "device variables" => {
            cudaMemcpyToSymbol(null_mut(), null_mut(), 0, 0, 0) => Unknown;
            cudaMemcpyToSymbolAsync(null_mut(), null_mut(), 0, 0, 0, null_mut()) => Unknown;
            cudaMemcpyFromSymbol(null_mut(), null_mut(), 0, 0, 0) => Unknown;
            cudaMemcpyFromSymbolAsync(null_mut(), null_mut(), 0, 0, 0, null_mut()) => Unknown;
            cudaGetSymbolAddress(null_mut(), null_mut()) => Unknown;
            cudaGetSymbolSize(null_mut(), null_mut()) => Unknown;
        }
        "registration" => {
            __cudaRegisterFatBinary(null_mut()) => Quiet(Answer::Pointer(0));
            __cudaRegisterFatBinaryEnd(null_mut()) => Quiet(Answer::Nothing);
            __cudaUnregisterFatBinary(null_mut()) => Quiet(Answer::Nothing);
            __cudaRegisterFunction(
                null_mut(), null_mut(), null_mut(), null_mut(), 0,
                null_mut(), null_mut(), null_mut(), null_mut(), null_mut()
            ) => Quiet(Answer::Nothing);
            __cudaRegisterVar(null_mut(), null_mut(), null_mut(), null_mut(), 0, 0, 0, 0)
                => Quiet(Answer::Nothing);
            __cudaRegisterManagedVar(null_mut(), null_mut(), null_mut(), null_mut(), 0, 0, 0, 0)
                => Quiet(Answer::Nothing);
            // Its fallback refuses the module, as one with a managed
            // variable is refused.
            __cudaInitModule(null_mut()) => Quiet(Answer::Number(0));
        }
        "streams" => {
            cudaStreamCreateWithPriority(null_mut(), 0, 0) => Unknown;
            cudaStreamCreateWithFlags(null_mut(), 0) => Unknown;
            cudaStreamCreate(null_mut()) => Unknown;
            cudaStreamDestroy(null_mut()) => Unknown;
            cudaStreamSynchronize(null_mut()) => Unknown;
            cudaStreamQuery(null_mut()) => Unknown;
            cudaStreamGetFlags(null_mut(), null_mut()) => Unknown;
            cudaStreamGetPriority(null_mut(), null_mut()) => Unknown;
            cudaStreamWaitEvent(null_mut(), null_mut(), 0) => Unknown;
        }
        "events" => {
            cudaEventCreateWithFlags(null_mut(), 0) => Unknown;
            cudaEventCreate(null_mut()) => Unknown;
            cudaEventDestroy(null_mut()) => Unknown;
            cudaEventRecord(null_mut(), null_mut()) => Unknown;
            cudaEventRecordWithFlags(null_mut(), null_mut(), 0) => Unknown;
            cudaEventQuery(null_mut()) => Unknown;
            cudaEventSynchronize(null_mut()) => Unknown;
            cudaEventElapsedTime(null_mut(), null_mut(), null_mut()) => Unknown;
        }
    }
}

/// What went wrong with one probe, if anything.
fn check(p: &Probe) -> Option<String> {
    let _ = cudaGetLastError();
    inject_panic();
    let answer = (p.call)();
    if disarm_injected_panic() {
        return Some(format!(
            "{}: the panic was not spent: the entry ran no guarded body",
            p.name
        ));
    }
    let (wanted, latched) = match p.expect {
        Unknown => (Answer::Code(CudaError::UNKNOWN), CudaError::UNKNOWN),
        Quiet(fallback) => (fallback, CudaError::SUCCESS),
    };
    if answer != wanted {
        return Some(format!("{}: answered {answer:?}, not {wanted:?}", p.name));
    }
    let last = cudaGetLastError();
    if last != latched {
        return Some(format!("{}: left {last} as the last error", p.name));
    }
    // The process goes on: the next call does its work.
    let mut version = 0;
    // SAFETY: a writable int.
    let next = unsafe { cudaRuntimeGetVersion(&mut version) };
    if (next, version) != (CudaError::SUCCESS, RUNTIME_VERSION) {
        return Some(format!(
            "{}: the next call answered {next} (version {version})",
            p.name
        ));
    }
    None
}

#[test]
fn a_panic_under_any_entry_point_comes_back_as_its_code() {
    entry_scan::hush_panics_carrying(INJECTED_PANIC);
    let probes = probes();
    let failures: Vec<String> = probes.iter().filter_map(check).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let families = entry_scan::by_family(probes.iter().map(|p| p.family));
    println!(
        "{} entry points in {} families: {families:?}",
        probes.len(),
        families.len()
    );
}

#[test]
fn every_entry_point_is_probed_or_exempt() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let probed: Vec<&str> = probes().iter().map(|p| p.name).collect();
    entry_scan::assert_probed_or_exempt(&src, &probed, EXEMPT);
}
