use crate::error::SubmitError;
use macuda_core::{actor_protocol, ActorConfig, ActorJoin};
use macuda_memory::{DeviceBuffer, MemoryHandle};
use macuda_pci::PciHandle;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// GPFIFO entries per stream's ring.
const GPFIFO_ENTRIES: u64 = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StreamId(pub u32);

/// One kernel launch as the layers above describe it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchRecord {
    /// The device address of the kernel's entry point.
    pub entry: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    /// The marshalled parameter block.
    pub params: Vec<u8>,
}

/// An upload accepted onto the copy queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadReceipt {
    pub dst: u64,
    pub bytes: u64,
    /// Copy-queue position; the copy happens at the next flush.
    pub queued_at: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitStats {
    pub streams: u64,
    pub launches: u64,
    pub param_bytes: u64,
    pub uploads: u64,
    pub upload_bytes: u64,
    pub flushes: u64,
    pub refused_flushes: u64,
    /// Launches dropped because their flush was refused.
    pub refused_launches: u64,
}

actor_protocol! {
    /// The submit actor's handle.
    pub handle SubmitHandle;
    request SubmitRequest;
    service SubmitService;
    error SubmitError;
    CreateStream => fn create_stream() -> StreamId;
    DestroyStream => fn destroy_stream(stream: StreamId) -> ();
    /// Queue a launch; returns its position in the stream's timeline.
    Launch => fn launch(stream: StreamId, launch: LaunchRecord) -> u64;
    /// Queue a host-to-device copy on the copy queue.
    Upload => fn upload(dst: u64, bytes: Vec<u8>) -> UploadReceipt;
    /// Hand everything queued on `stream` to the GPU and wait for it;
    /// returns the timeline value reached.
    Synchronize => fn synchronize(stream: StreamId) -> u64;
    Stats => fn stats() -> SubmitStats;
}

struct Stream {
    ring: DeviceBuffer,
    /// The channel's work-submit token. The null RM has no channels, so
    /// there it is the stream number; real backends take it from RM.
    token: u32,
    pending: Vec<LaunchRecord>,
    timeline: u64,
}

struct SubmitActor {
    memory: MemoryHandle,
    pci: PciHandle,
    streams: BTreeMap<StreamId, Stream>,
    next_stream: u32,
    copy_queue: Vec<(u64, Vec<u8>)>,
    copies_queued: u64,
    stats: SubmitStats,
}

impl SubmitService for SubmitActor {
    fn create_stream(&mut self) -> Result<StreamId, SubmitError> {
        let ring = self
            .memory
            .alloc_device(GPFIFO_ENTRIES * macuda_hw::gpfifo::ENTRY_BYTES)
            .map_err(SubmitError::Memory)?;
        self.next_stream += 1;
        let id = StreamId(self.next_stream);
        self.streams.insert(
            id,
            Stream {
                ring,
                token: self.next_stream,
                pending: Vec::new(),
                timeline: 0,
            },
        );
        self.stats.streams += 1;
        Ok(id)
    }

    fn destroy_stream(&mut self, stream: StreamId) -> Result<(), SubmitError> {
        let s = self
            .streams
            .remove(&stream)
            .ok_or(SubmitError::NoSuchStream(stream))?;
        self.memory
            .free_device(s.ring.va)
            .map_err(SubmitError::Memory)?;
        Ok(())
    }

    fn launch(&mut self, stream: StreamId, launch: LaunchRecord) -> Result<u64, SubmitError> {
        if launch.grid.contains(&0) || launch.block.contains(&0) {
            return Err(SubmitError::EmptyLaunch {
                grid: launch.grid,
                block: launch.block,
            });
        }
        let s = self
            .streams
            .get_mut(&stream)
            .ok_or(SubmitError::NoSuchStream(stream))?;
        self.stats.launches += 1;
        self.stats.param_bytes += launch.params.len() as u64;
        s.pending.push(launch);
        Ok(s.timeline + s.pending.len() as u64)
    }

    fn upload(&mut self, dst: u64, bytes: Vec<u8>) -> Result<UploadReceipt, SubmitError> {
        self.copies_queued += 1;
        self.stats.uploads += 1;
        self.stats.upload_bytes += bytes.len() as u64;
        let receipt = UploadReceipt {
            dst,
            bytes: bytes.len() as u64,
            queued_at: self.copies_queued,
        };
        self.copy_queue.push((dst, bytes));
        Ok(receipt)
    }

    fn synchronize(&mut self, stream: StreamId) -> Result<u64, SubmitError> {
        let s = self
            .streams
            .get_mut(&stream)
            .ok_or(SubmitError::NoSuchStream(stream))?;
        if s.pending.is_empty() && self.copy_queue.is_empty() {
            return Ok(s.timeline);
        }
        self.stats.flushes += 1;
        match self.pci.doorbell(s.token) {
            Ok(()) => {
                s.timeline += s.pending.len() as u64;
                s.pending.clear();
                self.copy_queue.clear();
                Ok(s.timeline)
            }
            Err(e) => {
                if e.is_refusal() {
                    self.stats.refused_flushes += 1;
                    self.stats.refused_launches += s.pending.len() as u64;
                    s.pending.clear();
                    self.copy_queue.clear();
                }
                Err(SubmitError::Pci(e))
            }
        }
    }

    fn stats(&mut self) -> Result<SubmitStats, SubmitError> {
        Ok(self.stats)
    }
}

/// Start the submit actor.
///
/// # Errors
/// Only if the thread cannot start.
pub fn spawn(
    config: ActorConfig,
    memory: MemoryHandle,
    pci: PciHandle,
) -> Result<(SubmitHandle, ActorJoin), SubmitError> {
    let actor = SubmitActor {
        memory,
        pci,
        streams: BTreeMap::new(),
        next_stream: 0,
        copy_queue: Vec::new(),
        copies_queued: 0,
        stats: SubmitStats::default(),
    };
    SubmitHandle::spawn(config, actor).map_err(SubmitError::Spawn)
}
