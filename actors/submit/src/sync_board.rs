//! Sync points the caller waits out on its own thread.
//!
//! A sync through the actor's mailbox hands the caller over to the actor
//! and back: two wake-ups of a sleeping thread. On idle CPUs each costs
//! microseconds; on CPUs all busy (llama.cpp's op suite runs its CPU
//! reference on eight threads a process, several processes at once) each
//! waits for the OS to find a CPU, and a sync cost milliseconds where
//! NVIDIA's runtime, which waits on the caller's thread, paid none.
//!
//! So a caller that can read the timelines (every card whose semaphore
//! memory the CPU maps) pushes a sync point into the lane and waits on the
//! board: the actor, draining the lane in order, flushes what came before
//! and posts the timeline values that cover it; the caller then reads the
//! semaphores itself. Whatever is not the plain case (lane work that
//! failed, a fault, a device that declined work, the profiler's sync
//! records, a wait longer than [`CALLER_PATIENCE`]) is answered "ask the
//! actor", and the caller makes the mailbox sync, which reports and
//! recovers as before (also after the channels are made again: the
//! timelines go on at the same addresses). The actor starts the next token over (its
//! standstill) only once the caller has seen the GPU finish and nothing
//! was queued since.

use macuda_gsp::CpuView;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a caller polls the board and the timelines flat out before it
/// polls between short sleeps (a decode token's sync is shorter).
const SPIN_FOR: Duration = Duration::from_millis(5);
const POLL_SLEEP: Duration = Duration::from_micros(50);

/// How long a caller waits on its own before it asks the actor, whose
/// wait checks for faults and stuck queues and reports them.
pub const CALLER_PATIENCE: Duration = Duration::from_millis(100);

/// What the actor posts for a sync point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Posted {
    /// Everything before the sync point is done when the compute timeline
    /// reaches `compute` and the copy timeline `copy`.
    Wait { compute: u64, copy: u64 },
    /// The sync point needs the actor (see the module notes).
    AskActor,
}

/// Shared by the actor and every caller's [`SyncWatch`].
#[derive(Debug)]
pub(crate) struct SyncBoard {
    next_ticket: AtomicU64,
    /// The last ticket the actor posted for; its answer in `posted`.
    published: AtomicU64,
    posted: Mutex<Posted>,
    /// The last ticket a caller saw done on the GPU.
    observed: AtomicU64,
}

impl SyncBoard {
    pub(crate) fn new() -> SyncBoard {
        SyncBoard {
            next_ticket: AtomicU64::new(0),
            published: AtomicU64::new(0),
            posted: Mutex::new(Posted::AskActor),
            observed: AtomicU64::new(0),
        }
    }

    /// The actor's answer for `ticket` (and every ticket before it).
    pub(crate) fn post(&self, ticket: u64, answer: Posted) {
        *self.posted.lock() = answer;
        self.published.fetch_max(ticket, Ordering::SeqCst);
    }

    /// The last ticket a caller saw done.
    pub(crate) fn observed(&self) -> u64 {
        self.observed.load(Ordering::SeqCst)
    }
}

/// How a caller's own wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallerSync {
    /// Everything the lane took up to the sync point is done; `covered` is
    /// the lane's count with the sync point in it.
    Done { covered: u64 },
    /// Make the sync through the actor.
    AskActor,
}

/// One semaphore the CPU maps.
#[derive(Clone)]
struct MappedTimeline {
    view: CpuView,
    offset: u64,
}

impl MappedTimeline {
    fn read(&self) -> Option<u64> {
        self.view.read_u64(self.offset).ok()
    }
}

/// A caller's view of the board and of both queues' timelines.
#[derive(Clone)]
pub struct SyncWatch {
    board: std::sync::Arc<SyncBoard>,
    compute: MappedTimeline,
    copy: MappedTimeline,
}

impl SyncWatch {
    /// Over the CPU's mappings of both timelines (a view and the offset
    /// of the semaphore in it: compute, then copy).
    pub(crate) fn new(
        board: std::sync::Arc<SyncBoard>,
        compute: (CpuView, u64),
        copy: (CpuView, u64),
    ) -> SyncWatch {
        let mapped = |(view, offset)| MappedTimeline { view, offset };
        SyncWatch {
            board,
            compute: mapped(compute),
            copy: mapped(copy),
        }
    }

