//! The trace format, declared once: [`TraceOp`] prints itself as one line
//! (`Display`) and parses itself back (`FromStr`); [`Trace`] reads a whole
//! file with its header, comments and limits. The grammar is in the module
//! documentation of [`crate::trace`].

use crate::transport::{BarInfo, DmaId, DmaRegion, DmaSegment};
use macuda_hw::pci::Width;
use std::collections::HashSet;
use std::fmt;
use std::io::{self, BufRead};
use std::path::Path;
use std::str::FromStr;

/// The first line of every trace this build writes (v2: DMA included).
pub const TRACE_HEADER: &str = "# macuda trace v2";
/// The first line of a v1 trace, which this build still reads: one recorded
/// before DMA was, replayed with the DMA memory kept locally.
pub const TRACE_HEADER_V1: &str = "# macuda trace v1";
/// What every version's header starts with, so a trace of another version is
/// told apart from a file that is no trace at all.
const HEADER_PREFIX: &str = "# macuda trace ";
/// The longest line a trace may have (without its line ending).
pub const MAX_TRACE_LINE_BYTES: usize = 1 << 20;
/// The largest trace that is read.
pub const MAX_TRACE_BYTES: u64 = 1 << 30;
/// The most operations a trace may hold (each costs a few dozen bytes parsed,
/// so this bounds the parsed trace as the byte limit bounds the file).
pub const MAX_TRACE_OPS: usize = 1 << 23;
/// The longest MMIO access the recorder accepts: its hex must fit a line.
pub const MAX_RECORDED_MMIO_BYTES: usize = 256 << 10;
/// The most bytes one `dma_read` line holds. A longer DMA read is recorded
/// as consecutive lines of this many bytes (the last one shorter), and a
/// replay cuts the driver's read the same way, so a read of any size can be
/// recorded while every line stays within [`MAX_TRACE_LINE_BYTES`].
pub const MAX_DMA_READ_LINE_BYTES: usize = 256 << 10;
/// How much of an offending token an error message repeats.
const ECHO_CHARS: usize = 40;

/// One bus-visible operation as recorded: what the driver asked and what
/// the card answered.
///
/// `flush` has no op: it only orders posted writes that are already in the
/// trace in their order, and every read orders them anyway, so it adds
/// nothing a replay could check.
///
/// DMA reads and writes are ops from v2 on. No bus transaction happens when
/// the CPU touches a DMA buffer, but the card writes that memory behind the
/// driver's back (GSP-RM's status queue, the FMC's write-back of the WPR
/// metadata), so a replay can only answer the driver's reads of it from the
/// trace: a read is recorded with its bytes. A write is recorded by length
/// and SHA-256, because the driver stages tens of megabytes of firmware and
/// a trace must stay small, yet a replay must still see that the driver
/// wrote the same bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceOp {
    /// `cfg_read 0x004 u16 = 0x0006`
    ConfigRead {
        offset: u16,
        width: Width,
        value: u32,
    },
    /// `cfg_write 0x004 u16 0x0006`
    ConfigWrite {
        offset: u16,
        width: Width,
        value: u32,
    },
    /// `bars = 0:0x4000000 1:0x10000000`
    Bars(Vec<BarInfo>),
    /// `mmio_read 0x000000 4 = a100201b` (bytes in address order)
    MmioRead { offset: u64, data: Vec<u8> },
    /// `mmio_write 0x000a00 4 01000000`
    MmioWrite { offset: u64, data: Vec<u8> },
    /// `doorbell 0x0000000a`
    Doorbell { token: u32 },
    /// `dma_alloc 16384 = id 1 bytes 16384 segs 0x100000:0x4000`
    DmaAlloc { requested: u64, region: DmaRegion },
    /// `dma_read 1 0x40 4 = 01000000` (v2; region id, offset, bytes)
    DmaRead {
        id: DmaId,
        offset: u64,
        data: Vec<u8>,
    },
    /// `dma_write 1 0x0 6 sha256 <64 hex digits>` (v2; region id, offset,
    /// length and the SHA-256 of the bytes written)
    DmaWrite {
        id: DmaId,
        offset: u64,
        len: u64,
        sha256: [u8; 32],
    },
    /// `reset`
    Reset,
}

/// One op of a parsed trace and the physical line (1-based) it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracedOp {
    pub line: usize,
    pub op: TraceOp,
}

/// Why a trace was rejected, and on which physical line (1-based; 0 means
/// the file as a whole, e.g. it could not be opened).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trace line {line}: {why}")]
pub struct TraceError {
    pub line: usize,
    pub why: TraceWhy,
}

