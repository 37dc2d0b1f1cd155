//! Record and replay at the PCI boundary, end to end.
//!
//! A small scripted "driver" that uses only the `Transport` trait is
//! recorded over a fake card (the null card plus one status register that
//! turns ready after K reads, so real polling is recorded), then replayed:
//! clean through the same driver; against mutations of the trace text and
//! variants of the driver, each rejected with its divergence at its line;
//! with polling loops of other lengths; and from corrupt files.

use macuda_core::{ActorFault, Severity};
use macuda_hw::pci::Width;
use macuda_pci::{
    clear_bus_master, dma_write_hash, enable_bus_master, read_identity, BarInfo, CardEvent,
    Divergence, DivergenceKind, DmaId, DmaRegion, DmaSegment, Gap, NullOpener, Opener, PciError,
    Recorder, Replay, ReplayError, ReplayStats, Trace, TraceError, TraceWhy, Transport,
    END_OF_TRACE, MAX_TRACE_LINE_BYTES, REPLAY_FINISH, TRACE_HEADER, TRACE_HEADER_V1,
};
use std::collections::HashMap;

// ------------------------------------------------------------ the fake card

/// The fake card's own registers, in a BAR0 window nothing else uses.
const WINDOW: u64 = 0x7f_0000;
const STATUS: u64 = WINDOW;
const SCRATCH: u64 = WINDOW + 0x04;
const KICK: u64 = WINDOW + 0x08;
const ACK: u64 = WINDOW + 0x0c;
const CLK_CTRL: u64 = WINDOW + 0x100;
const CLK_DIV: u64 = WINDOW + 0x104;
const QUEUE_LO: u64 = WINDOW + 0x200;
const QUEUE_HI: u64 = WINDOW + 0x204;
const QUEUE_SIZE: u64 = WINDOW + 0x208;
const RESULT: u64 = WINDOW + 0x300;

const BUSY: u32 = 0;
const READY: u32 = 1;
/// What SCRATCH reads once the card has been kicked.
const DONE_MAGIC: u32 = 0x00C0_FFEE;
/// STATUS reads BUSY this many times, then READY.
const BUSY_READS: usize = 3;
const QUEUE_BYTES: u64 = 16384;
const DOORBELL: u32 = 7;

/// The null card (config space, BARs, identification registers, reset)
/// plus a window of registers with one status register that changes value
/// after `BUSY_READS` reads, a scratch register that changes when the card
/// is kicked, and DMA memory in two segments.
struct FakeCard {
    null: Box<dyn Transport>,
    regs: HashMap<u64, u32>,
    status_reads: usize,
    dma: Vec<Vec<u8>>,
}

impl FakeCard {
    fn new() -> FakeCard {
        FakeCard {
            null: NullOpener::gb202().open().unwrap(),
            regs: HashMap::new(),
            status_reads: 0,
            dma: Vec::new(),
        }
    }

    fn in_window(offset: u64) -> bool {
        (WINDOW..WINDOW + 0x1000).contains(&offset)
    }

    fn memory(&mut self, id: DmaId, offset: u64, len: usize) -> Result<&mut [u8], PciError> {
        let mem = (id.0 as usize)
            .checked_sub(1)
            .and_then(|i| self.dma.get_mut(i))
            .ok_or(PciError::Refused {
                what: "that region",
            })?;
        let size = mem.len() as u64;
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        mem.get_mut(start..start.saturating_add(len))
            .ok_or(PciError::OutOfRange {
                what: "fake DMA".to_string(),
                offset,
                len: len as u64,
                size,
            })
    }
}

impl Transport for FakeCard {
    fn backend(&self) -> &'static str {
        "fake"
    }
    fn config_read(&mut self, offset: u16, width: Width) -> Result<u32, PciError> {
        self.null.config_read(offset, width)
    }
    fn config_write(&mut self, offset: u16, width: Width, value: u32) -> Result<(), PciError> {
        self.null.config_write(offset, width, value)
    }
    fn bars(&mut self) -> Result<Vec<BarInfo>, PciError> {
        self.null.bars()
    }
    fn mmio_read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        if !FakeCard::in_window(offset) {
            return self.null.mmio_read(offset, out);
        }
        let value = match offset {
            STATUS => {
                self.status_reads += 1;
                if self.status_reads > BUSY_READS {
                    READY
                } else {
                    BUSY
                }
            }
            SCRATCH if self.regs.get(&KICK) == Some(&1) => DONE_MAGIC,
            _ => self.regs.get(&offset).copied().unwrap_or(0),
        };
        out.copy_from_slice(&value.to_le_bytes()[..out.len()]);
        Ok(())
    }
    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), PciError> {
        if !FakeCard::in_window(offset) {
            return self.null.mmio_write(offset, data);
        }
        let mut b = [0u8; 4];
        b[..data.len()].copy_from_slice(data);
        self.regs.insert(offset, u32::from_le_bytes(b));
        Ok(())
    }
    fn doorbell(&mut self, _token: u32) -> Result<(), PciError> {
        Ok(())
    }
    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        let bytes = bytes.div_ceil(4096) * 4096;
        self.dma.push(vec![0; bytes as usize]);
        let n = self.dma.len() as u64;
        let half = bytes / 2;
        Ok(DmaRegion {
            id: DmaId(n as u32),
            bytes,
            segments: vec![
                DmaSegment {
                    bus_addr: 0x1_0000_0000 * n,
                    bytes: half,
                },
                DmaSegment {
                    bus_addr: 0x2_0000_0000 * n,
                    bytes: bytes - half,
                },
            ],
        })
    }
    fn dma_read(&mut self, id: DmaId, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        let len = out.len();
        out.copy_from_slice(self.memory(id, offset, len)?);
        Ok(())
    }
    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        self.memory(id, offset, data.len())?.copy_from_slice(data);
        Ok(())
    }
    fn function_reset(&mut self) -> Result<(), PciError> {
        self.null.function_reset()
    }
}

