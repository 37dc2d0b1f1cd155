//! Status names and sentences, and the logger switch.

use crate::guard::{guard, guard_value};
use crate::log;
use crate::status::{Status, UNRECOGNIZED};
use std::ffi::{c_char, c_int, CStr};

#[no_mangle]
pub extern "C" fn cublasGetStatusString(status: Status) -> *const c_char {
    guard_value("cublasGetStatusString", UNRECOGNIZED.as_ptr(), || {
        status.text().as_ptr()
    })
}

#[no_mangle]
pub extern "C" fn cublasGetStatusName(status: Status) -> *const c_char {
    guard_value("cublasGetStatusName", UNRECOGNIZED.as_ptr(), || {
        status.name().as_ptr()
    })
}

/// # Safety
/// `file` is null or a NUL-terminated path.
#[no_mangle]
pub unsafe extern "C" fn cublasLoggerConfigure(
    on: c_int,
    stdout: c_int,
    stderr: c_int,
    file: *const c_char,
) -> Status {
    guard("cublasLoggerConfigure", || {
        // SAFETY: the caller's promise.
        let path = (!file.is_null()).then(|| {
            unsafe { CStr::from_ptr(file) }
                .to_string_lossy()
                .into_owned()
        });
        log::configure(on != 0, stdout != 0, stderr != 0, path.as_deref());
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_come_back_for_known_and_unknown_codes() {
        // SAFETY: static NUL-terminated strings.
        let name = unsafe { CStr::from_ptr(cublasGetStatusName(Status::INVALID_VALUE)) };
        assert_eq!(name, c"CUBLAS_STATUS_INVALID_VALUE");
        // SAFETY: as above.
        let text = unsafe { CStr::from_ptr(cublasGetStatusString(Status(1234))) };
        assert_eq!(text, UNRECOGNIZED);
    }
}
