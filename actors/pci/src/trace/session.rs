//! Record and replay for a whole session: openers that put every
//! connection a session makes (the pci actor's, and recovery's fresh one)
//! into one trace, and that replay such a trace.

use super::recorder::Recorder;
use super::replay::{Replay, ReplayError};
use crate::error::PciError;
use crate::transport::{BarInfo, DmaId, DmaRegion, Opener, Transport};
use macuda_hw::pci::Width;
use parking_lot::Mutex;
use std::fs::File;
use std::io::{LineWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One trace file shared by the connections of a session; each line is
/// written whole under the lock.
#[derive(Clone)]
struct SharedTrace(Arc<Mutex<LineWriter<File>>>);

impl Write for SharedTrace {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.0.lock().write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().flush()
    }
}

/// Wraps an opener so that every connection it opens is recorded into one
/// trace file.
pub struct RecordingOpener {
    inner: Arc<dyn Opener>,
    path: PathBuf,
    trace: SharedTrace,
    connections: Mutex<u32>,
}

impl RecordingOpener {
    /// # Errors
    /// The trace file cannot be created.
    pub fn new(inner: Arc<dyn Opener>, path: &Path) -> Result<RecordingOpener, PciError> {
        let file = File::create(path).map_err(|source| PciError::Os {
            what: format!("creating the trace {}", path.display()),
            source,
        })?;
        Ok(RecordingOpener {
            inner,
            path: path.to_path_buf(),
            trace: SharedTrace(Arc::new(Mutex::new(LineWriter::new(file)))),
            connections: Mutex::new(0),
        })
    }
}

impl Opener for RecordingOpener {
    fn describe(&self) -> String {
        format!(
            "{}, recorded to {}",
            self.inner.describe(),
            self.path.display()
        )
    }

    fn open(&self) -> Result<Box<dyn Transport>, PciError> {
        let transport = self.inner.open()?;
        let mut n = self.connections.lock();
        *n += 1;
        let out = self.trace.clone();
        Ok(if *n == 1 {
            Box::new(Recorder::new(transport, out)?)
        } else {
            Box::new(Recorder::resume(transport, out, *n)?)
        })
    }

    fn end_session(&self) -> Result<Option<String>, PciError> {
        self.trace.clone().flush().map_err(|source| PciError::Os {
            what: format!("flushing the trace {}", self.path.display()),
            source,
        })?;
        Ok(Some(format!(
            "{} connection(s) recorded to {}",
            self.connections.lock(),
            self.path.display()
        )))
    }
}

/// Replays one trace for a whole session: every connection the session
/// opens continues the same replay, as the recording put them in one trace.
pub struct ReplayOpener {
    path: PathBuf,
    replay: Arc<Mutex<Replay>>,
}

impl ReplayOpener {
    /// # Errors
    /// The trace cannot be read or parsed.
    pub fn load(path: &Path) -> Result<ReplayOpener, PciError> {
        let replay = Replay::load(path).map_err(ReplayError::from)?;
        Ok(ReplayOpener {
            path: path.to_path_buf(),
            replay: Arc::new(Mutex::new(replay)),
        })
    }

    /// Declare a gap (see [`Replay::declare_gap`]) before the session starts.
    ///
    /// # Errors
    /// A malformed or overlapping gap.
    pub fn declare_gap(&self, first: usize, last: usize) -> Result<(), PciError> {
        self.replay
            .lock()
            .declare_gap(first, last)
            .map_err(|e| PciError::from(ReplayError::from(e)))
    }
}

impl Opener for ReplayOpener {
    fn describe(&self) -> String {
        format!("replay of {}", self.path.display())
    }

    fn open(&self) -> Result<Box<dyn Transport>, PciError> {
        Ok(Box::new(ReplayConnection(Arc::clone(&self.replay))))
    }

    /// Every recorded op must have been made: a recorded read the driver
    /// never made is a divergence too.
    fn end_session(&self) -> Result<Option<String>, PciError> {
        let stats = self.replay.lock().finish()?;
        Ok(Some(format!(
            "replay complete: {} ops matched, {} stepped over, {} in gaps, {} re-reads answered from held values",
            stats.finished, stats.stepped, stats.gapped, stats.rereads
        )))
    }
}

struct ReplayConnection(Arc<Mutex<Replay>>);

impl Transport for ReplayConnection {
    fn backend(&self) -> &'static str {
        "replay"
    }
    fn config_read(&mut self, offset: u16, width: Width) -> Result<u32, PciError> {
        self.0.lock().config_read(offset, width)
    }
    fn config_write(&mut self, offset: u16, width: Width, value: u32) -> Result<(), PciError> {
        self.0.lock().config_write(offset, width, value)
    }
    fn bars(&mut self) -> Result<Vec<BarInfo>, PciError> {
        self.0.lock().bars()
    }
    fn mmio_read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        self.0.lock().mmio_read(offset, out)
    }
    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), PciError> {
        self.0.lock().mmio_write(offset, data)
    }
    fn flush(&mut self) -> Result<(), PciError> {
        self.0.lock().flush()
    }
    fn doorbell(&mut self, token: u32) -> Result<(), PciError> {
        self.0.lock().doorbell(token)
    }
    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        self.0.lock().alloc_dma(bytes)
    }
    fn dma_read(&mut self, id: DmaId, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        self.0.lock().dma_read(id, offset, out)
    }
    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        self.0.lock().dma_write(id, offset, data)
    }
    fn function_reset(&mut self) -> Result<(), PciError> {
        self.0.lock().function_reset()
    }
}
