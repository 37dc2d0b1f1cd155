//! `cudaError_t`: the codes our entry points answer with (values pinned to
//! NVIDIA's headers in tests/layout.rs), their names and sentences, the
//! per-thread last error, and the guard every entry point runs inside
//! (with the switch tests use to make a guarded body panic).

use macuda_core::find_in_chain;
use macuda_submit::SubmitError;
use macuda_supervisor::HostError;
use std::cell::Cell;
use std::ffi::{c_char, CStr};
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// A CUDA runtime error code, as the C ABI carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct CudaError(pub i32);

macro_rules! codes {
    ($( $name:ident = $value:literal, $cname:literal, $text:literal; )+) => {
        impl CudaError {
            $( pub const $name: CudaError = CudaError($value); )+

            /// NVIDIA's name for the code (`cudaErrorInvalidValue`).
            pub fn name(self) -> &'static CStr {
                match self.0 {
                    $( $value => $cname, )+
                    _ => c"cudaErrorUnknown",
                }
            }

            /// What the code means, in our words.
            pub fn text(self) -> &'static CStr {
                match self.0 {
                    $( $value => $text, )+
                    _ => c"unrecognized error code",
                }
            }
        }

        /// Every code we answer with, for the layout test.
        pub const ALL: &[(&str, i32)] = &[ $( (stringify!($name), $value), )+ ];
    };
}

codes! {
    SUCCESS = 0, c"cudaSuccess", c"no error";
    INVALID_VALUE = 1, c"cudaErrorInvalidValue", c"invalid argument";
    MEMORY_ALLOCATION = 2, c"cudaErrorMemoryAllocation", c"out of memory";
    INITIALIZATION_ERROR = 3, c"cudaErrorInitializationError", c"the runtime could not open a device";
    CUDART_UNLOADING = 4, c"cudaErrorCudartUnloading", c"the runtime is shutting down";
    INVALID_CONFIGURATION = 9, c"cudaErrorInvalidConfiguration", c"invalid launch configuration (grid, block or shared memory)";
    INVALID_PITCH_VALUE = 12, c"cudaErrorInvalidPitchValue", c"invalid pitch";
    INVALID_SYMBOL = 13, c"cudaErrorInvalidSymbol", c"no device variable is registered for this symbol";
    INVALID_HOST_POINTER = 16, c"cudaErrorInvalidHostPointer", c"invalid host pointer";
    INVALID_DEVICE_POINTER = 17, c"cudaErrorInvalidDevicePointer", c"invalid device pointer";
    INVALID_MEMCPY_DIRECTION = 21, c"cudaErrorInvalidMemcpyDirection", c"invalid copy direction";
    MISSING_CONFIGURATION = 52, c"cudaErrorMissingConfiguration", c"a launch without a call configuration";
    INVALID_DEVICE_FUNCTION = 98, c"cudaErrorInvalidDeviceFunction", c"no kernel is registered for this function";
    NO_DEVICE = 100, c"cudaErrorNoDevice", c"no device";
    INVALID_DEVICE = 101, c"cudaErrorInvalidDevice", c"invalid device ordinal";
    STARTUP_FAILURE = 127, c"cudaErrorStartupFailure", c"the runtime failed to start";
    INVALID_KERNEL_IMAGE = 200, c"cudaErrorInvalidKernelImage", c"the registered fat binary cannot be loaded";
    NO_KERNEL_IMAGE_FOR_DEVICE = 209, c"cudaErrorNoKernelImageForDevice", c"no kernel image for this device";
    INVALID_RESOURCE_HANDLE = 400, c"cudaErrorInvalidResourceHandle", c"invalid stream, event or graph handle";
    ILLEGAL_STATE = 401, c"cudaErrorIllegalState", c"the operation is not valid in this state";
    SYMBOL_NOT_FOUND = 500, c"cudaErrorSymbolNotFound", c"symbol not found";
    NOT_READY = 600, c"cudaErrorNotReady", c"work has not completed yet";
    ILLEGAL_ADDRESS = 700, c"cudaErrorIllegalAddress", c"a kernel accessed an address that is not mapped";
    LAUNCH_OUT_OF_RESOURCES = 701, c"cudaErrorLaunchOutOfResources", c"too many resources requested for the launch";
    LAUNCH_TIMEOUT = 702, c"cudaErrorLaunchTimeout", c"the work did not complete in time";
    PEER_ACCESS_ALREADY_ENABLED = 704, c"cudaErrorPeerAccessAlreadyEnabled", c"peer access is already enabled";
    PEER_ACCESS_NOT_ENABLED = 705, c"cudaErrorPeerAccessNotEnabled", c"peer access is not enabled";
    ASSERT = 710, c"cudaErrorAssert", c"a device-side assert failed";
    HOST_MEMORY_ALREADY_REGISTERED = 712, c"cudaErrorHostMemoryAlreadyRegistered", c"host memory is already registered";
    HOST_MEMORY_NOT_REGISTERED = 713, c"cudaErrorHostMemoryNotRegistered", c"host memory is not registered";
    ILLEGAL_INSTRUCTION = 715, c"cudaErrorIllegalInstruction", c"a kernel executed an illegal instruction";
    LAUNCH_FAILURE = 719, c"cudaErrorLaunchFailure", c"a kernel failed (the GPU removed its channel)";
    COOPERATIVE_LAUNCH_TOO_LARGE = 720, c"cudaErrorCooperativeLaunchTooLarge", c"a cooperative launch needs more blocks than can be resident";
    NOT_SUPPORTED = 801, c"cudaErrorNotSupported", c"operation not supported on this device";
    STREAM_CAPTURE_UNSUPPORTED = 900, c"cudaErrorStreamCaptureUnsupported", c"the operation is not permitted while the stream is capturing";
    STREAM_CAPTURE_INVALIDATED = 901, c"cudaErrorStreamCaptureInvalidated", c"the capture was invalidated by an earlier error";
    STREAM_CAPTURE_UNMATCHED = 903, c"cudaErrorStreamCaptureUnmatched", c"the stream is not capturing";
    STREAM_CAPTURE_IMPLICIT = 906, c"cudaErrorStreamCaptureImplicit", c"the legacy stream was used while another stream captures";
    STREAM_CAPTURE_WRONG_THREAD = 908, c"cudaErrorStreamCaptureWrongThread", c"the capture was begun on another thread";
    GRAPH_EXEC_UPDATE_FAILURE = 910, c"cudaErrorGraphExecUpdateFailure", c"the graph's topology differs from the instance's";
    DEVICE_LOST = 46, c"cudaErrorDevicesUnavailable", c"the device was lost: an actor of the driver failed and recovery ran (see the crash report)";
    UNKNOWN = 999, c"cudaErrorUnknown", c"unknown error";
}

