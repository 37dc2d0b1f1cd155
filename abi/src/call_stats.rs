//! Under `MACUDA_CALL_STATS=FILE`: how many runtime entry points the
//! program called and how long it spent inside them, written to FILE at
//! exit beside the process's own lifetime. With the launch log this gives
//! what the seed counted on a machine with no card (notes §08): launches
//! and calls per token, and the runtime's share of the host's time, on
//! the null device as on a GPU.
//!
//! Off unless asked; when off an entry pays one relaxed load.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// The environment variable naming the stats file.
pub const CALL_STATS: &str = "MACUDA_CALL_STATS";

static ON: AtomicBool = AtomicBool::new(false);
static CALLS: AtomicU64 = AtomicU64::new(0);
static INSIDE_NS: AtomicU64 = AtomicU64::new(0);
static STARTED: OnceLock<Instant> = OnceLock::new();

thread_local! {
    /// Entry points nested in this thread's current call (an entry that
    /// calls another counts once).
    static DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Start counting, from the first call into the runtime.
pub fn enable() {
    let _ = STARTED.set(Instant::now());
    ON.store(true, Ordering::Relaxed);
}

/// Whether calls are being counted.
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Run `f` as one entry-point call, counted and timed when on.
pub fn counted<T>(f: impl FnOnce() -> T) -> T {
    if !on() {
        return f();
    }
    let outer = DEPTH.with(|d| {
        let depth = d.get();
        d.set(depth + 1);
        depth == 0
    });
    let began = Instant::now();
    let r = f();
    DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    if outer {
        CALLS.fetch_add(1, Ordering::Relaxed);
        // CAST: a call longer than 584 years saturates.
        let ns = u64::try_from(began.elapsed().as_nanos()).unwrap_or(u64::MAX);
        INSIDE_NS.fetch_add(ns, Ordering::Relaxed);
    }
    r
}

/// The figures so far: calls, nanoseconds inside them, nanoseconds since
/// counting started.
pub fn figures() -> (u64, u64, u64) {
    let since = STARTED
        .get()
        .map(|t| u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    (
        CALLS.load(Ordering::Relaxed),
        INSIDE_NS.load(Ordering::Relaxed),
        since,
    )
}

/// The line written at exit.
pub fn line() -> String {
    let (calls, inside, since) = figures();
    format!("calls {calls} inside_ns {inside} since_first_call_ns {since}")
}

/// Write the figures to the file `MACUDA_CALL_STATS` names, if on.
pub fn write_at_exit() {
    if !on() {
        return;
    }
    let Some(path) = std::env::var_os(CALL_STATS) else {
        return;
    };
    let written = std::fs::File::create(&path).and_then(|mut f| writeln!(f, "{}", line()));
    if let Err(e) = written {
        eprintln!("macuda: {CALL_STATS}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_entries_count_once_and_time_adds_up() {
        enable();
        let (before, inside_before, _) = figures();
        counted(|| {
            counted(|| std::thread::sleep(std::time::Duration::from_millis(2)));
        });
        let (after, inside_after, since) = figures();
        assert!(after > before, "counted");
        assert!(inside_after - inside_before >= 2_000_000);
        assert!(since >= inside_after - inside_before);
        assert!(line().starts_with("calls "));
    }
}
