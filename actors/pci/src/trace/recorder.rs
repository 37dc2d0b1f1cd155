//! The recorder: a transport that forwards every call to the one it wraps
//! and writes each bus-visible op to a trace.

use super::access::Access;
use super::format::{
    dma_read_pieces, dma_write_hash, TraceOp, MAX_RECORDED_MMIO_BYTES, MAX_TRACE_LINE_BYTES,
    TRACE_HEADER,
};
use crate::capabilities::Capabilities;
use crate::error::PciError;
use crate::transport::{BarInfo, DmaId, DmaRegion, Transport};
use macuda_hw::pci::Width;
use std::fs::File;
use std::io::{self, LineWriter, Write};
use std::path::Path;

/// Wraps any transport and records what it does.
///
/// Each op that succeeded is written as one trace line after the wrapped
/// transport answered; an op that failed is written as a `# failed: ...`
/// comment, so it is visible to a reader but never replayed. A DMA read is
/// written with its bytes (in pieces of at most
/// [`super::MAX_DMA_READ_LINE_BYTES`]), a DMA write with its length and
/// SHA-256; `flush` is forwarded and not recorded (see [`TraceOp`] for
/// why).
///
/// If the trace cannot be written, the call that found out returns the
/// error (even though the op itself reached the card) and every later call
/// is refused without being forwarded: a session whose trace has a hole must
/// not go on as if it were being recorded.
pub struct Recorder<T: ?Sized, W> {
    out: W,
    /// Why recording stopped, once it has.
    broken: Option<(io::ErrorKind, String)>,
    inner: Box<T>,
}

impl<T: Transport + ?Sized, W: Write + Send> Recorder<T, W> {
    /// Start a trace on `out`: writes the header and a comment naming the
    /// wrapped backend.
    ///
    /// # Errors
    /// `out` cannot be written.
    pub fn new(inner: Box<T>, out: W) -> Result<Recorder<T, W>, PciError> {
        let head = format!(
            "{TRACE_HEADER}\n# recorded over the {} transport\n",
            inner.backend()
        );
        Self::begin(inner, out, &head)
    }

    /// Go on with a trace another connection of the same session began:
    /// writes only a comment marking the new connection, so the ops of all
    /// connections land in one trace in the order the card saw them.
    ///
    /// # Errors
    /// `out` cannot be written.
    pub fn resume(inner: Box<T>, out: W, connection: u32) -> Result<Recorder<T, W>, PciError> {
        let head = format!(
            "# connection {connection} over the {} transport\n",
            inner.backend()
        );
        Self::begin(inner, out, &head)
    }

    fn begin(inner: Box<T>, mut out: W, head: &str) -> Result<Recorder<T, W>, PciError> {
        out.write_all(head.as_bytes())
            .map_err(|e| trace_write_error(e.kind(), &e.to_string()))?;
        Ok(Recorder {
            out,
            broken: None,
            inner,
        })
    }

    /// The wrapped transport.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// Flush the trace and hand back the transport and the writer.
    ///
    /// # Errors
    /// Recording had already stopped, or the final flush failed.
    pub fn finish(mut self) -> Result<(Box<T>, W), PciError> {
        self.usable()?;
        self.out
            .flush()
            .map_err(|e| trace_write_error(e.kind(), &e.to_string()))?;
        Ok((self.inner, self.out))
    }

    fn usable(&self) -> Result<(), PciError> {
        match &self.broken {
            Some((kind, message)) => Err(trace_write_error(*kind, message)),
            None => Ok(()),
        }
    }

    fn write_line(&mut self, line: &str) -> Result<(), PciError> {
        let written = if line.len() > MAX_TRACE_LINE_BYTES {
            Err(io::Error::other(format!(
                "a trace line of {} bytes exceeds the {MAX_TRACE_LINE_BYTES}-byte limit",
                line.len()
            )))
        } else {
            // One write per line, so a line is never split by the writer.
            let mut whole = String::with_capacity(line.len() + 1);
            whole.push_str(line);
            whole.push('\n');
            self.out.write_all(whole.as_bytes())
        };
        written.map_err(|e| {
            let message = e.to_string();
            self.broken = Some((e.kind(), message.clone()));
            trace_write_error(e.kind(), &message)
        })
    }

