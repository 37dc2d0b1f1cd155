//! The descriptor region: launch descriptors and their constant bank 0 are
//! built into a cached host **shadow**, then delivered at a flush by one
//! sequential copy per patch into a **mirror** laid out at the region's own
//! offsets, from which the copy engine moves them to video memory ahead of
//! the compute work that reads them (seed notes, "Descriptor delivery").
//! Command buffers never take this path: the engine must find them already
//! in place to read the ordering primitives inside them, so they live in a
//! region of their own with a writer of their own (two regions, one writer
//! each).
//!
//! Video memory starts with whatever was there, not the mirror's zeros, so
//! the first flush delivers the whole region, and so does the first after
//! the channels that delivered were torn down mid-flight; every other flush
//! delivers only its spans (with diffing, only their changed words).
//!
//! Cross-token alignment: at a standstill (a synchronisation the host
//! waited for, so nothing is in flight) the next descriptor starts again at
//! offset 0. A decode token then lays launch k where the previous token's
//! launch k was, and diffing compares each launch with its own previous
//! self: only the parameters that really changed are delivered.

use std::collections::VecDeque;

/// Patches are whole 32-bit words: the copy moves words at word addresses.
pub const PATCH_GRANULE: u64 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub offset: u64,
    pub len: u64,
}

impl Span {
    fn end(&self) -> u64 {
        self.offset + self.len
    }

    fn overlaps(&self, other: &Span) -> bool {
        self.offset < other.end() && other.offset < self.end()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ArenaError {
    #[error("a descriptor of {len} bytes does not fit the {capacity}-byte region")]
    TooLarge { len: u64, capacity: u64 },
    #[error(
        "the region at {offset:#x} is still read by work that completes at timeline value {value}"
    )]
    Busy { offset: u64, value: u64 },
    #[error("write of {len} bytes at {offset:#x} is outside the region")]
    OutOfRange { offset: u64, len: u64 },
}

/// What one flush delivers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlushPlan {
    pub patches: Vec<Span>,
    /// Descriptor bytes copied (the patches' lengths).
    pub payload_bytes: u64,
}

/// Where the mirror lives: memory the copy engine reads by GPU address
/// (pinned host memory on the kernel path), or a plain buffer where no
/// engine runs (the null device).
pub trait MirrorStore: Send {
    fn bytes(&self) -> &[u8];
    fn bytes_mut(&mut self) -> &mut [u8];
}

impl MirrorStore for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
}

pub struct DescriptorArena {
    shadow: Vec<u8>,
    mirror: Box<dyn MirrorStore>,
    cursor: u64,
    restart_at_next: bool,
    dirty: Vec<Span>,
    diffing: bool,
    /// Video memory does not hold the mirror: the next flush delivers the
    /// whole region. Where it does, a word equal in shadow and mirror is
    /// in video memory too, and diffing needs nothing else to know what to
    /// leave out. (A flag per word, asked of every span at every flush,
    /// cost more than the diff itself: a memchr over a quarter of the
    /// span's bytes, and a quarter more of the region in the CPU's caches.)
    owe_region: bool,
    /// Spans handed to the GPU and the timeline value that retires them.
    in_flight: VecDeque<(Span, u64)>,
}

impl std::fmt::Debug for DescriptorArena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DescriptorArena")
            .field("capacity", &self.shadow.len())
            .field("cursor", &self.cursor)
            .field("in_flight", &self.in_flight.len())
            .finish_non_exhaustive()
    }
}

impl DescriptorArena {
    /// A region whose mirror is a buffer of its own.
    pub fn new(capacity: u64, diffing: bool) -> DescriptorArena {
        DescriptorArena::with_mirror(capacity, diffing, Box::new(vec![0u8; capacity as usize]))
    }

    /// A region whose mirror is `mirror` (at least `capacity` bytes; its
    /// first `capacity` bytes are used).
    pub fn with_mirror(
        capacity: u64,
        diffing: bool,
        mirror: Box<dyn MirrorStore>,
    ) -> DescriptorArena {
        DescriptorArena {
            shadow: vec![0; capacity as usize],
            mirror,
            cursor: 0,
            restart_at_next: true,
            dirty: Vec::new(),
            diffing,
            owe_region: true,
            in_flight: VecDeque::new(),
        }
    }

    pub fn capacity(&self) -> u64 {
        self.shadow.len() as u64
    }