// ---------------------------------------------------------- the "driver"

/// How a driver variant departs from the recorded one.
#[derive(Debug, Clone, Copy)]
struct Variant {
    /// Reads of STATUS after it first reads READY, each expecting READY.
    settle: usize,
    /// One more register write than recorded.
    extra_write: bool,
    /// Skip the clock stage (a stage not ported yet).
    skip_clocks: bool,
    /// Read STATUS once and go on without waiting for READY.
    no_wait: bool,
    /// Reuse the SCRATCH value read before the kick instead of reading it
    /// again after (where its value changed).
    reuse_scratch: bool,
    /// Stop before the last stage.
    stop_early: bool,
}

/// The recorded driver.
const RECORDED: Variant = Variant {
    settle: 2,
    extra_write: false,
    skip_clocks: false,
    no_wait: false,
    reuse_scratch: false,
    stop_early: false,
};

const POLL_LIMIT: usize = 100;

/// What the driver learned, to compare a replayed run against the recorded
/// one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    vendor: u16,
    device: u16,
    bars: Vec<BarInfo>,
    queue: DmaRegion,
    queue_head: Vec<u8>,
    polls: usize,
    result: u32,
}

/// A scripted bring-up that uses only the `Transport` trait.
fn drive(t: &mut dyn Transport, v: Variant) -> Result<Seen, PciError> {
    // Identify, then bus mastering.
    let id = read_identity(t)?;
    enable_bus_master(t)?;
    // Clocks: two writes and a read-back.
    if !v.skip_clocks {
        t.mmio_write32(CLK_CTRL, 0x11)?;
        t.mmio_write32(CLK_DIV, 0x4)?;
        let clk = t.mmio_read32(CLK_CTRL)?;
        if clk != 0x11 {
            return Err(PciError::Protocol {
                command: "clock read-back",
                what: format!("{clk:#x}"),
            });
        }
    }
    // A queue in DMA memory, its bus address handed to the card.
    let queue = t.alloc_dma(QUEUE_BYTES)?;
    t.dma_write(queue.id, 0, b"cmd:go")?;
    let mut queue_head = vec![0u8; 6];
    t.dma_read(queue.id, 0, &mut queue_head)?;
    let bus = queue.bus_addr(0).unwrap_or(0);
    // CAST: the low and high words of a bus address.
    t.mmio_write32(QUEUE_LO, bus as u32)?;
    t.mmio_write32(QUEUE_HI, (bus >> 32) as u32)?;
    if v.extra_write {
        t.mmio_write32(QUEUE_SIZE, QUEUE_BYTES as u32)?;
    }
    // Kick the card and poll until it is ready.
    let before = t.mmio_read32(SCRATCH)?;
    t.mmio_write32(KICK, 1)?;
    t.doorbell(DOORBELL)?;
    let mut polls = 0;
    loop {
        polls += 1;
        if t.mmio_read32(STATUS)? == READY || v.no_wait {
            break;
        }
        if polls == POLL_LIMIT {
            return Err(PciError::Timeout {
                command: "status poll",
                after_ms: 0,
            });
        }
    }
    for _ in 0..v.settle {
        let s = t.mmio_read32(STATUS)?;
        if s != READY {
            return Err(PciError::Protocol {
                command: "settle",
                what: format!("status {s:#x}"),
            });
        }
    }
    t.mmio_write32(ACK, 1)?;
    let result = if v.reuse_scratch {
        before
    } else {
        t.mmio_read32(SCRATCH)?
    };
    if !v.stop_early {
        // Report and close.
        t.mmio_write32(RESULT, result)?;
        t.function_reset()?;
    }
    Ok(Seen {
        vendor: id.vendor,
        device: id.device,
        bars: id.bars,
        queue,
        queue_head,
        polls,
        result,
    })
}

// ----------------------------------------------------------------- helpers