    /// Record the outcome of `access`: `op(&value)` when it succeeded, a
    /// comment when it failed. Returns the outcome unless the trace could
    /// not be written.
    fn record<R>(
        &mut self,
        access: Access<'_>,
        result: Result<R, PciError>,
        op: impl FnOnce(&R) -> TraceOp,
    ) -> Result<R, PciError> {
        let line = match &result {
            Ok(v) => op(v).to_string(),
            Err(e) => format!("# failed: {access}: {}", one_line(e)),
        };
        self.write_line(&line)?;
        result
    }
}

impl<T: Transport + ?Sized> Recorder<T, LineWriter<File>> {
    /// Record to a new file at `path` (replacing one already there). Each op
    /// reaches the file as it completes, so a session that hangs the machine
    /// leaves a trace that ends at the last op that finished.
    ///
    /// # Errors
    /// The file cannot be created or written.
    pub fn create(
        inner: Box<T>,
        path: impl AsRef<Path>,
    ) -> Result<Recorder<T, LineWriter<File>>, PciError> {
        let path = path.as_ref();
        let file = File::create(path).map_err(|source| PciError::Os {
            what: format!("creating the trace {}", path.display()),
            source,
        })?;
        Recorder::new(inner, LineWriter::new(file))
    }
}

fn trace_write_error(kind: io::ErrorKind, message: &str) -> PciError {
    PciError::Os {
        what: "writing the trace (the recording has stopped)".to_string(),
        source: io::Error::new(kind, message.to_string()),
    }
}

/// An error and its sources on one line, for a trace comment.
fn one_line(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text.replace(['\n', '\r'], " ")
}

fn refuse_long_mmio(len: usize) -> Result<(), PciError> {
    if len > MAX_RECORDED_MMIO_BYTES {
        return Err(PciError::Unsupported {
            backend: "recorder",
            what: "MMIO accesses longer than 256 KiB (their hex would not fit a trace line)",
        });
    }
    Ok(())
}

impl<T: Transport + ?Sized, W: Write + Send> Transport for Recorder<T, W> {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn config_read(&mut self, offset: u16, width: Width) -> Result<u32, PciError> {
        self.usable()?;
        let r = self.inner.config_read(offset, width);
        self.record(Access::ConfigRead { offset, width }, r, |&value| {
            TraceOp::ConfigRead {
                offset,
                width,
                value,
            }
        })
    }

    fn config_write(&mut self, offset: u16, width: Width, value: u32) -> Result<(), PciError> {
        self.usable()?;
        let r = self.inner.config_write(offset, width, value);
        let access = Access::ConfigWrite {
            offset,
            width,
            value,
        };
        self.record(access, r, |()| TraceOp::ConfigWrite {
            offset,
            width,
            value,
        })
    }

    fn bars(&mut self) -> Result<Vec<BarInfo>, PciError> {
        self.usable()?;
        let r = self.inner.bars();
        self.record(Access::Bars, r, |bars| TraceOp::Bars(bars.clone()))
    }

