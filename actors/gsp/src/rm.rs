//! One interface for the resource manager behind the gsp actor: the null
//! RM (an object tree in software), NVIDIA's kernel module, and GSP-RM over
//! RPC on bare metal to come. The actor opens one and answers every request
//! through it; what one RM cannot do it says with a typed error.

use crate::error::GspError;
use crate::fault::ChannelFault;
use crate::handle::ObjectHandle;
use crate::kernel::RmTeardown;
use crate::objects::RmObject;
use crate::resources::{ChannelSetup, Channels, Doorbell, PinnedAlloc, VideoAlloc};
use crate::view::CpuView;

pub(crate) trait Rm: Send {
    /// An object that needs no parameters, under `parent`.
    fn alloc(&mut self, parent: ObjectHandle, class: u32) -> Result<ObjectHandle, GspError>;
    /// Free an object and its subtree; how many objects went.
    fn free(&mut self, handle: ObjectHandle) -> Result<u32, GspError>;
    /// The objects this RM keeps where we can list them.
    fn objects(&self) -> Vec<RmObject>;
    /// Video memory mapped for the GPU at `va`.
    fn alloc_video(&mut self, bytes: u64, va: u64) -> Result<VideoAlloc, GspError>;
    /// Pinned host memory mapped for the GPU at `va`.
    fn alloc_pinned(&mut self, bytes: u64, va: u64) -> Result<PinnedAlloc, GspError>;
    /// A CPU view of video memory.
    fn map_cpu(&mut self, handle: ObjectHandle, bytes: u64) -> Result<CpuView, GspError>;
    /// Unmap memory from the GPU at `va` and free it.
    fn free_memory(&mut self, handle: ObjectHandle, va: u64, bytes: u64) -> Result<(), GspError>;
    /// A channel group with a compute and a copy channel over `setup`'s rings.
    fn create_channels(&mut self, setup: ChannelSetup) -> Result<Channels, GspError>;
    fn destroy_channels(&mut self) -> Result<(), GspError>;
    /// How work in memory reaches the engines.
    fn doorbell(&self) -> Doorbell;
    /// What RM reported against the channels, if anything.
    fn channel_fault(&mut self, deep: bool) -> Result<Option<ChannelFault>, GspError>;
    /// The supervisor's handle to the objects, where the RM has one.
    fn teardown(&self) -> Option<RmTeardown>;
    /// How many objects it holds, where it counts them itself.
    fn live_objects(&self) -> Option<u64> {
        None
    }
}