impl CudaError {
    pub fn is_success(self) -> bool {
        self.0 == 0
    }

    /// Errors after which the context is unusable: every later call
    /// answers with them (NVIDIA's "sticky" errors).
    pub fn is_sticky(self) -> bool {
        matches!(
            self,
            CudaError::ILLEGAL_ADDRESS
                | CudaError::LAUNCH_FAILURE
                | CudaError::ILLEGAL_INSTRUCTION
                | CudaError::ASSERT
                | CudaError::LAUNCH_TIMEOUT
                | CudaError::DEVICE_LOST
        )
    }

    pub fn name_ptr(self) -> *const c_char {
        self.name().as_ptr()
    }

    pub fn text_ptr(self) -> *const c_char {
        self.text().as_ptr()
    }
}

impl std::fmt::Display for CudaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.name().to_string_lossy(),
            self.0,
            self.text().to_string_lossy()
        )
    }
}

/// The code a failure of the stack below answers with. Faults the GPU
/// reported and lost actors poison the context (sticky), as on NVIDIA's
/// runtime; typed refusals of bad input are the caller's to fix.
pub fn from_host(e: &HostError) -> CudaError {
    let code = classify(e);
    if code.is_sticky() {
        set_sticky(code);
    }
    code
}

fn classify(e: &HostError) -> CudaError {
    if let Some(fault) = find_in_chain::<SubmitError>(e).and_then(|s| match s {
        SubmitError::ChannelFault(f) => Some(f),
        _ => None,
    }) {
        return match fault.xid {
            macuda_hw::rm::XID_MMU_FAULT => CudaError::ILLEGAL_ADDRESS,
            _ => CudaError::LAUNCH_FAILURE,
        };
    }
    if matches!(
        find_in_chain::<SubmitError>(e),
        Some(SubmitError::Stuck { .. })
    ) {
        return CudaError::LAUNCH_TIMEOUT;
    }
    match e {
        HostError::ActorFailed { .. }
        | HostError::Down { .. }
        | HostError::Interrupted { .. }
        | HostError::RecoveryTimedOut { .. } => CudaError::DEVICE_LOST,
        // A transport declining by design: the device does not do it.
        _ if e.is_refusal() => CudaError::NOT_SUPPORTED,
        _ => CudaError::UNKNOWN,
    }
}