    pub fn diffing(&self) -> bool {
        self.diffing
    }

    /// Space for one descriptor of `len` bytes at `align`; wraps to the
    /// start when the end of the region is reached.
    ///
    /// # Errors
    /// Too large for the region, or the space is still in use by work in
    /// flight (wait for the value named, then retire it).
    pub fn reserve(&mut self, len: u64, align: u64) -> Result<u64, ArenaError> {
        let capacity = self.capacity();
        if len > capacity {
            return Err(ArenaError::TooLarge { len, capacity });
        }
        if std::mem::take(&mut self.restart_at_next) {
            self.cursor = 0;
        }
        let mut offset = self.cursor.next_multiple_of(align.max(1));
        if offset + len > capacity {
            offset = 0;
        }
        let span = Span { offset, len };
        if let Some((_, value)) = self.in_flight.iter().find(|(s, _)| s.overlaps(&span)) {
            return Err(ArenaError::Busy {
                offset,
                value: *value,
            });
        }
        self.cursor = offset + len;
        Ok(offset)
    }

    /// Write into the shadow; the span is delivered at the next flush.
    ///
    /// # Errors
    /// A span outside the region.
    pub fn write(&mut self, offset: u64, bytes: &[u8]) -> Result<(), ArenaError> {
        let len = bytes.len() as u64;
        let end = offset.checked_add(len).filter(|e| *e <= self.capacity());
        let Some(end) = end else {
            return Err(ArenaError::OutOfRange { offset, len });
        };
        self.shadow[offset as usize..end as usize].copy_from_slice(bytes);
        match self.dirty.last_mut() {
            Some(last) if last.end() == offset => last.len += len,
            _ => self.dirty.push(Span { offset, len }),
        }
        Ok(())
    }

