use macuda_core::{ActorError, ActorFault, Severity};
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum PciError {
    #[error("actor call failed")]
    Actor(#[from] ActorError),
    #[error("the `{backend}` transport is not built yet (it lands with the {lands_with})")]
    NotBuilt {
        backend: &'static str,
        lands_with: &'static str,
    },
    #[error("the null device refuses {what}: it has no card behind it")]
    Refused { what: &'static str },
    #[error("the {backend} transport does not support {what}")]
    Unsupported {
        backend: &'static str,
        what: &'static str,
    },
    #[error("the null device has no register at BAR0 + {offset:#x}")]
    NoSuchRegister { offset: u64 },
    #[error("config access at {offset:#x} ({width} bytes) is outside the configuration space")]
    ConfigOutOfRange { offset: u16, width: usize },
    #[error("access of {len} bytes at {offset:#x} is outside {what} ({size} bytes)")]
    OutOfRange {
        what: String,
        offset: u64,
        len: u64,
        size: u64,
    },
    #[error("not an NVIDIA GPU: vendor {vendor:#06x}, device {device:#06x}")]
    NotNvidia { vendor: u16, device: u16 },
    /// Every read of the card gives all ones: no device answers there (a
    /// card that fell off the bus, lost power or was unplugged).
    #[error("the card has fallen off the bus: {what} reads all ones")]
    OffTheBus { what: &'static str },
    #[error("the TinyGPU server refused `{command}`: {message}")]
    Server {
        command: &'static str,
        message: String,
    },
    #[error("the TinyGPU server sent a bad reply to `{command}`: {what}")]
    Protocol { command: &'static str, what: String },
    #[error("the TinyGPU server closed the connection during `{command}`")]
    Closed { command: &'static str },
    #[error("no reply to `{command}` within {after_ms} ms")]
    Timeout {
        command: &'static str,
        after_ms: u64,
    },
    #[error("the TinyGPU server at {endpoint} did not answer `{command}` within {after_ms} ms before; not asked again")]
    PeerSilent {
        endpoint: String,
        command: &'static str,
        after_ms: u64,
    },
    #[error("bus mastering still on after clearing it: command {before:#06x} -> {after:#06x}")]
    BusMasterStillOn { before: u16, after: u16 },
    #[error("cannot reach {what}")]
    Connect {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} failed")]
    Os {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the card is in use by process {pid} (lock file {})", path.display())]
    CardBusy { path: PathBuf, pid: String },
    #[error("transport I/O failed")]
    Io(#[source] std::io::Error),
    #[error("bad PCI address `{bdf}`: {why} (expected DDDD:BB:DD.F in hex, e.g. 0000:01:00.0)")]
    BadBdf { bdf: String, why: &'static str },
    #[error("no PCI device {bdf} ({} does not exist)", path.display())]
    NoSuchDevice { bdf: String, path: PathBuf },
    #[error("PCI device {bdf} is bound to the `{driver}` kernel driver; unbind it first")]
    DriverBound { bdf: String, driver: String },
    #[error("the replay refused the operation")]
    Replay(#[from] crate::trace::ReplayError),
    #[error("NVIDIA's kernel module owns {what}: on this path we reach the GPU only through RM")]
    OwnedByKernelModule { what: &'static str },
}

impl PciError {
    /// True when the device declined the operation by design (the null
    /// device's answer to DMA and submission), not because anything broke.
    pub fn is_refusal(&self) -> bool {
        matches!(self, PciError::Refused { .. })
    }

    /// True when this one request was said no to, by the device or by the
    /// server answering for it (a TinyGPU server's error reply), with the
    /// connection still sound: a smaller or different request may pass.
    pub fn is_declined(&self) -> bool {
        matches!(self, PciError::Refused { .. } | PciError::Server { .. })
    }
}

impl ActorFault for PciError {
    fn severity(&self) -> Severity {
        match self {
            PciError::Actor(ActorError::Injected { .. }) => Severity::Fatal,
            PciError::Actor(_) => Severity::Downstream,
            // A transport that broke mid-conversation leaves the card in an
            // unknown state: that is the actor's failure.
            PciError::Io(_)
            | PciError::Os { .. }
            | PciError::Protocol { .. }
            | PciError::Closed { .. }
            | PciError::Timeout { .. }
            | PciError::PeerSilent { .. }
            | PciError::BusMasterStillOn { .. }
            // Nothing on the card can be trusted; recovery decides.
            | PciError::OffTheBus { .. } => Severity::Fatal,
            // The driver left the recording (or the replay broke): it must
            // not run on.
            PciError::Replay(_) => Severity::Fatal,
            PciError::NotBuilt { .. }
            | PciError::Refused { .. }
            | PciError::Unsupported { .. }
            | PciError::NoSuchRegister { .. }
            | PciError::ConfigOutOfRange { .. }
            | PciError::OutOfRange { .. }
            | PciError::NotNvidia { .. }
            | PciError::Server { .. }
            | PciError::Connect { .. }
            | PciError::CardBusy { .. }
            | PciError::BadBdf { .. }
            | PciError::NoSuchDevice { .. }
            | PciError::DriverBound { .. }
            | PciError::OwnedByKernelModule { .. } => Severity::Recoverable,
        }
    }
}
