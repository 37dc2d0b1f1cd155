//! A queue's timeline: the 64-bit semaphore its engine releases a value
//! into as each piece of work completes, how the CPU reads it, and the one
//! wait on it that every sync point, full ring and wrapped command region
//! goes through.

use crate::error::{QueueMarks, SubmitError};
use macuda_gsp::CpuView;
use macuda_memory::{DeviceWindow, MemoryError, MemoryHandle};
use std::time::{Duration, Instant};

/// A 64-bit timeline payload.
const PAYLOAD_BYTES: u64 = 8;

/// A wait asks RM about a channel fault this long after it starts, then
/// this often: a faulted channel never releases, and the fault says why.
const FAULT_CHECK_FIRST: Duration = Duration::from_millis(2);
const FAULT_CHECK_EVERY: Duration = Duration::from_millis(20);

/// A wait polls flat out (yielding the CPU between reads) this long, which
/// covers a decode token's sync; past it, it sleeps this long between
/// reads, so that many waiting processes on a shared GPU leave the CPUs to
/// the ones with work (the threads that hand work over among them).
const SPIN_FOR: Duration = Duration::from_millis(5);
const POLL_SLEEP: Duration = Duration::from_micros(50);

/// How the CPU reaches the semaphore.
enum Reach {
    /// Through a mapping of the buffer that holds it (every real card).
    Window { view: CpuView, offset: u64 },
    /// Through the memory actor, a request a read.
    Memory(MemoryHandle),
    /// Not at all: the device gives no memory access (the null card).
    None,
}

/// One queue's timeline semaphore.
pub(crate) struct Timeline {
    /// Its GPU address: what the engines' releases and acquires name.
    pub(crate) address: u64,
    reach: Reach,
}

impl Timeline {
    /// The timeline at `address`, read through whichever of `windows`
    /// covers it, else through `memory`, or not at all where the device
    /// gives no memory access.
    pub(crate) fn new(
        address: u64,
        windows: &[DeviceWindow],
        memory: &MemoryHandle,
        readable: bool,
    ) -> Timeline {
        let window = windows.iter().find_map(|w| {
            w.offset_of(address, PAYLOAD_BYTES)
                .map(|offset| (w.view.clone(), offset))
        });
        let reach = match (readable, window) {
            (false, _) => Reach::None,
            (true, Some((view, offset))) => Reach::Window { view, offset },
            (true, None) => Reach::Memory(memory.clone()),
        };
        Timeline { address, reach }
    }

    /// The CPU's mapping of the semaphore and its offset there, where the
    /// timeline is read through one.
    pub(crate) fn mapped(&self) -> Option<(CpuView, u64)> {
        match &self.reach {
            Reach::Window { view, offset } => Some((view.clone(), *offset)),
            _ => None,
        }
    }

    /// The value the engine last released.
    pub(crate) fn completed(&self) -> Result<u64, SubmitError> {
        match &self.reach {
            Reach::Window { view, offset } => view
                .read_u64(*offset)
                .map_err(|e| SubmitError::Memory(MemoryError::View(e))),
            Reach::Memory(memory) => {
                let bytes = memory
                    .read_device(self.address, PAYLOAD_BYTES)
                    .map_err(SubmitError::Memory)?;
                let word: [u8; 8] =
                    bytes
                        .as_slice()
                        .try_into()
                        .map_err(|_| SubmitError::Invariant {
                            reason: "a semaphore read returned the wrong length",
                        })?;
                Ok(u64::from_le_bytes(word))
            }
            Reach::None => Err(SubmitError::NoTimeline {
                why: "the device gives no access to semaphore memory",
            }),
        }
    }

    /// Wait until the timeline reaches `value`; returns what it read.
    /// `check_fault(deep, still)` asks RM whether the channels were
    /// removed, now and then and (deep) before the queue is called stuck;
    /// `still` says how long the timeline has not moved.
    ///
    /// The patience counts from the timeline's last step, not from the
    /// start: a GPU shared with other processes (RM time-slices their
    /// channels) runs a long queue slowly but keeps stepping, and NVIDIA's
    /// runtime waits for it as long as it takes. Only a queue that stops
    /// moving for the whole patience is called stuck.
    pub(crate) fn wait(
        &self,
        queue: &'static str,
        value: u64,
        patience: Duration,
        mut check_fault: impl FnMut(bool, Duration) -> Result<(), SubmitError>,
    ) -> Result<u64, SubmitError> {
        let started = Instant::now();
        let mut next_check = FAULT_CHECK_FIRST;
        let mut last = None;
        let mut moved = started;
        loop {
            let done = self.completed()?;
            if done >= value {
                return Ok(done);
            }
            if last != Some(done) {
                last = Some(done);
                moved = Instant::now();
            }
            if started.elapsed() >= next_check {
                check_fault(false, moved.elapsed())?;
                next_check = started.elapsed() + FAULT_CHECK_EVERY;
            }
            if moved.elapsed() > patience {
                check_fault(true, moved.elapsed())?;
                // The caller fills in both queues' marks.
                return Err(SubmitError::Stuck {
                    queue,
                    value,
                    reached: done,
                    after_ms: u64::try_from(patience.as_millis()).unwrap_or(u64::MAX),
                    queues: QueueMarks::default(),
                });
            }
            if started.elapsed() < SPIN_FOR {
                std::thread::yield_now();
            } else {
                std::thread::sleep(POLL_SLEEP);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_gsp::HostMemory;
    use std::sync::Arc;

    fn in_host_memory() -> (Timeline, CpuView) {
        let view = CpuView::new(Arc::new(HostMemory::zeroed(64)));
        let timeline = Timeline {
            address: 0x1000,
            reach: Reach::Window {
                view: view.clone(),
                offset: 16,
            },
        };
        (timeline, view)
    }

    #[test]
    fn a_wait_returns_what_it_read_once_the_value_arrives() {
        let (timeline, view) = in_host_memory();
        view.write_u64(16, 7).unwrap();
        let mut checks = 0;
        let got = timeline
            .wait("compute", 5, Duration::from_secs(1), |_, _| {
                checks += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!((got, checks), (7, 0));
    }

    #[test]
    fn a_still_timeline_is_stuck_after_the_patience_and_rm_is_asked_first() {
        let (timeline, _view) = in_host_memory();
        let mut deep = Vec::new();
        let started = Instant::now();
        let err = timeline
            .wait("copy", 1, Duration::from_millis(50), |d, _| {
                deep.push(d);
                Ok(())
            })
            .unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(matches!(
            err,
            SubmitError::Stuck {
                queue: "copy",
                value: 1,
                reached: 0,
                after_ms: 50,
                ..
            }
        ));
        assert_eq!(deep.last(), Some(&true), "a deep check before giving up");
        assert!(deep[..deep.len() - 1].iter().all(|d| !d));
    }

    #[test]
    fn a_fault_rm_reports_ends_the_wait_with_it() {
        let (timeline, _view) = in_host_memory();
        let err = timeline
            .wait("compute", 1, Duration::from_secs(5), |_, _| {
                Err(SubmitError::Invariant { reason: "faulted" })
            })
            .unwrap_err();
        assert!(matches!(err, SubmitError::Invariant { reason: "faulted" }));
    }

    #[test]
    fn without_memory_access_there_is_no_timeline_to_read() {
        let timeline = Timeline {
            address: 0,
            reach: Reach::None,
        };
        assert!(matches!(
            timeline.completed(),
            Err(SubmitError::NoTimeline { .. })
        ));
    }
}
