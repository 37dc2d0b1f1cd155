//! The replay: a transport that answers from a recorded trace and checks the
//! driver against it, with the rules of design.md "Record and replay".

use super::access::{recorded_read, Access, ReadKey, ReadValue};
use super::format::{dma_read_pieces, dma_write_hash, Trace, TraceError, TraceOp, TracedOp};
use crate::error::PciError;
use crate::transport::{BarInfo, DmaId, DmaRegion, Transport};
use macuda_hw::pci::Width;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

/// A stage of the recording the driver under test does not perform yet,
/// named by its first and last recorded line (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gap {
    pub first: usize,
    pub last: usize,
}

impl fmt::Display for Gap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lines {}..={}", self.first, self.last)
    }
}

/// Why a gap declaration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GapError {
    #[error("gap {gap}: its first line comes after its last")]
    OutOfOrder { gap: Gap },
    #[error("gap {gap}: line {line} holds no recorded operation")]
    NotAnOp { gap: Gap, line: usize },
    #[error("gap {gap} overlaps the gap {other} declared before it")]
    Overlap { gap: Gap, other: Gap },
    #[error("gap {gap}: gaps must be declared before the replay starts")]
    Started { gap: Gap },
}

/// What kind of divergence the driver made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DivergenceKind {
    /// The driver's op is not the recorded op (a different op, address,
    /// width, value or size), and no forgiven read lies between.
    Mismatch,
    /// The driver's op would step over a recorded read whose value differs
    /// from the one the driver holds for that address: the read that saw a
    /// change, which the driver never made.
    SkippedChange,
    /// The driver made an op after the last recorded one.
    PastEnd,
    /// The driver finished with recorded ops it never made.
    Unreplayed,
}

impl fmt::Display for DivergenceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DivergenceKind::Mismatch => "the driver's operation is not the recorded one",
            DivergenceKind::SkippedChange => {
                "the driver skipped a recorded read that saw a value it does not hold"
            }
            DivergenceKind::PastEnd => "the driver went on past the end of the trace",
            DivergenceKind::Unreplayed => "the driver finished with recorded operations left",
        })
    }
}

/// What [`Divergence::expected`] says when the trace has ended.
pub const END_OF_TRACE: &str = "end of trace";
/// What [`Divergence::actual`] says when the driver finished.
pub const REPLAY_FINISH: &str = "finish";

/// Where the driver left the recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    pub kind: DivergenceKind,
    /// The recorded line of the expected op; one past the last line when the
    /// trace had ended.
    pub line: usize,
    /// The recorded op as trace text, or [`END_OF_TRACE`].
    pub expected: String,
    /// The driver's op as trace text without a result (`cfg_read 0x004
    /// u16`, `mmio_read 0x000a00 4`), or [`REPLAY_FINISH`].
    pub actual: String,
}

/// At most this much of an op's text goes into the error message (the
/// fields keep it whole).
const SHOWN: usize = 200;

fn shown(text: &str) -> String {
    match text.char_indices().nth(SHOWN) {
        Some((i, _)) => format!("{}... ({} bytes)", &text[..i], text.len()),
        None => text.to_string(),
    }
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "replay diverged at trace line {} ({}): recorded `{}`, driver `{}`",
            self.line,
            self.kind,
            shown(&self.expected),
            shown(&self.actual)
        )
    }
}

/// Replay failures. Every one but [`ReplayError::NoSuchDma`],
/// [`ReplayError::Trace`] and [`ReplayError::Gap`] poisons the replay: each
/// later call returns the same error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error("{0}")]
    Divergence(Box<Divergence>),
    #[error(
        "replay accounting broken: cursor {cursor} != finished {finished} + stepped {stepped} \
         + gapped {gapped} (of {total} ops)"
    )]
    Accounting {
        cursor: usize,
        finished: usize,
        stepped: usize,
        gapped: usize,
        total: usize,
    },
    #[error("the driver touched DMA region {id}, which the replay never allocated")]
    NoSuchDma { id: u32 },
    #[error("the trace could not be read")]
    Trace(#[from] TraceError),
    #[error("a gap was refused")]
    Gap(#[from] GapError),
}

impl ReplayError {
    /// The divergence, if this is one.
    pub fn divergence(&self) -> Option<&Divergence> {
        match self {
            ReplayError::Divergence(d) => Some(d),
            _ => None,
        }
    }
}

/// Where a replay stands. `cursor == finished + stepped + gapped` always.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplayStats {
    /// Recorded ops the driver made.
    pub finished: usize,
    /// Recorded reads stepped over: the driver polled fewer times.
    pub stepped: usize,
    /// Recorded ops inside declared gaps that were crossed.
    pub gapped: usize,
    /// Recorded ops behind the cursor.
    pub cursor: usize,
    /// Recorded ops in all.
    pub total: usize,
    /// Driver reads answered from the value it already held, the cursor
    /// unmoved: the driver polled more times.
    pub rereads: usize,
}

