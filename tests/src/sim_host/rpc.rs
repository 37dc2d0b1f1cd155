//! The host's side of GSP-RM's message queues, for the sim's tests: the
//! gsp actor's own RPC client (`macuda_gsp::bare`) staging the shared
//! block and RM arguments and speaking over the queues, with what only
//! tests need around it: the libos page entries that name the RM
//! arguments and the log buffers, records broken on purpose, and the log
//! buffers read back through the sim's stand-in for the logging ELF.

use super::{bus, Staged};
use macuda_gsp::bare::init_messages::DRIVER_REGISTRY;
use macuda_gsp::bare::logs::{self, LogFormat};
use macuda_gsp::bare::{
    encode_record, packed_registry as encode_registry, Message, RpcError, RpcQueue, SharedBlock,
    RMARGS_BYTES,
};
use macuda_hw::gsp_rpc::{self, libos_region};
use macuda_pci::tinygpu::TinyGpuTransport;
use macuda_pci::{DmaRegion, Transport};
use std::time::Duration;

/// A message read from the status queue.
pub type Received = Message;

/// The host's end of the queues.
pub struct HostQueues {
    queue: RpcQueue,
    /// LOGINIT and LOGRM, one after the other.
    logs: DmaRegion,
}

/// Bytes of each log buffer the host hands over (RM's and nouveau's size).
pub const LOG_BUFFER_BYTES: u64 = 64 << 10;
/// The log buffers, in the order they follow RMARGS in the libos page and
/// each other in their region.
pub const LOG_BUFFERS: [&[u8]; 2] = [b"LOGINIT", b"LOGRM"];

/// One record read back from a log buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub metadata: &'static macuda_sim::gsp_rm::logs::LogMetadata,
    pub args: Vec<u64>,
    pub time_ns: u64,
}

/// A libos page entry for contiguous host memory.
fn libos_entry(id8: u64, pa: u64, size: u64) -> [u8; libos_region::BYTES] {
    let mut region = [0u8; libos_region::BYTES];
    region[libos_region::ID8..][..8].copy_from_slice(&id8.to_le_bytes());
    region[libos_region::PA..][..8].copy_from_slice(&pa.to_le_bytes());
    region[libos_region::SIZE..][..8].copy_from_slice(&size.to_le_bytes());
    region[libos_region::KIND] = libos_region::KIND_CONTIGUOUS;
    region[libos_region::LOC] = libos_region::LOC_SYSMEM;
    region
}

/// The registry a driver sets, in PACKED_REGISTRY_TABLE form.
pub fn registry_table() -> Vec<u8> {
    encode_registry(DRIVER_REGISTRY).expect("ASCII names")
}

/// A PACKED_REGISTRY_TABLE of DWORD entries.
pub fn packed_registry<S: AsRef<str>>(names: &[(S, u32)]) -> Vec<u8> {
    let keys: Vec<(&str, u32)> = names.iter().map(|(n, v)| (n.as_ref(), *v)).collect();
    encode_registry(&keys).expect("ASCII names")
}

/// The sim's metadata table as the log decoder looks it up.
fn sim_metadata(pointer: u64) -> Option<LogFormat> {
    macuda_sim::gsp_rm::logs::metadata(pointer).map(|m| LogFormat {
        file: m.file.to_string(),
        line: m.line,
        format: m.format.to_string(),
        argument_count: m.argument_count,
        print_level: m.print_level,
    })
}

impl HostQueues {
    /// The shared block with its PTE page and the command queue's header,
    /// the RM arguments, and the libos page entries naming them and the
    /// log buffers.
    pub fn stage(t: &mut TinyGpuTransport, staged: &Staged) -> HostQueues {
        let block = SharedBlock::stage(t).unwrap();
        let region = libos_entry(gsp_rpc::RMARGS_ID8, block.rmargs_bus_addr(), RMARGS_BYTES);
        t.dma_write(staged.region.id, staged.libos_at, &region)
            .unwrap();
        // The log buffers, zeroed (as tinygrad hands them over), named
        // after RMARGS.
        let logs = t
            .alloc_dma(LOG_BUFFERS.len() as u64 * LOG_BUFFER_BYTES + 2 * gsp_rpc::PTE_PAGE_BYTES)
            .unwrap();
        for (i, name) in LOG_BUFFERS.iter().enumerate() {
            let at = Self::log_at(i);
            let entry = libos_entry(gsp_rpc::id8(name), bus(&logs, at), LOG_BUFFER_BYTES);
            let slot = staged.libos_at + (i as u64 + 1) * libos_region::BYTES as u64;
            t.dma_write(staged.region.id, slot, &entry).unwrap();
        }
        HostQueues {
            queue: RpcQueue::new(block),
            logs,
        }
    }

