//! The data plane: callers push launches, asynchronous copies and event
//! records into a bounded lock-free queue the submit actor drains between
//! requests. Nothing on this path waits for a thread: a push is a
//! compare-and-swap plus one atomic load to see whether the actor is parked.
//! Only synchronisation points (stream or event sync, queries) go through
//! the actor's mailbox and wait, and the actor drains the lane before it
//! answers them, so everything pushed before a sync is ordered before it.

use crate::encode::LaunchShape;
use crate::sync_board::{CallerSync, SyncWatch};
use crossbeam_queue::ArrayQueue;
use macuda_core::Waker;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// A stream: work on it runs in the order it was pushed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct StreamId(pub u32);

/// A kernel registered with the submit actor: what a launch needs beyond
/// its dimensions and arguments, sent once instead of with every launch.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct KernelId(pub u32);

/// An event: a point in a stream's work that can be queried or waited on.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct EventId(pub u32);

/// A chain of launches recorded once in video memory of its own and
/// replayed whole (a CUDA graph's run of kernels; `crate::recorded`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct RecordedChainId(pub u32);

/// Parameters up to this size travel inline in the lane record (ggml's
/// kernels mostly take under 128 bytes); larger ones go on the heap.
pub const INLINE_PARAM_BYTES: usize = 128;

#[derive(Clone)]
pub enum ParamBlock {
    Inline {
        len: u16,
        bytes: [u8; INLINE_PARAM_BYTES],
    },
    Heap(Box<[u8]>),
}

impl ParamBlock {
    pub fn new(params: &[u8]) -> ParamBlock {
        if params.len() <= INLINE_PARAM_BYTES {
            let mut bytes = [0u8; INLINE_PARAM_BYTES];
            bytes[..params.len()].copy_from_slice(params);
            // CAST: at most INLINE_PARAM_BYTES, which fits u16.
            ParamBlock::Inline {
                len: params.len() as u16,
                bytes,
            }
        } else {
            ParamBlock::Heap(params.into())
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            ParamBlock::Inline { len, bytes } => &bytes[..usize::from(*len)],
            ParamBlock::Heap(b) => b,
        }
    }
}

impl std::fmt::Debug for ParamBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ParamBlock({} bytes)", self.as_slice().len())
    }
}

/// One kernel launch on the data plane.
#[derive(Debug, Clone)]
pub struct LaneLaunch {
    pub stream: StreamId,
    pub kernel: KernelId,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_shared_bytes: u32,
    /// The parameter block, laid out as the kernel's metadata says.
    pub params: ParamBlock,
}

impl LaneLaunch {
    pub fn shape(&self) -> LaunchShape {
        LaunchShape {
            grid: self.grid,
            block: self.block,
            dynamic_shared_bytes: self.dynamic_shared_bytes,
        }
    }
}

/// What can travel on the lane.
#[derive(Debug, Clone)]
pub enum LaneItem {
    Launch(LaneLaunch),
    /// A device-to-device (or pinned host) copy of `bytes`.
    Copy {
        stream: StreamId,
        src: u64,
        dst: u64,
        bytes: u64,
    },
    /// A small upload whose bytes travel in the compute queue's push
    /// buffer (inline to memory), in stream order like a launch: no
    /// staging memory, no copy engine, no wait between two queues. `dst`
    /// and the length are multiples of four
    /// ([`crate::pushbuf::INLINE_WORD_BYTES`]).
    Upload {
        stream: StreamId,
        dst: u64,
        data: Box<[u8]>,
    },
    /// A 2-D copy: `height` rows of `width` bytes.
    Copy2d {
        stream: StreamId,
        src: u64,
        src_pitch: u64,
        dst: u64,
        dst_pitch: u64,
        width: u64,
        height: u64,
    },
    /// Fill `bytes` at `dst` with a repeated 32-bit value.
    Fill {
        stream: StreamId,
        dst: u64,
        bytes: u64,
        value: u32,
    },
    /// Record `event` after the stream's work so far; a timed record also
    /// has the engine write its clock there (for elapsed times).
    RecordEvent {
        stream: StreamId,
        event: EventId,
        timed: bool,
    },
    /// `stream` waits for `event` (possibly recorded on another stream).
    WaitEvent {
        stream: StreamId,
        event: EventId,
    },
    /// A caller waits for everything before this on its own thread: the
    /// actor posts the timeline values that cover it on the sync board
    /// (`crate::sync_board`).
    SyncPoint {
        ticket: u64,
    },
    /// Run a recorded chain after the stream's work so far.
    Replay {
        stream: StreamId,
        chain: RecordedChainId,
    },
    /// The recorded chain will not be replayed again: its memory goes back
    /// once its last replay has run. On the lane, so it comes after every
    /// replay pushed before it.
    ForgetChain {
        chain: RecordedChainId,
    },
}