/// A declared gap with the op indices it spans.
#[derive(Debug, Clone, Copy)]
struct GapSpan {
    gap: Gap,
    /// Index of its first op.
    start: usize,
    /// Index after its last op.
    end: usize,
}

/// The only three reasons the cursor moves.
#[derive(Debug, Clone, Copy)]
enum Move {
    Finish,
    Step,
    Cross(usize),
}

/// A transport that answers from a recorded trace.
///
/// Reads return the recorded value; writes, resets, doorbells, BAR queries
/// and DMA allocations must match the recorded op exactly, and queries and
/// allocations return the recorded answer. Two things are forgiven, nothing
/// else:
///
/// 1. A read of an address the driver already holds a value for (the last
///    value this replay returned for that address and width), when it does
///    not match the recorded op: it is answered with the held value and the
///    cursor stays (the driver polls more times than the recording did).
/// 2. A recorded read, at the cursor, of an address whose recorded value
///    equals the value the driver holds for it: when the driver's op does not
///    match it, it is stepped over (the driver polled fewer times). A read
///    whose value differs from the held one is the read that saw a change;
///    stepping over it is a divergence.
///
/// The driver's op is first looked for past forgivable reads (and crossed
/// gaps); only when it is not found is rule 1 tried, and otherwise the op is
/// a divergence naming the first recorded op that could not be forgiven.
///
/// DMA memory depends on the trace's version. A v2 trace holds the driver's
/// DMA reads and writes: they are ops like any other (a DMA read is a read,
/// forgiven as above; a write matches by length and hash), and the replay
/// keeps no DMA memory. A v1 trace holds none, so the replay keeps each
/// region's memory locally, and the driver reads back what it wrote (what
/// the card wrote there is lost).
pub struct Replay {
    ops: Vec<TracedOp>,
    lines: usize,
    /// The trace holds DMA reads and writes (v2).
    traced_dma: bool,
    cursor: usize,
    finished: usize,
    stepped: usize,
    gapped: usize,
    rereads: usize,
    /// Sorted by first line; none overlap.
    gaps: Vec<GapSpan>,
    crossed: Vec<Gap>,
    held: HashMap<ReadKey, ReadValue>,
    dma: BTreeMap<DmaId, SparseMemory>,
    started: bool,
    poisoned: Option<ReplayError>,
}

/// What a matched or forgiven op answers.
enum Reply {
    Nothing,
    Word(u32),
    Bytes(Vec<u8>),
    Bars(Vec<BarInfo>),
    Region(DmaRegion),
}

impl Replay {
    pub fn new(trace: Trace) -> Replay {
        let lines = trace.lines();
        let traced_dma = trace.version() >= 2;
        Replay {
            ops: trace.into_ops(),
            lines,
            traced_dma,
            cursor: 0,
            finished: 0,
            stepped: 0,
            gapped: 0,
            rereads: 0,
            gaps: Vec::new(),
            crossed: Vec::new(),
            held: HashMap::new(),
            dma: BTreeMap::new(),
            started: false,
            poisoned: None,
        }
    }

    /// Parse `text` and replay it.
    ///
    /// # Errors
    /// A malformed trace.
    pub fn parse(text: &str) -> Result<Replay, TraceError> {
        Trace::parse(text).map(Replay::new)
    }

    /// Read the trace at `path` and replay it.
    ///
    /// # Errors
    /// An unreadable or malformed trace.
    pub fn load(path: impl AsRef<Path>) -> Result<Replay, TraceError> {
        Trace::load(path).map(Replay::new)
    }

