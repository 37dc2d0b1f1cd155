//! Streams, events and the capture state a stream can be in. Every stream
//! is a submit stream, and all of them share the device's queues, so their
//! work runs in submission order: each stream's own order holds, and a
//! wait on an event recorded earlier is satisfied by position.

use crate::error::CudaError;
use crate::hash::AddressMap;
use crate::state::nodes::Node;
use crate::types::{flags, STREAM_LEGACY, STREAM_PER_THREAD};
use arc_swap::ArcSwapOption;
use macuda_submit::{EventId, StreamId};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;

/// `cudaDeviceGetStreamPriorityRange`: NVIDIA's range (lower is sooner).
pub const LEAST_PRIORITY: i32 = 0;
pub const GREATEST_PRIORITY: i32 = -5;

/// First handle value given to a created stream, event or graph: well
/// away from 0, 1 and 2 (the special streams), and distinct per table.
const FIRST_HANDLE: usize = 0x1000;
const HANDLE_STEP: usize = 0x10;

/// Handle numbers for one table.
#[derive(Debug)]
pub struct HandleCounter {
    next: AtomicUsize,
    base: usize,
}

impl HandleCounter {
    pub fn new(base: usize) -> HandleCounter {
        HandleCounter {
            next: AtomicUsize::new(0),
            base,
        }
    }

    pub fn next(&self) -> usize {
        self.base + FIRST_HANDLE + self.next.fetch_add(1, Ordering::Relaxed) * HANDLE_STEP
    }
}

/// Work recorded on capturing streams, in the order it was issued.
pub struct Capture {
    pub mode: i32,
    pub thread: ThreadId,
    pub nodes: Mutex<Vec<Node>>,
    /// An operation the capture could not record ended it: EndCapture
    /// answers `cudaErrorStreamCaptureInvalidated`.
    pub invalidated: AtomicBool,
    /// The stream that began it (only it may end it).
    pub origin: usize,
}

pub struct StreamState {
    pub id: StreamId,
    pub flags: u32,
    pub priority: i32,
    pub capture: ArcSwapOption<Capture>,
}

impl StreamState {
    fn new(id: StreamId, flags: u32, priority: i32) -> StreamState {
        StreamState {
            id,
            flags,
            priority,
            capture: ArcSwapOption::empty(),
        }
    }

    pub fn capturing(&self) -> Option<Arc<Capture>> {
        self.capture.load_full()
    }
}

/// The streams: the default one (handles 0, `cudaStreamLegacy` and
/// `cudaStreamPerThread`) and those the program created.
pub struct StreamTable {
    default: Arc<StreamState>,
    created: AddressMap<Arc<StreamState>>,
    handles: HandleCounter,
    /// Captures in `cudaStreamCaptureModeGlobal` or thread-local mode now
    /// running: the legacy stream may not be used meanwhile.
    strict_captures: AtomicUsize,
}

impl StreamTable {
    pub fn new(default: StreamId) -> StreamTable {
        StreamTable {
            default: Arc::new(StreamState::new(
                default,
                flags::STREAM_DEFAULT,
                LEAST_PRIORITY,
            )),
            created: AddressMap::default(),
            handles: HandleCounter::new(0x5300_0000),
            strict_captures: AtomicUsize::new(0),
        }
    }

    pub fn is_default(handle: usize) -> bool {
        matches!(handle, 0 | STREAM_LEGACY | STREAM_PER_THREAD)
    }

    /// The stream a handle names.
    pub fn get(&self, handle: usize) -> Result<Arc<StreamState>, CudaError> {
        if Self::is_default(handle) {
            return Ok(Arc::clone(&self.default));
        }
        self.created
            .get(&handle)
            .map(|s| Arc::clone(&s))
            .ok_or(CudaError::INVALID_RESOURCE_HANDLE)
    }

    /// The stream work is issued to. Work on the legacy stream while a
    /// strict capture runs elsewhere is refused (and the capture ended), as
    /// NVIDIA's runtime does.
    pub fn for_work(&self, handle: usize) -> Result<Arc<StreamState>, CudaError> {
        let s = self.get(handle)?;
        if handle != STREAM_PER_THREAD
            && Self::is_default(handle)
            && self.strict_captures.load(Ordering::Acquire) > 0
            && s.capturing().is_none()
        {
            self.invalidate_all();
            return Err(CudaError::STREAM_CAPTURE_IMPLICIT);
        }
        Ok(s)
    }

    pub fn create(&self, id: StreamId, flags: u32, priority: i32) -> usize {
        let handle = self.handles.next();
        let priority = priority.clamp(GREATEST_PRIORITY, LEAST_PRIORITY);
        self.created
            .insert(handle, Arc::new(StreamState::new(id, flags, priority)));
        handle
    }

