//! The bare-metal path: what the gsp actor does on a card no NVIDIA driver
//! serves (the TinyGPU socket, sysfs, the simulated card). It stages the
//! signed firmware in host memory the card reads by DMA, asks the FSP to
//! start it, and then speaks RPC with GSP-RM over the message queues.
//! Everything here reaches the card through [`CardBus`], so the same code
//! runs over the pci actor and, in tests, straight over a transport.
//!
//! The boot, in the order it runs:
//! - `early`, `poll`: the card before staging (chip, resident firmware,
//!   its own boot, VRAM), and the bounded waits every step uses;
//! - `staging`: bounded mappings handed out in page-aligned pieces;
//! - `radix3`: the GSP-RM image and the table the firmware finds it by;
//! - `wpr_meta`, `boot_params`, `libos`: the structures the FMC and
//!   GSP-RM read first;
//! - `cot`, `fsp_channel`: the chain-of-trust request and the FSP's EMEM
//!   channel;
//! - `boot`: [`stage_for_fsp`] and [`send_cot`], the two steps together;
//! - `fsp_boot`: [`boot_through_fsp`], the whole boot as one straight
//!   function, from a card in any state to GSP-RM answering RPCs.
//!
//! The RPC side, bottom up: `shared` stages the shared block and the RM
//! arguments the libos page names; `queue` moves records through the
//! two rings with every check; `conversation` makes calls and handles
//! what GSP-RM sends unprompted; `rm_calls` encodes the RM API carried
//! over it; `init_messages` builds what is queued before the boot; `logs`
//! reads GSP-RM's log buffers back; `static_info` asks GSP-RM what it
//! knows of the card once it runs; `transcript` keeps the last messages
//! both ways for reports; `va_space` makes a client's first objects and
//! hands GSP-RM the root of our page tables; `device_info` and
//! `reserved_pdes` are the golden context's first controls; `channels`
//! makes channel groups and channels over memory the driver placed,
//! `debugger` reads what RM kept of a fault, `golden` builds the golden
//! context and promotes context buffers, and `journal` keeps the last
//! messages, notices and log lines for crash reports.

pub mod boot;
pub mod boot_params;
mod bus;
pub mod channels;
pub mod conversation;
pub mod cot;
pub mod debugger;
pub mod device_info;
pub mod early;
mod error;
#[cfg(test)]
mod fake;
pub mod fsp_boot;
pub mod fsp_channel;
pub mod golden;
pub mod hold_back;
pub mod init_messages;
pub mod journal;
pub mod libos;
pub mod logs;
pub mod poll;
pub mod queue;
pub mod radix3;
pub mod reserved_pdes;
pub mod rm_calls;
mod rpc_error;
pub mod shared;
pub mod staging;
pub mod static_info;
pub mod transcript;
pub mod va_space;
pub mod wpr_meta;

pub use boot::{send_cot, send_cot_with, stage_for_fsp, stage_for_fsp_with, Staged};
pub use bus::{CardBus, OverActor, OverTransport};
pub use conversation::{GspRpc, Notice};
pub use error::BareError;
pub use fsp_boot::{boot_through_fsp, BootError, BootFailed, BootPatience, BootStep, BootedGsp};
pub use fsp_channel::FspChannel;
pub use init_messages::{packed_registry, InitMessageError, PciAddress, SystemInfo};
pub use journal::{GspJournal, LogReader, SharedJournal, SharedLogMetadata};
pub use libos::{LibosArgs, LibosRegion};
pub use logs::{LogError, LogFormat, LogMetadata, LogRecord};
pub use queue::{encode_record, Message, Patience, RpcQueue};
pub use radix3::{Radix3, Radix3Shape};
pub use rm_calls::RmAlloc;
pub use rpc_error::RpcError;
pub use shared::{SharedBlock, RMARGS_BYTES};
pub use staging::{HostStaging, Piece, StagingLimits};
pub use static_info::{GspStaticInfo, StaticInfoError};
pub use transcript::{Direction, RpcEntry, RpcTranscript};
pub use va_space::{
    alloc_client_objects, set_page_directory, ClientObjects, TablesOwner, USER_OBJECTS,
};