/// Record the recorded driver over the fake card.
fn record() -> (String, Seen) {
    let mut rec = Recorder::new(Box::new(FakeCard::new()), Vec::new()).unwrap();
    let seen = drive(&mut rec, RECORDED).unwrap();
    let (_, out) = rec.finish().unwrap();
    (String::from_utf8(out).unwrap(), seen)
}

fn op_count(text: &str) -> usize {
    Trace::parse(text).unwrap().ops().len()
}

/// The 1-based lines that start with `prefix`.
fn lines_of(text: &str, prefix: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with(prefix))
        .map(|(i, _)| i + 1)
        .collect()
}

/// The one line that starts with `prefix`.
fn line_of(text: &str, prefix: &str) -> usize {
    let found = lines_of(text, prefix);
    assert_eq!(found.len(), 1, "`{prefix}` in\n{text}");
    found[0]
}

fn line_text(text: &str, line: usize) -> String {
    text.lines().nth(line - 1).unwrap().to_string()
}

/// `text` with `line` replaced (or removed, for `None`).
fn edit(text: &str, line: usize, new: Option<&str>) -> String {
    let mut out = String::new();
    for (i, l) in text.lines().enumerate() {
        match (i + 1 == line, new) {
            (true, Some(n)) => out.push_str(n),
            (true, None) => continue,
            (false, _) => out.push_str(l),
        }
        out.push('\n');
    }
    out
}

fn swap(text: &str, a: usize, b: usize) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.swap(a - 1, b - 1);
    lines.join("\n") + "\n"
}

fn mmio_write_text(offset: u64, value: u32) -> String {
    format!(
        "mmio_write {offset:#08x} 4 {}",
        value
            .to_le_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn mmio_read_prefix(offset: u64) -> String {
    format!("mmio_read {offset:#08x} 4 =")
}

/// Replay `text` through driver `v`, with `gaps` declared.
fn replay(text: &str, v: Variant, gaps: &[(usize, usize)]) -> (Replay, Result<Seen, PciError>) {
    let mut r = Replay::parse(text).unwrap();
    for &(first, last) in gaps {
        r.declare_gap(first, last).unwrap();
    }
    let seen = drive(&mut r, v);
    (r, seen)
}

fn divergence(e: PciError) -> Divergence {
    match e {
        PciError::Replay(ReplayError::Divergence(d)) => *d,
        other => panic!("not a divergence: {other:?}"),
    }
}

fn diverged(kind: DivergenceKind, line: usize, expected: &str, actual: &str) -> Divergence {
    Divergence {
        kind,
        line,
        expected: expected.to_string(),
        actual: actual.to_string(),
    }
}

/// After a divergence the replay is poisoned: `finish` (and any later op)
/// returns the same divergence.
fn assert_poisoned(r: &mut Replay, d: &Divergence) {
    assert_eq!(r.finish().unwrap_err().divergence(), Some(d));
    assert_eq!(&divergence(r.mmio_read32(STATUS).unwrap_err()), d);
}

// ------------------------------------------------------------ (i) records

#[test]
fn the_recorded_session_replays_clean() {
    let (text, recorded) = record();
    // The shape of the recording: header, real polling, DMA segments.
    assert!(text.starts_with(&format!(
        "{TRACE_HEADER}\n# recorded over the fake transport\n"
    )));
    assert_eq!(lines_of(&text, &mmio_read_prefix(STATUS)).len(), 3 + 1 + 2);
    assert_eq!(
        lines_of(&text, &format!("{} 00000000", mmio_read_prefix(STATUS))).len(),
        BUSY_READS
    );
    line_of(
        &text,
        "dma_alloc 16384 = id 1 bytes 16384 segs 0x100000000:0x2000,0x200000000:0x2000",
    );
    line_of(&text, "doorbell 0x00000007");
    line_of(&text, "reset");
    assert_eq!(text.lines().last(), Some("reset"));
    // The driver's DMA write by its hash, its read-back with the bytes.
    line_of(
        &text,
        &format!(
            "dma_write 1 0x0 6 sha256 {}",
            hex(&dma_write_hash(b"cmd:go"))
        ),
    );
    line_of(&text, &format!("dma_read 1 0x0 6 = {}", hex(b"cmd:go")));

    let ops = op_count(&text);
    let (mut r, seen) = replay(&text, RECORDED, &[]);
    // The driver saw exactly what it saw on the card.
    assert_eq!(seen.unwrap(), recorded);
    assert_eq!(
        r.finish().unwrap(),
        ReplayStats {
            finished: ops,
            stepped: 0,
            gapped: 0,
            cursor: ops,
            total: ops,
            rereads: 0,
        }
    );
    assert!(r.gaps_crossed().is_empty());
}

#[test]
fn a_session_over_the_null_transport_records_and_replays_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("null.trace");
    let opener = NullOpener::gb202();
    let null_driver = |t: &mut dyn Transport, ring: bool| -> Result<u16, PciError> {
        let id = read_identity(t)?;
        enable_bus_master(t)?;
        t.mmio_write32(CLK_CTRL, 0x11)?;
        t.mmio_write32(CLK_DIV, 0x4)?;
        clear_bus_master(t)?;
        if ring {
            t.doorbell(DOORBELL)?;
        }
        Ok(id.device)
    };
    let mut rec = Recorder::create(opener.open().unwrap(), &path).unwrap();
    // The null card refuses the doorbell: recorded as a comment.
    assert!(null_driver(&mut rec, true).unwrap_err().is_refusal());
    rec.finish().unwrap();
    // Every op reached the card through the recorder.
    let events = opener.card().events();
    assert!(events.contains(&CardEvent::MmioWrite {
        connection: 1,
        offset: CLK_DIV,
        value: 0x4
    }));
    assert_eq!(opener.card().command(), 0x0002);

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with(&format!(
        "{TRACE_HEADER}\n# recorded over the null transport\n"
    )));
    line_of(&text, "cfg_read 0x000 u16 = 0x10de");
    line_of(&text, "cfg_read 0x002 u16 = 0x2b85");
    line_of(&text, "bars = 0:0x4000000 1:0x10000000 3:0x2000000");
    line_of(&text, "cfg_write 0x004 u16 0x0006");
    line_of(&text, "cfg_write 0x004 u16 0x0002");
    let refused = line_of(
        &text,
        "# failed: doorbell 0x00000007: the null device refuses",
    );
    assert_eq!(refused, text.lines().count());

    let ops = op_count(&text);
    let mut r = Replay::load(&path).unwrap();
    assert_eq!(null_driver(&mut r, false).unwrap(), 0x2b85);
    let stats = r.finish().unwrap();
    assert_eq!((stats.finished, stats.stepped, stats.gapped), (ops, 0, 0));

    // A failed op is not replayed: a driver that makes it goes past the end.
    let mut r = Replay::load(&path).unwrap();
    let d = divergence(null_driver(&mut r, true).unwrap_err());
    assert_eq!(
        d,
        diverged(
            DivergenceKind::PastEnd,
            text.lines().count() + 1,
            END_OF_TRACE,
            "doorbell 0x00000007"
        )
    );
    assert_poisoned(&mut r, &d);
}

