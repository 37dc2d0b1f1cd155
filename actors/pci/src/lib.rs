//! The PCI actor owns the device transport: it is the only code that
//! touches the card's configuration space, BARs, DMA memory and function
//! reset. It calls nothing above it and only `macuda-core` (the harness) and
//! `macuda-hw` (formats) beside it. Besides the actor, it exports the
//! [`Transport`] and [`Opener`] traits so the supervisor can open a fresh
//! connection of its own for recovery (clearing bus mastering, FLR) without
//! going through an actor that may have failed, and the device selection
//! ([`DeviceSpec`]) that names which transport to open.

mod actor;
mod capabilities;
mod error;
mod kernel_module;
mod lock;
mod null;
mod open;
mod spec;
mod sysfs;
pub mod tinygpu;
mod trace;
mod transport;

pub use actor::{read_identity, spawn, PciHandle, PciIdentity, PciRequest, PciService, PciStats};
pub use capabilities::Capabilities;
pub use error::PciError;
pub use kernel_module::KernelModuleOpener;
pub use lock::{default_lock_dir, CardLock, HandedLock, HANDED_LOCK_VAR, LOCK_DIR_VAR};
pub use null::{CardEvent, NullCard, NullOpener, NullProfile};
pub use open::{open_transport, open_transport_held, record_to};
pub use spec::{default_tinygpu_socket, DeviceSpec, ParseDeviceError};
pub use sysfs::{SysfsOpener, SYSFS_PCI_DEVICES};
pub use trace::{
    dma_write_hash, Divergence, DivergenceKind, Gap, GapError, Recorder, RecordingOpener, Replay,
    ReplayError, ReplayOpener, ReplayStats, Trace, TraceError, TraceOp, TraceWhy, TracedOp,
    END_OF_TRACE, MAX_DMA_READ_LINE_BYTES, MAX_RECORDED_MMIO_BYTES, MAX_TRACE_BYTES,
    MAX_TRACE_LINE_BYTES, MAX_TRACE_OPS, REPLAY_FINISH, TRACE_HEADER, TRACE_HEADER_V1,
};
pub use transport::{
    clear_bus_master, command_register, enable_bus_master, enable_memory_space, reset_function,
    BarInfo, BusMasterChange, DmaId, DmaRegion, DmaSegment, DmaView, Opener, Transport,
    TRANSPORT_TIMEOUT,
};