    pub fn remove(&self, handle: usize) -> Result<Arc<StreamState>, CudaError> {
        if Self::is_default(handle) {
            return Err(CudaError::INVALID_RESOURCE_HANDLE);
        }
        self.created
            .remove(&handle)
            .map(|(_, s)| s)
            .ok_or(CudaError::INVALID_RESOURCE_HANDLE)
    }

    pub fn begin_strict(&self) {
        self.strict_captures.fetch_add(1, Ordering::AcqRel);
    }

    pub fn end_strict(&self) {
        let _ = self
            .strict_captures
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Streams in a capture (the origin and those that joined it).
    pub fn in_capture(&self, capture: &Arc<Capture>) -> Vec<Arc<StreamState>> {
        let mut out: Vec<Arc<StreamState>> = self
            .created
            .iter()
            .filter(|s| s.capturing().is_some_and(|c| Arc::ptr_eq(&c, capture)))
            .map(|s| Arc::clone(&s))
            .collect();
        if self
            .default
            .capturing()
            .is_some_and(|c| Arc::ptr_eq(&c, capture))
        {
            out.push(Arc::clone(&self.default));
        }
        out
    }

    fn invalidate_all(&self) {
        let mut all: Vec<Arc<StreamState>> = self.created.iter().map(|s| Arc::clone(&s)).collect();
        all.push(Arc::clone(&self.default));
        for s in all {
            if let Some(c) = s.capturing() {
                c.invalidated.store(true, Ordering::Release);
            }
        }
    }
}

pub struct EventState {
    pub id: EventId,
    pub flags: u32,
    pub recorded: AtomicBool,
    /// The capture its last record went into, for streams that wait on it
    /// (they join that capture).
    pub captured: ArcSwapOption<Capture>,
}

impl EventState {
    pub fn timed(&self) -> bool {
        self.flags & flags::EVENT_DISABLE_TIMING == 0
    }
}

pub struct EventTable {
    events: AddressMap<Arc<EventState>>,
    handles: HandleCounter,
}

impl Default for EventTable {
    fn default() -> Self {
        EventTable {
            events: AddressMap::default(),
            handles: HandleCounter::new(0x4500_0000),
        }
    }
}

impl EventTable {
    pub fn create(&self, id: EventId, flags: u32) -> usize {
        let handle = self.handles.next();
        self.events.insert(
            handle,
            Arc::new(EventState {
                id,
                flags,
                recorded: AtomicBool::new(false),
                captured: ArcSwapOption::empty(),
            }),
        );
        handle
    }

    pub fn get(&self, handle: usize) -> Result<Arc<EventState>, CudaError> {
        self.events
            .get(&handle)
            .map(|e| Arc::clone(&e))
            .ok_or(CudaError::INVALID_RESOURCE_HANDLE)
    }

    pub fn remove(&self, handle: usize) -> Result<Arc<EventState>, CudaError> {
        self.events
            .remove(&handle)
            .map(|(_, e)| e)
            .ok_or(CudaError::INVALID_RESOURCE_HANDLE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_special_handles_are_the_default_stream_and_others_must_exist() {
        let t = StreamTable::new(StreamId(7));
        for h in [0, STREAM_LEGACY, STREAM_PER_THREAD] {
            assert_eq!(t.get(h).unwrap().id, StreamId(7));
        }
        assert_eq!(
            t.get(0x1234).err(),
            Some(CudaError::INVALID_RESOURCE_HANDLE)
        );
        let h = t.create(StreamId(8), flags::STREAM_NON_BLOCKING, -100);
        let s = t.get(h).unwrap();
        assert_eq!(
            (s.id, s.priority),
            (StreamId(8), GREATEST_PRIORITY),
            "clamped"
        );
        t.remove(h).unwrap();
        assert!(t.get(h).is_err(), "a destroyed stream is gone");
        assert!(
            t.remove(0).is_err(),
            "the default stream cannot be destroyed"
        );
    }

    #[test]
    fn the_legacy_stream_is_refused_during_a_strict_capture() {
        let t = StreamTable::new(StreamId(1));
        let h = t.create(StreamId(2), 0, 0);
        let c = Arc::new(Capture {
            mode: flags::CAPTURE_MODE_GLOBAL,
            thread: std::thread::current().id(),
            nodes: Mutex::new(Vec::new()),
            invalidated: AtomicBool::new(false),
            origin: h,
        });
        t.get(h).unwrap().capture.store(Some(Arc::clone(&c)));
        t.begin_strict();
        assert_eq!(
            t.for_work(0).err(),
            Some(CudaError::STREAM_CAPTURE_IMPLICIT)
        );
        assert!(c.invalidated.load(Ordering::Acquire));
        assert!(t.for_work(STREAM_PER_THREAD).is_ok());
        t.end_strict();
        assert!(t.for_work(0).is_ok());
    }
}