// ---------------------------------------------------------- (ii) mutations

#[test]
fn a_changed_write_value_is_rejected_at_its_line() {
    let (text, _) = record();
    let line = line_of(&text, &mmio_write_text(CLK_DIV, 0x4));
    let mutated = edit(&text, line, Some(&mmio_write_text(CLK_DIV, 0x5)));
    let (mut r, seen) = replay(&mutated, RECORDED, &[]);
    let d = divergence(seen.unwrap_err());
    assert_eq!(
        d,
        diverged(
            DivergenceKind::Mismatch,
            line,
            "mmio_write 0x7f0104 4 05000000",
            "mmio_write 0x7f0104 4 04000000"
        )
    );
    assert_poisoned(&mut r, &d);
}

#[test]
fn every_kind_of_changed_op_is_rejected_at_its_line() {
    let (text, _) = record();
    // (recorded line, its replacement, the driver's op as the error names it)
    let cases = [
        (
            "cfg_write 0x004 u16 0x0006",
            "cfg_write 0x004 u16 0x0004",
            "cfg_write 0x004 u16 0x0006",
        ),
        (
            "cfg_read 0x008 u32 = 0x030000a1",
            "cfg_read 0x008 u16 = 0x00a1",
            "cfg_read 0x008 u32",
        ),
        (
            "cfg_read 0x002 u16 = 0x2b85",
            "cfg_read 0x00a u16 = 0x2b85",
            "cfg_read 0x002 u16",
        ),
        (
            "mmio_read 0x7f0100 4 = 11000000",
            "mmio_read 0x7f0108 4 = 11000000",
            "mmio_read 0x7f0100 4",
        ),
        (
            "mmio_read 0x000a00 4 = 00102a1b",
            "mmio_read 0x000a00 2 = 0010",
            "mmio_read 0x000a00 4",
        ),
        (
            "mmio_write 0x7f0008 4 01000000",
            "mmio_write 0x7f0008 2 0100",
            "mmio_write 0x7f0008 4 01000000",
        ),
        (
            "doorbell 0x00000007",
            "doorbell 0x00000008",
            "doorbell 0x00000007",
        ),
        (
            "dma_alloc 16384 = ",
            "dma_alloc 8192 = id 1 bytes 8192 segs 0x100000000:0x2000",
            "dma_alloc 16384",
        ),
        ("reset", "doorbell 0x00000000", "reset"),
    ];
    for (recorded, changed, actual) in cases {
        let line = line_of(&text, recorded);
        let mutated = edit(&text, line, Some(changed));
        let (mut r, seen) = replay(&mutated, RECORDED, &[]);
        let d = divergence(seen.unwrap_err());
        assert_eq!(
            d,
            diverged(DivergenceKind::Mismatch, line, changed, actual),
            "{recorded}"
        );
        assert_eq!(r.stats().finished, line - 3, "{recorded}");
        assert_poisoned(&mut r, &d);
    }
}

