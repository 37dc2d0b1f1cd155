//! The frame every exported entry runs in: a panic becomes
//! `CUBLAS_STATUS_INTERNAL_ERROR` (its message on stderr), an error its
//! status (its reason in the log), so nothing unwinds into C.

use crate::log;
use crate::status::{Error, Status};
use std::panic::{catch_unwind, AssertUnwindSafe};

pub fn guard(entry: &'static str, f: impl FnOnce() -> Result<(), Error>) -> Status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => Status::SUCCESS,
        Ok(Err(e)) => {
            log::line(|| {
                format!(
                    "{entry} refused: {e} ({})",
                    e.status().name().to_string_lossy()
                )
            });
            e.status()
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic with no message".to_string());
            eprintln!("macuda-cublas: {entry} panicked: {msg}");
            Error::Panic(msg).status()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_and_errors_become_statuses() {
        assert_eq!(guard("t", || Ok(())), Status::SUCCESS);
        assert_eq!(
            guard("t", || Err(Error::BadHandle)),
            Status::NOT_INITIALIZED
        );
        assert_eq!(guard("t", || panic!("boom")), Status::INTERNAL_ERROR);
    }
}