thread_local! {
    /// The last error an entry point on this thread answered with.
    static LAST: Cell<CudaError> = const { Cell::new(CudaError::SUCCESS) };
}

/// A sticky error poisons the whole process's context, not one thread.
static STICKY: AtomicI32 = AtomicI32::new(0);

/// The process's sticky error, if one happened.
pub fn sticky() -> Option<CudaError> {
    let v = STICKY.load(Ordering::Acquire);
    (v != 0).then_some(CudaError(v))
}

/// Record a sticky error (the first one stays).
pub fn set_sticky(e: CudaError) {
    let _ = STICKY.compare_exchange(0, e.0, Ordering::AcqRel, Ordering::Acquire);
}

/// Forget the sticky error (cudaDeviceReset).
pub fn clear_sticky() {
    STICKY.store(0, Ordering::Release);
}

/// Latch `e` as this thread's last error (success leaves it as it was, and
/// so does "not ready", which is an answer, not an error).
pub fn latch(e: CudaError) {
    if !e.is_success() && e != CudaError::NOT_READY {
        LAST.with(|l| l.set(e));
    }
}

/// `cudaGetLastError`: the last error, cleared. A sticky error is cleared
/// from here too (NVIDIA's runtime answers success on the second read,
/// seen on the H200) while every other call goes on answering with it.
pub fn take_last() -> CudaError {
    LAST.with(|l| l.replace(CudaError::SUCCESS))
}

/// `cudaPeekAtLastError`: the last error, left in place.
pub fn peek_last() -> CudaError {
    LAST.with(|l| l.get())
}

/// Whether any thread ever armed an injected panic. A program never does,
/// so there the guard pays this one relaxed load and nothing more; the
/// per-thread flag is read only once this is on.
static PANIC_ARMED_ANYWHERE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The next guarded body on this thread panics.
    static PANIC_ARMED: Cell<bool> = const { Cell::new(false) };
}

/// The payload of an injected panic, so that a test's panic hook can tell
/// it from a real one.
pub const INJECTED_PANIC: &str = "macuda: a panic injected under an entry point";

/// For tests (abi/tests/entry_panics.rs): the next body [`guard`] or
/// [`guard_quiet`] runs on this thread panics, as a bug in the entry's
/// work would, so that a test can see what the entry answers instead of
/// unwinding into C. It is aimed at the calling thread so that other
/// threads (the runtime's, or a test harness's other tests) never meet
/// it.
///
/// The panic comes first in the body, before any argument is read: the
/// guard's `catch_unwind` holds the whole body alike, so where in it the
/// panic starts proves nothing more, and firing first lets a test call
/// each entry with null pointers and no device, none of them touched.
pub fn inject_panic() {
    PANIC_ARMED.with(|a| a.set(true));
    PANIC_ARMED_ANYWHERE.store(true, Ordering::Relaxed);
}

/// Disarm the panic [`inject_panic`] armed on this thread, and say
/// whether it was still armed: after a call to an entry, true means the
/// entry ran no guarded body (its work was outside every guard).
pub fn disarm_injected_panic() -> bool {
    PANIC_ARMED.with(|a| a.replace(false))
}

/// The first thing inside every guard: panic if this thread armed it.
fn panic_if_injected() {
    if PANIC_ARMED_ANYWHERE.load(Ordering::Relaxed) && PANIC_ARMED.with(|a| a.replace(false)) {
        std::panic::panic_any(INJECTED_PANIC);
    }
}

/// Run an entry point's body: a panic becomes `cudaErrorUnknown` (with the
/// message on stderr, as nothing else can report it), an error is latched
/// for `cudaGetLastError`, and a sticky error answers every call.
pub fn guard(f: impl FnOnce() -> Result<(), CudaError>) -> CudaError {
    crate::call_stats::counted(|| guard_counted(f))
}

fn guard_counted(f: impl FnOnce() -> Result<(), CudaError>) -> CudaError {
    let body = || {
        panic_if_injected();
        f()
    };
    let r = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => CudaError::SUCCESS,
        Ok(Err(e)) => e,
        Err(p) => {
            say_panic(p.as_ref());
            CudaError::UNKNOWN
        }
    };
    let r = match sticky() {
        Some(s) if r.is_success() => s,
        _ => r,
    };
    latch(r);
    r
}