#[test]
fn a_missing_write_is_rejected_at_its_line() {
    let (text, _) = record();
    let line = line_of(&text, "mmio_write 0x7f0200 4");
    let lo = line_text(&text, line);
    let hi = line_text(&text, line + 1);
    assert!(hi.starts_with("mmio_write 0x7f0204 4"));
    let mutated = edit(&text, line, None);
    let (mut r, seen) = replay(&mutated, RECORDED, &[]);
    // The next recorded op now sits on the removed write's line.
    let d = divergence(seen.unwrap_err());
    assert_eq!(d, diverged(DivergenceKind::Mismatch, line, &hi, &lo));
    assert_eq!(r.stats().finished, line - 3);
    assert_poisoned(&mut r, &d);
}

#[test]
fn an_extra_write_is_rejected_where_it_was_made() {
    let (text, _) = record();
    let after = line_of(&text, "mmio_write 0x7f0204 4") + 1;
    let extra = Variant {
        extra_write: true,
        ..RECORDED
    };
    let (mut r, seen) = replay(&text, extra, &[]);
    let d = divergence(seen.unwrap_err());
    assert_eq!(
        d,
        diverged(
            DivergenceKind::Mismatch,
            after,
            "mmio_read 0x7f0004 4 = 00000000",
            "mmio_write 0x7f0208 4 00400000"
        )
    );
    assert_poisoned(&mut r, &d);
}

#[test]
fn a_skipped_read_whose_value_changed_is_rejected() {
    let (text, _) = record();
    // SCRATCH is read before the kick (0) and after it (the magic).
    let reads = lines_of(&text, &mmio_read_prefix(SCRATCH));
    assert_eq!(reads.len(), 2);
    assert_eq!(
        line_text(&text, reads[1]),
        "mmio_read 0x7f0004 4 = eeffc000"
    );
    let reuse = Variant {
        reuse_scratch: true,
        ..RECORDED
    };
    let (mut r, seen) = replay(&text, reuse, &[]);
    let d = divergence(seen.unwrap_err());
    assert_eq!(
        d,
        diverged(
            DivergenceKind::SkippedChange,
            reads[1],
            "mmio_read 0x7f0004 4 = eeffc000",
            "mmio_write 0x7f0300 4 00000000"
        )
    );
    assert_poisoned(&mut r, &d);
}

#[test]
fn reordered_ops_are_rejected_at_the_first_of_them() {
    let (text, _) = record();
    let kick = line_of(&text, &mmio_write_text(KICK, 1));
    assert_eq!(line_text(&text, kick + 1), "doorbell 0x00000007");
    let mutated = swap(&text, kick, kick + 1);
    let (mut r, seen) = replay(&mutated, RECORDED, &[]);
    let d = divergence(seen.unwrap_err());
    assert_eq!(
        d,
        diverged(
            DivergenceKind::Mismatch,
            kick,
            "doorbell 0x00000007",
            "mmio_write 0x7f0008 4 01000000"
        )
    );
    assert_poisoned(&mut r, &d);
}

#[test]
fn a_truncated_trace_is_rejected_past_its_end() {
    let (text, _) = record();
    let result = line_of(&text, "mmio_write 0x7f0300 4");
    let truncated: String = text
        .lines()
        .take(result - 1)
        .map(|l| l.to_string() + "\n")
        .collect();
    let (mut r, seen) = replay(&truncated, RECORDED, &[]);
    let d = divergence(seen.unwrap_err());
    assert_eq!(
        d,
        diverged(
            DivergenceKind::PastEnd,
            result,
            END_OF_TRACE,
            "mmio_write 0x7f0300 4 eeffc000"
        )
    );
    assert_poisoned(&mut r, &d);
}

#[test]
fn a_driver_that_stops_early_fails_finish_at_the_first_unreplayed_line() {
    let (text, _) = record();
    let result = line_of(&text, "mmio_write 0x7f0300 4");
    let early = Variant {
        stop_early: true,
        ..RECORDED
    };
    let (mut r, seen) = replay(&text, early, &[]);
    assert_eq!(seen.unwrap().result, DONE_MAGIC);
    let e = r.finish().unwrap_err();
    let d = e.divergence().unwrap().clone();
    assert_eq!(
        d,
        diverged(
            DivergenceKind::Unreplayed,
            result,
            "mmio_write 0x7f0300 4 eeffc000",
            REPLAY_FINISH
        )
    );
    let ops = op_count(&text);
    assert_eq!(
        (r.stats().finished, r.stats().cursor, r.stats().total),
        (ops - 2, ops - 2, ops)
    );
    assert_poisoned(&mut r, &d);
}

