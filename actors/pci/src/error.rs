use macuda_core::{ActorError, ActorFault, Severity};

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
    #[error("the null device has no register at BAR0 + {offset:#x}")]
    NoSuchRegister { offset: u64 },
    #[error("config access at {offset:#x} ({width} bytes) is outside the configuration space")]
    ConfigOutOfRange { offset: u16, width: usize },
    #[error("not an NVIDIA GPU: vendor {vendor:#06x}, device {device:#06x}")]
    NotNvidia { vendor: u16, device: u16 },
    #[error("transport I/O failed")]
    Io(#[source] std::io::Error),
}

impl PciError {
    /// True when the device declined the operation by design (the null
    /// device's answer to DMA and submission), not because anything broke.
    pub fn is_refusal(&self) -> bool {
        matches!(self, PciError::Refused { .. })
    }
}

impl ActorFault for PciError {
    fn severity(&self) -> Severity {
        match self {
            PciError::Actor(ActorError::Injected { .. }) => Severity::Fatal,
            PciError::Actor(_) => Severity::Downstream,
            PciError::Io(_) => Severity::Fatal,
            PciError::NotBuilt { .. }
            | PciError::Refused { .. }
            | PciError::NoSuchRegister { .. }
            | PciError::ConfigOutOfRange { .. }
            | PciError::NotNvidia { .. } => Severity::Recoverable,
        }
    }
}
