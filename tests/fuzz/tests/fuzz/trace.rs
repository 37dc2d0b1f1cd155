//! The trace reader and the replay. A trace is text a person may edit (or
//! a file that is no trace at all): it is parsed, and when it parses, a
//! replay of it is driven by a driver that asks for the recorded ops
//! (sometimes skipping, repeating or bending one, and across declared
//! gaps), then finished, as `--device replay:` and the replay tests do.

use crate::common::{finish, fuzz};
use macuda_fuzz::{combine, outcome, Rng};
use macuda_hw::pci::Width;
use macuda_pci::{
    DmaId, NullOpener, Opener, Recorder, Replay, Trace, TraceOp, Transport, TRACE_HEADER_V1,
};
use std::time::Duration;

const INPUTS: u64 = 15_000;
const TIME: Duration = Duration::from_secs(3);
/// Traces worth trying are short: the grammar is per line.
const MAX_LEN: usize = 8 << 10;
/// The most bytes the fuzz driver writes to DMA for one recorded write,
/// whatever length a mutated line claims (the replay then diverges).
const MAX_DRIVER_WRITE: u64 = 1 << 20;
/// BAR0 registers the recording driver touches: BOOT_0 and a scratch.
const BOOT_0: u64 = 0x0;
const SCRATCH: u64 = 0x1_0000;
/// The v1 example of the format's documentation: a card that turns ready
/// on the third read.
const POLL_V1: &str = "# macuda trace v1
# the card turns ready on the third read
mmio_read 0x7f0000 4 = 00000000
mmio_read 0x7f0000 4 = 00000000
mmio_read 0x7f0000 4 = 01000000
mmio_write 0x7f000c 4 01000000
";

/// DMA ops, which the null card refuses to record: the format's own
/// example (actors/pci's trace module), allocation, write and read.
const DMA_V2: &str = "# macuda trace v2
bars = 0:0x4000000 1:0x10000000 3:0x2000000
dma_alloc 16384 = id 1 bytes 16384 segs 0x100000:0x4000
dma_write 1 0x0 6 sha256 92cf572fe18491a05d1eeeb7c62d75d1e5451f1bc215809a732ac8604afc3454
dma_read 1 0x40 4 = 01000000
doorbell 0x0000000a
reset
";

/// Words of the format, for the mutator to insert.
const WORDS: [&str; 30] = [
    "cfg_read ",
    "cfg_write ",
    "bars = ",
    "mmio_read ",
    "mmio_write ",
    "doorbell ",
    "dma_alloc ",
    "dma_read ",
    "dma_write ",
    "reset",
    " = ",
    " id ",
    " bytes ",
    " segs ",
    " sha256 ",
    "u8",
    "u16",
    "u32",
    "0x",
    "-",
    ":",
    ",",
    "\n",
    "\r\n",
    "#",
    "0:0x1000000 ",
    "0xffffffffffffffff",
    "18446744073709551615",
    "4294967296",
    "# macuda trace v2\n",
];

/// A trace recorded over the null card by a small driver that does one
/// of everything a trace can hold.
fn recorded() -> Vec<u8> {
    let inner = NullOpener::gb202().open().expect("the null card opens");
    let mut t = Recorder::new(inner, Vec::new()).expect("the recorder starts");
    let _ = t.config_read(0, Width::U16);
    let _ = t.config_read(4, Width::U16);
    let _ = t.config_write(4, Width::U16, 0x6);
    let _ = t.bars();
    let _ = t.mmio_read32(BOOT_0);
    let _ = t.mmio_write32(SCRATCH, 0x1234_5678);
    let _ = t.mmio_read32(SCRATCH);
    let _ = t.doorbell(0xa);
    if let Ok(region) = t.alloc_dma(8192) {
        let _ = t.dma_write(region.id, 0, b"macuda");
        let mut back = [0u8; 6];
        let _ = t.dma_read(region.id, 0, &mut back);
    }
    let _ = t.function_reset();
    let (_, bytes) = t.finish().expect("the recording ends");
    bytes
}

/// Bend a number: an edge value, in the base the token used.
fn bend(rng: &mut Rng, token: &str) -> String {
    const EDGES: [u64; 8] = [0, 1, 0xff, 0xffff, 0xffff_ffff, 1 << 32, 1 << 63, u64::MAX];
    let v = *rng.pick(&EDGES).unwrap_or(&0);
    if token.starts_with("0x") {
        format!("{v:#x}")
    } else {
        v.to_string()
    }
}