/// The clock stage: its first and last recorded lines.
fn clock_stage(text: &str) -> (usize, usize) {
    let first = line_of(text, &mmio_write_text(CLK_CTRL, 0x11));
    let last = line_of(text, &mmio_read_prefix(CLK_CTRL));
    assert_eq!(last, first + 2);
    (first, last)
}

const SKIP_CLOCKS: Variant = Variant {
    skip_clocks: true,
    ..RECORDED
};

#[test]
fn a_skipped_stage_without_a_gap_is_rejected() {
    let (text, _) = record();
    let (first, _) = clock_stage(&text);
    let (mut r, seen) = replay(&text, SKIP_CLOCKS, &[]);
    let d = divergence(seen.unwrap_err());
    assert_eq!(
        d,
        diverged(
            DivergenceKind::Mismatch,
            first,
            "mmio_write 0x7f0100 4 11000000",
            "dma_alloc 16384"
        )
    );
    assert!(r.gaps_crossed().is_empty());
    assert_poisoned(&mut r, &d);
}

#[test]
fn the_same_stage_declared_as_a_gap_is_crossed_exactly() {
    let (text, recorded) = record();
    let (first, last) = clock_stage(&text);
    let (mut r, seen) = replay(&text, SKIP_CLOCKS, &[(first, last)]);
    assert_eq!(seen.unwrap(), recorded);
    let ops = op_count(&text);
    assert_eq!(
        r.finish().unwrap(),
        ReplayStats {
            finished: ops - 3,
            stepped: 0,
            gapped: 3,
            cursor: ops,
            total: ops,
            rereads: 0,
        }
    );
    assert_eq!(r.gaps_crossed(), [Gap { first, last }]);
}

#[test]
fn a_gap_one_line_short_is_rejected_at_the_line_it_left_out() {
    let (text, _) = record();
    let (first, last) = clock_stage(&text);
    let (mut r, seen) = replay(&text, SKIP_CLOCKS, &[(first, last - 1)]);
    let d = divergence(seen.unwrap_err());
    assert_eq!(
        d,
        diverged(
            DivergenceKind::Mismatch,
            last,
            "mmio_read 0x7f0100 4 = 11000000",
            "dma_alloc 16384"
        )
    );
    assert_eq!(
        r.gaps_crossed(),
        [Gap {
            first,
            last: last - 1
        }]
    );
    assert_poisoned(&mut r, &d);
}

#[test]
fn a_gap_over_a_stage_the_driver_performs_is_rejected() {
    let (text, _) = record();
    let (first, last) = clock_stage(&text);
    let (mut r, seen) = replay(&text, RECORDED, &[(first, last)]);
    let d = divergence(seen.unwrap_err());
    assert_eq!(
        d,
        diverged(
            DivergenceKind::Mismatch,
            last + 1,
            &line_text(&text, last + 1),
            "mmio_write 0x7f0100 4 11000000"
        )
    );
    assert!(line_text(&text, last + 1).starts_with("dma_alloc 16384 = "));
    assert_poisoned(&mut r, &d);
}

// ------------------------------------------------------- (iii) polling

#[test]
fn a_driver_that_polls_fewer_times_steps_over_reads_it_holds() {
    let (text, recorded) = record();
    let fewer = Variant {
        settle: 0,
        ..RECORDED
    };
    let (mut r, seen) = replay(&text, fewer, &[]);
    assert_eq!(seen.unwrap(), recorded);
    let ops = op_count(&text);
    assert_eq!(
        r.finish().unwrap(),
        ReplayStats {
            finished: ops - 2,
            stepped: 2,
            gapped: 0,
            cursor: ops,
            total: ops,
            rereads: 0,
        }
    );
}

#[test]
fn a_driver_that_polls_more_times_is_answered_from_held_values() {
    let (text, recorded) = record();
    let more = Variant {
        settle: 5,
        ..RECORDED
    };
    let (mut r, seen) = replay(&text, more, &[]);
    assert_eq!(seen.unwrap(), recorded);
    let ops = op_count(&text);
    assert_eq!(
        r.finish().unwrap(),
        ReplayStats {
            finished: ops,
            stepped: 0,
            gapped: 0,
            cursor: ops,
            total: ops,
            rereads: 3,
        }
    );
}

#[test]
fn a_driver_that_skips_past_the_read_that_saw_the_change_is_rejected() {
    let (text, _) = record();
    let ready = lines_of(&text, &format!("{} 01000000", mmio_read_prefix(STATUS)));
    assert_eq!(ready.len(), 3);
    let no_wait = Variant {
        settle: 0,
        no_wait: true,
        ..RECORDED
    };
    let (mut r, seen) = replay(&text, no_wait, &[]);
    let d = divergence(seen.unwrap_err());
    // The two further BUSY reads were forgivable; the READY one is not.
    assert_eq!(
        d,
        diverged(
            DivergenceKind::SkippedChange,
            ready[0],
            "mmio_read 0x7f0000 4 = 01000000",
            "mmio_write 0x7f000c 4 01000000"
        )
    );
    // Nothing was stepped: the search did not commit.
    assert_eq!(r.stats().stepped, 0);
    assert_poisoned(&mut r, &d);
}