/// The ways a trace line can be malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceWhy {
    #[error("the first line is not a `{TRACE_HEADER}` (or v1) header")]
    MissingHeader,
    #[error("the trace is format `{found}`; this build reads v1 and v2")]
    Version { found: String },
    #[error("`{op}` is not an operation of trace v{version}")]
    NotInVersion { op: &'static str, version: u32 },
    #[error("bad SHA-256 `{text}` (64 hex digits)")]
    BadHash { text: String },
    #[error("unknown operation `{op}`")]
    UnknownOp { op: String },
    #[error("the {field} is missing")]
    MissingField { field: &'static str },
    #[error("`=` is missing before the recorded result")]
    MissingEquals,
    #[error("expected `{expected}`, found `{found}`")]
    Keyword {
        expected: &'static str,
        found: String,
    },
    #[error("bad number for the {field}: `{text}`")]
    BadNumber { field: &'static str, text: String },
    #[error("an impossible card: {why}")]
    ImpossibleBars { why: String },
    #[error("a register access of {len} bytes at {offset:#x} lies past BAR0's {size:#x} bytes, as the trace's own bars line gives them")]
    OutsideBar0 { offset: u64, len: u64, size: u64 },
    #[error("unknown access width `{text}` (u8, u16 or u32)")]
    BadWidth { text: String },
    #[error("value {value:#x} does not fit a {bytes}-byte access")]
    ValueTooWide { value: u32, bytes: usize },
    #[error("bad hex bytes `{text}`")]
    BadHex { text: String },
    #[error("hex is truncated: {expected_bytes} bytes declared, {found_digits} hex digits given")]
    TruncatedHex {
        expected_bytes: u64,
        found_digits: usize,
    },
    #[error("hex is too long: {expected_bytes} bytes declared, {found_digits} hex digits given")]
    HexTooLong {
        expected_bytes: u64,
        found_digits: usize,
    },
    #[error("unexpected text after the operation: `{text}`")]
    TrailingText { text: String },
    #[error("DMA region {id} is allocated twice")]
    DuplicateDmaId { id: u32 },
    #[error("the line is longer than {limit} bytes")]
    LineTooLong { limit: usize },
    #[error("the trace is larger than {limit} bytes")]
    TraceTooLarge { limit: u64 },
    #[error("the trace has more than {limit} operations")]
    TooManyOps { limit: usize },
    #[error("the line is not UTF-8")]
    NotUtf8,
    #[error("reading the trace failed: {message}")]
    Io {
        kind: io::ErrorKind,
        message: String,
    },
}

/// A parsed trace: its ops in order with their line numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    ops: Vec<TracedOp>,
    lines: usize,
    version: u32,
}

impl Trace {
    /// Parse a trace held in memory.
    ///
    /// # Errors
    /// The first malformed line, as a [`TraceError`].
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        Trace::read_from(text.as_bytes())
    }

    /// Read a trace file.
    ///
    /// # Errors
    /// The file cannot be opened (line 0) or read, or a line is malformed.
    pub fn load(path: impl AsRef<Path>) -> Result<Trace, TraceError> {
        let file = std::fs::File::open(path.as_ref()).map_err(|e| TraceError {
            line: 0,
            why: io_why(&e),
        })?;
        Trace::read_from(io::BufReader::new(file))
    }

    /// Read a trace from any reader, never holding more than one line of
    /// [`MAX_TRACE_LINE_BYTES`] beyond the parsed ops, and stopping at
    /// [`MAX_TRACE_BYTES`] and [`MAX_TRACE_OPS`].
    ///
    /// # Errors
    /// The first malformed line, as a [`TraceError`].
    pub fn read_from<R: BufRead>(mut reader: R) -> Result<Trace, TraceError> {
        let mut buf = Vec::new();
        let mut ops = Vec::new();
        let mut dma_ids = HashSet::new();
        let mut bar0: Option<u64> = None;
        let mut total: u64 = 0;
        let mut line = 0;
        let mut version = 0;
        loop {
            let at = line + 1;
            let fail = |why| TraceError { line: at, why };
            let Some(consumed) = next_line(&mut reader, &mut buf).map_err(fail)? else {
                break;
            };
            line = at;
            total += consumed as u64;
            if total > MAX_TRACE_BYTES {
                return Err(fail(TraceWhy::TraceTooLarge {
                    limit: MAX_TRACE_BYTES,
                }));
            }
            let text = std::str::from_utf8(&buf).map_err(|_| fail(TraceWhy::NotUtf8))?;
            if line == 1 {
                version = check_header(text).map_err(fail)?;
                continue;
            }
            let text = text.trim();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            let op: TraceOp = text.parse().map_err(fail)?;
            if version < op.since_version() {
                return Err(fail(TraceWhy::NotInVersion {
                    op: op.name(),
                    version,
                }));
            }
            if let TraceOp::DmaAlloc { region, .. } = &op {
                if !dma_ids.insert(region.id) {
                    return Err(fail(TraceWhy::DuplicateDmaId { id: region.id.0 }));
                }
            }
            // Register accesses must fit the BAR0 the trace itself declared
            // (once it has: a trace may read registers before asking).
            match &op {
                TraceOp::Bars(bars) => bar0 = bars.iter().find(|b| b.index == 0).map(|b| b.bytes),
                TraceOp::MmioRead { offset, data } | TraceOp::MmioWrite { offset, data } => {
                    if let Some(size) = bar0 {
                        let len = data.len() as u64;
                        if offset.checked_add(len).is_none_or(|end| end > size) {
                            return Err(fail(TraceWhy::OutsideBar0 {
                                offset: *offset,
                                len,
                                size,
                            }));
                        }
                    }
                }
                _ => {}
            }
            if ops.len() == MAX_TRACE_OPS {
                return Err(fail(TraceWhy::TooManyOps {
                    limit: MAX_TRACE_OPS,
                }));
            }
            ops.push(TracedOp { line, op });
        }
        if line == 0 {
            return Err(TraceError {
                line: 1,
                why: TraceWhy::MissingHeader,
            });
        }
        Ok(Trace {
            ops,
            lines: line,
            version,
        })
    }

    /// The ops in recorded order.
    pub fn ops(&self) -> &[TracedOp] {
        &self.ops
    }

    /// The format version its header names (1 or 2).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// How many physical lines the trace had, header and comments included.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// The op recorded on `line`, if that line holds one.
    pub fn op_at_line(&self, line: usize) -> Option<&TraceOp> {
        self.ops
            .binary_search_by_key(&line, |o| o.line)
            .ok()
            .map(|i| &self.ops[i].op)
    }

    pub(crate) fn into_ops(self) -> Vec<TracedOp> {
        self.ops
    }
}