    /// Declare lines `first..=last` a gap: when the cursor reaches `first`
    /// it crosses to after `last`. Both must hold ops, in order, overlapping
    /// no other gap, and the replay must not have started.
    ///
    /// # Errors
    /// As [`GapError`].
    pub fn declare_gap(&mut self, first: usize, last: usize) -> Result<(), GapError> {
        let gap = Gap { first, last };
        if self.started {
            return Err(GapError::Started { gap });
        }
        if first > last {
            return Err(GapError::OutOfOrder { gap });
        }
        let index_of = |line: usize| {
            self.ops
                .binary_search_by_key(&line, |o| o.line)
                .map_err(|_| GapError::NotAnOp { gap, line })
        };
        let start = index_of(first)?;
        let end = index_of(last)? + 1;
        if let Some(other) = self
            .gaps
            .iter()
            .find(|g| first <= g.gap.last && g.gap.first <= last)
        {
            return Err(GapError::Overlap {
                gap,
                other: other.gap,
            });
        }
        let at = self.gaps.partition_point(|g| g.gap.first < first);
        self.gaps.insert(at, GapSpan { gap, start, end });
        Ok(())
    }

    /// The gaps crossed so far, in the order crossed.
    pub fn gaps_crossed(&self) -> &[Gap] {
        &self.crossed
    }

    pub fn stats(&self) -> ReplayStats {
        ReplayStats {
            finished: self.finished,
            stepped: self.stepped,
            gapped: self.gapped,
            cursor: self.cursor,
            total: self.ops.len(),
            rereads: self.rereads,
        }
    }

    /// The driver is done: step over trailing forgivable reads, cross
    /// trailing gaps, and fail if any recorded op is left.
    ///
    /// # Errors
    /// [`DivergenceKind::Unreplayed`] naming the first op left; or the
    /// divergence that poisoned the replay earlier.
    pub fn finish(&mut self) -> Result<ReplayStats, ReplayError> {
        self.live()?;
        while self.cursor < self.ops.len() && self.forgivable(&self.ops[self.cursor].op) {
            self.advance(Move::Step)?;
        }
        if let Some(left) = self.ops.get(self.cursor) {
            let d = Divergence {
                kind: DivergenceKind::Unreplayed,
                line: left.line,
                expected: left.op.to_string(),
                actual: REPLAY_FINISH.to_string(),
            };
            return Err(self.poison(ReplayError::Divergence(Box::new(d))));
        }
        Ok(self.stats())
    }

    /// Fails with the poisoning error if there is one; on the first call,
    /// crosses a gap that starts at the first op.
    fn live(&mut self) -> Result<(), ReplayError> {
        if let Some(e) = &self.poisoned {
            return Err(e.clone());
        }
        if !self.started {
            self.started = true;
            if let Some(g) = self.gap_starting_at(0) {
                self.advance(Move::Cross(g))?;
            }
        }
        Ok(())
    }

    fn poison(&mut self, e: ReplayError) -> ReplayError {
        self.poisoned = Some(e.clone());
        e
    }

    fn gap_starting_at(&self, index: usize) -> Option<usize> {
        self.gaps.iter().position(|g| g.start == index)
    }

    /// The one place the cursor moves. Counts the move, checks
    /// `cursor == finished + stepped + gapped`, then crosses any gap that
    /// starts where the cursor landed (each crossing a move of its own).
    fn advance(&mut self, first: Move) -> Result<(), ReplayError> {
        let mut next = Some(first);
        while let Some(m) = next {
            let by = match m {
                Move::Finish => {
                    self.finished += 1;
                    1
                }
                Move::Step => {
                    self.stepped += 1;
                    1
                }
                Move::Cross(g) => {
                    let span = self.gaps[g];
                    let ops = span.end - span.start;
                    self.gapped += ops;
                    self.crossed.push(span.gap);
                    ops
                }
            };
            self.cursor += by;
            self.check_accounting()?;
            next = self.gap_starting_at(self.cursor).map(Move::Cross);
        }
        Ok(())
    }

    fn check_accounting(&mut self) -> Result<(), ReplayError> {
        let sum = self
            .finished
            .checked_add(self.stepped)
            .and_then(|s| s.checked_add(self.gapped));
        if sum != Some(self.cursor) || self.cursor > self.ops.len() {
            let e = ReplayError::Accounting {
                cursor: self.cursor,
                finished: self.finished,
                stepped: self.stepped,
                gapped: self.gapped,
                total: self.ops.len(),
            };
            return Err(self.poison(e));
        }
        Ok(())
    }

