//! RM through NVIDIA's kernel module: the client, device and subdevice
//! objects allocated with the module's ioctls on /dev/nvidiactl and
//! /dev/nvidiaN, the controls that say what the GPU is, memory, channels
//! and teardown. No libcuda is involved; the parameter structures are
//! ours (macuda_hw::rm), pinned to the 580 headers.

mod channels;
mod client;
mod error;
mod faults;
mod identity;
mod ioctl;
mod memory;
mod teardown;

pub use crate::fault::FaultState;
pub use channels::{
    ChannelError, ChannelGroup, ChannelObjects, RingPlacement, Usermode, GPFIFO_CLASSES,
    USERMODE_CLASSES,
};
pub use client::{cards, KernelRm};
pub use error::KernelRmError;
pub use identity::{fp32_cores_per_sm, GrFacts, KernelIdentity};
pub use ioctl::{DeviceFiles, RmDriver, RmMapping, RmNode, CTL_NODE, DRIVER_MAJOR};
pub use memory::{video_page, GpuVaSpace, PinnedHost, VideoMemory, MODULE_MEMORY};
pub use teardown::RmTeardown;