/// The version the header names.
fn check_header(text: &str) -> Result<u32, TraceWhy> {
    let text = text.trim_end();
    if text == TRACE_HEADER {
        return Ok(2);
    }
    if text == TRACE_HEADER_V1 {
        return Ok(1);
    }
    match text.strip_prefix(HEADER_PREFIX) {
        Some(found) => Err(TraceWhy::Version {
            found: clip(found.trim()),
        }),
        None => Err(TraceWhy::MissingHeader),
    }
}

fn io_why(e: &io::Error) -> TraceWhy {
    TraceWhy::Io {
        kind: e.kind(),
        message: e.to_string(),
    }
}

/// Read one line into `buf` (without `\n` or a trailing `\r`), refusing to
/// hold more than [`MAX_TRACE_LINE_BYTES`] of it. `Ok(None)` at the end of input;
/// otherwise the bytes consumed.
fn next_line<R: BufRead>(reader: &mut R, buf: &mut Vec<u8>) -> Result<Option<usize>, TraceWhy> {
    buf.clear();
    let mut consumed = 0;
    loop {
        let avail = match reader.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_why(&e)),
        };
        if avail.is_empty() {
            break;
        }
        let (take, newline) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (avail.len(), false),
        };
        // One byte of slack for a `\r` before the `\n`.
        if buf.len() + take > MAX_TRACE_LINE_BYTES + 1 {
            return Err(TraceWhy::LineTooLong {
                limit: MAX_TRACE_LINE_BYTES,
            });
        }
        buf.extend_from_slice(&avail[..take]);
        let step = take + usize::from(newline);
        reader.consume(step);
        consumed += step;
        if newline {
            break;
        }
    }
    if consumed == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    if buf.len() > MAX_TRACE_LINE_BYTES {
        return Err(TraceWhy::LineTooLong {
            limit: MAX_TRACE_LINE_BYTES,
        });
    }
    Ok(Some(consumed))
}

/// At most [`ECHO_CHARS`] of `text`, for error messages.
fn clip(text: &str) -> String {
    match text.char_indices().nth(ECHO_CHARS) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}

// ---------------------------------------------------------------- printing

pub(crate) fn width_name(width: Width) -> &'static str {
    match width {
        Width::U8 => "u8",
        Width::U16 => "u16",
        Width::U32 => "u32",
    }
}

/// A config offset: three hex digits cover the 4 KiB extended space.
pub(crate) struct CfgOffset(pub u16);
impl fmt::Display for CfgOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#05x}", self.0)
    }
}

/// A config value, as many hex digits as the access is wide.
pub(crate) struct CfgValue(pub u32, pub Width);
impl fmt::Display for CfgValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#0w$x}", self.0, w = 2 + 2 * self.1.bytes())
    }
}

/// A BAR0 offset: six hex digits cover the 16 MiB register space.
pub(crate) struct MmioOffset(pub u64);
impl fmt::Display for MmioOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#08x}", self.0)
    }
}

/// Bytes in address order, two lowercase hex digits each; `-` for none.
pub(crate) struct Hex<'a>(pub &'a [u8]);
impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("-");
        }
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Display for TraceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceOp::ConfigRead {
                offset,
                width,
                value,
            } => write!(
                f,
                "cfg_read {} {} = {}",
                CfgOffset(*offset),
                width_name(*width),
                CfgValue(*value, *width)
            ),
            TraceOp::ConfigWrite {
                offset,
                width,
                value,
            } => write!(
                f,
                "cfg_write {} {} {}",
                CfgOffset(*offset),
                width_name(*width),
                CfgValue(*value, *width)
            ),
            TraceOp::Bars(bars) => {
                f.write_str("bars =")?;
                for b in bars {
                    write!(f, " {}:{:#x}", b.index, b.bytes)?;
                }
                Ok(())
            }
            TraceOp::MmioRead { offset, data } => write!(
                f,
                "mmio_read {} {} = {}",
                MmioOffset(*offset),
                data.len(),
                Hex(data)
            ),
            TraceOp::MmioWrite { offset, data } => write!(
                f,
                "mmio_write {} {} {}",
                MmioOffset(*offset),
                data.len(),
                Hex(data)
            ),
            TraceOp::Doorbell { token } => write!(f, "doorbell {token:#010x}"),
            TraceOp::DmaAlloc { requested, region } => {
                write!(
                    f,
                    "dma_alloc {requested} = id {} bytes {} segs ",
                    region.id.0, region.bytes
                )?;
                if region.segments.is_empty() {
                    return f.write_str("-");
                }
                for (i, s) in region.segments.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "," };
                    write!(f, "{sep}{:#x}:{:#x}", s.bus_addr, s.bytes)?;
                }
                Ok(())
            }
            TraceOp::DmaRead { id, offset, data } => write!(
                f,
                "dma_read {} {offset:#x} {} = {}",
                id.0,
                data.len(),
                Hex(data)
            ),
            TraceOp::DmaWrite {
                id,
                offset,
                len,
                sha256,
            } => write!(
                f,
                "dma_write {} {offset:#x} {len} sha256 {}",
                id.0,
                Hex(sha256)
            ),
            TraceOp::Reset => f.write_str("reset"),
        }
    }
}

impl TraceOp {
    /// The op's keyword, as the trace spells it.
    pub fn name(&self) -> &'static str {
        match self {
            TraceOp::ConfigRead { .. } => "cfg_read",
            TraceOp::ConfigWrite { .. } => "cfg_write",
            TraceOp::Bars(_) => "bars",
            TraceOp::MmioRead { .. } => "mmio_read",
            TraceOp::MmioWrite { .. } => "mmio_write",
            TraceOp::Doorbell { .. } => "doorbell",
            TraceOp::DmaAlloc { .. } => "dma_alloc",
            TraceOp::DmaRead { .. } => "dma_read",
            TraceOp::DmaWrite { .. } => "dma_write",
            TraceOp::Reset => "reset",
        }
    }

    /// The first trace version that has this op.
    pub fn since_version(&self) -> u32 {
        match self {
            TraceOp::DmaRead { .. } | TraceOp::DmaWrite { .. } => 2,
            _ => 1,
        }
    }
}