/// A polling trace written by hand: STATUS reads BUSY twice, then READY;
/// the driver acknowledges.
const POLL_TRACE: &str = "# macuda trace v1
# the card turns ready on the third read
mmio_read 0x7f0000 4 = 00000000
mmio_read 0x7f0000 4 = 00000000
mmio_read 0x7f0000 4 = 01000000
mmio_write 0x7f000c 4 01000000
";

/// Polls STATUS `reads` times at most (stopping at READY unless `past`),
/// acknowledges, then re-reads STATUS `after` times.
fn poller(t: &mut dyn Transport, reads: usize, past: bool, after: usize) -> Result<u32, PciError> {
    let mut last = BUSY;
    for _ in 0..reads {
        last = t.mmio_read32(STATUS)?;
        if last == READY && !past {
            break;
        }
    }
    t.mmio_write32(ACK, 1)?;
    for _ in 0..after {
        last = t.mmio_read32(STATUS)?;
    }
    Ok(last)
}

#[test]
fn hand_written_polls_forgive_only_what_the_driver_holds() {
    // Exactly as recorded.
    let mut r = Replay::parse(POLL_TRACE).unwrap();
    assert_eq!(poller(&mut r, 10, false, 0).unwrap(), READY);
    assert_eq!(r.finish().unwrap().finished, 4);

    // More polls than recorded, past the change: answered from the held
    // READY, cursor unmoved.
    let mut r = Replay::parse(POLL_TRACE).unwrap();
    assert_eq!(poller(&mut r, 6, true, 0).unwrap(), READY);
    let s = r.finish().unwrap();
    assert_eq!((s.finished, s.stepped, s.rereads), (4, 0, 3));

    // Reads after the end of the trace of a held address are forgiven too.
    let mut r = Replay::parse(POLL_TRACE).unwrap();
    assert_eq!(poller(&mut r, 10, false, 2).unwrap(), READY);
    let s = r.finish().unwrap();
    assert_eq!((s.finished, s.rereads, s.cursor), (4, 2, 4));

    // A read of an address the driver never read is not.
    let mut r = Replay::parse(POLL_TRACE).unwrap();
    poller(&mut r, 10, false, 0).unwrap();
    let d = divergence(r.mmio_read32(SCRATCH).unwrap_err());
    assert_eq!(
        d,
        diverged(
            DivergenceKind::PastEnd,
            7,
            END_OF_TRACE,
            "mmio_read 0x7f0004 4"
        )
    );

    // One poll, then the write: the second BUSY is stepped over, the READY
    // read is the change the driver never saw.
    let mut r = Replay::parse(POLL_TRACE).unwrap();
    let d = divergence(poller(&mut r, 1, false, 0).unwrap_err());
    assert_eq!(
        d,
        diverged(
            DivergenceKind::SkippedChange,
            5,
            "mmio_read 0x7f0000 4 = 01000000",
            "mmio_write 0x7f000c 4 01000000"
        )
    );

    // No poll at all: a recorded read the driver never made (and holds no
    // value for) is a plain mismatch at the first read.
    let mut r = Replay::parse(POLL_TRACE).unwrap();
    let d = divergence(poller(&mut r, 0, false, 0).unwrap_err());
    assert_eq!(
        d,
        diverged(
            DivergenceKind::Mismatch,
            3,
            "mmio_read 0x7f0000 4 = 00000000",
            "mmio_write 0x7f000c 4 01000000"
        )
    );

    // A driver that held READY and stops: the trailing reads of a value it
    // holds are stepped over by finish; a trailing changed read is not.
    let trailing = format!("{POLL_TRACE}mmio_read 0x7f0000 4 = 01000000\n");
    let mut r = Replay::parse(&trailing).unwrap();
    poller(&mut r, 10, false, 0).unwrap();
    let s = r.finish().unwrap();
    assert_eq!((s.finished, s.stepped, s.cursor, s.total), (4, 1, 5, 5));
    let changed = format!("{POLL_TRACE}mmio_read 0x7f0000 4 = 02000000\n");
    let mut r = Replay::parse(&changed).unwrap();
    poller(&mut r, 10, false, 0).unwrap();
    assert_eq!(
        r.finish().unwrap_err().divergence().unwrap(),
        &diverged(
            DivergenceKind::Unreplayed,
            7,
            "mmio_read 0x7f0000 4 = 02000000",
            REPLAY_FINISH
        )
    );
}

#[test]
fn a_different_width_at_the_same_address_is_not_held() {
    let text = format!("{TRACE_HEADER}\ncfg_read 0x004 u16 = 0x0006\ncfg_write 0x004 u16 0x0002\n");
    let mut r = Replay::parse(&text).unwrap();
    assert_eq!(r.config_read(0x004, Width::U16).unwrap(), 6);
    // The same address and width again, before the write: held.
    assert_eq!(r.config_read(0x004, Width::U16).unwrap(), 6);
    let d = divergence(r.config_read(0x004, Width::U8).unwrap_err());
    assert_eq!(
        d,
        diverged(
            DivergenceKind::Mismatch,
            3,
            "cfg_write 0x004 u16 0x0002",
            "cfg_read 0x004 u8"
        )
    );
}