/// Why the lane took nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LaneError {
    /// The lane's consumer, the submit actor, has stopped: nothing pushed
    /// now would ever run (and a full lane would never drain).
    #[error("the submit actor has stopped; the launch lane takes nothing more")]
    Stopped,
    /// The lane stayed full for the lane's patience: the actor is alive
    /// but takes nothing (stuck, or waiting on a GPU that does not
    /// finish).
    #[error("the launch lane stayed full for {waited_ms} ms; the submit actor takes nothing")]
    Stuck { waited_ms: u64 },
}

/// What the submit actor holds while it drains a lane: its lanes see it
/// gone when the actor's state is dropped (the actor thread ended).
#[derive(Debug, Default)]
pub(crate) struct LaneConsumer {
    alive: Arc<()>,
    /// Items every lane of this actor took, counted after each push.
    pushed: Arc<AtomicU64>,
}

/// The producer side, cloneable across caller threads.
#[derive(Clone)]
pub struct LaunchLane {
    queue: Arc<ArrayQueue<LaneItem>>,
    waker: Waker,
    consumer: Weak<()>,
    /// How long a push waits on a full lane.
    patience: Duration,
    pushed: Arc<AtomicU64>,
    /// Where a caller waits out a sync point itself, where the timelines
    /// are mapped and the config lets it.
    watch: Option<SyncWatch>,
}

impl LaunchLane {
    pub(crate) fn new(
        queue: Arc<ArrayQueue<LaneItem>>,
        waker: Waker,
        consumer: &LaneConsumer,
        patience: Duration,
        watch: Option<SyncWatch>,
    ) -> LaunchLane {
        LaunchLane {
            queue,
            waker,
            consumer: Arc::downgrade(&consumer.alive),
            patience,
            pushed: Arc::clone(&consumer.pushed),
            watch,
        }
    }

    fn consumer_gone(&self) -> bool {
        self.consumer.strong_count() == 0
    }

    /// Push without waiting for the actor. A full lane means the actor is
    /// behind: the caller yields until there is room (back-pressure), until
    /// the actor is seen gone, or for the lane's patience at most.
    ///
    /// # Errors
    /// The submit actor has stopped, or took nothing for the patience.
    pub fn push(&self, item: LaneItem) -> Result<(), LaneError> {
        self.push_counted(item).map(|_| ())
    }

    /// As [`LaunchLane::push`]; returns the lane's count with this item.
    fn push_counted(&self, item: LaneItem) -> Result<u64, LaneError> {
        if self.consumer_gone() {
            return Err(LaneError::Stopped);
        }
        let mut item = item;
        let mut full_since: Option<Instant> = None;
        loop {
            match self.queue.push(item) {
                Ok(()) => break,
                Err(back) => {
                    if self.consumer_gone() {
                        return Err(LaneError::Stopped);
                    }
                    let since = *full_since.get_or_insert_with(Instant::now);
                    let waited = since.elapsed();
                    if waited >= self.patience {
                        return Err(LaneError::Stuck {
                            // CAST: milliseconds of a bounded wait.
                            waited_ms: waited.as_millis() as u64,
                        });
                    }
                    item = back;
                    self.waker.wake();
                    std::thread::yield_now();
                }
            }
        }
        let count = self.pushed.fetch_add(1, Ordering::SeqCst) + 1;
        self.waker.wake();
        Ok(count)
    }

    /// Wait on this thread for everything the lane took so far, where the
    /// lane has a sync watch: a sync point into the lane, the actor's
    /// answer from the board, then the timelines read here. Anything else
    /// than the plain case says to ask the actor (`crate::sync_board`).
    pub fn sync_point(&self) -> CallerSync {
        let Some(watch) = &self.watch else {
            return CallerSync::AskActor;
        };
        let ticket = watch.ticket();
        let Ok(covered) = self.push_counted(LaneItem::SyncPoint { ticket }) else {
            return CallerSync::AskActor;
        };
        if watch.wait(ticket, || self.consumer_gone()) {
            CallerSync::Done { covered }
        } else {
            CallerSync::AskActor
        }
    }

    /// How many items the actor's lanes have taken so far. Every one
    /// counted was in the lane before the count moved, so a sync point
    /// requested after reading `n` covers the first `n`.
    pub fn pushed(&self) -> u64 {
        self.pushed.load(Ordering::SeqCst)
    }