    fn mmio_read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        self.usable()?;
        let access = Access::MmioRead {
            offset,
            len: out.len(),
        };
        let r = refuse_long_mmio(out.len()).and_then(|()| self.inner.mmio_read(offset, out));
        self.record(access, r, |()| TraceOp::MmioRead {
            offset,
            data: out.to_vec(),
        })
    }

    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), PciError> {
        self.usable()?;
        let r = refuse_long_mmio(data.len()).and_then(|()| self.inner.mmio_write(offset, data));
        self.record(Access::MmioWrite { offset, data }, r, |()| {
            TraceOp::MmioWrite {
                offset,
                data: data.to_vec(),
            }
        })
    }

    fn flush(&mut self) -> Result<(), PciError> {
        self.usable()?;
        self.inner.flush()
    }

    fn doorbell(&mut self, token: u32) -> Result<(), PciError> {
        self.usable()?;
        let r = self.inner.doorbell(token);
        self.record(Access::Doorbell { token }, r, |()| TraceOp::Doorbell {
            token,
        })
    }

    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        self.usable()?;
        let r = self.inner.alloc_dma(bytes);
        self.record(Access::DmaAlloc { requested: bytes }, r, |region| {
            TraceOp::DmaAlloc {
                requested: bytes,
                region: region.clone(),
            }
        })
    }

    fn dma_read(&mut self, id: DmaId, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        self.usable()?;
        if let Err(e) = self.inner.dma_read(id, offset, out) {
            let access = Access::DmaRead {
                id,
                offset,
                len: out.len(),
            };
            self.write_line(&format!("# failed: {access}: {}", one_line(&e)))?;
            return Err(e);
        }
        for (at, range) in dma_read_pieces(offset, out.len()) {
            let op = TraceOp::DmaRead {
                id,
                offset: at,
                data: out[range].to_vec(),
            };
            self.write_line(&op.to_string())?;
        }
        Ok(())
    }

    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        self.usable()?;
        let r = self.inner.dma_write(id, offset, data);
        let sha256 = dma_write_hash(data);
        let len = data.len() as u64;
        let access = Access::DmaWrite {
            id,
            offset,
            len,
            sha256,
        };
        self.record(access, r, |()| TraceOp::DmaWrite {
            id,
            offset,
            len,
            sha256,
        })
    }

    fn function_reset(&mut self) -> Result<(), PciError> {
        self.usable()?;
        let r = self.inner.function_reset();
        self.record(Access::Reset, r, |()| TraceOp::Reset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::null::{CardEvent, NullOpener};
    use crate::trace::{Replay, Trace};
    use crate::transport::Opener;

    /// A writer that fails after `ok` writes.
    struct Failing {
        ok: usize,
        text: Vec<u8>,
    }

    impl Write for Failing {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.ok == 0 {
                return Err(io::Error::new(io::ErrorKind::StorageFull, "disk full"));
            }
            self.ok -= 1;
            self.text.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn failed_ops_become_comments_and_are_not_replayed() {
        let opener = NullOpener::gb202();
        let mut rec = Recorder::new(opener.open().unwrap(), Vec::new()).unwrap();
        assert!(rec.doorbell(7).unwrap_err().is_refusal());
        assert!(matches!(
            rec.mmio_read32(0x1234),
            Err(PciError::NoSuchRegister { offset: 0x1234 })
        ));
        rec.mmio_write32(0x1234, 5).unwrap();
        let (_, out) = rec.finish().unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            format!(
                "{TRACE_HEADER}\n# recorded over the null transport\n\
                 # failed: doorbell 0x00000007: the null device refuses submission: it has no card behind it\n\
                 # failed: mmio_read 0x001234 4: the null device has no register at BAR0 + 0x1234\n\
                 mmio_write 0x001234 4 05000000\n"
            )
        );
        let trace = Trace::parse(&text).unwrap();
        assert_eq!(trace.ops().len(), 1);
        assert_eq!(trace.ops()[0].line, 5);
        let mut replay = Replay::new(trace);
        replay.mmio_write32(0x1234, 5).unwrap();
        replay.finish().unwrap();
    }

    #[test]
    fn a_trace_that_cannot_be_written_stops_the_session() {
        let opener = NullOpener::gb202();
        // The header lines, then one op line.
        let out = Failing {
            ok: 2,
            text: Vec::new(),
        };
        let mut rec = Recorder::new(opener.open().unwrap(), out).unwrap();
        rec.mmio_write32(0x10, 1).unwrap();
        let e = rec.mmio_write32(0x14, 2).unwrap_err();
        assert!(
            matches!(&e, PciError::Os { source, .. } if source.kind() == io::ErrorKind::StorageFull),
            "{e:?}"
        );
        // The op that found out reached the card; later ones do not.
        let e = rec.mmio_write32(0x18, 3).unwrap_err();
        assert!(matches!(&e, PciError::Os { .. }));
        let writes = opener
            .card()
            .events()
            .iter()
            .filter(|e| matches!(e, CardEvent::MmioWrite { .. }))
            .count();
        assert_eq!(writes, 2);
        assert!(rec.finish().is_err());
    }

    #[test]
    fn dma_is_recorded_reads_in_line_sized_pieces_writes_by_hash() {
        use crate::trace::{dma_write_hash, MAX_DMA_READ_LINE_BYTES, TRACE_HEADER_V1};
        // A v1 replay keeps DMA memory locally: a card whose host memory
        // reads back what was written.
        let bytes = 1u64 << 20;
        let card = Replay::parse(&format!(
            "{TRACE_HEADER_V1}\ndma_alloc {bytes} = id 1 bytes {bytes} segs 0x1000:{bytes:#x}\n"
        ))
        .unwrap();
        let mut rec = Recorder::new(Box::new(card), Vec::new()).unwrap();
        let region = rec.alloc_dma(bytes).unwrap();
        let len = 2 * MAX_DMA_READ_LINE_BYTES + 100;
        // CAST: a pattern byte.
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        rec.dma_write(region.id, 0x10, &data).unwrap();
        let mut back = vec![0u8; len];
        rec.dma_read(region.id, 0x10, &mut back).unwrap();
        assert_eq!(back, data);
        // Outside the region: the transport's error, as a comment.
        assert!(rec.dma_read(region.id, bytes - 2, &mut [0u8; 4]).is_err());
        let (_, out) = rec.finish().unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.len(),
            8,
            "header, comment, alloc, write, 3 reads, failure"
        );
        assert_eq!(
            lines[3],
            format!(
                "dma_write 1 0x10 {len} sha256 {}",
                super::super::format::Hex(&dma_write_hash(&data))
            )
        );
        let piece = MAX_DMA_READ_LINE_BYTES;
        assert!(lines[4].starts_with(&format!("dma_read 1 0x10 {piece} = ")));
        assert!(lines[5].starts_with(&format!("dma_read 1 {:#x} {piece} = ", 0x10 + piece)));
        assert!(lines[6].starts_with(&format!("dma_read 1 {:#x} 100 = ", 0x10 + 2 * piece)));
        assert!(lines[7].starts_with(&format!("# failed: dma_read 1 {:#x} 4: ", bytes - 2)));

        // Replayed (v2): the read comes back from the trace, cut the same way.
        let mut replay = Replay::parse(&text).unwrap();
        let region = replay.alloc_dma(bytes).unwrap();
        replay.dma_write(region.id, 0x10, &data).unwrap();
        let mut again = vec![0u8; len];
        replay.dma_read(region.id, 0x10, &mut again).unwrap();
        assert_eq!(again, data);
        assert!(replay
            .dma_read(region.id, bytes - 2, &mut [0u8; 4])
            .is_err());
        let stats = replay.finish().unwrap();
        assert_eq!((stats.finished, stats.stepped), (5, 0));
    }

    #[test]
    fn mmio_longer_than_a_line_holds_is_refused_before_the_card_sees_it() {
        let opener = NullOpener::gb202();
        let mut rec = Recorder::new(opener.open().unwrap(), Vec::new()).unwrap();
        let big = vec![0u8; MAX_RECORDED_MMIO_BYTES + 1];
        assert!(matches!(
            rec.mmio_write(0, &big),
            Err(PciError::Unsupported {
                backend: "recorder",
                ..
            })
        ));
        let fits = vec![0xABu8; MAX_RECORDED_MMIO_BYTES];
        rec.mmio_write(0, &fits).unwrap();
        let (_, out) = rec.finish().unwrap();
        let trace = Trace::parse(std::str::from_utf8(&out).unwrap()).unwrap();
        assert_eq!(
            trace.ops()[0].op,
            TraceOp::MmioWrite {
                offset: 0,
                data: fits
            }
        );
        // Only the one that fitted reached the card.
        assert_eq!(
            opener
                .card()
                .events()
                .iter()
                .filter(|e| matches!(e, CardEvent::MmioWrite { offset: 0, .. }))
                .count(),
            1
        );
    }
}