    /// A recorded read whose value is the one the driver holds for its
    /// address.
    fn forgivable(&self, op: &TraceOp) -> bool {
        recorded_read(op).is_some_and(|(key, value)| self.held.get(&key) == Some(&value))
    }

    /// Serve one driver op.
    fn play(&mut self, access: Access<'_>) -> Result<Reply, ReplayError> {
        self.live()?;
        // Look for the driver's op past recorded reads it may skip.
        let mut at = self.cursor;
        let mut steps = 0;
        let mut found = false;
        while let Some(rec) = self.ops.get(at) {
            if access.matches(&rec.op) {
                found = true;
                break;
            }
            if !self.forgivable(&rec.op) {
                break;
            }
            steps += 1;
            at += 1;
            while let Some(g) = self.gap_starting_at(at) {
                at = self.gaps[g].end;
            }
        }
        if found {
            // Each step is a move of its own (and crosses the same gaps the
            // search jumped), so the cursor must land on the match.
            for _ in 0..steps {
                self.advance(Move::Step)?;
            }
            if self.cursor != at {
                return Err(self.accounting_error());
            }
            let reply = self.answer(at);
            self.advance(Move::Finish)?;
            return Ok(reply);
        }
        // Not found: a re-read of a value the driver holds, or a divergence.
        if let Some(held) = access.read_key().and_then(|k| self.held.get(&k)) {
            let reply = match held {
                ReadValue::Word(v) => Reply::Word(*v),
                ReadValue::Bytes(b) => Reply::Bytes(b.clone()),
            };
            self.rereads += 1;
            return Ok(reply);
        }
        let d = match self.ops.get(at) {
            None => Divergence {
                kind: DivergenceKind::PastEnd,
                line: self.lines + 1,
                expected: END_OF_TRACE.to_string(),
                actual: access.to_string(),
            },
            Some(rec) => {
                let changed = recorded_read(&rec.op).is_some_and(|(key, value)| {
                    self.held.get(&key).is_some_and(|held| *held != value)
                });
                Divergence {
                    kind: if changed {
                        DivergenceKind::SkippedChange
                    } else {
                        DivergenceKind::Mismatch
                    },
                    line: rec.line,
                    expected: rec.op.to_string(),
                    actual: access.to_string(),
                }
            }
        };
        Err(self.poison(ReplayError::Divergence(Box::new(d))))
    }

    fn accounting_error(&mut self) -> ReplayError {
        let e = ReplayError::Accounting {
            cursor: self.cursor,
            finished: self.finished,
            stepped: self.stepped,
            gapped: self.gapped,
            total: self.ops.len(),
        };
        self.poison(e)
    }

    /// The recorded answer of the op at `index`, which the driver made:
    /// reads become held values, allocations get local memory.
    fn answer(&mut self, index: usize) -> Reply {
        let op = &self.ops[index].op;
        if let Some((key, value)) = recorded_read(op) {
            self.held.insert(key, value);
        }
        match op {
            TraceOp::ConfigRead { value, .. } => Reply::Word(*value),
            TraceOp::MmioRead { data, .. } => Reply::Bytes(data.clone()),
            TraceOp::Bars(bars) => Reply::Bars(bars.clone()),
            TraceOp::DmaAlloc { region, .. } => {
                self.dma.insert(region.id, SparseMemory::new(region.bytes));
                Reply::Region(region.clone())
            }
            TraceOp::DmaRead { data, .. } => Reply::Bytes(data.clone()),
            TraceOp::ConfigWrite { .. }
            | TraceOp::MmioWrite { .. }
            | TraceOp::DmaWrite { .. }
            | TraceOp::Doorbell { .. }
            | TraceOp::Reset => Reply::Nothing,
        }
    }

    /// An answer of the wrong shape for the op that was asked: matching
    /// guarantees this cannot happen, so it is reported as broken
    /// accounting rather than trusted.
    fn wrong_reply(&mut self) -> PciError {
        PciError::Replay(self.accounting_error())
    }

    fn region(&mut self, id: DmaId) -> Result<&mut SparseMemory, PciError> {
        self.live()?;
        self.dma
            .get_mut(&id)
            .ok_or(PciError::Replay(ReplayError::NoSuchDma { id: id.0 }))
    }
}

