use crate::handle::ObjectHandle;
use crate::kernel::KernelRmError;
use macuda_core::{ActorError, ActorFault, Severity};
use macuda_pci::PciError;

#[derive(Debug, thiserror::Error)]
pub enum GspError {
    #[error("actor call failed")]
    Actor(#[from] ActorError),
    #[error("pci request failed")]
    Pci(#[source] PciError),
    #[error("the kernel module's RM")]
    Kernel(#[from] KernelRmError),
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
    #[error("the {rm} RM has no {what}")]
    NotOnThisRm {
        rm: &'static str,
        what: &'static str,
    },
    #[error("GPU address {va:#x} is not aligned to the {align}-byte page its memory needs")]
    MisalignedVa { va: u64, align: u64 },
    #[error("{bytes} bytes is more than this process can map")]
    TooLarge { bytes: u64 },
    #[error("the channels exist already (destroy them first)")]
    ChannelsExist,
    #[error("no channels have been created")]
    NoChannels,
    #[error("copy engine {index} is not one RM names (NV2080_ENGINE_TYPE_COPY0 to COPY9)")]
    NoSuchCopyEngine { index: u8 },
    #[error("the card shows no BAR1, the CPU's window onto its video memory")]
    NoBar1,
    #[error("identifying the card before its boot")]
    Identify(#[source] Box<crate::bare::early::EarlyError>),
    #[error("the GSP firmware for the card")]
    Firmware(#[source] Box<crate::firmware::FirmwareError>),
    #[error("booting GSP-RM")]
    Boot(#[source] Box<crate::bare::BootFailed>),
    #[error("our memory on the card: {why}")]
    CardMemory { why: String },
    #[error("building the golden context")]
    Golden(#[source] Box<crate::bare::golden::GoldenError>),
    #[error("GSP-RM")]
    Rpc(#[source] Box<crate::bare::RpcError>),
    #[error("the {what} at GPU address {va:#x} is not in video memory of ours")]
    NotOurMemory { what: &'static str, va: u64 },
}

impl ActorFault for GspError {
    fn severity(&self) -> Severity {
        match self {
            GspError::Actor(ActorError::Injected { .. }) => Severity::Fatal,
            GspError::Actor(_) | GspError::Pci(_) => Severity::Downstream,
            GspError::Kernel(k) => match k {
                // RM said no (out of memory, a bad argument): the caller's
                // problem, the stack is fine.
                KernelRmError::Status { .. }
                | KernelRmError::Map { .. }
                | KernelRmError::VaExhausted { .. } => Severity::Recoverable,
                // The module itself failed us, or is not the one we speak.
                KernelRmError::Open { .. }
                | KernelRmError::Ioctl { .. }
                | KernelRmError::NoClass { .. }
                | KernelRmError::NoGpu { .. }
                | KernelRmError::DriverVersion { .. } => Severity::Fatal,
            },
            GspError::NoVram
            | GspError::Spawn(_)
            | GspError::NoBar1
            | GspError::Identify(_)
            | GspError::Firmware(_)
            | GspError::Boot(_)
            | GspError::CardMemory { .. }
            | GspError::Golden(_) => Severity::Fatal,
            // GSP-RM refusing a call is the caller's; the conversation
            // itself failing leaves the card unreachable.
            GspError::Rpc(e) => {
                if matches!(**e, crate::bare::RpcError::Rm { .. }) {
                    Severity::Recoverable
                } else {
                    Severity::Fatal
                }
            }
            GspError::NotOpen
            | GspError::NoSuchObject(_)
            | GspError::BadParent { .. }
            | GspError::UnsupportedClass { .. }
            | GspError::NotOnThisRm { .. }
            | GspError::MisalignedVa { .. }
            | GspError::TooLarge { .. }
            | GspError::ChannelsExist
            | GspError::NoChannels
            | GspError::NoSuchCopyEngine { .. }
            | GspError::NotOurMemory { .. } => Severity::Recoverable,
        }
    }
}