/// Line-level moves: duplicate, delete or swap lines, or replace one
/// number on a line with an edge value.
fn mutate_lines(rng: &mut Rng, input: &mut Vec<u8>) {
    let text = String::from_utf8_lossy(input).into_owned();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.len() < 2 {
        return;
    }
    // Line 0 is the header; most moves leave it alone.
    let i = 1 + rng.below(lines.len() - 1);
    match rng.below(4) {
        0 => {
            let copy = lines[i].clone();
            lines.insert(i, copy);
        }
        1 => {
            lines.remove(i);
        }
        2 => {
            let j = 1 + rng.below(lines.len() - 1);
            lines.swap(i, j);
        }
        _ => {
            let words: Vec<String> = lines[i].split(' ').map(str::to_string).collect();
            let numbers: Vec<usize> = (0..words.len())
                .filter(|&k| words[k].starts_with(|c: char| c.is_ascii_digit()))
                .collect();
            if let Some(&k) = rng.pick(&numbers) {
                let mut words = words;
                words[k] = bend(rng, &words[k]);
                lines[i] = words.join(" ");
            }
        }
    }
    *input = (lines.join("\n") + "\n").into_bytes();
}

/// Ask the replay for `op` as a driver would. `bend` changes what is
/// asked (a different value or length) so the replay must diverge.
fn ask(r: &mut Replay, op: &TraceOp, bend: bool) -> u64 {
    let b = u64::from(bend);
    match op {
        TraceOp::ConfigRead { offset, width, .. } => {
            outcome(&r.config_read(*offset ^ (b as u16 * 4), *width))
        }
        TraceOp::ConfigWrite {
            offset,
            width,
            value,
        } => outcome(&r.config_write(*offset, *width, value ^ b as u32)),
        TraceOp::Bars(_) => outcome(&r.bars()),
        TraceOp::MmioRead { offset, data } => {
            let mut out = vec![0u8; data.len() + b as usize];
            outcome(&r.mmio_read(*offset, &mut out))
        }
        TraceOp::MmioWrite { offset, data } => {
            outcome(&r.mmio_write(offset.wrapping_add(b * 4), data))
        }
        TraceOp::Doorbell { token } => outcome(&r.doorbell(token ^ b as u32)),
        TraceOp::DmaAlloc { requested, .. } => outcome(&r.alloc_dma(requested.wrapping_add(b))),
        TraceOp::DmaRead { id, offset, data } => {
            let mut out = vec![0u8; data.len()];
            outcome(&r.dma_read(DmaId(id.0 + b as u32), *offset, &mut out))
        }
        TraceOp::DmaWrite {
            id, offset, len, ..
        } => {
            let data = vec![b as u8; (*len).min(MAX_DRIVER_WRITE) as usize];
            outcome(&r.dma_write(*id, *offset, &data))
        }
        TraceOp::Reset => outcome(&r.function_reset()),
    }
}

/// Parse, then drive a replay of what parsed.
fn exercise(bytes: &[u8]) -> u64 {
    let parsed = Trace::read_from(bytes);
    let Ok(trace) = parsed else {
        return outcome(&parsed);
    };
    let _ = trace.op_at_line(trace.lines() / 2);
    // The input picks the driver's deviation, so it is part of what the
    // mutator explores.
    let pick = bytes.iter().fold(0usize, |h, &b| {
        h.wrapping_mul(31).wrapping_add(usize::from(b))
    });
    let ops: Vec<TraceOp> = trace.ops().iter().map(|o| o.op.clone()).collect();
    let lines: Vec<usize> = trace.ops().iter().map(|o| o.line).collect();
    let mut r = Replay::new(trace);
    let mut outcomes = Vec::new();
    if let (Some(&first), Some(&last)) = (lines.get(pick % 5), lines.get(pick % 5 + pick % 3)) {
        outcomes.push(outcome(&r.declare_gap(first, last)));
    }
    let deviate = if ops.is_empty() { 0 } else { pick % ops.len() };
    for (i, op) in ops.iter().enumerate() {
        let how = if i == deviate { pick / 7 % 4 } else { 0 };
        match how {
            1 => continue,
            2 => {
                outcomes.push(ask(&mut r, op, false));
                outcomes.push(ask(&mut r, op, false));
            }
            3 => outcomes.push(ask(&mut r, op, true)),
            _ => outcomes.push(ask(&mut r, op, false)),
        }
    }
    let _ = r.flush();
    outcomes.push(outcome(&r.finish()));
    let _ = r.stats();
    let _ = r.gaps_crossed();
    combine(&outcomes)
}

#[test]
fn trace() {
    let v2 = recorded();
    let v1 = POLL_V1.as_bytes().to_vec();
    assert!(
        Trace::read_from(&v2[..]).is_ok(),
        "the recorded seed parses"
    );
    assert!(POLL_V1.starts_with(TRACE_HEADER_V1));
    assert!(
        Trace::read_from(DMA_V2.as_bytes()).is_ok(),
        "the DMA seed parses"
    );
    let summary = fuzz("trace")
        .seeds([v2, v1, DMA_V2.as_bytes().to_vec()])
        .dictionary(WORDS)
        .mutate(mutate_lines)
        .max_len(MAX_LEN)
        .budget(INPUTS, TIME)
        .run(exercise);
    finish(&summary);
}
