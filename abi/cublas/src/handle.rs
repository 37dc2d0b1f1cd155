//! `cublasHandle_t`: a context bound to the device that was current when
//! it was created, holding the stream its work goes to, the math and
//! pointer modes, the workspace the caller lent it, and the memory of its
//! own that split GEMMs use. Handles are keys
//! into a table of live contexts, never dereferenced, so a null,
//! destroyed or foreign handle is refused rather than followed.

use crate::enums::{AtomicsMode, MathMode, PointerMode};
use crate::runtime::{DeviceFacts, Stream};
use crate::status::Error;
use crate::workspace::Partials;
use dashmap::DashMap;
use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

/// The settings cuBLAS calls change and GEMMs read.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// The `cudaStream_t` work is launched on (0: the legacy stream).
    pub stream: usize,
    pub math: MathMode,
    /// The raw math value as set (mode plus flags), for cublasGetMathMode.
    pub math_raw: i32,
    pub pointer_mode: PointerMode,
    pub atomics: AtomicsMode,
    /// The caller's workspace (address, bytes); none until set.
    pub workspace: (usize, usize),
}

impl Settings {
    pub fn stream(&self) -> Stream {
        self.stream as Stream
    }
}

pub struct Context {
    pub device: DeviceFacts,
    pub settings: Mutex<Settings>,
    /// Where split GEMMs keep their partial sums.
    pub partials: Mutex<Partials>,
}

impl Context {
    pub fn new(device: DeviceFacts) -> Self {
        Context {
            device,
            settings: Mutex::new(Settings {
                stream: 0,
                math: MathMode::Default,
                math_raw: MathMode::Default as i32,
                pointer_mode: PointerMode::Host,
                atomics: AtomicsMode::NotAllowed,
                workspace: (0, 0),
            }),
            partials: Mutex::new(Partials::default()),
        }
    }

    pub fn settings(&self) -> Settings {
        *self.settings.lock()
    }
}

/// Live contexts by handle value.
static LIVE: LazyLock<DashMap<usize, Arc<Context>>> = LazyLock::new(DashMap::new);
/// Handle values: distinct, non-null, never reused within a process.
static NEXT: AtomicUsize = AtomicUsize::new(1);
/// Handle values step by this, so they look like (and are as unlikely to
/// collide with) aligned pointers.
const HANDLE_STEP: usize = 0x10;

/// Store a context and give out its handle.
pub fn insert(ctx: Context) -> *mut c_void {
    let key = NEXT.fetch_add(1, Ordering::Relaxed) * HANDLE_STEP;
    LIVE.insert(key, Arc::new(ctx));
    key as *mut c_void
}

/// The context behind a handle.
pub fn get(handle: *mut c_void) -> Result<Arc<Context>, Error> {
    LIVE.get(&(handle as usize))
        .map(|c| Arc::clone(c.value()))
        .ok_or(Error::BadHandle)
}

/// Forget a handle; calls still running on its context finish first.
pub fn remove(handle: *mut c_void) -> Result<(), Error> {
    LIVE.remove(&(handle as usize))
        .map(|_| ())
        .ok_or(Error::BadHandle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> DeviceFacts {
        DeviceFacts::h200()
    }

    #[test]
    fn handles_are_distinct_and_refused_once_removed() {
        let a = insert(Context::new(facts()));
        let b = insert(Context::new(facts()));
        assert_ne!(a, b);
        assert!(!a.is_null());
        assert!(get(a).is_ok());
        remove(a).unwrap();
        assert_eq!(get(a).err(), Some(Error::BadHandle));
        assert_eq!(remove(a).err(), Some(Error::BadHandle));
        assert!(get(b).is_ok());
        assert_eq!(get(std::ptr::null_mut()).err(), Some(Error::BadHandle));
        remove(b).unwrap();
    }

    #[test]
    fn a_new_context_has_the_documented_defaults() {
        let s = Context::new(facts()).settings();
        assert_eq!(s.stream, 0);
        assert_eq!(s.math, MathMode::Default);
        assert_eq!(s.pointer_mode, PointerMode::Host);
    }
}
