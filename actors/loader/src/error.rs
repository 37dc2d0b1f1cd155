use crate::actor::ModuleId;
use macuda_core::{ActorError, ActorFault, Severity};
use macuda_memory::MemoryError;
use macuda_submit::SubmitError;

#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    #[error("actor call failed")]
    Actor(#[from] ActorError),
    #[error("memory request failed")]
    Memory(#[source] MemoryError),
    #[error("submit request failed")]
    Submit(#[source] SubmitError),
    #[error("module image `{name}` is empty")]
    EmptyImage { name: String },
    #[error("no module {0:?}")]
    NoSuchModule(ModuleId),
    #[error("could not start the loader actor thread")]
    Spawn(#[source] std::io::Error),
}

impl ActorFault for LoaderError {
    fn severity(&self) -> Severity {
        match self {
            LoaderError::Actor(ActorError::Injected { .. }) => Severity::Fatal,
            LoaderError::Actor(_) | LoaderError::Memory(_) | LoaderError::Submit(_) => {
                Severity::Downstream
            }
            LoaderError::EmptyImage { .. } | LoaderError::NoSuchModule(_) => Severity::Recoverable,
            LoaderError::Spawn(_) => Severity::Fatal,
        }
    }
}
