//! The bare-metal path: what the gsp actor does on a card no NVIDIA driver
//! serves (the TinyGPU socket, sysfs, the simulated card). It stages the
//! signed firmware in host memory the card reads by DMA, asks the FSP to
//! start it, and then speaks RPC with GSP-RM over the message queues.
//! Everything here reaches the card through [`CardBus`], so the same code
//! runs over the pci actor and, in tests, straight over a transport.
//!
//! - `staging`: bounded mappings handed out in page-aligned pieces;
//! - `radix3`: the GSP-RM image and the table the firmware finds it by;
//! - `wpr_meta`, `boot_params`, `libos`: the structures the FMC and
//!   GSP-RM read first;
//! - `cot`, `fsp_channel`: the chain-of-trust request and the FSP's EMEM
//!   channel;
//! - `early`, `poll`: the card before staging (chip, resident firmware,
//!   its own boot, VRAM), and the bounded waits every step uses;
//! - `boot`: [`stage_for_fsp`] and [`send_cot`], the two steps together.

pub mod boot;
pub mod boot_params;
mod bus;
pub mod cot;
pub mod early;
mod error;
pub mod fsp_channel;
pub mod libos;
pub mod poll;
pub mod radix3;
pub mod staging;
pub mod wpr_meta;

pub use boot::{send_cot, send_cot_with, stage_for_fsp, stage_for_fsp_with, Staged};
pub use bus::{CardBus, OverActor};
pub use error::BareError;
pub use fsp_channel::FspChannel;
pub use libos::{LibosArgs, LibosRegion};
pub use radix3::{Radix3, Radix3Shape};
pub use staging::{HostStaging, Piece, StagingLimits};
