//! The submit actor turns kernel launches, copies and synchronisation into
//! command streams the GPU executes: GPFIFO rings, push buffers, launch
//! descriptors, semaphores and the copy engine. Launches are queued per
//! stream and handed to the GPU at synchronisation points by ringing the
//! channel's doorbell through the pci actor; on the null device that final
//! hand-over is refused, so everything before it runs and is counted. It
//! calls memory (for rings and buffers) and pci (for the doorbell), never
//! anything above it.

mod actor;
mod error;

pub use actor::{
    spawn, LaunchRecord, StreamId, SubmitHandle, SubmitRequest, SubmitService, SubmitStats,
    UploadReceipt,
};
pub use error::SubmitError;
