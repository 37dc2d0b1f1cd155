//! The bare-metal path: what the gsp actor does on a card no NVIDIA driver
//! serves (the TinyGPU socket, sysfs, the simulated card). It stages the
//! signed firmware in host memory the card reads by DMA, asks the FSP to
//! start it, and then speaks RPC with GSP-RM over the message queues.
//! Everything here reaches the card through [`CardBus`], so the same code
//! runs over the pci actor and, in tests, straight over a transport.
//!
//! The RPC side, bottom up: `shared` stages the shared block and the RM
//! arguments the libos page names; `queue` moves records through the
//! two rings with every check; `conversation` makes calls and handles
//! what GSP-RM sends unprompted; `rm_calls` encodes the RM API carried
//! over it; `init_messages` builds what is queued before the boot; `logs`
//! reads GSP-RM's log buffers back.

mod bus;
pub mod conversation;
#[cfg(test)]
mod fake;
pub mod init_messages;
pub mod logs;
pub mod queue;
pub mod rm_calls;
mod rpc_error;
pub mod shared;

pub use bus::{CardBus, OverActor};
pub use conversation::{GspRpc, Notice};
pub use init_messages::{packed_registry, InitMessageError, PciAddress, SystemInfo};
pub use logs::{LogError, LogFormat, LogMetadata, LogRecord};
pub use queue::{encode_record, Message, Patience, RpcQueue};
pub use rm_calls::RmAlloc;
pub use rpc_error::RpcError;
pub use shared::{SharedBlock, RMARGS_BYTES};