impl Transport for Replay {
    fn backend(&self) -> &'static str {
        "replay"
    }

    fn config_read(&mut self, offset: u16, width: Width) -> Result<u32, PciError> {
        match self.play(Access::ConfigRead { offset, width })? {
            Reply::Word(v) => Ok(v),
            _ => Err(self.wrong_reply()),
        }
    }

    fn config_write(&mut self, offset: u16, width: Width, value: u32) -> Result<(), PciError> {
        self.play(Access::ConfigWrite {
            offset,
            width,
            value,
        })?;
        Ok(())
    }

    fn bars(&mut self) -> Result<Vec<BarInfo>, PciError> {
        match self.play(Access::Bars)? {
            Reply::Bars(b) => Ok(b),
            _ => Err(self.wrong_reply()),
        }
    }

    fn mmio_read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        let access = Access::MmioRead {
            offset,
            len: out.len(),
        };
        match self.play(access)? {
            Reply::Bytes(b) if b.len() == out.len() => {
                out.copy_from_slice(&b);
                Ok(())
            }
            _ => Err(self.wrong_reply()),
        }
    }

    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), PciError> {
        self.play(Access::MmioWrite { offset, data })?;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), PciError> {
        self.live()?;
        Ok(())
    }

    fn doorbell(&mut self, token: u32) -> Result<(), PciError> {
        self.play(Access::Doorbell { token })?;
        Ok(())
    }

    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        match self.play(Access::DmaAlloc { requested: bytes })? {
            Reply::Region(r) => Ok(r),
            _ => Err(self.wrong_reply()),
        }
    }

    /// A v2 trace answers each piece from its recorded line; a v1 trace
    /// from the local memory. Either way a read outside the region fails as
    /// the recorded transport failed it (the recording holds a comment, not
    /// an op, for it).
    fn dma_read(&mut self, id: DmaId, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        if !self.traced_dma {
            return self.region(id)?.read(id, offset, out);
        }
        self.region(id)?.check(id, offset, out.len())?;
        for (at, range) in dma_read_pieces(offset, out.len()) {
            let access = Access::DmaRead {
                id,
                offset: at,
                len: range.len(),
            };
            match self.play(access)? {
                Reply::Bytes(b) if b.len() == range.len() => out[range].copy_from_slice(&b),
                _ => return Err(self.wrong_reply()),
            }
        }
        Ok(())
    }

    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        if !self.traced_dma {
            return self.region(id)?.write(id, offset, data);
        }
        self.region(id)?.check(id, offset, data.len())?;
        self.play(Access::DmaWrite {
            id,
            offset,
            len: data.len() as u64,
            sha256: dma_write_hash(data),
        })?;
        Ok(())
    }

    fn function_reset(&mut self) -> Result<(), PciError> {
        self.play(Access::Reset)?;
        Ok(())
    }
}

const PAGE: u64 = 4096;

/// A DMA region's host memory, zeroed, backed only where the driver wrote:
/// a trace may claim regions of any size without costing memory.
struct SparseMemory {
    bytes: u64,
    pages: BTreeMap<u64, Box<[u8]>>,
}

impl SparseMemory {
    fn new(bytes: u64) -> SparseMemory {
        SparseMemory {
            bytes,
            pages: BTreeMap::new(),
        }
    }

    fn check(&self, id: DmaId, offset: u64, len: usize) -> Result<(), PciError> {
        let len = len as u64;
        let inside = matches!(offset.checked_add(len), Some(end) if end <= self.bytes);
        if !inside {
            return Err(PciError::OutOfRange {
                what: format!("replayed DMA region {}", id.0),
                offset,
                len,
                size: self.bytes,
            });
        }
        Ok(())
    }

    /// The page-sized pieces of `offset..offset + len`: (page number, offset
    /// in page, offset in the caller's buffer, length).
    fn pieces(offset: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
        let mut done = 0usize;
        std::iter::from_fn(move || {
            if done == len {
                return None;
            }
            let at = offset + done as u64;
            // CAST: a page offset is below PAGE.
            let in_page = (at % PAGE) as usize;
            // CAST: PAGE fits usize.
            let n = (PAGE as usize - in_page).min(len - done);
            let piece = (at / PAGE, in_page, done, n);
            done += n;
            Some(piece)
        })
    }

