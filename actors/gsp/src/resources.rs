//! What RM hands out: memory mapped for the GPU, channels over rings the
//! caller placed, and the doorbell that starts them.

use crate::error::GspError;
use crate::handle::ObjectHandle;
use crate::info::GrShape;
use crate::kernel::Usermode;
use crate::view::CpuView;
use macuda_pci::PciHandle;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Video memory RM allocated and mapped into our VA space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VideoAlloc {
    pub handle: ObjectHandle,
    /// What RM gave: a whole number of its page size.
    pub bytes: u64,
}

/// Pinned host memory mapped into our VA space, with the process's view.
#[derive(Debug, Clone)]
pub struct PinnedAlloc {
    pub handle: ObjectHandle,
    pub bytes: u64,
    pub view: CpuView,
}

/// Where one channel's ring and USERD live (memory the caller allocated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RingSpec {
    pub ring_memory: ObjectHandle,
    pub ring_va: u64,
    pub entries: u32,
    pub userd_memory: ObjectHandle,
    pub userd_offset: u64,
    /// USERD's GPU address (where our own tables place it, RM is told
    /// the video memory behind it).
    pub userd_va: u64,
}

/// Which channel group the copy channel joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum CopyPlacement {
    /// The compute channel's group: its copies run on a graphics copy
    /// engine, scheduled with the compute work in that group's timeslices
    /// (tinygrad's layout, and ours so far).
    #[default]
    ComputeGroup,
    /// A group of its own on copy engine `n` (`NV2080_ENGINE_TYPE_COPYn`),
    /// scheduled on that engine's runlist apart from the graphics engine,
    /// as CUDA places its copy channels.
    CopyEngine(u8),
}

/// The two channels the submit actor drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelSetup {
    pub compute: RingSpec,
    pub copy: RingSpec,
    pub copy_placement: CopyPlacement,
}

/// One channel as RM made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelInfo {
    pub channel: ObjectHandle,
    /// The engine object bound on it.
    pub engine: ObjectHandle,
    /// The engine's class (what SET_OBJECT names).
    pub class: u32,
    /// What the doorbell takes.
    pub token: u32,
}

/// A channel group with its compute and copy channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Channels {
    pub group: ObjectHandle,
    /// The copy channel's group: `group` itself unless it has its own.
    pub copy_group: ObjectHandle,
    pub compute: ChannelInfo,
    pub copy: ChannelInfo,
    pub gr: GrShape,
}

/// How work reaches the engines once it is in memory: a doorbell write
/// with the channel's token.
#[derive(Clone)]
pub enum Doorbell {
    /// A register write through the pci actor (bare metal, the null card).
    Pci(PciHandle),
    /// The usermode page RM mapped for us (the kernel module).
    Usermode(Arc<Usermode>),
}

impl Doorbell {
    /// The engine's clock (PTIMER, ns) as the host reads it now, where the
    /// doorbell page carries it (the kernel module's usermode page); the
    /// clock semaphore timestamps are written in.
    pub fn time_ns(&self) -> Option<u64> {
        match self {
            Doorbell::Pci(_) => None,
            Doorbell::Usermode(u) => Some(u.time_ns()),
        }
    }
}

impl std::fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Doorbell::Pci(_) => write!(f, "Doorbell(pci)"),
            Doorbell::Usermode(u) => write!(f, "Doorbell(usermode {:#x})", u.class),
        }
    }
}

impl Doorbell {
    /// Tell the engine that `token`'s channel has new GP entries.
    ///
    /// # Errors
    /// The pci path's refusal (the null card declines submission).
    pub fn ring(&self, token: u32) -> Result<(), GspError> {
        match self {
            Doorbell::Pci(pci) => pci.doorbell(token).map_err(GspError::Pci),
            Doorbell::Usermode(u) => {
                u.ring(token);
                Ok(())
            }
        }
    }
}
