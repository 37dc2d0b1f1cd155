//! The gsp actor is the resource manager (RM) of the stack: it identifies
//! the chip, owns the RM object tree (client, device, subdevice, VA spaces,
//! memory objects, channel groups and channels, the debugger object) and
//! answers what the card is, how much memory it has, and what RM recorded
//! after a fault. Its requests are neutral to the backend behind them:
//! GSP-RM firmware over RPC queues (bare metal, not built yet), nvidia.ko
//! ioctls (the kernel module), or, on the null device, an object tree kept
//! in software. It hands out on purpose what the layers above need to
//! touch directly: CPU views of memory RM mapped, the doorbell, and the
//! supervisor's teardown handle. It may call only the pci actor below it
//! (through a `PciHandle`) and the shared harness and formats.

mod actor;
pub mod bare;
mod card_tables;
mod error;
mod fault;
pub mod firmware;
mod firmware_rm;
mod handle;
mod info;
pub mod kernel;
mod module_rm;
mod null_rm;
mod objects;
mod resources;
mod rm;
pub mod sequencer;
mod view;

pub use actor::{spawn, GspHandle, GspRequest, GspService, GspStats, RmChoice};
pub use card_tables::{BootedCard, CardTables, TablesFactory};
pub use error::GspError;
pub use fault::{ChannelFault, MmuFault, SmError};
pub use handle::ObjectHandle;
pub use info::{
    ComputeFacts, DeviceInfo, GrShape, MemoryOwner, RmBackend, RmMemoryRules, NULL_COMPUTE,
};
pub use kernel::{DeviceFiles, KernelIdentity, KernelRmError, RmDriver, RmTeardown};
pub use module_rm::identify_module;
pub use objects::{ObjectTree, RmObject};
pub use resources::{
    ChannelInfo, ChannelSetup, Channels, CopyPlacement, Doorbell, PinnedAlloc, RingSpec, VideoAlloc,
};
pub use view::{CpuView, HostMemory, OutsideView};