/// The SHA-256 of bytes the driver wrote to DMA memory, as a trace records
/// them.
pub fn dma_write_hash(data: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(data).into()
}

/// How a DMA read of `len` bytes at `offset` is cut into trace lines: the
/// offset and the byte range of each piece, always at least one piece (a
/// read of nothing is one empty line), so recorder and replay agree.
pub(crate) fn dma_read_pieces(
    offset: u64,
    len: usize,
) -> impl Iterator<Item = (u64, std::ops::Range<usize>)> {
    let count = len.div_ceil(MAX_DMA_READ_LINE_BYTES).max(1);
    (0..count).map(move |i| {
        let start = i * MAX_DMA_READ_LINE_BYTES;
        let end = (start + MAX_DMA_READ_LINE_BYTES).min(len);
        (offset.wrapping_add(start as u64), start..end)
    })
}

// ----------------------------------------------------------------- parsing

/// The whitespace-separated tokens of one op line.
struct Fields<'a> {
    tokens: std::str::SplitAsciiWhitespace<'a>,
}

impl<'a> Fields<'a> {
    fn next(&mut self, field: &'static str) -> Result<&'a str, TraceWhy> {
        self.tokens.next().ok_or(TraceWhy::MissingField { field })
    }

    fn equals(&mut self) -> Result<(), TraceWhy> {
        match self.tokens.next() {
            Some("=") => Ok(()),
            _ => Err(TraceWhy::MissingEquals),
        }
    }

    fn keyword(&mut self, expected: &'static str) -> Result<(), TraceWhy> {
        match self.tokens.next() {
            Some(t) if t == expected => Ok(()),
            Some(t) => Err(TraceWhy::Keyword {
                expected,
                found: clip(t),
            }),
            None => Err(TraceWhy::MissingField { field: expected }),
        }
    }

    fn hex<N: TryFrom<u64>>(&mut self, field: &'static str) -> Result<N, TraceWhy> {
        let t = self.next(field)?;
        hex_number(field, t)
    }

    fn dec<N: TryFrom<u64>>(&mut self, field: &'static str) -> Result<N, TraceWhy> {
        let t = self.next(field)?;
        dec_number(field, t)
    }

    fn width(&mut self) -> Result<Width, TraceWhy> {
        match self.next("width")? {
            "u8" => Ok(Width::U8),
            "u16" => Ok(Width::U16),
            "u32" => Ok(Width::U32),
            t => Err(TraceWhy::BadWidth { text: clip(t) }),
        }
    }

    fn cfg_value(&mut self, width: Width) -> Result<u32, TraceWhy> {
        let value: u32 = self.hex("value")?;
        let bytes = width.bytes();
        if bytes < 4 && value >> (8 * bytes) != 0 {
            return Err(TraceWhy::ValueTooWide { value, bytes });
        }
        Ok(value)
    }

    /// A length, then (after `=` for reads) that many bytes of hex.
    fn bytes(&mut self, with_equals: bool) -> Result<Vec<u8>, TraceWhy> {
        let len: u64 = self.dec("length")?;
        if with_equals {
            self.equals()?;
        }
        let text = self.next("bytes")?;
        hex_bytes(text, len)
    }

    fn end(mut self) -> Result<(), TraceWhy> {
        match self.tokens.next() {
            None => Ok(()),
            Some(t) => Err(TraceWhy::TrailingText { text: clip(t) }),
        }
    }
}

fn bad_number(field: &'static str, text: &str) -> TraceWhy {
    TraceWhy::BadNumber {
        field,
        text: clip(text),
    }
}

/// `0x` and one or more hex digits (no sign), fitting `N`.
fn hex_number<N: TryFrom<u64>>(field: &'static str, text: &str) -> Result<N, TraceWhy> {
    let digits = text
        .strip_prefix("0x")
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| bad_number(field, text))?;
    u64::from_str_radix(digits, 16)
        .ok()
        .and_then(|v| N::try_from(v).ok())
        .ok_or_else(|| bad_number(field, text))
}

/// One or more decimal digits (no sign), fitting `N`.
fn dec_number<N: TryFrom<u64>>(field: &'static str, text: &str) -> Result<N, TraceWhy> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad_number(field, text));
    }
    text.parse::<u64>()
        .ok()
        .and_then(|v| N::try_from(v).ok())
        .ok_or_else(|| bad_number(field, text))
}

fn hex_bytes(text: &str, len: u64) -> Result<Vec<u8>, TraceWhy> {
    let digits = if text == "-" { "" } else { text };
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(TraceWhy::BadHex { text: clip(text) });
    }
    let found_digits = digits.len();
    match len.checked_mul(2) {
        Some(want) if want == found_digits as u64 => {}
        Some(want) if want < found_digits as u64 => {
            return Err(TraceWhy::HexTooLong {
                expected_bytes: len,
                found_digits,
            })
        }
        _ => {
            return Err(TraceWhy::TruncatedHex {
                expected_bytes: len,
                found_digits,
            })
        }
    }
    let nibble = |b: u8| match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    };
    Ok(digits
        .as_bytes()
        .chunks_exact(2)
        .map(|p| nibble(p[0]) << 4 | nibble(p[1]))
        .collect())
}

fn parse_bar(text: &str) -> Result<BarInfo, TraceWhy> {
    let (index, bytes) = text
        .split_once(':')
        .ok_or_else(|| bad_number("BAR", text))?;
    Ok(BarInfo {
        index: dec_number("BAR index", index)?,
        bytes: hex_number("BAR size", bytes)?,
    })
}

