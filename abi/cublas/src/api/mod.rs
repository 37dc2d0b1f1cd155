//! The exported C entry points, by topic. Each runs inside
//! [`crate::guard::guard`]: a panic becomes CUBLAS_STATUS_INTERNAL_ERROR,
//! an error its status. Handles are looked up, never dereferenced; host
//! pointers from the caller are checked for null before use.

pub mod context;
pub mod gemm;
pub mod info;
pub mod trsm;

use crate::status::Error;

/// Where an entry writes its answer: refused when null.
///
/// # Safety
/// A non-null `p` must be valid for writes of a `T`.
pub(crate) unsafe fn out<'a, T>(p: *mut T, what: &'static str) -> Result<&'a mut T, Error> {
    // SAFETY: the caller's promise for a non-null pointer.
    unsafe { p.as_mut() }.ok_or(Error::Null(what))
}