    /// The queue, for the gsp actor's conversation to own (the log
    /// buffers stay mapped: the transport keeps its mappings).
    pub fn into_queue(self) -> RpcQueue {
        self.queue
    }

    /// The gsp actor's queue under the test host.
    pub fn queue(&mut self) -> &mut RpcQueue {
        &mut self.queue
    }

    /// Where log buffer `i` lies in its region (past the pages that held
    /// the mapping's segment table).
    fn log_at(i: usize) -> u64 {
        2 * gsp_rpc::PTE_PAGE_BYTES + i as u64 * LOG_BUFFER_BYTES
    }

    /// The records in log buffer `name` (LOGINIT or LOGRM), oldest first,
    /// read by the gsp actor's decoder with the sim's metadata table
    /// standing in for the logging ELF a real GSP-RM's records need.
    ///
    /// # Panics
    /// A buffer that is not one of ours, or one that does not decode.
    pub fn log_records(&self, t: &mut TinyGpuTransport, name: &[u8]) -> Vec<LogRecord> {
        let i = LOG_BUFFERS
            .iter()
            .position(|n| *n == name)
            .expect("one of ours");
        let mut raw = vec![0u8; LOG_BUFFER_BYTES as usize];
        t.dma_read(self.logs.id, Self::log_at(i), &mut raw).unwrap();
        logs::decode(&raw, &sim_metadata)
            .unwrap()
            .into_iter()
            .map(|r| LogRecord {
                metadata: macuda_sim::gsp_rm::logs::metadata(r.pointer).expect("looked up"),
                args: r.args,
                time_ns: r.time_ns,
            })
            .collect()
    }

    /// The message `function(payload)` as the next command record,
    /// element header and checksum filled in (for a test to break).
    pub fn message(&self, function: u32, payload: &[u8]) -> Vec<u8> {
        encode_record(self.queue.next_tx_seq(), function, payload).unwrap()
    }

    /// Write a record (`message`'s, or one broken by the caller) into the
    /// command queue and ring the doorbell.
    pub fn send_bytes(&mut self, t: &mut TinyGpuTransport, m: &[u8]) {
        self.queue.send_record(t, m).unwrap();
    }

    /// Send a command (in continuation records when it is long).
    pub fn send(&mut self, t: &mut TinyGpuTransport, function: u32, payload: &[u8]) {
        self.queue.send(t, function, payload).unwrap();
    }

    /// A command longer than one record: its first part under `function`,
    /// the rest in CONTINUATION_RECORDs (reference/gsp.md 5.7).
    pub fn send_long(&mut self, t: &mut TinyGpuTransport, function: u32, payload: &[u8]) {
        self.send(t, function, payload);
    }

    /// GSP has published the status queue.
    pub fn linked(&mut self, t: &mut TinyGpuTransport) -> bool {
        self.queue.linked(t).unwrap()
    }

    /// The next status message within `patience`, checked as a receiver
    /// checks it; the host's read pointer moves past it. `None` when
    /// nothing came.
    ///
    /// # Panics
    /// A message that does not check out.
    pub fn receive(&mut self, t: &mut TinyGpuTransport, patience: Duration) -> Option<Received> {
        match self.receive_checked(t, patience) {
            Ok(m) => Some(m),
            Err(RpcError::Timeout { .. }) => None,
            Err(e) => panic!("the status queue: {e}"),
        }
    }

    /// As [`HostQueues::receive`], the receiver's verdict given back.
    ///
    /// # Errors
    /// A message that does not check out, or nothing in time.
    pub fn receive_checked(
        &mut self,
        t: &mut TinyGpuTransport,
        patience: Duration,
    ) -> Result<Received, RpcError> {
        self.queue.receive(t, patience, "a status message")
    }

    /// Step over the message that failed its checks.
    ///
    /// # Errors
    /// The queue's.
    pub fn discard(&mut self, t: &mut TinyGpuTransport) -> Result<(), RpcError> {
        self.queue.discard(t)
    }
}