    /// # Errors
    /// As [`LaunchLane::push`].
    pub fn launch(&self, launch: LaneLaunch) -> Result<(), LaneError> {
        self.push(LaneItem::Launch(launch))
    }

    /// Items waiting for the actor.
    pub fn backlog(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lane_of_an_actor_counts_what_it_took() {
        let queue = Arc::new(ArrayQueue::new(8));
        let (waker, _parking) = macuda_core::wake_pair();
        let consumer = LaneConsumer::default();
        let a = LaunchLane::new(Arc::clone(&queue), waker.clone(), &consumer, PATIENCE, None);
        let b = LaunchLane::new(Arc::clone(&queue), waker, &consumer, PATIENCE, None);
        assert_eq!(a.pushed(), 0);
        a.push(fill(0)).unwrap();
        b.push(fill(1)).unwrap();
        assert_eq!((a.pushed(), b.pushed()), (2, 2));
        drop(consumer);
        assert!(a.push(fill(2)).is_err());
        assert_eq!(a.pushed(), 2, "a refused push is not counted");
    }

    #[test]
    fn small_params_stay_inline_large_ones_do_not() {
        let small = ParamBlock::new(&[1; 96]);
        assert!(matches!(small, ParamBlock::Inline { len: 96, .. }));
        assert_eq!(small.as_slice(), &[1; 96]);
        let large = ParamBlock::new(&[2; 4800]);
        assert!(matches!(large, ParamBlock::Heap(_)));
        assert_eq!(large.as_slice().len(), 4800);
    }

    #[test]
    fn a_full_lane_waits_for_room_instead_of_dropping() {
        let queue = Arc::new(ArrayQueue::new(2));
        let (waker, _parking) = macuda_core::wake_pair();
        let consumer = LaneConsumer::default();
        let lane = LaunchLane::new(Arc::clone(&queue), waker, &consumer, PATIENCE, None);
        let reader = {
            let q = Arc::clone(&queue);
            std::thread::spawn(move || {
                let mut got = 0;
                while got < 100 {
                    if q.pop().is_some() {
                        got += 1;
                    } else {
                        std::thread::yield_now();
                    }
                }
                got
            })
        };
        for i in 0..100u64 {
            lane.push(fill(i)).unwrap();
        }
        assert_eq!(reader.join().unwrap(), 100);
        drop(consumer);
    }

    const PATIENCE: Duration = Duration::from_secs(30);

    /// An actor alive but taking nothing: the push gives up after the
    /// lane's patience instead of waiting for ever.
    #[test]
    fn a_full_lane_nobody_drains_gives_up_after_its_patience() {
        let queue = Arc::new(ArrayQueue::new(2));
        let (waker, _parking) = macuda_core::wake_pair();
        let consumer = LaneConsumer::default();
        let patience = Duration::from_millis(50);
        let lane = LaunchLane::new(Arc::clone(&queue), waker, &consumer, patience, None);
        lane.push(fill(0)).unwrap();
        lane.push(fill(1)).unwrap();
        let started = Instant::now();
        let e = lane.push(fill(2)).unwrap_err();
        assert!(
            matches!(e, LaneError::Stuck { waited_ms } if waited_ms >= 50),
            "{e}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        // Room again: taken.
        let _ = queue.pop();
        lane.push(fill(3)).unwrap();
        drop(consumer);
    }

    fn fill(i: u64) -> LaneItem {
        LaneItem::Fill {
            stream: StreamId(1),
            dst: i,
            bytes: 4,
            value: 0,
        }
    }

    /// The 4,097th launch after the actor died used to spin for ever.
    #[test]
    fn a_full_lane_whose_actor_is_gone_refuses_instead_of_spinning() {
        let queue = Arc::new(ArrayQueue::new(4));
        let (waker, _parking) = macuda_core::wake_pair();
        let consumer = LaneConsumer::default();
        let lane = LaunchLane::new(Arc::clone(&queue), waker, &consumer, PATIENCE, None);
        for i in 0..4 {
            lane.push(fill(i)).unwrap();
        }
        // The actor stops while a caller waits on the full lane.
        let waiting = {
            let lane = lane.clone();
            std::thread::spawn(move || lane.push(fill(99)))
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(consumer);
        assert_eq!(waiting.join().unwrap(), Err(LaneError::Stopped));
        // And later pushes are refused at once, full or not.
        assert_eq!(lane.push(fill(100)), Err(LaneError::Stopped));
        let _ = queue.pop();
        assert_eq!(lane.push(fill(101)), Err(LaneError::Stopped));
    }
}