/// A card's BARs as PCI allows them: BAR0 (the registers) among them,
/// indices below six and each named once, sizes powers of two.
fn check_bars(bars: &[BarInfo]) -> Result<(), TraceWhy> {
    let impossible = |why: String| Err(TraceWhy::ImpossibleBars { why });
    if !bars.iter().any(|b| b.index == 0) {
        return impossible("no BAR0 (the card's registers)".to_string());
    }
    let mut seen = [false; macuda_hw::pci::BAR_COUNT];
    for b in bars {
        let Some(slot) = seen.get_mut(usize::from(b.index)) else {
            return impossible(format!(
                "BAR{} (a function has BAR0 to BAR{})",
                b.index,
                macuda_hw::pci::BAR_COUNT - 1
            ));
        };
        if std::mem::replace(slot, true) {
            return impossible(format!("BAR{} named twice", b.index));
        }
        if !b.bytes.is_power_of_two() {
            return impossible(format!(
                "BAR{} of {:#x} bytes (a BAR's size is a power of two)",
                b.index, b.bytes
            ));
        }
    }
    Ok(())
}

fn parse_segments(text: &str) -> Result<Vec<DmaSegment>, TraceWhy> {
    if text == "-" {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|s| {
            let (addr, bytes) = s
                .split_once(':')
                .ok_or_else(|| bad_number("DMA segment", s))?;
            Ok(DmaSegment {
                bus_addr: hex_number("segment bus address", addr)?,
                bytes: hex_number("segment size", bytes)?,
            })
        })
        .collect()
}

fn parse_hash(text: &str) -> Result<[u8; 32], TraceWhy> {
    let bad = || TraceWhy::BadHash { text: clip(text) };
    let bytes = hex_bytes(text, 32).map_err(|_| bad())?;
    bytes.try_into().map_err(|_| bad())
}

impl FromStr for TraceOp {
    type Err = TraceWhy;

    /// Parse one op line (not a comment, not the header).
    fn from_str(line: &str) -> Result<TraceOp, TraceWhy> {
        let mut f = Fields {
            tokens: line.split_ascii_whitespace(),
        };
        let op = match f.next("operation")? {
            "cfg_read" => {
                let offset = f.hex("offset")?;
                let width = f.width()?;
                f.equals()?;
                let value = f.cfg_value(width)?;
                TraceOp::ConfigRead {
                    offset,
                    width,
                    value,
                }
            }
            "cfg_write" => {
                let offset = f.hex("offset")?;
                let width = f.width()?;
                let value = f.cfg_value(width)?;
                TraceOp::ConfigWrite {
                    offset,
                    width,
                    value,
                }
            }
            "bars" => {
                f.equals()?;
                let bars: Vec<BarInfo> =
                    f.tokens.by_ref().map(parse_bar).collect::<Result<_, _>>()?;
                check_bars(&bars)?;
                TraceOp::Bars(bars)
            }
            "mmio_read" => TraceOp::MmioRead {
                offset: f.hex("offset")?,
                data: f.bytes(true)?,
            },
            "mmio_write" => TraceOp::MmioWrite {
                offset: f.hex("offset")?,
                data: f.bytes(false)?,
            },
            "doorbell" => TraceOp::Doorbell {
                token: f.hex("token")?,
            },
            "dma_alloc" => {
                let requested = f.dec("requested size")?;
                f.equals()?;
                f.keyword("id")?;
                let id = DmaId(f.dec("DMA id")?);
                f.keyword("bytes")?;
                let bytes = f.dec("DMA size")?;
                f.keyword("segs")?;
                let segments = parse_segments(f.next("segments")?)?;
                TraceOp::DmaAlloc {
                    requested,
                    region: DmaRegion {
                        id,
                        bytes,
                        segments,
                    },
                }
            }
            "dma_read" => {
                let id = DmaId(f.dec("DMA id")?);
                let offset = f.hex("DMA offset")?;
                TraceOp::DmaRead {
                    id,
                    offset,
                    data: f.bytes(true)?,
                }
            }
            "dma_write" => {
                let id = DmaId(f.dec("DMA id")?);
                let offset = f.hex("DMA offset")?;
                let len = f.dec("length")?;
                f.keyword("sha256")?;
                let sha256 = parse_hash(f.next("hash")?)?;
                TraceOp::DmaWrite {
                    id,
                    offset,
                    len,
                    sha256,
                }
            }
            "reset" => TraceOp::Reset,
            other => return Err(TraceWhy::UnknownOp { op: clip(other) }),
        };
        f.end()?;
        Ok(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> Vec<TraceOp> {
        vec![
            TraceOp::ConfigRead {
                offset: 0x004,
                width: Width::U16,
                value: 0x0006,
            },
            TraceOp::ConfigRead {
                offset: 0x008,
                width: Width::U32,
                value: 0x0300_00A1,
            },
            TraceOp::ConfigRead {
                offset: 0xFFF,
                width: Width::U8,
                value: 0xFF,
            },
            TraceOp::ConfigWrite {
                offset: 0x004,
                width: Width::U16,
                value: 0x0002,
            },
            TraceOp::Bars(vec![
                BarInfo {
                    index: 0,
                    bytes: 0x2_0000_0000,
                },
                BarInfo {
                    index: 1,
                    bytes: 0x1000_0000,
                },
            ]),
            TraceOp::MmioRead {
                offset: 0x000a00,
                data: vec![0xa1, 0x00, 0x20, 0x1b],
            },
            TraceOp::MmioRead {
                offset: 0x1_0000_0000,
                data: Vec::new(),
            },
            TraceOp::MmioWrite {
                offset: 0x000a00,
                data: vec![1, 0, 0, 0, 0xff, 0xee],
            },
            TraceOp::MmioWrite {
                offset: 0,
                data: Vec::new(),
            },
            TraceOp::Doorbell { token: 0xa },
            TraceOp::DmaAlloc {
                requested: 16384,
                region: DmaRegion {
                    id: DmaId(1),
                    bytes: 16384,
                    segments: vec![
                        DmaSegment {
                            bus_addr: 0x1000,
                            bytes: 0x3000,
                        },
                        DmaSegment {
                            bus_addr: 0x9000,
                            bytes: 0x1000,
                        },
                    ],
                },
            },
            TraceOp::DmaAlloc {
                requested: 1,
                region: DmaRegion {
                    id: DmaId(u32::MAX),
                    bytes: 4096,
                    segments: Vec::new(),
                },
            },
            TraceOp::DmaRead {
                id: DmaId(2),
                offset: 0x40,
                data: vec![1, 0, 0, 0],
            },
            TraceOp::DmaRead {
                id: DmaId(0),
                offset: 0,
                data: Vec::new(),
            },
            TraceOp::DmaWrite {
                id: DmaId(1),
                offset: 0,
                len: 6,
                sha256: dma_write_hash(b"cmd:go"),
            },
            TraceOp::Reset,
        ]
    }

    #[test]
    fn prints_the_documented_text() {
        let texts: Vec<String> = every_kind().iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "cfg_read 0x004 u16 = 0x0006",
                "cfg_read 0x008 u32 = 0x030000a1",
                "cfg_read 0xfff u8 = 0xff",
                "cfg_write 0x004 u16 0x0002",
                "bars = 0:0x200000000 1:0x10000000",
                "mmio_read 0x000a00 4 = a100201b",
                "mmio_read 0x100000000 0 = -",
                "mmio_write 0x000a00 6 01000000ffee",
                "mmio_write 0x000000 0 -",
                "doorbell 0x0000000a",
                "dma_alloc 16384 = id 1 bytes 16384 segs 0x1000:0x3000,0x9000:0x1000",
                "dma_alloc 1 = id 4294967295 bytes 4096 segs -",
                "dma_read 2 0x40 4 = 01000000",
                "dma_read 0 0x0 0 = -",
                "dma_write 1 0x0 6 sha256 \
                 92cf572fe18491a05d1eeeb7c62d75d1e5451f1bc215809a732ac8604afc3454",
                "reset",
            ]
        );
    }

