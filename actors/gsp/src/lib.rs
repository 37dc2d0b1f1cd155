//! The gsp actor is the resource manager (RM) of the stack: it identifies
//! the chip, owns the RM object tree (client, device, subdevice, VA spaces,
//! channels, ...) and answers what the card is and how much memory it has.
//! Its requests are neutral to the backend behind them: GSP-RM firmware over
//! RPC queues (bare metal), nvidia.ko ioctls (kernel module), or, on the null
//! device, an object tree kept in software. It may call only the pci actor
//! below it (through a `PciHandle`) and the shared harness and formats.

mod actor;
mod error;
pub mod kernel;
mod objects;

pub use actor::{spawn, DeviceInfo, GspHandle, GspRequest, GspService, GspStats, RmBackend};
pub use error::GspError;
pub use objects::{ObjectHandle, ObjectTree, RmObject};