// ------------------------------------------------------ (iv) corrupt files

#[test]
fn corrupt_trace_files_give_typed_errors() {
    let (text, _) = record();
    let dir = tempfile::tempdir().unwrap();
    let load = |name: &str, contents: &[u8]| -> TraceError {
        let path = dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        match Replay::load(&path) {
            Ok(_) => panic!("{name} loaded"),
            Err(e) => e,
        }
    };
    let err = |line, why| TraceError { line, why };

    // The whole recording loads.
    let path = dir.path().join("good.trace");
    std::fs::write(&path, &text).unwrap();
    assert_eq!(Trace::load(&path).unwrap().ops().len(), op_count(&text));

    let v3 = edit(&text, 1, Some("# macuda trace v3"));
    assert_eq!(
        load("v3", v3.as_bytes()),
        err(
            1,
            TraceWhy::Version {
                found: "v3".to_string()
            }
        )
    );
    // Read as v1, the recording's DMA lines are not ops of that version.
    let v1 = edit(&text, 1, Some(TRACE_HEADER_V1));
    let first_dma = lines_of(&text, "dma_write")[0];
    assert_eq!(
        load("v1", v1.as_bytes()),
        err(
            first_dma,
            TraceWhy::NotInVersion {
                op: "dma_write",
                version: 1
            }
        )
    );

    let vendor = line_of(&text, "cfg_read 0x000 u16 = 0x10de");
    let bad = edit(&text, vendor, Some("cfg_read 0x000 u16 = 0x10dg"));
    assert_eq!(
        load("bad-number", bad.as_bytes()),
        err(
            vendor,
            TraceWhy::BadNumber {
                field: "value",
                text: "0x10dg".to_string()
            }
        )
    );

    let kick = line_of(&text, &mmio_write_text(KICK, 1));
    let unknown = edit(&text, kick, Some("mmio_poke 0x7f0008 4 01000000"));
    assert_eq!(
        load("unknown-op", unknown.as_bytes()),
        err(
            kick,
            TraceWhy::UnknownOp {
                op: "mmio_poke".to_string()
            }
        )
    );

    let clk = line_of(&text, &mmio_read_prefix(CLK_CTRL));
    let no_equals = edit(&text, clk, Some("mmio_read 0x7f0100 4 11000000"));
    assert_eq!(
        load("missing-equals", no_equals.as_bytes()),
        err(clk, TraceWhy::MissingEquals)
    );

    let short_hex = edit(&text, clk, Some("mmio_read 0x7f0100 4 = 1100000"));
    assert_eq!(
        load("truncated-hex", short_hex.as_bytes()),
        err(
            clk,
            TraceWhy::TruncatedHex {
                expected_bytes: 4,
                found_digits: 7
            }
        )
    );

    // A file cut off in the middle of a line.
    let cut_at = text.find("mmio_read 0x7f0100 4 = 1100").unwrap() + 27;
    assert_eq!(
        load("cut", &text.as_bytes()[..cut_at]),
        err(
            clk,
            TraceWhy::TruncatedHex {
                expected_bytes: 4,
                found_digits: 4
            }
        )
    );

    let mut long = text.clone().into_bytes();
    long.extend(vec![b'#'; MAX_TRACE_LINE_BYTES + 1]);
    assert_eq!(
        load("long-line", &long),
        err(
            text.lines().count() + 1,
            TraceWhy::LineTooLong {
                limit: MAX_TRACE_LINE_BYTES
            }
        )
    );

    let mut binary = text.clone().into_bytes();
    binary.extend_from_slice(b"reset \xc3\x28\n");
    assert_eq!(
        load("not-utf8", &binary),
        err(text.lines().count() + 1, TraceWhy::NotUtf8)
    );

    let missing = Replay::load(dir.path().join("absent.trace")).err().unwrap();
    assert_eq!(missing.line, 0);
    assert!(matches!(
        missing.why,
        TraceWhy::Io {
            kind: std::io::ErrorKind::NotFound,
            ..
        }
    ));

    // As a PciError the parse error keeps its chain, and it is fatal.
    let e = PciError::from(ReplayError::from(load("v3-again", v3.as_bytes())));
    assert_eq!(e.severity(), Severity::Fatal);
    let chain: Vec<String> =
        std::iter::successors(Some(&e as &dyn std::error::Error), |e| e.source())
            .map(ToString::to_string)
            .collect();
    assert_eq!(
        chain,
        [
            "the replay refused the operation",
            "the trace could not be read",
            "trace line 1: the trace is format `v3`; this build reads v1 and v2",
        ]
    );
}
