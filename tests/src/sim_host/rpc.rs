//! The host's side of GSP-RM's message queues, for the sim's tests: the RM
//! arguments and the libos page that names them, the shared block and its
//! PTEs, the command queue's header, messages written with their element
//! headers and checksums (or broken on purpose), the doorbell, and the
//! status queue read back with the receiver's checks.

use super::{bus, Staged};
use macuda_hw::gsp_rpc::{
    self, element, libos_region, rm_args, rpc_header, tx_header, ENTRY_OFF, MSGQ_FLAGS_SWAP_RX,
    MSG_COUNT, MSG_SIZE, QUEUE_BYTES, RPC_HEADER_VERSION, RPC_SIGNATURE,
};
use macuda_hw::regs::NV_PGSP_QUEUE_HEAD_0;
use macuda_pci::tinygpu::TinyGpuTransport;
use macuda_pci::{DmaRegion, Transport};
use std::time::{Duration, Instant};

const CMD: u64 = gsp_rpc::CMD_QUEUE_OFFSET;
const STAT: u64 = gsp_rpc::STAT_QUEUE_OFFSET;

/// A message read from the status queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub seq: u32,
    pub function: u32,
    pub result: u32,
    pub payload: Vec<u8>,
}

/// The host's end of the queues.
pub struct HostQueues {
    block: DmaRegion,
    tx_seq: u32,
    rx_seq: u32,
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

/// The registry tinygrad sets, in PACKED_REGISTRY_TABLE form.
pub fn registry_table() -> Vec<u8> {
    packed_registry(&[("RMForcePcieConfigSave", 1), ("RMSecBusResetEnable", 1)])
}

/// A PACKED_REGISTRY_TABLE of DWORD entries.
pub fn packed_registry<S: AsRef<str>>(names: &[(S, u32)]) -> Vec<u8> {
    let entries_at = 8 + 16 * names.len();
    let mut strings = Vec::new();
    let mut entries = Vec::new();
    for (name, value) in names {
        entries.extend(((entries_at + strings.len()) as u32).to_le_bytes());
        entries.extend([1u8, 0, 0, 0]);
        entries.extend(value.to_le_bytes());
        entries.extend(4u32.to_le_bytes());
        strings.extend(name.as_ref().as_bytes());
        strings.push(0);
    }
    let mut t = Vec::new();
    t.extend(((entries_at + strings.len()) as u32).to_le_bytes());
    t.extend((names.len() as u32).to_le_bytes());
    t.extend(entries);
    t.extend(strings);
    t
}

impl HostQueues {
    /// The shared block with its PTE page and the command queue's header,
    /// the RM arguments, and the libos page entry naming them.
    pub fn stage(t: &mut TinyGpuTransport, staged: &Staged) -> HostQueues {
        let block = t
            .alloc_dma(gsp_rpc::SHARED_BLOCK_BYTES + 3 * gsp_rpc::PTE_PAGE_BYTES)
            .unwrap();
        // Skip the first pages, which held the mapping's segment table.
        let base = 2 * gsp_rpc::PTE_PAGE_BYTES;
        let ptes: Vec<u8> = (0..gsp_rpc::SHARED_BLOCK_PAGES)
            .flat_map(|i| bus(&block, base + i * gsp_rpc::PTE_PAGE_BYTES).to_le_bytes())
            .collect();
        t.dma_write(block.id, base, &ptes).unwrap();
        let mut header = [0u8; tx_header::BYTES];
        for (at, v) in [
            (tx_header::SIZE, QUEUE_BYTES),
            (tx_header::MSG_SIZE, MSG_SIZE),
            (tx_header::MSG_COUNT, MSG_COUNT),
            (tx_header::FLAGS, MSGQ_FLAGS_SWAP_RX),
            (tx_header::RX_HDR_OFF, tx_header::BYTES as u32),
            (tx_header::ENTRY_OFF, ENTRY_OFF),
        ] {
            header[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        t.dma_write(block.id, base + CMD, &header).unwrap();
        let args_at = base + gsp_rpc::SHARED_BLOCK_BYTES;
        let mut args = [0u8; rm_args::BYTES];
        args[rm_args::SHARED_MEM_PHYS_ADDR..][..8]
            .copy_from_slice(&bus(&block, base).to_le_bytes());
        args[rm_args::PAGE_TABLE_ENTRY_COUNT..][..4]
            .copy_from_slice(&(gsp_rpc::SHARED_BLOCK_PAGES as u32).to_le_bytes());
        args[rm_args::CMD_QUEUE_OFFSET..][..8].copy_from_slice(&CMD.to_le_bytes());
        args[rm_args::STAT_QUEUE_OFFSET..][..8].copy_from_slice(&STAT.to_le_bytes());
        t.dma_write(block.id, args_at, &args).unwrap();
        let region = libos_entry(
            gsp_rpc::RMARGS_ID8,
            bus(&block, args_at),
            gsp_rpc::PTE_PAGE_BYTES,
        );
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
            block,
            tx_seq: 0,
            rx_seq: 0,
            logs,
        }
    }

    /// Where log buffer `i` lies in its region (past the pages that held
    /// the mapping's segment table).
    fn log_at(i: usize) -> u64 {
        2 * gsp_rpc::PTE_PAGE_BYTES + i as u64 * LOG_BUFFER_BYTES
    }

    /// The records in log buffer `name` (LOGINIT or LOGRM), oldest first,
    /// read as RM's decoder reads them: put from word 0, then backwards
    /// from it, each record's time stamp, metadata and, as many as the
    /// metadata says, arguments. The sim's metadata table stands in for
    /// the logging ELF a real GSP-RM's records need.
    ///
    /// # Panics
    /// A buffer that is not one of ours, or a record whose metadata
    /// pointer the table does not know.
    pub fn log_records(&self, t: &mut TinyGpuTransport, name: &[u8]) -> Vec<LogRecord> {
        let i = LOG_BUFFERS
            .iter()
            .position(|n| *n == name)
            .expect("one of ours");
        let mut raw = vec![0u8; LOG_BUFFER_BYTES as usize];
        t.dma_read(self.logs.id, Self::log_at(i), &mut raw).unwrap();
        let word = |k: u64| u64::from_le_bytes(raw[(k * 8) as usize..][..8].try_into().unwrap());
        let ring = LOG_BUFFER_BYTES / 8 - 1;
        let slot = |k: u64| word(1 + k % ring);
        let put = word(0);
        let oldest = put.saturating_sub(ring);
        let mut records = Vec::new();
        let mut at = put;
        while at >= oldest + 2 {
            let time_ns = slot(at - 1);
            let pointer = slot(at - 2);
            let metadata = macuda_sim::gsp_rm::logs::metadata(pointer)
                .unwrap_or_else(|| panic!("record ending at word {at}: metadata {pointer:#x}"));
            let n = u64::from(metadata.argument_count);
            if at < oldest + 2 + n {
                break;
            }
            let args = (at - 2 - n..at - 2).map(slot).collect();
            records.push(LogRecord {
                metadata,
                args,
                time_ns,
            });
            at -= 2 + n;
        }
        records.reverse();
        records
    }

    fn at(&self, offset: u64) -> u64 {
        2 * gsp_rpc::PTE_PAGE_BYTES + offset
    }

    fn read_u32(&self, t: &mut TinyGpuTransport, offset: u64) -> u32 {
        let mut b = [0u8; 4];
        t.dma_read(self.block.id, self.at(offset), &mut b).unwrap();
        u32::from_le_bytes(b)
    }

    fn write_u32(&self, t: &mut TinyGpuTransport, offset: u64, v: u32) {
        t.dma_write(self.block.id, self.at(offset), &v.to_le_bytes())
            .unwrap();
    }

    /// The message `function(payload)` as a command, element header and
    /// checksum filled in.
    pub fn message(&self, function: u32, payload: &[u8]) -> Vec<u8> {
        let length = rpc_header::BYTES + payload.len();
        let elems = gsp_rpc::elements_for(length);
        let mut m = vec![0u8; elems * MSG_SIZE as usize];
        let put =
            |m: &mut Vec<u8>, at: usize, v: u32| m[at..at + 4].copy_from_slice(&v.to_le_bytes());
        put(&mut m, element::SEQ_NUM, self.tx_seq);
        put(&mut m, element::ELEM_COUNT, elems as u32);
        let r = element::BYTES;
        put(&mut m, r + rpc_header::HEADER_VERSION, RPC_HEADER_VERSION);
        put(&mut m, r + rpc_header::SIGNATURE, RPC_SIGNATURE);
        put(&mut m, r + rpc_header::LENGTH, length as u32);
        put(&mut m, r + rpc_header::FUNCTION, function);
        put(
            &mut m,
            r + rpc_header::RPC_RESULT,
            gsp_rpc::result::RPC_PENDING,
        );
        put(
            &mut m,
            r + rpc_header::RPC_RESULT_PRIVATE,
            gsp_rpc::result::RPC_PENDING,
        );
        m[r + rpc_header::BYTES..r + length].copy_from_slice(payload);
        let sum = gsp_rpc::checksum(&m[..r + length]);
        put(&mut m, element::CHECKSUM, sum);
        m
    }

    /// Write a message (`message`'s, or one broken by the caller) into the
    /// command queue and ring the doorbell.
    pub fn send_bytes(&mut self, t: &mut TinyGpuTransport, m: &[u8]) {
        let write = self.read_u32(t, CMD + tx_header::WRITE_PTR as u64);
        let elems = (m.len() / MSG_SIZE as usize) as u32;
        // Wait for room: GSP's read pointer (in the status queue) must be
        // more than `elems` ahead of ours, one slot staying empty.
        let start = Instant::now();
        loop {
            let gsp_read = if self.linked(t) {
                self.read_u32(t, STAT + u64::from(gsp_rpc::RX_HDR_OFF))
            } else {
                0
            };
            if (gsp_read + MSG_COUNT - write - 1) % MSG_COUNT >= elems {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(2),
                "the command queue never had room"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        for (i, chunk) in m.chunks(MSG_SIZE as usize).enumerate() {
            let slot = (write + i as u32) % MSG_COUNT;
            t.dma_write(
                self.block.id,
                self.at(CMD + u64::from(ENTRY_OFF) + u64::from(slot * MSG_SIZE)),
                chunk,
            )
            .unwrap();
        }
        self.write_u32(
            t,
            CMD + tx_header::WRITE_PTR as u64,
            (write + elems) % MSG_COUNT,
        );
        self.tx_seq += 1;
        t.mmio_write32(u64::from(NV_PGSP_QUEUE_HEAD_0::ADDR), 0)
            .unwrap();
    }

    pub fn send(&mut self, t: &mut TinyGpuTransport, function: u32, payload: &[u8]) {
        let m = self.message(function, payload);
        self.send_bytes(t, &m);
    }

    /// A command longer than one record: its first part under `function`,
    /// the rest in CONTINUATION_RECORDs (reference/gsp.md 5.7).
    pub fn send_long(&mut self, t: &mut TinyGpuTransport, function: u32, payload: &[u8]) {
        for (i, part) in payload.chunks(gsp_rpc::RPC_PAYLOAD_MAX).enumerate() {
            let f = if i == 0 {
                function
            } else {
                gsp_rpc::function::CONTINUATION_RECORD
            };
            self.send(t, f, part);
        }
    }

    /// GSP has published the status queue.
    pub fn linked(&self, t: &mut TinyGpuTransport) -> bool {
        self.read_u32(t, STAT + tx_header::ENTRY_OFF as u64) == ENTRY_OFF
    }

    /// The next status message within `patience`, checked as a receiver
    /// checks it; the host's read pointer moves past it.
    pub fn receive(&mut self, t: &mut TinyGpuTransport, patience: Duration) -> Option<Received> {
        self.take(t, patience, true).map(|(_, m)| m)
    }

    /// As [`HostQueues::receive`], but the checksum is given back, not
    /// checked: what it folds to (0 for a good message).
    pub fn receive_with_checksum(
        &mut self,
        t: &mut TinyGpuTransport,
        patience: Duration,
    ) -> Option<(u32, Received)> {
        self.take(t, patience, false)
    }

    fn take(
        &mut self,
        t: &mut TinyGpuTransport,
        patience: Duration,
        check: bool,
    ) -> Option<(u32, Received)> {
        let start = Instant::now();
        let read_at = CMD + u64::from(gsp_rpc::RX_HDR_OFF);
        loop {
            if self.linked(t) {
                let write = self.read_u32(t, STAT + tx_header::WRITE_PTR as u64);
                let read = self.read_u32(t, read_at);
                if write != read {
                    break;
                }
            }
            if start.elapsed() > patience {
                return None;
            }
            // Any access lets the GSP run; poll gently.
            std::thread::sleep(Duration::from_millis(1));
        }
        let read = self.read_u32(t, read_at);
        let slot = |i: u32| {
            self.at(STAT + u64::from(ENTRY_OFF) + u64::from(((read + i) % MSG_COUNT) * MSG_SIZE))
        };
        let mut first = vec![0u8; MSG_SIZE as usize];
        t.dma_read(self.block.id, slot(0), &mut first).unwrap();
        let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let elems = u32_at(&first, element::ELEM_COUNT);
        let length = u32_at(&first, element::BYTES + rpc_header::LENGTH) as usize;
        assert_eq!(elems as usize, gsp_rpc::elements_for(length), "elemCount");
        let mut m = first;
        for i in 1..elems {
            let mut e = vec![0u8; MSG_SIZE as usize];
            t.dma_read(self.block.id, slot(i), &mut e).unwrap();
            m.extend(e);
        }
        m.truncate(element::BYTES + length);
        let fold = gsp_rpc::checksum(&m);
        if check {
            assert_eq!(fold, 0, "the status message's checksum");
        }
        let seq = u32_at(&m, element::SEQ_NUM);
        assert_eq!(seq, self.rx_seq, "the status queue's sequence");
        self.rx_seq += 1;
        self.write_u32(t, read_at, (read + elems) % MSG_COUNT);
        let r = &m[element::BYTES..];
        assert_eq!(u32_at(r, rpc_header::SIGNATURE), RPC_SIGNATURE);
        Some((
            fold,
            Received {
                seq,
                function: u32_at(r, rpc_header::FUNCTION),
                result: u32_at(r, rpc_header::RPC_RESULT),
                payload: r[rpc_header::BYTES..].to_vec(),
            },
        ))
    }
}
