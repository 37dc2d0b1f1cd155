use crate::actor::StreamId;
use macuda_core::{ActorError, ActorFault, Severity};
use macuda_memory::MemoryError;
use macuda_pci::PciError;

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("actor call failed")]
    Actor(#[from] ActorError),
    #[error("memory request failed")]
    Memory(#[source] MemoryError),
    #[error("pci request failed")]
    Pci(#[source] PciError),
    #[error("no stream {0:?}")]
    NoSuchStream(StreamId),
    #[error("launch has a zero grid or block dimension: grid {grid:?}, block {block:?}")]
    EmptyLaunch { grid: [u32; 3], block: [u32; 3] },
    #[error("could not start the submit actor thread")]
    Spawn(#[source] std::io::Error),
}

impl SubmitError {
    /// The device declined the submission by design (the null device).
    pub fn is_refusal(&self) -> bool {
        matches!(self, SubmitError::Pci(e) if e.is_refusal())
    }
}

impl ActorFault for SubmitError {
    fn severity(&self) -> Severity {
        match self {
            SubmitError::Actor(ActorError::Injected { .. }) => Severity::Fatal,
            SubmitError::Actor(_) | SubmitError::Memory(_) | SubmitError::Pci(_) => {
                Severity::Downstream
            }
            SubmitError::NoSuchStream(_) | SubmitError::EmptyLaunch { .. } => Severity::Recoverable,
            SubmitError::Spawn(_) => Severity::Fatal,
        }
    }
}