    #[test]
    fn every_op_kind_round_trips() {
        for op in every_kind() {
            let text = op.to_string();
            assert_eq!(text.parse::<TraceOp>(), Ok(op.clone()), "{text}");
        }
    }

    #[test]
    fn a_whole_trace_round_trips_with_line_numbers() {
        let mut text = format!("{TRACE_HEADER}\n# a comment\n\n");
        for op in every_kind() {
            text.push_str(&format!("{op}\n# between\n"));
        }
        let trace = Trace::parse(&text).unwrap();
        assert_eq!(trace.lines(), 3 + 2 * every_kind().len());
        let ops: Vec<TraceOp> = trace.ops().iter().map(|o| o.op.clone()).collect();
        assert_eq!(ops, every_kind());
        let lines: Vec<usize> = trace.ops().iter().map(|o| o.line).collect();
        let want: Vec<usize> = (0..every_kind().len()).map(|i| 4 + 2 * i).collect();
        assert_eq!(lines, want);
        assert_eq!(trace.op_at_line(4), Some(&every_kind()[0]));
        assert_eq!(trace.op_at_line(5), None);
    }

    #[test]
    fn accepts_crlf_uppercase_hex_and_a_missing_final_newline() {
        let t = Trace::parse(&format!(
            "{TRACE_HEADER}\r\nmmio_read 0x0A00 2 = ABcd\r\ncfg_read 0x4 u16 = 0x6"
        ))
        .unwrap();
        assert_eq!(
            t.ops()[0].op,
            TraceOp::MmioRead {
                offset: 0xa00,
                data: vec![0xab, 0xcd]
            }
        );
        assert_eq!(t.ops()[1].line, 3);
    }

    /// The error for `line` placed as line 3 of a trace (after a comment).
    fn error_of(line: &str) -> TraceError {
        Trace::parse(&format!("{TRACE_HEADER}\n# comment\n{line}\nreset\n")).unwrap_err()
    }

    fn at3(why: TraceWhy) -> TraceError {
        TraceError { line: 3, why }
    }

