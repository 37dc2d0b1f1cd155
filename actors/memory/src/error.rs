use crate::range::RangeError;
use macuda_core::{ActorError, ActorFault, Severity};
use macuda_gsp::GspError;
use macuda_pci::PciError;

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("actor call failed")]
    Actor(#[from] ActorError),
    #[error("gsp request failed")]
    Gsp(#[source] GspError),
    #[error("pci request failed")]
    Pci(#[source] PciError),
    #[error("VRAM")]
    Vram(#[source] RangeError),
    #[error("GPU virtual addresses")]
    VirtualAddress(#[source] RangeError),
    #[error("the card's {vram_bytes} bytes of VRAM do not cover the {reserve_bytes}-byte firmware reserve")]
    VramTooSmall { vram_bytes: u64, reserve_bytes: u64 },
    #[error("{len} bytes at GPU address {va:#x} are not inside one live allocation")]
    NotAllocated { va: u64, len: u64 },
    #[error("could not start the memory actor thread")]
    Spawn(#[source] std::io::Error),
    #[error("{bytes} bytes is more than the address space holds")]
    TooLarge { bytes: u64 },
    #[error("CPU access")]
    View(#[source] macuda_gsp::OutsideView),
    #[error("our memory on the card")]
    Card(#[source] Box<crate::BareMemoryError>),
    #[error("{len} bytes at GPU address {va:#x} lie outside the BAR1 window the CPU reaches (the copy engine reaches them)")]
    NotCpuVisible { va: u64, len: u64 },
    #[error("internal invariant broken: {reason}")]
    Invariant { reason: &'static str },
}

impl ActorFault for MemoryError {
    fn severity(&self) -> Severity {
        match self {
            MemoryError::Actor(ActorError::Injected { .. }) => Severity::Fatal,
            MemoryError::Actor(_) | MemoryError::Gsp(_) | MemoryError::Pci(_) => {
                Severity::Downstream
            }
            MemoryError::Vram(_)
            | MemoryError::VirtualAddress(_)
            | MemoryError::NotAllocated { .. }
            | MemoryError::TooLarge { .. }
            | MemoryError::View(_)
            | MemoryError::NotCpuVisible { .. } => Severity::Recoverable,
            // Out of room is the caller's; the tables or the card failing
            // is not.
            MemoryError::Card(e) => {
                if e.is_full() {
                    Severity::Recoverable
                } else {
                    Severity::Fatal
                }
            }
            MemoryError::VramTooSmall { .. }
            | MemoryError::Spawn(_)
            | MemoryError::Invariant { .. } => Severity::Fatal,
        }
    }
}
