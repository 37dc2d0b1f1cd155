use crate::objects::ObjectHandle;
use macuda_core::{ActorError, ActorFault, Severity};
use macuda_pci::PciError;

#[derive(Debug, thiserror::Error)]
pub enum GspError {
    #[error("actor call failed")]
    Actor(#[from] ActorError),
    #[error("pci request failed")]
    Pci(#[source] PciError),
    #[error("the device is not open yet (open_device comes first)")]
    NotOpen,
    #[error("the card reports no usable VRAM (NV_USABLE_FB_SIZE_IN_MB is 0)")]
    NoVram,
    #[error("no RM object {0}")]
    NoSuchObject(ObjectHandle),
    #[error("class {class:#06x} cannot be allocated under {parent} (class {parent_class:#06x})")]
    BadParent {
        class: u32,
        parent: ObjectHandle,
        parent_class: u32,
    },
    #[error("could not start the gsp actor thread")]
    Spawn(#[source] std::io::Error),
    #[error("the {backend} RM does not implement class {class:#06x}")]
    UnsupportedClass { backend: &'static str, class: u32 },
}

impl ActorFault for GspError {
    fn severity(&self) -> Severity {
        match self {
            GspError::Actor(ActorError::Injected { .. }) => Severity::Fatal,
            GspError::Actor(_) | GspError::Pci(_) => Severity::Downstream,
            GspError::NoVram | GspError::Spawn(_) => Severity::Fatal,
            GspError::NotOpen
            | GspError::NoSuchObject(_)
            | GspError::BadParent { .. }
            | GspError::UnsupportedClass { .. } => Severity::Recoverable,
        }
    }
}