    /// The ticket of the next sync point.
    pub(crate) fn ticket(&self) -> u64 {
        self.board.next_ticket.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Wait for the actor to post `ticket`'s answer and then for the GPU to
    /// reach it; `actor_gone` ends the wait early. True when it is done.
    pub(crate) fn wait(&self, ticket: u64, actor_gone: impl Fn() -> bool) -> bool {
        let started = Instant::now();
        let mut poll = Poll::new(started);
        while self.board.published.load(Ordering::SeqCst) < ticket {
            if actor_gone() || !poll.again() {
                return false;
            }
        }
        // A later ticket's answer covers this one too.
        let Posted::Wait { compute, copy } = *self.board.posted.lock() else {
            return false;
        };
        loop {
            match (self.compute.read(), self.copy.read()) {
                (Some(c), Some(x)) if c >= compute && x >= copy => break,
                (Some(_), Some(_)) => {}
                _ => return false,
            }
            if !poll.again() {
                return false;
            }
        }
        self.board.observed.fetch_max(ticket, Ordering::SeqCst);
        true
    }
}

/// Flat out for [`SPIN_FOR`], then between short sleeps, for at most
/// [`CALLER_PATIENCE`].
struct Poll {
    started: Instant,
}

impl Poll {
    fn new(started: Instant) -> Poll {
        Poll { started }
    }

    /// Pause before the next read; false once the patience is spent.
    fn again(&mut self) -> bool {
        let spent = self.started.elapsed();
        if spent >= CALLER_PATIENCE {
            return false;
        }
        if spent < SPIN_FOR {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(POLL_SLEEP);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_gsp::HostMemory;
    use std::sync::Arc;

    fn watch() -> (SyncWatch, Arc<SyncBoard>, CpuView) {
        let view = CpuView::new(Arc::new(HostMemory::zeroed(0x100)));
        let board = Arc::new(SyncBoard::new());
        let w = SyncWatch {
            board: Arc::clone(&board),
            compute: MappedTimeline {
                view: view.clone(),
                offset: 0,
            },
            copy: MappedTimeline {
                view: view.clone(),
                offset: 16,
            },
        };
        (w, board, view)
    }

    #[test]
    fn a_caller_is_done_once_both_timelines_reach_what_the_actor_posted() {
        let (w, board, view) = watch();
        let t = w.ticket();
        assert_eq!(t, 1);
        board.post(
            t,
            Posted::Wait {
                compute: 5,
                copy: 2,
            },
        );
        let gpu = {
            let view = view.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(2));
                view.write_u64(16, 2).unwrap();
                std::thread::sleep(Duration::from_millis(2));
                view.write_u64(0, 5).unwrap();
            })
        };
        assert!(w.wait(t, || false));
        gpu.join().unwrap();
        assert_eq!(board.observed(), 1);
    }

    #[test]
    fn an_answer_to_ask_the_actor_sends_the_caller_there() {
        let (w, board, _view) = watch();
        let t = w.ticket();
        board.post(t, Posted::AskActor);
        assert!(!w.wait(t, || false));
        assert_eq!(board.observed(), 0, "nothing was seen done");
        assert_eq!(w.ticket(), 2);
    }

    #[test]
    fn a_gpu_that_does_not_finish_sends_the_caller_to_the_actor_after_the_patience() {
        let (w, board, _view) = watch();
        let t = w.ticket();
        board.post(
            t,
            Posted::Wait {
                compute: 1,
                copy: 0,
            },
        );
        let started = Instant::now();
        assert!(!w.wait(t, || false));
        assert!(started.elapsed() >= CALLER_PATIENCE);
    }

    #[test]
    fn a_caller_whose_actor_is_gone_stops_waiting_for_the_post() {
        let (w, _board, _view) = watch();
        let t = w.ticket();
        let started = Instant::now();
        assert!(!w.wait(t, || true));
        assert!(started.elapsed() < CALLER_PATIENCE);
    }
}
