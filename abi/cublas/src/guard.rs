//! The frame every exported entry runs in: a panic becomes
//! `CUBLAS_STATUS_INTERNAL_ERROR` (its message on stderr), an error its
//! status (its reason in the log), so nothing unwinds into C. The entries
//! that answer with a string run in [`guard_value`]. Tests make a guarded
//! body panic with [`inject_panic`].
//!
//! The switch is the CUDA runtime's (`cudart::error::inject_panic`) in
//! shape, kept here apart: this library knows the runtime only through
//! its C entry points, so it cannot share the runtime's Rust items.

use crate::log;
use crate::status::{Error, Status};
use std::any::Any;
use std::cell::Cell;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether any thread ever armed an injected panic. A program never does,
/// so there a guard pays this one relaxed load and nothing more; the
/// per-thread flag is read only once this is on.
static PANIC_ARMED_ANYWHERE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The next guarded body on this thread panics.
    static PANIC_ARMED: Cell<bool> = const { Cell::new(false) };
}

/// The payload of an injected panic, so that a test's panic hook can tell
/// it from a real one.
pub const INJECTED_PANIC: &str = "macuda-cublas: a panic injected under an entry";

/// For tests (tests/entry_panics.rs): the next body [`guard`] or
/// [`guard_value`] runs on this thread panics, as a bug in the entry's
/// work would, so that a test can see what the entry answers instead of
/// unwinding into C. It is aimed at the calling thread so that other
/// threads never meet it.
///
/// The panic comes first in the body, before the handle is looked up or
/// any argument read: `catch_unwind` holds the whole body alike, so where
/// in it the panic starts proves nothing more, and firing first lets a
/// test call each entry with a null handle and null pointers, none of
/// them touched.
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

/// A caught panic's message: the caller gets only a status.
fn message(p: &(dyn Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".to_string())
}

/// Say that `entry` panicked, on stderr. It runs outside the
/// `catch_unwind`, so a failed write is let go (`eprintln!` would panic
/// on one, into C).
fn say_panic(entry: &str, msg: &str) {
    let _ = writeln!(std::io::stderr(), "macuda-cublas: {entry} panicked: {msg}");
}

pub fn guard(entry: &'static str, f: impl FnOnce() -> Result<(), Error>) -> Status {
    let body = || {
        panic_if_injected();
        f()
    };
    match catch_unwind(AssertUnwindSafe(body)) {
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
            let msg = message(p.as_ref());
            say_panic(entry, &msg);
            Error::Panic(msg).status()
        }
    }
}

/// As [`guard`], for an entry that answers with a value, not a status: a
/// panic becomes `fallback`, its message on stderr.
pub fn guard_value<T>(entry: &'static str, fallback: T, f: impl FnOnce() -> T) -> T {
    let body = || {
        panic_if_injected();
        f()
    };
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|p| {
        say_panic(entry, &message(p.as_ref()));
        fallback
    })
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
        assert_eq!(guard_value("t", 0, || panic!("boom")), 0);
    }

    #[test]
    fn an_injected_panic_hits_the_next_guarded_body_of_its_thread_only() {
        inject_panic();
        let elsewhere = std::thread::spawn(|| (guard("t", || Ok(())), disarm_injected_panic()));
        assert_eq!(elsewhere.join().unwrap(), (Status::SUCCESS, false));
        let mut ran = false;
        let r = guard("t", || {
            ran = true;
            Ok(())
        });
        assert_eq!(r, Status::INTERNAL_ERROR);
        assert!(!ran, "the panic comes before the body's work");
        assert!(!disarm_injected_panic(), "spent by the one call");
        assert_eq!(guard("t", || Ok(())), Status::SUCCESS, "once only");
        inject_panic();
        assert_eq!(guard_value("t", 7, || 1), 7);
    }
}