    fn read(&self, id: DmaId, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        self.check(id, offset, out.len())?;
        for (page, in_page, at, n) in SparseMemory::pieces(offset, out.len()) {
            let dst = &mut out[at..at + n];
            match self.pages.get(&page) {
                Some(p) => dst.copy_from_slice(&p[in_page..in_page + n]),
                None => dst.fill(0),
            }
        }
        Ok(())
    }

    fn write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        self.check(id, offset, data.len())?;
        for (page, in_page, at, n) in SparseMemory::pieces(offset, data.len()) {
            // CAST: PAGE fits usize.
            let p = self
                .pages
                .entry(page)
                .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice());
            p[in_page..in_page + n].copy_from_slice(&data[at..at + n]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::format::Hex;
    use crate::trace::{TRACE_HEADER, TRACE_HEADER_V1};

    fn replay(body: &str) -> Replay {
        Replay::parse(&format!("{TRACE_HEADER}\n{body}")).unwrap()
    }

    fn replay_v1(body: &str) -> Replay {
        Replay::parse(&format!("{TRACE_HEADER_V1}\n{body}")).unwrap()
    }

    fn divergence(e: PciError) -> Divergence {
        match e {
            PciError::Replay(ReplayError::Divergence(d)) => *d,
            other => panic!("not a divergence: {other:?}"),
        }
    }

    #[test]
    fn the_accounting_check_catches_a_move_outside_it() {
        let mut r = replay("reset\nreset\nreset\n");
        r.function_reset().unwrap();
        // A path that moved the cursor without counting the move.
        r.cursor += 1;
        let e = r.function_reset().unwrap_err();
        let want = ReplayError::Accounting {
            cursor: 3,
            finished: 2,
            stepped: 0,
            gapped: 0,
            total: 3,
        };
        assert!(matches!(&e, PciError::Replay(got) if *got == want), "{e:?}");
        // Poisoned with it.
        assert!(matches!(r.finish(), Err(got) if got == want));
    }

    #[test]
    fn gaps_are_checked_when_declared() {
        // Lines: 1 header, 2 reset, 3 comment, 4 doorbell, 5 reset, 6 doorbell.
        let mut r = replay("reset\n# c\ndoorbell 0x1\nreset\ndoorbell 0x2\n");
        let gap = |first, last| Gap { first, last };
        assert_eq!(
            r.declare_gap(5, 4),
            Err(GapError::OutOfOrder { gap: gap(5, 4) })
        );
        assert_eq!(
            r.declare_gap(3, 4),
            Err(GapError::NotAnOp {
                gap: gap(3, 4),
                line: 3
            })
        );
        assert_eq!(
            r.declare_gap(1, 2),
            Err(GapError::NotAnOp {
                gap: gap(1, 2),
                line: 1
            })
        );
        assert_eq!(
            r.declare_gap(4, 7),
            Err(GapError::NotAnOp {
                gap: gap(4, 7),
                line: 7
            })
        );
        r.declare_gap(4, 5).unwrap();
        assert_eq!(
            r.declare_gap(5, 6),
            Err(GapError::Overlap {
                gap: gap(5, 6),
                other: gap(4, 5)
            })
        );
        assert_eq!(
            r.declare_gap(2, 6),
            Err(GapError::Overlap {
                gap: gap(2, 6),
                other: gap(4, 5)
            })
        );
        r.declare_gap(6, 6).unwrap();
        r.function_reset().unwrap();
        assert_eq!(
            r.declare_gap(2, 2),
            Err(GapError::Started { gap: gap(2, 2) })
        );
        // Adjacent gaps are crossed one after the other.
        assert_eq!(r.gaps_crossed(), [gap(4, 5), gap(6, 6)]);
        let stats = r.finish().unwrap();
        assert_eq!((stats.finished, stats.gapped, stats.cursor), (1, 3, 4));
    }

    #[test]
    fn a_gap_at_the_start_is_crossed_on_the_first_call() {
        let mut r = replay("doorbell 0x1\nreset\n");
        r.declare_gap(2, 2).unwrap();
        r.function_reset().unwrap();
        assert_eq!(r.gaps_crossed(), [Gap { first: 2, last: 2 }]);
        assert_eq!(r.finish().unwrap().gapped, 1);
    }

    #[test]
    fn a_v2_trace_answers_dma_reads_and_checks_write_hashes() {
        let hash = |d: &[u8]| Hex(&dma_write_hash(d)).to_string();
        let text = format!(
            "dma_alloc 8192 = id 1 bytes 8192 segs 0x1000:0x2000\n\
             dma_write 1 0x0 6 sha256 {}\n\
             dma_read 1 0x10 4 = 00000000\n\
             dma_read 1 0x10 4 = 00000000\n\
             dma_read 1 0x10 4 = 2a000000\n\
             dma_write 1 0x4 2 sha256 {}\n",
            hash(b"cmd:go"),
            hash(b"ok")
        );
        // The card's write is answered although the driver never made it.
        let mut r = replay(&text);
        let region = r.alloc_dma(8192).unwrap();
        r.dma_write(region.id, 0, b"cmd:go").unwrap();
        let mut word = [0u8; 4];
        for want in [0, 0, 0x2a] {
            r.dma_read(region.id, 0x10, &mut word).unwrap();
            assert_eq!(word, [want, 0, 0, 0]);
        }
        // Out of the region: refused as the recorded transport refused it.
        assert!(matches!(
            r.dma_read(region.id, 8190, &mut word),
            Err(PciError::OutOfRange { .. })
        ));
        r.dma_write(region.id, 4, b"ok").unwrap();
        let stats = r.finish().unwrap();
        assert_eq!((stats.finished, stats.stepped), (6, 0));
        // Other bytes than recorded: a mismatch at the write's line.
        let mut r = replay(&text);
        let region = r.alloc_dma(8192).unwrap();
        let d = divergence(r.dma_write(region.id, 0, b"cmd:no").unwrap_err());
        assert_eq!((d.kind, d.line), (DivergenceKind::Mismatch, 3));
        assert_eq!(
            d.actual,
            format!("dma_write 1 0x0 6 sha256 {}", hash(b"cmd:no"))
        );
    }

    #[test]
    fn replayed_dma_memory_is_zeroed_sparse_and_bounded() {
        let mut r = replay_v1("dma_alloc 8192 = id 3 bytes 1099511627776 segs 0x1000:0x2000\n");
        let region = r.alloc_dma(8192).unwrap();
        assert_eq!(region.id, DmaId(3));
        let far = (1u64 << 40) - 4;
        r.dma_write(region.id, 4090, b"across a page").unwrap();
        r.dma_write(region.id, far, b"end!").unwrap();
        let mut buf = [0xAAu8; 20];
        r.dma_read(region.id, 4088, &mut buf).unwrap();
        assert_eq!(&buf, b"\0\0across a page\0\0\0\0\0");
        let mut end = [0u8; 4];
        r.dma_read(region.id, far, &mut end).unwrap();
        assert_eq!(&end, b"end!");
        assert_eq!(r.dma.get(&DmaId(3)).unwrap().pages.len(), 3);
        assert!(matches!(
            r.dma_read(region.id, far, &mut [0u8; 5]),
            Err(PciError::OutOfRange { offset, len: 5, size: 1099511627776, .. }) if offset == far
        ));
        assert!(matches!(
            r.dma_write(DmaId(4), 0, b"x"),
            Err(PciError::Replay(ReplayError::NoSuchDma { id: 4 }))
        ));
        r.finish().unwrap();
    }

    #[test]
    fn poisoned_replays_answer_every_call_with_the_same_divergence() {
        let mut r = replay("dma_alloc 16 = id 1 bytes 16 segs -\nreset\ndoorbell 0x1\n");
        let region = r.alloc_dma(16).unwrap();
        let first = divergence(r.doorbell(1).unwrap_err());
        assert_eq!(
            first,
            Divergence {
                kind: DivergenceKind::Mismatch,
                line: 3,
                expected: "reset".to_string(),
                actual: "doorbell 0x00000001".to_string(),
            }
        );
        assert_eq!(divergence(r.function_reset().unwrap_err()), first);
        assert_eq!(divergence(r.flush().unwrap_err()), first);
        assert_eq!(
            divergence(r.dma_read(region.id, 0, &mut [0u8; 1]).unwrap_err()),
            first
        );
        assert_eq!(r.finish().unwrap_err().divergence(), Some(&first));
        assert_eq!(r.stats().finished, 1);
    }
}