    #[test]
    fn bad_numbers_are_typed() {
        let bad = |field: &'static str, text: &str| {
            at3(TraceWhy::BadNumber {
                field,
                text: text.to_string(),
            })
        };
        assert_eq!(
            error_of("cfg_read 4 u16 = 0x0006"),
            bad("offset", "4"),
            "hex needs 0x"
        );
        assert_eq!(
            error_of("cfg_read 0x10000 u16 = 0x0006"),
            bad("offset", "0x10000"),
            "offset wider than u16"
        );
        assert_eq!(error_of("cfg_write 0x004 u16 0xzz"), bad("value", "0xzz"));
        assert_eq!(error_of("doorbell 0x"), bad("token", "0x"));
        assert_eq!(error_of("doorbell +0x1"), bad("token", "+0x1"));
        assert_eq!(
            error_of("doorbell 0x100000000"),
            bad("token", "0x100000000")
        );
        assert_eq!(error_of("mmio_read 0x0 +4 = 00000000"), bad("length", "+4"));
        assert_eq!(error_of("mmio_write 0x0 4x 00000000"), bad("length", "4x"));
        assert_eq!(
            error_of("dma_alloc 0x10 = id 1 bytes 16 segs -"),
            bad("requested size", "0x10")
        );
        assert_eq!(
            error_of("dma_alloc 16 = id 1 bytes 16 segs 0x1000"),
            bad("DMA segment", "0x1000")
        );
        assert_eq!(
            error_of("dma_alloc 16 = id 1 bytes 16 segs 0x1000:0x10,"),
            bad("DMA segment", "")
        );
        assert_eq!(
            error_of("dma_alloc 16 = id 1 bytes 16 segs 0x1000:0x10,x:0x10"),
            bad("segment bus address", "x")
        );
        assert_eq!(error_of("bars = 0:64"), bad("BAR size", "64"));
        assert_eq!(error_of("bars = 256:0x10"), bad("BAR index", "256"));
        // Register accesses past the trace's own BAR0 (once declared).
        let past = Trace::parse(&format!(
            "{TRACE_HEADER}\nmmio_read 0x88a828 4 = 00000000\nbars = 0:0x1000\nmmio_read 0xffc 4 = 00000000\nmmio_read 0x88a828 4 = 00000000\n"
        ))
        .unwrap_err();
        assert_eq!(
            past,
            TraceError {
                line: 5,
                why: TraceWhy::OutsideBar0 {
                    offset: 0x88a828,
                    len: 4,
                    size: 0x1000
                }
            }
        );
        let wraps = Trace::parse(&format!(
            "{TRACE_HEADER}\nbars = 0:0x1000\nmmio_write 0xffffffffffffffff 2 0000\n"
        ))
        .unwrap_err();
        assert!(
            matches!(wraps.why, TraceWhy::OutsideBar0 { .. }),
            "{wraps:?}"
        );
        for (line, why) in [
            ("bars = 1:0x1000", "no BAR0"),
            ("bars =", "no BAR0"),
            ("bars = 0:0x1000 9:0x1000", "BAR9"),
            ("bars = 0:0x1000 0:0x2000", "BAR0 named twice"),
            ("bars = 0:0x3000", "power of two"),
            ("bars = 0:0xffffffffffffffff", "power of two"),
        ] {
            match error_of(line).why {
                TraceWhy::ImpossibleBars { why: w } => assert!(w.contains(why), "{line}: {w}"),
                other => panic!("{line}: {other:?}"),
            }
        }
        assert_eq!(
            error_of("cfg_read 0x004 u16 = 0x10000"),
            at3(TraceWhy::ValueTooWide {
                value: 0x10000,
                bytes: 2
            })
        );
        assert_eq!(
            error_of("cfg_read 0x004 u64 = 0x0"),
            at3(TraceWhy::BadWidth {
                text: "u64".to_string()
            })
        );
    }

    #[test]
    fn bad_dma_lines_are_typed() {
        let hash = "92cf572fe18491a05d1eeeb7c62d75d1e5451f1bc215809a732ac8604afc3454";
        assert_eq!(
            error_of(&format!("dma_write 1 0x0 6 sha256 {}", &hash[..62])),
            at3(TraceWhy::BadHash {
                text: format!("{}...", &hash[..ECHO_CHARS])
            })
        );
        assert_eq!(
            error_of(&format!("dma_write 1 0x0 6 sha256 {hash}00")),
            at3(TraceWhy::BadHash {
                text: format!("{}...", &hash[..ECHO_CHARS])
            })
        );
        assert_eq!(
            error_of(&format!("dma_write 1 0x0 6 md5 {hash}")),
            at3(TraceWhy::Keyword {
                expected: "sha256",
                found: "md5".to_string()
            })
        );
        assert_eq!(
            error_of("dma_read 1 0x0 4 = 0000"),
            at3(TraceWhy::TruncatedHex {
                expected_bytes: 4,
                found_digits: 4
            })
        );
        assert_eq!(
            error_of("dma_read x 0x0 1 = 00"),
            at3(TraceWhy::BadNumber {
                field: "DMA id",
                text: "x".to_string()
            })
        );
        assert_eq!(
            error_of("dma_read 1 0x0 1 00"),
            at3(TraceWhy::MissingEquals)
        );
    }

    #[test]
    fn dma_reads_are_cut_into_line_sized_pieces() {
        let cut = |len| dma_read_pieces(0x10, len).collect::<Vec<_>>();
        assert_eq!(cut(0), [(0x10, 0..0)]);
        assert_eq!(cut(5), [(0x10, 0..5)]);
        let max = MAX_DMA_READ_LINE_BYTES;
        assert_eq!(cut(max), [(0x10, 0..max)]);
        assert_eq!(
            cut(2 * max + 1),
            [
                (0x10, 0..max),
                (0x10 + max as u64, max..2 * max),
                (0x10 + 2 * max as u64, 2 * max..2 * max + 1)
            ]
        );
        // The longest piece prints within a line.
        let op = TraceOp::DmaRead {
            id: DmaId(u32::MAX),
            offset: u64::MAX,
            data: vec![0; max],
        };
        assert!(op.to_string().len() <= MAX_TRACE_LINE_BYTES);
    }

    #[test]
    fn unknown_ops_are_typed() {
        assert_eq!(
            error_of("mmio_peek 0x0 4"),
            at3(TraceWhy::UnknownOp {
                op: "mmio_peek".to_string()
            })
        );
        assert_eq!(
            error_of("  Reset"),
            at3(TraceWhy::UnknownOp {
                op: "Reset".to_string()
            })
        );
    }

    #[test]
    fn missing_equals_is_typed() {
        for line in [
            "cfg_read 0x004 u16 0x0006",
            "cfg_read 0x004 u16",
            "bars 0:0x10",
            "bars",
            "mmio_read 0x0 4 00000000",
            "dma_alloc 16 id 1 bytes 16 segs -",
        ] {
            assert_eq!(error_of(line), at3(TraceWhy::MissingEquals), "{line}");
        }
    }

    #[test]
    fn missing_and_extra_fields_are_typed() {
        assert_eq!(
            error_of("cfg_read 0x004 u16 ="),
            at3(TraceWhy::MissingField { field: "value" })
        );
        assert_eq!(
            error_of("cfg_write 0x004"),
            at3(TraceWhy::MissingField { field: "width" })
        );
        assert_eq!(
            error_of("mmio_write 0x0 4"),
            at3(TraceWhy::MissingField { field: "bytes" })
        );
        assert_eq!(
            error_of("dma_alloc 16 = id 1 bytes 16"),
            at3(TraceWhy::MissingField { field: "segs" })
        );
        assert_eq!(
            error_of("dma_alloc 16 = ident 1 bytes 16 segs -"),
            at3(TraceWhy::Keyword {
                expected: "id",
                found: "ident".to_string()
            })
        );
        assert_eq!(
            error_of("reset now"),
            at3(TraceWhy::TrailingText {
                text: "now".to_string()
            })
        );
        assert_eq!(
            error_of("doorbell 0x1 0x2"),
            at3(TraceWhy::TrailingText {
                text: "0x2".to_string()
            })
        );
    }

    #[test]
    fn bad_hex_is_typed() {
        assert_eq!(
            error_of("mmio_read 0x0 4 = 000000"),
            at3(TraceWhy::TruncatedHex {
                expected_bytes: 4,
                found_digits: 6
            })
        );
        assert_eq!(
            error_of("mmio_write 0x0 4 0000000"),
            at3(TraceWhy::TruncatedHex {
                expected_bytes: 4,
                found_digits: 7
            })
        );
        assert_eq!(
            error_of("mmio_write 0x0 2 -"),
            at3(TraceWhy::TruncatedHex {
                expected_bytes: 2,
                found_digits: 0
            })
        );
        assert_eq!(
            error_of("mmio_read 0x0 18446744073709551615 = 00"),
            at3(TraceWhy::TruncatedHex {
                expected_bytes: u64::MAX,
                found_digits: 2
            })
        );
        assert_eq!(
            error_of("mmio_write 0x0 1 0000"),
            at3(TraceWhy::HexTooLong {
                expected_bytes: 1,
                found_digits: 4
            })
        );
        assert_eq!(
            error_of("mmio_write 0x0 2 00g0"),
            at3(TraceWhy::BadHex {
                text: "00g0".to_string()
            })
        );
    }

    #[test]
    fn headers_are_checked() {
        assert_eq!(
            Trace::parse("# macuda trace v3\nreset\n").unwrap_err(),
            TraceError {
                line: 1,
                why: TraceWhy::Version {
                    found: "v3".to_string()
                }
            }
        );
        assert_eq!(
            Trace::parse(&format!("{TRACE_HEADER}\n"))
                .unwrap()
                .version(),
            2
        );
        let v1 = Trace::parse(&format!("{TRACE_HEADER_V1}\nreset\n")).unwrap();
        assert_eq!((v1.version(), v1.ops().len()), (1, 1));
        // v1 had no DMA reads or writes.
        assert_eq!(
            Trace::parse(&format!("{TRACE_HEADER_V1}\nreset\ndma_read 1 0x0 0 = -\n")).unwrap_err(),
            TraceError {
                line: 3,
                why: TraceWhy::NotInVersion {
                    op: "dma_read",
                    version: 1
                }
            }
        );
        assert_eq!(
            Trace::parse("reset\n").unwrap_err(),
            TraceError {
                line: 1,
                why: TraceWhy::MissingHeader
            }
        );
        assert_eq!(
            Trace::parse("").unwrap_err(),
            TraceError {
                line: 1,
                why: TraceWhy::MissingHeader
            }
        );
        let empty = Trace::parse(&format!("{TRACE_HEADER}\n")).unwrap();
        assert_eq!((empty.lines(), empty.ops().len()), (1, 0));
    }

    #[test]
    fn limits_are_typed() {
        let long = format!(
            "{TRACE_HEADER}\nreset\nmmio_write 0x0 {n} {}\n",
            "0".repeat(2 * (MAX_TRACE_LINE_BYTES / 2)),
            n = MAX_TRACE_LINE_BYTES / 2
        );
        assert_eq!(
            Trace::parse(&long).unwrap_err(),
            TraceError {
                line: 3,
                why: TraceWhy::LineTooLong {
                    limit: MAX_TRACE_LINE_BYTES
                }
            }
        );
        // A line of exactly the limit is fine.
        let fits = format!(
            "{TRACE_HEADER}\n#{}\n",
            "x".repeat(MAX_TRACE_LINE_BYTES - 1)
        );
        assert_eq!(Trace::parse(&fits).unwrap().lines(), 2);
        let mut bytes = format!("{TRACE_HEADER}\nreset\n").into_bytes();
        bytes.extend_from_slice(b"doorbell 0x\xff\n");
        assert_eq!(
            Trace::read_from(&bytes[..]).unwrap_err(),
            TraceError {
                line: 3,
                why: TraceWhy::NotUtf8
            }
        );
        assert_eq!(
            error_of("dma_alloc 16 = id 7 bytes 16 segs -\ndma_alloc 16 = id 7 bytes 16 segs -"),
            TraceError {
                line: 4,
                why: TraceWhy::DuplicateDmaId { id: 7 }
            }
        );
    }

    #[test]
    fn echoed_text_is_clipped() {
        let e = error_of(&format!("{} 1", "x".repeat(100)));
        assert_eq!(
            e.why,
            TraceWhy::UnknownOp {
                op: format!("{}...", "x".repeat(ECHO_CHARS))
            }
        );
    }
}
