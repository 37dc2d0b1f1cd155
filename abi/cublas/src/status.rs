//! `cublasStatus_t`: the codes our entry points answer with (values pinned
//! to NVIDIA's headers in tests/values.rs), their names and sentences, and
//! [`Error`], the typed reason behind every code other than success.

use std::ffi::CStr;

/// The name and the sentence of a code that is none of ours, and what the
/// string entries answer if they fail.
pub const UNRECOGNIZED: &CStr = c"unrecognized status";

/// A cuBLAS status code, as the C ABI carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Status(pub i32);

macro_rules! statuses {
    ($( $name:ident = $value:literal, $cname:literal, $text:literal; )+) => {
        impl Status {
            $( pub const $name: Status = Status($value); )+

            /// NVIDIA's name for the code (`CUBLAS_STATUS_INVALID_VALUE`).
            pub fn name(self) -> &'static CStr {
                match self.0 {
                    $( $value => $cname, )+
                    _ => UNRECOGNIZED,
                }
            }

            /// What the code means, in our words.
            pub fn text(self) -> &'static CStr {
                match self.0 {
                    $( $value => $text, )+
                    _ => UNRECOGNIZED,
                }
            }
        }

        /// Every code, for the value test.
        pub const ALL: &[(&str, i32)] = &[ $( (stringify!($name), $value), )+ ];
    };
}

statuses! {
    SUCCESS = 0, c"CUBLAS_STATUS_SUCCESS", c"the call succeeded";
    NOT_INITIALIZED = 1, c"CUBLAS_STATUS_NOT_INITIALIZED", c"no valid cuBLAS handle, or the CUDA runtime could not start";
    ALLOC_FAILED = 3, c"CUBLAS_STATUS_ALLOC_FAILED", c"memory for the call could not be allocated";
    INVALID_VALUE = 7, c"CUBLAS_STATUS_INVALID_VALUE", c"an argument is outside what the function accepts";
    ARCH_MISMATCH = 8, c"CUBLAS_STATUS_ARCH_MISMATCH", c"the device lacks what the function needs";
    MAPPING_ERROR = 11, c"CUBLAS_STATUS_MAPPING_ERROR", c"device memory could not be accessed";
    EXECUTION_FAILED = 13, c"CUBLAS_STATUS_EXECUTION_FAILED", c"a kernel could not be launched on the GPU";
    INTERNAL_ERROR = 14, c"CUBLAS_STATUS_INTERNAL_ERROR", c"the library failed internally";
    NOT_SUPPORTED = 15, c"CUBLAS_STATUS_NOT_SUPPORTED", c"this combination of types, modes or parameters is not supported";
    LICENSE_ERROR = 16, c"CUBLAS_STATUS_LICENSE_ERROR", c"a license check failed";
}

impl Status {
    pub fn is_success(self) -> bool {
        self == Status::SUCCESS
    }
}

/// Why a call did not succeed; each maps to the status NVIDIA's cuBLAS
/// answers in that case, and its message names what was wrong (written to
/// the log when logging is on).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("the handle is null, destroyed or not one of ours")]
    BadHandle,
    #[error("the CUDA runtime could not start (cudaError {0})")]
    NoRuntime(i32),
    #[error("{what} is {value}: {rule}")]
    Invalid {
        what: &'static str,
        value: i64,
        rule: &'static str,
    },
    #[error("{0} is a null pointer")]
    Null(&'static str),
    #[error("{0} is not supported")]
    Unsupported(String),
    #[error("the device has no kernel image for {0}")]
    Arch(&'static str),
    #[error("the CUDA runtime refused to launch {kernel} (cudaError {code})")]
    Launch { kernel: &'static str, code: i32 },
    #[error("the library panicked: {0}")]
    Panic(String),
}

impl Error {
    /// The same refusal, naming the argument as the entry calls it
    /// (`transa` rather than `trans`).
    pub fn named(self, name: &'static str) -> Error {
        match self {
            Error::Invalid { value, rule, .. } => Error::Invalid {
                what: name,
                value,
                rule,
            },
            e => e,
        }
    }

    pub fn status(&self) -> Status {
        match self {
            Error::BadHandle | Error::NoRuntime(_) => Status::NOT_INITIALIZED,
            Error::Invalid { .. } | Error::Null(_) => Status::INVALID_VALUE,
            Error::Unsupported(_) => Status::NOT_SUPPORTED,
            Error::Arch(_) => Status::ARCH_MISMATCH,
            Error::Launch { .. } => Status::EXECUTION_FAILED,
            Error::Panic(_) => Status::INTERNAL_ERROR,
        }
    }
}

/// A checked argument: `Ok` when `ok` holds.
pub fn require(ok: bool, what: &'static str, value: i64, rule: &'static str) -> Result<(), Error> {
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid { what, value, rule })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_maps_to_the_status_nvidia_answers() {
        assert_eq!(Error::BadHandle.status(), Status::NOT_INITIALIZED);
        assert_eq!(Error::Null("alpha").status(), Status::INVALID_VALUE);
        assert_eq!(
            require(false, "m", -1, "must not be negative")
                .unwrap_err()
                .status(),
            Status::INVALID_VALUE
        );
        assert_eq!(
            Error::Unsupported("x".into()).status(),
            Status::NOT_SUPPORTED
        );
        assert_eq!(
            Error::Launch {
                kernel: "k",
                code: 1
            }
            .status(),
            Status::EXECUTION_FAILED
        );
        assert_eq!(Error::Panic("p".into()).status(), Status::INTERNAL_ERROR);
    }

    #[test]
    fn names_and_texts_cover_every_code_and_the_unknown() {
        for &(_, v) in ALL {
            let s = Status(v);
            assert!(s.name().to_bytes().starts_with(b"CUBLAS_STATUS_"));
            assert!(!s.text().to_bytes().is_empty());
        }
        // NVIDIA's answer for a code it does not have.
        assert_eq!(Status(99).name(), c"unrecognized status");
        assert_eq!(Status(99).text(), c"unrecognized status");
    }

    #[test]
    fn messages_name_what_was_wrong() {
        let e = require(false, "lda", 3, "must be at least max(1, rows of A)").unwrap_err();
        assert_eq!(
            e.to_string(),
            "lda is 3: must be at least max(1, rows of A)"
        );
    }
}
