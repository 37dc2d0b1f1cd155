//! `--device sim[:CHIP]`: a simulated card (`macuda_sim`) started in this
//! process on a unix socket in a directory of its own and opened over the
//! TinyGPU protocol as TinyGPU's own server is on the Mac, shared host
//! memory included, so the same transport, boot and RM code run against
//! it. The server lives as long as the opener (the Host's). Its TCP form
//! is `macuda sim serve tcp:PORT` with `--device remote:127.0.0.1:PORT`.
//! `auto` does not pick it yet: our own boot of a card (issue 15) is what
//! makes a simulated card useful to the rest of the stack.

use macuda_pci::tinygpu::TinyGpuOpener;
use macuda_pci::{Opener, PciError, Transport, TRANSPORT_TIMEOUT};
use macuda_sim::{Card, Listen, Server, SimChip};
use std::sync::Arc;

/// The chip `--device sim` plays when none is named.
pub const DEFAULT_CHIP: &str = "gb202";

/// An opener onto a simulated card it serves itself.
pub struct SimOpener {
    inner: TinyGpuOpener,
    chip: SimChip,
    _server: Server<Card>,
    /// The socket's directory, removed when the opener goes.
    _dir: tempfile::TempDir,
}

impl SimOpener {
    /// Start a simulated `chip` (gb202 when `None`).
    ///
    /// # Errors
    /// A chip the sim does not play, or no port to serve it on.
    pub fn start(chip: Option<&str>) -> Result<Arc<dyn Opener>, PciError> {
        let served = ServedSim::start(chip)?;
        let inner = TinyGpuOpener::new(served.server.endpoint(), TRANSPORT_TIMEOUT);
        Ok(Arc::new(SimOpener {
            inner,
            chip: served.chip,
            _server: served.server,
            _dir: served.dir,
        }))
    }
}

/// A simulated card served on a unix socket in a directory of its own
/// (removed with it): what `--device sim` and `macuda run --device sim`
/// both start.
pub struct ServedSim {
    pub chip: SimChip,
    pub server: Server<Card>,
    pub dir: tempfile::TempDir,
}

impl ServedSim {
    /// Start a simulated `chip` (gb202 when `None`).
    ///
    /// # Errors
    /// A chip the sim does not play, or no socket to serve it on.
    pub fn start(chip: Option<&str>) -> Result<ServedSim, PciError> {
        let name = chip.unwrap_or(DEFAULT_CHIP);
        let chip = SimChip::by_name(name).ok_or(PciError::Unsupported {
            backend: "sim",
            what: "that chip (it plays gb202 or gh100)",
        })?;
        let connect = |what: &str| {
            let what = what.to_string();
            move |source| PciError::Connect { what, source }
        };
        let dir = tempfile::Builder::new()
            .prefix("macuda-sim")
            .tempdir()
            .map_err(connect("a directory for the simulated card's socket"))?;
        let socket = dir.path().join("card.sock");
        let server = Server::start(&Listen::Unix(socket), Card::new(chip.clone()))
            .map_err(connect("a unix socket to serve the simulated card on"))?;
        Ok(ServedSim { chip, server, dir })
    }
}

impl Opener for SimOpener {
    fn describe(&self) -> String {
        format!(
            "a simulated {} served in this process ({})",
            self.chip.name.to_uppercase(),
            self.inner.describe()
        )
    }

    fn open(&self) -> Result<Box<dyn Transport>, PciError> {
        self.inner.open()
    }

    fn end_session(&self) -> Result<Option<String>, PciError> {
        self.inner.end_session()
    }
}

/// The simulated GSP-RM's log metadata, as the gsp actor's log reader
/// looks it up: the sim writes records its own table describes.
pub fn log_metadata() -> macuda_gsp::bare::SharedLogMetadata {
    Arc::new(|pointer: u64| {
        macuda_sim::gsp_rm::logs::metadata(pointer).map(|m| macuda_gsp::bare::LogFormat {
            file: m.file.to_string(),
            line: m.line,
            format: m.format.to_string(),
            argument_count: m.argument_count,
            print_level: m.print_level,
        })
    })
}
