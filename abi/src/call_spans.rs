//! Under `MACUDA_PROFILE`: how long the caller spent inside the runtime's
//! busiest entry points (copies, syncs, launches, graphs), on the same
//! host clock as the submit actor's timeline. The GPU timeline alone shows
//! that the GPU stood idle at a sync point; these spans say whose turn it
//! was then: the caller's own code, a sync of ours that had not yet
//! returned, or a copy or graph launch of ours still on its way.
//!
//! Off unless the profile is on; when off an entry pays one relaxed load.

use macuda_submit::host_clock_ns;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

static ON: AtomicBool = AtomicBool::new(false);
static SPANS: Mutex<Vec<CallSpan>> = Mutex::new(Vec::new());
/// Small numbers for the caller's threads, in the order they first call.
static NEXT_THREAD: AtomicU32 = AtomicU32::new(1);

thread_local! {
    static THREAD: u32 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

/// One call into the runtime, as the caller spent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSpan {
    /// The entry point's C name.
    pub name: &'static str,
    /// The caller's thread, numbered from 1 in the order threads called.
    pub thread: u32,
    /// On the profile clock (`macuda_submit::host_clock_ns`).
    pub began_ns: u64,
    pub ended_ns: u64,
}

/// Start recording (the runtime does this when the profile is on).
pub fn enable() {
    ON.store(true, Ordering::Relaxed);
}

/// Whether spans are being recorded.
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Every span recorded so far, in the order they ended.
pub fn recorded() -> Vec<CallSpan> {
    SPANS.lock().clone()
}

/// Records the span of the call it lives in when it drops.
#[must_use = "the span ends when this drops"]
pub struct CallTimer {
    name: &'static str,
    began_ns: Option<u64>,
}

impl Drop for CallTimer {
    fn drop(&mut self) {
        if let Some(began_ns) = self.began_ns {
            let span = CallSpan {
                name: self.name,
                thread: THREAD.with(|t| *t),
                began_ns,
                ended_ns: host_clock_ns(),
            };
            SPANS.lock().push(span);
        }
    }
}

/// Time the entry point `name` until the returned timer drops.
pub fn time(name: &'static str) -> CallTimer {
    CallTimer {
        name,
        began_ns: enabled().then(host_clock_ns),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_call_is_recorded_once_recording_is_on() {
        // Off: nothing kept (no test here turns it off again, so this
        // one runs first in its own order or finds it already on).
        let was_on = enabled();
        {
            let _t = time("cudaTestOff");
        }
        let off_kept = recorded().iter().any(|s| s.name == "cudaTestOff");
        assert_eq!(off_kept, was_on, "a call is kept only while recording");
        enable();
        {
            let _t = time("cudaTestOn");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let spans = recorded();
        let s = spans.iter().find(|s| s.name == "cudaTestOn").unwrap();
        assert!(s.ended_ns >= s.began_ns + 1_000_000, "{s:?}");
        assert!(s.thread >= 1);
    }
}
