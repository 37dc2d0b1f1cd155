//! The PCI actor owns the device transport: it is the only code that
//! touches the card's configuration space, BARs, DMA memory and function
//! reset. It calls nothing above it and only `macuda-core` (the harness) and
//! `macuda-hw` (formats) beside it. Besides the actor, it exports the
//! [`Transport`] and [`Opener`] traits so the supervisor can open a fresh
//! connection of its own for recovery (clearing bus mastering, FLR) without
//! going through an actor that may have failed, and the device selection
//! ([`DeviceSpec`]) that names which transport to open.

mod actor;
mod error;
mod null;
mod spec;
mod transport;

pub use actor::{read_identity, spawn, PciHandle, PciIdentity, PciRequest, PciService, PciStats};
pub use error::PciError;
pub use null::{CardEvent, NullCard, NullOpener, NullProfile};
pub use spec::{DeviceSpec, ParseDeviceError};
pub use transport::{
    clear_bus_master, enable_bus_master, open_transport, BarInfo, BusMasterChange, DmaRegion,
    Opener, Transport,
};