    /// Let `fill` write `len` bytes of the shadow in place (no staging
    /// copy); the span is delivered at the next flush.
    ///
    /// # Errors
    /// A span outside the region.
    pub fn write_with<E>(
        &mut self,
        offset: u64,
        len: u64,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Result<(), E>, ArenaError> {
        let end = offset.checked_add(len).filter(|e| *e <= self.capacity());
        let Some(end) = end else {
            return Err(ArenaError::OutOfRange { offset, len });
        };
        let r = fill(&mut self.shadow[offset as usize..end as usize]);
        match self.dirty.last_mut() {
            Some(last) if last.end() == offset => last.len += len,
            _ => self.dirty.push(Span { offset, len }),
        }
        Ok(r)
    }

    /// Overwrite bytes already written this flush (a chain link set when
    /// the next launch arrives) without adding a new dirty span.
    ///
    /// # Errors
    /// A span outside the region.
    pub fn patch(&mut self, offset: u64, bytes: &[u8]) -> Result<(), ArenaError> {
        let len = bytes.len() as u64;
        let end = offset.checked_add(len).filter(|e| *e <= self.capacity());
        let Some(end) = end else {
            return Err(ArenaError::OutOfRange { offset, len });
        };
        self.shadow[offset as usize..end as usize].copy_from_slice(bytes);
        if !self
            .dirty
            .iter()
            .any(|s| s.offset <= offset && end <= s.end())
        {
            self.dirty.push(Span { offset, len });
        }
        Ok(())
    }

    pub fn shadow(&self, span: Span) -> &[u8] {
        &self.shadow[span.offset as usize..span.end() as usize]
    }

    pub fn mirror(&self) -> &[u8] {
        &self.mirror.bytes()[..self.shadow.len()]
    }

    /// Video memory can no longer be trusted to hold what was delivered
    /// (the channels that delivered it were torn down mid-flight): the
    /// whole region goes again at the next flush.
    pub fn forget_delivered(&mut self) {
        self.owe_region = true;
        self.in_flight.clear();
        self.dirty.clear();
        self.restart_at_next = true;
    }

    /// The host waited for everything: nothing is in flight, and the next
    /// descriptor starts the region again (cross-token alignment).
    pub fn standstill(&mut self) {
        self.in_flight.clear();
        self.restart_at_next = true;
    }

    /// Work up to timeline value `completed` is done; its spans are free.
    pub fn retire(&mut self, completed: u64) {
        self.in_flight.retain(|(_, v)| *v > completed);
    }

    /// Deliver what was written since the last flush into the mirror and
    /// say what was copied. With diffing, each written span contributes
    /// only the words that differ from what the mirror already holds there;
    /// while video memory does not hold the mirror, the whole region goes.
    pub fn flush(&mut self, retire_at: u64) -> FlushPlan {
        let mut plan = FlushPlan::default();
        let owe_region = self.owe_region && !self.dirty.is_empty();
        for span in std::mem::take(&mut self.dirty) {
            let patch = if self.diffing && !owe_region {
                self.changed(span)
            } else {
                Some(span)
            };
            if let Some(p) = patch {
                let (a, b) = (p.offset as usize, p.end() as usize);
                self.mirror.bytes_mut()[a..b].copy_from_slice(&self.shadow[a..b]);
                if !owe_region {
                    plan.payload_bytes += p.len;
                    plan.patches.push(p);
                }
            }
            self.note_in_flight(span, retire_at);
        }
        if owe_region {
            // Nothing else is in flight: the region was just created, or
            // its channels were torn down.
            let whole = Span {
                offset: 0,
                len: self.capacity(),
            };
            plan.payload_bytes = whole.len;
            plan.patches = vec![whole];
            self.owe_region = false;
        }
        plan
    }

    /// Keep `span` as in flight until `value`, merged into the newest entry
    /// when it retires with it and lies at or after its start: a flush's
    /// descriptors were reserved one after another, so their bounding
    /// range holds nothing else until the region comes round again, when
    /// this flush must have retired anyway. The queue then holds an entry
    /// or two per chain, not one per launch, and a reservation scans only
    /// those. (A flush that wrapped starts a second entry.)
    fn note_in_flight(&mut self, span: Span, value: u64) {
        if let Some((last, v)) = self.in_flight.back_mut() {
            if *v == value && span.offset >= last.offset {
                let start = last.offset.min(span.offset);
                let end = last.end().max(span.end());
                *last = Span {
                    offset: start,
                    len: end - start,
                };
                return;
            }
        }
        self.in_flight.push_back((span, value));
    }

    /// Spans in flight (merged), for tests and diagnostics.
    pub fn in_flight_spans(&self) -> usize {
        self.in_flight.len()
    }

    /// The smallest word-aligned span of `span` where shadow and mirror
    /// differ.
    fn changed(&self, span: Span) -> Option<Span> {
        let start = span.offset - span.offset % PATCH_GRANULE;
        let end = span
            .end()
            .next_multiple_of(PATCH_GRANULE)
            .min(self.capacity());
        let (s, m) = (
            &self.shadow[start as usize..end as usize],
            &self.mirror.bytes()[start as usize..end as usize],
        );
        // The common case in a steady decode: nothing changed; one compare
        // of the whole span says so.
        if s == m {
            return None;
        }
        let g = PATCH_GRANULE as usize;
        let mut words = s.chunks_exact(g).zip(m.chunks_exact(g));
        let first = words.position(|(a, b)| a != b)?;
        let last = s
            .chunks_exact(g)
            .zip(m.chunks_exact(g))
            .rposition(|(a, b)| a != b)?;
        let offset = start + (first * g) as u64;
        let len = (end - offset).min(((last - first + 1) * g) as u64);
        Some(Span { offset, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flush_of_adjacent_descriptors_is_one_span_in_flight() {
        let mut a = DescriptorArena::new(1 << 20, true);
        for _ in 0..128 {
            let o = a.reserve(576, 64).unwrap();
            a.write(o, &[1; 576]).unwrap();
            let q = a.reserve(384, 256).unwrap();
            a.write(q, &[2; 384]).unwrap();
        }
        a.flush(1);
        assert_eq!(a.in_flight_spans(), 1, "one chain, one span");
        // Still busy where the chain lies, free where it does not.
        a.standstill();
        let mut b = DescriptorArena::new(4096, false);
        let o = b.reserve(1024, 256).unwrap();
        b.write(o, &[1; 1024]).unwrap();
        b.flush(3);
        let far = b.reserve(1024, 256).unwrap();
        b.write(far, &[1; 1024]).unwrap();
        b.flush(4);
        assert_eq!(b.in_flight_spans(), 2, "different retire values stay apart");
        b.reserve(2048, 256).unwrap();
        assert!(matches!(
            b.reserve(1024, 256),
            Err(ArenaError::Busy { value: 3, .. })
        ));
    }

    #[test]
    fn reserves_aligned_and_wraps() {
        let mut a = DescriptorArena::new(1024, true);
        assert_eq!(a.reserve(100, 256), Ok(0));
        assert_eq!(a.reserve(100, 256), Ok(256));
        assert_eq!(a.reserve(600, 256), Ok(0), "no room at the end: wraps");
        assert_eq!(
            a.reserve(2000, 1),
            Err(ArenaError::TooLarge {
                len: 2000,
                capacity: 1024
            })
        );
    }

    #[test]
    fn in_flight_spans_are_not_reused_until_retired() {
        let mut a = DescriptorArena::new(512, false);
        let o = a.reserve(256, 256).unwrap();
        a.write(o, &[1; 256]).unwrap();
        a.flush(7);
        a.reserve(256, 256).unwrap();
        assert_eq!(
            a.reserve(256, 256),
            Err(ArenaError::Busy {
                offset: 0,
                value: 7
            })
        );
        a.retire(7);
        assert_eq!(a.reserve(256, 256), Ok(0));
    }

    #[test]
    fn a_standstill_restarts_at_zero_so_tokens_line_up() {
        let mut a = DescriptorArena::new(4096, true);
        let first: Vec<u64> = (0..3).map(|_| a.reserve(384, 256).unwrap()).collect();
        a.standstill();
        let second: Vec<u64> = (0..3).map(|_| a.reserve(384, 256).unwrap()).collect();
        assert_eq!(first, second);
    }

    #[test]
    fn diffing_delivers_only_changed_words() {
        let mut a = DescriptorArena::new(4096, true);
        let token = |a: &mut DescriptorArena, pos: u32| {
            for k in 0..4u8 {
                let o = a.reserve(384, 256).unwrap();
                let mut d = vec![k + 1; 384];
                d[100..104].copy_from_slice(&pos.to_le_bytes());
                a.write(o, &d).unwrap();
            }
            let p = a.flush(1);
            a.standstill();
            p
        };
        let first = token(&mut a, 1);
        assert_eq!(
            first.patches,
            vec![Span {
                offset: 0,
                len: 4096
            }],
            "the first flush delivers the whole region"
        );
        let second = token(&mut a, 2);
        assert_eq!(second.patches.len(), 4);
        assert_eq!(second.payload_bytes, 16, "one word per launch changed");
        assert_eq!(
            second.patches[0],
            Span {
                offset: 100,
                len: 4
            }
        );
        let third = token(&mut a, 2);
        assert_eq!(third.payload_bytes, 0, "nothing changed");
        assert_eq!(
            &a.mirror()[0..384],
            a.shadow(Span {
                offset: 0,
                len: 384
            })
        );
    }

    #[test]
    fn video_memory_gets_the_whole_region_first_and_again_after_a_teardown() {
        // Video memory is not zeroed: zeros the mirror starts with, and
        // the gaps between descriptors, must reach it too.
        let mut a = DescriptorArena::new(4096, true);
        let o = a.reserve(384, 256).unwrap();
        let mut d = vec![0u8; 384];
        d[200] = 5;
        a.write(o, &d).unwrap();
        let whole = vec![Span {
            offset: 0,
            len: 4096,
        }];
        assert_eq!(a.flush(1).patches, whole);
        a.standstill();
        let o = a.reserve(384, 256).unwrap();
        a.write(o, &d).unwrap();
        assert_eq!(a.flush(2).payload_bytes, 0, "now video memory holds them");
        // Channels torn down mid-flight: nothing in video memory is
        // trusted, and the next flush with anything in it sends all again.
        a.forget_delivered();
        assert_eq!(a.flush(3), FlushPlan::default(), "nothing written yet");
        let o = a.reserve(384, 256).unwrap();
        a.write(o, &d).unwrap();
        assert_eq!(a.flush(4).patches, whole);
        assert_eq!(&a.mirror()[..384], &d[..]);
    }

    #[test]
    fn without_diffing_whole_spans_go() {
        let mut a = DescriptorArena::new(4096, false);
        let o = a.reserve(384, 256).unwrap();
        a.write(o, &[9; 384]).unwrap();
        assert_eq!(a.flush(1).payload_bytes, 4096, "the whole region first");
        a.standstill();
        for _ in 0..2 {
            let o = a.reserve(384, 256).unwrap();
            a.write(o, &[9; 384]).unwrap();
            assert_eq!(a.flush(1).payload_bytes, 384);
            a.standstill();
        }
        assert!(a.write(4000, &[0; 200]).is_err());
    }
}
