//! Panics on threads the loop does not run itself. A target may start
//! threads (a hostile server, the simulator's server): a panic there never
//! reaches the loop's `catch_unwind`, so a panic hook notes every panic
//! with the name of the thread it happened on, and the loop counts those
//! on the threads its target named.

use std::sync::{Mutex, Once, PoisonError};

/// One panic seen by the hook.
#[derive(Debug, Clone)]
pub struct Seen {
    pub thread: String,
    pub message: String,
}

static SEEN: Mutex<Vec<Seen>> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();

/// Install the hook once per process; the hook that was there (the
/// default one prints the message) still runs after ours.
pub fn install() {
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current()
                .name()
                .unwrap_or("unnamed")
                .to_string();
            let message = info.to_string();
            SEEN.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Seen { thread, message });
            previous(info);
        }));
    });
}

/// How many panics have been seen so far, to compare with later.
pub fn mark() -> usize {
    SEEN.lock().unwrap_or_else(PoisonError::into_inner).len()
}

/// The panics seen since `mark` on a thread whose name is in `threads`.
pub fn since(mark: usize, threads: &[String]) -> Vec<Seen> {
    SEEN.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .skip(mark)
        .filter(|s| threads.contains(&s.thread))
        .cloned()
        .collect()
}

/// A panic payload as text.
pub fn message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        return (*s).to_string();
    }
    if let Some(s) = payload.downcast_ref::<String>() {
        return s.clone();
    }
    "a panic with a payload that is not text".to_string()
}