/// A caught panic's message, on stderr: the caller gets only a code. It
/// runs outside the `catch_unwind`, so a failed write is let go
/// (`eprintln!` would panic on one, into C).
fn say_panic(p: &(dyn std::any::Any + Send)) {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".to_string());
    let _ = writeln!(std::io::stderr(), "macuda: an entry point panicked: {msg}");
}

/// As [`guard`], for entry points that must not touch the sticky state
/// or the last error (the error queries themselves) or that answer with
/// something other than a code: a panic becomes `fallback`, its message
/// on stderr.
pub fn guard_quiet<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    let body = || {
        panic_if_injected();
        f()
    };
    crate::call_stats::counted(|| {
        catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|p| {
            say_panic(p.as_ref());
            fallback
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sticky error is the process's: tests that run entries take
    /// turns.
    static SERIAL: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

    #[test]
    fn a_panic_is_an_unknown_error_and_is_latched() {
        let _turn = SERIAL.lock();
        let _ = take_last();
        let r = guard(|| panic!("boom"));
        assert_eq!(r, CudaError::UNKNOWN);
        assert_eq!(peek_last(), CudaError::UNKNOWN);
        assert_eq!(take_last(), CudaError::UNKNOWN);
        assert_eq!(take_last(), CudaError::SUCCESS, "cleared by the read");
        assert_eq!(
            guard(|| Err(CudaError::INVALID_VALUE)),
            CudaError::INVALID_VALUE
        );
        assert_eq!(guard(|| Ok(())), CudaError::SUCCESS);
        assert_eq!(
            take_last(),
            CudaError::INVALID_VALUE,
            "success does not clear it"
        );
    }

    #[test]
    fn a_sticky_error_answers_every_call_and_is_read_once_per_call() {
        let _turn = SERIAL.lock();
        let _ = take_last();
        set_sticky(CudaError::ILLEGAL_ADDRESS);
        set_sticky(CudaError::LAUNCH_FAILURE);
        assert_eq!(
            sticky(),
            Some(CudaError::ILLEGAL_ADDRESS),
            "the first one stays"
        );
        assert_eq!(guard(|| Ok(())), CudaError::ILLEGAL_ADDRESS);
        assert_eq!(take_last(), CudaError::ILLEGAL_ADDRESS);
        assert_eq!(take_last(), CudaError::SUCCESS, "read once, as on the H200");
        assert_eq!(
            guard(|| Err(CudaError::INVALID_VALUE)),
            CudaError::INVALID_VALUE
        );
        clear_sticky();
        assert_eq!(guard(|| Ok(())), CudaError::SUCCESS);
        let _ = take_last();
    }

    #[test]
    fn an_injected_panic_hits_the_next_guarded_body_of_its_thread_only() {
        let _turn = SERIAL.lock();
        let _ = take_last();
        inject_panic();
        let elsewhere = std::thread::spawn(|| (guard(|| Ok(())), disarm_injected_panic()));
        assert_eq!(
            elsewhere.join().unwrap(),
            (CudaError::SUCCESS, false),
            "another thread is not hit"
        );
        let mut ran = false;
        assert_eq!(
            guard(|| {
                ran = true;
                Ok(())
            }),
            CudaError::UNKNOWN
        );
        assert!(!ran, "the panic comes before the body's work");
        assert!(!disarm_injected_panic(), "spent by the one call");
        assert_eq!(take_last(), CudaError::UNKNOWN);
        assert_eq!(guard(|| Ok(())), CudaError::SUCCESS, "once only");
        inject_panic();
        assert_eq!(guard_quiet(7, || 1), 7);
        assert_eq!(
            peek_last(),
            CudaError::SUCCESS,
            "the quiet guard latches nothing"
        );
    }

    #[test]
    fn not_ready_is_an_answer_not_a_latched_error() {
        let _turn = SERIAL.lock();
        let _ = take_last();
        assert_eq!(guard(|| Err(CudaError::NOT_READY)), CudaError::NOT_READY);
        assert_eq!(peek_last(), CudaError::SUCCESS);
    }

    #[test]
    fn names_and_texts_are_there_for_every_code() {
        for (_, v) in ALL {
            let e = CudaError(*v);
            assert!(e.name().to_bytes().starts_with(b"cuda"));
            assert!(!e.text().to_bytes().is_empty());
        }
        assert_eq!(CudaError(12345).name(), c"cudaErrorUnknown");
        assert_eq!(
            CudaError::ILLEGAL_ADDRESS.to_string(),
            "cudaErrorIllegalAddress (700): a kernel accessed an address that is not mapped"
        );
    }
}
