//! Record and replay at the PCI boundary (design.md "Record and replay").
//!
//! A [`Recorder`] wraps any transport and writes every bus-visible op to a
//! text trace; a [`Replay`] is a transport that answers from such a trace
//! and checks, op by op, that the driver under test does what the recorded
//! driver did.
//!
//! # Trace format (v2; v1 is read too)
//!
//! Line oriented, UTF-8. Line numbers are 1-based physical lines of the
//! file: the header and comments count, so a gap or a divergence names the
//! line a reader sees.
//!
//! ```text
//! trace    = header { line }
//! header   = "# macuda trace v2" | "# macuda trace v1"  (line 1, exactly)
//! line     = comment | blank | op
//! comment  = "#" any text                              (ignored; a failed op
//!                                                       is recorded as one)
//! op       = "cfg_read"   CFGOFF WIDTH "=" HEX
//!          | "cfg_write"  CFGOFF WIDTH HEX
//!          | "bars" "=" { DEC ":" HEX }                (index:size)
//!          | "mmio_read"  HEX DEC "=" BYTES            (BAR0 offset, length)
//!          | "mmio_write" HEX DEC BYTES
//!          | "doorbell"   HEX
//!          | "dma_alloc"  DEC "=" "id" DEC "bytes" DEC "segs" SEGS
//!          | "dma_read"   DEC HEX DEC "=" BYTES        (v2: region id, offset,
//!                                                       length)
//!          | "dma_write"  DEC HEX DEC "sha256" SHA     (v2: region id, offset,
//!                                                       length, hash)
//!          | "reset"
//! WIDTH    = "u8" | "u16" | "u32"
//! HEX      = "0x" hexdigit { hexdigit }                (value must fit the field;
//!                                                       a config value, its width)
//! DEC      = digit { digit }
//! BYTES    = hexdigit pairs, bytes in address order, exactly length of them
//!          | "-"                                       (length 0)
//! SHA      = 64 hexdigits                              (SHA-256 of the bytes)
//! SEGS     = HEX ":" HEX { "," HEX ":" HEX }           (bus address:size)
//!          | "-"                                       (no segments)
//! ```
//!
//! Tokens are separated by ASCII whitespace; leading and trailing whitespace
//! and a `\r` before the line end are ignored. The printer writes config
//! offsets with three hex digits, config values with as many digits as the
//! access is wide, register offsets with six, DMA offsets with as many as
//! they need, lowercase hex throughout:
//!
//! ```text
//! # macuda trace v2
//! # recorded over the null transport
//! cfg_read 0x000 u16 = 0x10de
//! cfg_write 0x004 u16 0x0006
//! bars = 0:0x4000000 1:0x10000000 3:0x2000000
//! mmio_read 0x000000 4 = a100201b
//! mmio_write 0x000a00 4 01000000
//! doorbell 0x0000000a
//! dma_alloc 16384 = id 1 bytes 16384 segs 0x100000:0x4000
//! dma_write 1 0x0 6 sha256 92cf572fe18491a05d1eeeb7c62d75d1e5451f1bc215809a732ac8604afc3454
//! dma_read 1 0x40 4 = 01000000
//! reset
//! ```
//!
//! v2 added `dma_read` and `dma_write` (see [`TraceOp`] for why a read is
//! recorded with its bytes and a write only by its hash); a v1 trace holds
//! neither, and a replay of one keeps DMA memory locally. A DMA read longer
//! than [`MAX_DMA_READ_LINE_BYTES`] is recorded as consecutive `dma_read`
//! lines of that many bytes each (the last shorter), and replayed cut the
//! same way. `flush` is not recorded.
//!
//! Limits, so a hostile file cannot exhaust memory: lines of at most
//! [`MAX_TRACE_LINE_BYTES`], traces of at most [`MAX_TRACE_BYTES`] and
//! [`MAX_TRACE_OPS`] ops; the recorder refuses MMIO accesses longer than
//! [`MAX_RECORDED_MMIO_BYTES`] (before forwarding them) so every trace it
//! writes can be read back, and cuts DMA reads into lines (above); a v2
//! replay keeps no DMA memory at all, and a v1 replay backs a region only
//! where the driver writes, whatever size the trace claims.

mod access;
mod format;
mod recorder;
mod replay;
mod session;

pub use format::{
    dma_write_hash, Trace, TraceError, TraceOp, TraceWhy, TracedOp, MAX_DMA_READ_LINE_BYTES,
    MAX_RECORDED_MMIO_BYTES, MAX_TRACE_BYTES, MAX_TRACE_LINE_BYTES, MAX_TRACE_OPS, TRACE_HEADER,
    TRACE_HEADER_V1,
};
pub use recorder::Recorder;
pub use replay::{
    Divergence, DivergenceKind, Gap, GapError, Replay, ReplayError, ReplayStats, END_OF_TRACE,
    REPLAY_FINISH,
};
pub use session::{RecordingOpener, ReplayOpener};
