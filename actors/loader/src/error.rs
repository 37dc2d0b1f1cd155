use crate::image::ImageError;
use crate::module::ModuleError;
use crate::module::ModuleId;
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
    #[error("the module cannot be loaded")]
    Module(#[from] ModuleError),
    #[error("the module cannot be placed")]
    Image(#[source] ImageError),
    #[error("no module {0:?}")]
    NoSuchModule(ModuleId),
    #[error("module {module:?} has no kernel `{name}` (it has {available})")]
    NoSuchFunction {
        module: ModuleId,
        name: String,
        available: usize,
    },
    #[error("module {module:?} has no device variable `{name}` (it has {available})")]
    NoSuchGlobal {
        module: ModuleId,
        name: String,
        available: usize,
    },
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
            LoaderError::Module(_)
            | LoaderError::Image(_)
            | LoaderError::NoSuchModule(_)
            | LoaderError::NoSuchFunction { .. }
            | LoaderError::NoSuchGlobal { .. } => Severity::Recoverable,
            LoaderError::Spawn(_) => Severity::Fatal,
        }
    }
}
