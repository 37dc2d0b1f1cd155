//! GSP-RM's side of the conversation, which the host does not trust: the
//! status queue (headers, pointers, element counts, checksums, sequence
//! numbers, continuation records) pumped by the host's end of the RPC
//! channel with everything it does with what arrives (CPU-sequencer
//! scripts, error logs, robust-channel events), and the decoders of RPC
//! replies and of what the FSP and GSP-RM's log buffers hold.

use crate::common::{finish, fuzz};
use macuda_fuzz::{combine, outcome, Rng};
use macuda_gsp::bare::{
    device_info, fsp_channel, logs, rm_calls, CardBus, GspRpc, GspStaticInfo, LogFormat, Message,
    Patience, RpcQueue, SharedBlock,
};
use macuda_gsp::sequencer::{self, RegisterBus};
use macuda_hw::gsp_rpc::cpu_sequencer::{self as seq, opcode};
use macuda_hw::gsp_rpc::{
    self, device_info_table as dit, element, event, function, os_error_log, rc_triggered,
    rpc_header, static_info as si, tx_header, ENTRY_OFF, MSGQ_VERSION, MSG_COUNT, MSG_SIZE,
    QUEUE_BYTES, RPC_PAYLOAD_MAX, RX_HDR_OFF, STAT_QUEUE_OFFSET,
};
use macuda_pci::{DmaId, DmaRegion, DmaSegment, PciError};
use std::collections::BTreeMap;
use std::time::Duration;

const INPUTS: u64 = 6_000;
const TIME: Duration = Duration::from_secs(3);
/// A CPU-sequencer script's waits, in all, in the fuzz: a script may ask
/// for seconds (and is refused past its budget); the fuzz keeps each
/// input short.
const SCRIPT_BUDGET: Duration = Duration::from_millis(5);
/// The host's waits for room and for a reply, kept short for the same
/// reason (the status queue is all the input there is; nobody answers).
const ROOM_WAIT: Duration = Duration::from_micros(500);
const REPLY_WAIT: Duration = Duration::from_micros(500);
/// Pumps per input: the first takes what is there; later ones meet a
/// queue whose read pointer moved (or did not, past a bad message).
const PUMPS: usize = 3;
/// The input's layout: the status queue's header, then the host's read
/// pointer, then records.
const HEADER_END: usize = tx_header::BYTES;
const READ_PTR_END: usize = HEADER_END + 4;
/// A record: its first element's slot, its length, then its bytes.
const RECORD_HEAD: usize = 3;
/// Where the host keeps its read pointer into the status queue: in the
/// command queue's receive header.
const HOST_READ_PTR: u64 = gsp_rpc::CMD_QUEUE_OFFSET + RX_HDR_OFF as u64;
/// Bus address of the fuzz bus's first DMA page.
const DMA_BASE: u64 = 0x1_0000_0000;

/// Host memory and registers, all in this process: the queues live in
/// DMA memory the input fills, registers read as what was last written.
#[derive(Default)]
struct FuzzBus {
    dma: BTreeMap<DmaId, Vec<u8>>,
    regs: BTreeMap<u32, u32>,
}

impl FuzzBus {
    fn region(&mut self, id: DmaId, offset: u64, len: u64) -> Result<&mut [u8], PciError> {
        let mem = self.dma.get_mut(&id).ok_or(PciError::OutOfRange {
            what: format!("DMA region {}", id.0),
            offset,
            len,
            size: 0,
        })?;
        let size = mem.len() as u64;
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= size)
            .ok_or(PciError::OutOfRange {
                what: format!("DMA region {}", id.0),
                offset,
                len,
                size,
            })?;
        Ok(&mut mem[offset as usize..end as usize])
    }
}

impl CardBus for FuzzBus {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        Ok(self.regs.get(&reg).copied().unwrap_or(0))
    }

    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        self.regs.insert(reg, value);
        Ok(())
    }

    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        // CAST: the block is under a megabyte.
        let id = DmaId(self.dma.len() as u32 + 1);
        self.dma.insert(id, vec![0; bytes as usize]);
        Ok(DmaRegion {
            id,
            bytes,
            segments: vec![DmaSegment {
                bus_addr: DMA_BASE * u64::from(id.0),
                bytes,
            }],
        })
    }

    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        self.region(id, offset, data.len() as u64)?
            .copy_from_slice(data);
        Ok(())
    }

    fn dma_read(&mut self, id: DmaId, offset: u64, len: u64) -> Result<Vec<u8>, PciError> {
        Ok(self.region(id, offset, len)?.to_vec())
    }

    fn config_read32(&mut self, _offset: u16) -> Result<u32, PciError> {
        Ok(0)
    }

    fn reset_function(&mut self) -> Result<(), PciError> {
        Ok(())
    }

    fn clear_bus_master(&mut self) -> Result<(), PciError> {
        Ok(())
    }
}

impl RegisterBus for FuzzBus {
    fn read(&mut self, addr: u32) -> Result<u32, String> {
        Ok(self.regs.get(&addr).copied().unwrap_or(0))
    }

    fn write(&mut self, addr: u32, value: u32) -> Result<(), String> {
        self.regs.insert(addr, value);
        Ok(())
    }
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// A record as GSP-RM writes one: result 0, checksum over it.
fn record(seq: u32, function: u32, payload: &[u8]) -> Vec<u8> {
    let mut m = macuda_gsp::bare::encode_record(seq, function, payload).expect("a record");
    put_u32(&mut m, element::BYTES + rpc_header::RPC_RESULT, 0);
    put_u32(&mut m, element::CHECKSUM, 0);
    let length = element::BYTES + rpc_header::BYTES + payload.len();
    let sum = gsp_rpc::checksum(&m[..length]);
    put_u32(&mut m, element::CHECKSUM, sum);
    m
}

/// The status queue's header as GSP-RM publishes it, `written` elements
/// in.
fn status_header(written: u32) -> Vec<u8> {
    let mut h = vec![0u8; tx_header::BYTES];
    put_u32(&mut h, tx_header::VERSION, MSGQ_VERSION);
    put_u32(&mut h, tx_header::SIZE, QUEUE_BYTES);
    put_u32(&mut h, tx_header::MSG_SIZE, MSG_SIZE);
    put_u32(&mut h, tx_header::MSG_COUNT, MSG_COUNT);
    put_u32(&mut h, tx_header::WRITE_PTR, written % MSG_COUNT);
    put_u32(&mut h, tx_header::RX_HDR_OFF, RX_HDR_OFF);
    put_u32(&mut h, tx_header::ENTRY_OFF, ENTRY_OFF);
    h
}

/// An input: header, read pointer, then the records from slot `first`
/// on, each cut after its last non-zero byte (the memory is zero).
fn queue_input(first: u32, records: &[Vec<u8>]) -> Vec<u8> {
    let elements: usize = records.iter().map(|r| r.len() / MSG_SIZE as usize).sum();
    // CAST: a few elements.
    let mut input = status_header(first + elements as u32);
    input.extend(first.to_le_bytes());
    let mut slot = first;
    for r in records {
        let used = r.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        // CAST: slots are below MSG_COUNT, records at most 64 KiB.
        input.push(slot as u8);
        input.extend((used as u16).to_le_bytes());
        input.extend(&r[..used]);
        slot = (slot + (r.len() / MSG_SIZE as usize) as u32) % MSG_COUNT;
    }
    input
}

/// A script that writes, modifies, polls (satisfied at once), delays
/// and stores.
fn script() -> Vec<u8> {
    #[rustfmt::skip]
    let commands = [
        opcode::REG_WRITE, 0x11_80f8, 0x5ec0_00ab,
        opcode::REG_MODIFY, 0x11_80f8, 0xff00, 0x1200,
        opcode::REG_POLL, 0xa00, 0, 0, 1000, 0xe1,
        opcode::DELAY_US, 5,
        opcode::REG_STORE, 0xa00, 3,
    ];
    let mut m = vec![0u8; seq::HEADER_BYTES];
    put_u32(&mut m, seq::BUFFER_SIZE_DWORD, 64);
    // CAST: 18 dwords.
    put_u32(&mut m, seq::CMD_INDEX, commands.len() as u32);
    m.extend(commands.iter().flat_map(|w| w.to_le_bytes()));
    m
}

/// What GSP-RM sends: events of each kind, a reply, and a control reply
/// too long for one record, continued in a second.
fn queue_seeds() -> Vec<Vec<u8>> {
    let mut log = vec![0u8; os_error_log::ERR_STRING];
    log.extend(b"Xid 31: MMU fault\0");
    let mut rc = vec![0u8; rc_triggered::BYTES];
    put_u32(&mut rc, rc_triggered::CHID, 3);
    let events = vec![
        record(0, event::OS_ERROR_LOG, &log),
        record(1, event::RC_TRIGGERED, &rc),
        record(2, event::MMU_FAULT_QUEUED, &[]),
        record(3, event::GSP_RUN_CPU_SEQUENCER, &script()),
        record(4, event::GSP_INIT_DONE, &[]),
    ];
    let mut control = vec![0u8; RPC_PAYLOAD_MAX];
    let params = RPC_PAYLOAD_MAX + 64;
    // CAST: under 64 KiB.
    put_u32(
        &mut control,
        gsp_rpc::rm_control::PARAMS_SIZE,
        (params - gsp_rpc::rm_control::BYTES) as u32,
    );
    let rest = vec![0u8; params - RPC_PAYLOAD_MAX];
    let continued = vec![
        record(0, function::GSP_RM_CONTROL, &control),
        record(1, function::CONTINUATION_RECORD, &rest),
        record(2, function::GET_GSP_STATIC_INFO, &[1, 2, 3, 4]),
    ];
    vec![
        queue_input(0, &events),
        queue_input(MSG_COUNT - 2, &events[..2]),
        queue_input(0, &continued),
    ]
}

/// Lay the input out in the shared block.
fn fill(bus: &mut FuzzBus, block: &SharedBlock, input: &[u8]) {
    let id = block.region().id;
    let at = |offset: u64| SharedBlock::mapping_offset(offset);
    let header = &input[..input.len().min(HEADER_END)];
    let _ = bus.dma_write(id, at(STAT_QUEUE_OFFSET), header);
    if let Some(read) = input.get(HEADER_END..READ_PTR_END) {
        let _ = bus.dma_write(id, at(HOST_READ_PTR), read);
    }
    let mut rest = input.get(READ_PTR_END..).unwrap_or(&[]);
    while rest.len() >= RECORD_HEAD {
        let slot = u32::from(rest[0]) % MSG_COUNT;
        let len = usize::from(u16::from_le_bytes([rest[1], rest[2]]));
        let bytes = &rest[RECORD_HEAD..(RECORD_HEAD + len).min(rest.len())];
        rest = &rest[RECORD_HEAD + bytes.len()..];
        let start = u64::from(ENTRY_OFF) + u64::from(slot) * u64::from(MSG_SIZE);
        let room = (u64::from(QUEUE_BYTES) - start) as usize;
        let bytes = &bytes[..bytes.len().min(room)];
        let _ = bus.dma_write(id, at(STAT_QUEUE_OFFSET + start), bytes);
    }
}

fn exercise_queue(input: &[u8]) -> u64 {
    let mut bus = FuzzBus::default();
    let block = match SharedBlock::stage(&mut bus) {
        Ok(b) => b,
        Err(e) => panic!("the block stages on the fuzz bus: {e}"),
    };
    fill(&mut bus, &block, input);
    let queue = RpcQueue::new(block).with_patience(Patience { room: ROOM_WAIT });
    let mut rpc = GspRpc::new(queue);
    rpc.set_reply_wait(REPLY_WAIT);
    rpc.set_sequencer_budget(SCRIPT_BUDGET);
    let mut outcomes = Vec::new();
    for _ in 0..PUMPS {
        outcomes.push(outcome(&rpc.pump(&mut bus)));
    }
    outcomes.push(outcome(&rpc.queue().discard(&mut bus)));
    outcomes.push(outcome(&rpc.call(
        &mut bus,
        function::GET_GSP_STATIC_INFO,
        &[0; 8],
    )));
    outcomes.push(outcome(&rpc.wait_for(
        &mut bus,
        event::GSP_INIT_DONE,
        REPLY_WAIT,
    )));
    let _ = rpc.take_notices();
    let _ = rpc.transcript();
    combine(&outcomes)
}

/// Move one record's slot, or an edge value into one of its element or
/// RPC header fields (found by walking the records).
fn mutate_queue(rng: &mut Rng, input: &mut [u8]) {
    let mut starts = Vec::new();
    let mut at = READ_PTR_END;
    while at + RECORD_HEAD <= input.len() {
        starts.push(at);
        let len = usize::from(u16::from_le_bytes([input[at + 1], input[at + 2]]));
        at += RECORD_HEAD + len;
    }
    let Some(&start) = rng.pick(&starts) else {
        return;
    };
    const FIELDS: [usize; 8] = [
        element::CHECKSUM,
        element::SEQ_NUM,
        element::ELEM_COUNT,
        element::BYTES + rpc_header::LENGTH,
        element::BYTES + rpc_header::FUNCTION,
        element::BYTES + rpc_header::RPC_RESULT,
        element::BYTES + rpc_header::BYTES + gsp_rpc::rm_control::PARAMS_SIZE,
        element::BYTES + rpc_header::BYTES,
    ];
    const EDGES: [u32; 8] = [0, 1, 15, 16, 17, 0xffff, 0x7fff_ffff, u32::MAX];
    if rng.one_in(4) {
        input[start] = rng.next_u32() as u8;
        return;
    }
    let field = start + RECORD_HEAD + *rng.pick(&FIELDS).unwrap_or(&0);
    if let Some(slot) = input.get_mut(field..field + 4) {
        slot.copy_from_slice(&rng.pick(&EDGES).unwrap_or(&0).to_le_bytes());
    }
}

#[test]
fn gsp_queue() {
    let fields = [
        tx_header::VERSION,
        tx_header::SIZE,
        tx_header::MSG_SIZE,
        tx_header::MSG_COUNT,
        tx_header::WRITE_PTR,
        tx_header::RX_HDR_OFF,
        tx_header::ENTRY_OFF,
        HEADER_END,
    ];
    let summary = fuzz("gsp_queue")
        .seeds(queue_seeds())
        .fields(fields)
        .mutate(|rng, input| mutate_queue(rng, input))
        .budget(INPUTS, TIME)
        .run(exercise_queue);
    finish(&summary);
}

/// The decoders of the RPC input's first byte, in order.
const DECODERS: u8 = 8;

/// One payload through the decoder its first byte names (the second is
/// a parameter: an FSP command, a parameter size).
fn exercise_rpc(input: &[u8]) -> u64 {
    let (Some(&which), Some(&param)) = (input.first(), input.get(1)) else {
        return 0;
    };
    let p = &input[2..];
    let message = |function| Message {
        seq: 0,
        function,
        result: 0,
        payload: p.to_vec(),
    };
    let o = match which % DECODERS {
        0 => outcome(&GspStaticInfo::decode(p)),
        1 => outcome(&device_info::decode_page(p)),
        2 => outcome(&fsp_channel::parse_response(param, p)),
        3 => outcome(&sequencer::run_within(
            &mut FuzzBus::default(),
            p,
            SCRIPT_BUDGET,
        )),
        4 => outcome(&rm_calls::decode_alloc_reply(
            &message(function::GSP_RM_ALLOC),
            usize::from(param),
        )),
        5 => outcome(&rm_calls::decode_control_reply(
            &message(function::GSP_RM_CONTROL),
            usize::from(param),
        )),
        6 => outcome(&rm_calls::decode_free_reply(&message(function::FREE))),
        _ => {
            let lookup = |pointer: u64| {
                pointer.is_multiple_of(2).then(|| LogFormat {
                    file: "fuzz.c".into(),
                    line: 1,
                    format: "%d %s %x %llu %%\n".into(),
                    argument_count: param,
                    print_level: 0,
                })
            };
            let _ = logs::put_of(p);
            let decoded = logs::decode(p, &lookup);
            if let Ok(records) = &decoded {
                for r in records {
                    let _ = r.render();
                }
            }
            outcome(&decoded)
        }
    };
    combine(&[u64::from(which % DECODERS), o])
}

#[test]
fn gsp_rpc() {
    let with = |which: u8, param: u8, payload: Vec<u8>| {
        let mut v = vec![which, param];
        v.extend(payload);
        v
    };
    let seeds = vec![
        with(0, 0, vec![0; si::BYTES]),
        with(1, 0, vec![0; dit::BYTES]),
        with(2, 0, fsp_channel::packet(0x15, &[0; 16])),
        with(3, 0, script()),
        with(4, 8, vec![0; gsp_rpc::rm_alloc::BYTES + 8]),
        with(5, 8, vec![0; gsp_rpc::rm_control::BYTES + 8]),
        with(6, 0, vec![0; 32]),
        with(7, 2, vec![0; 256]),
    ];
    let summary = fuzz("gsp_rpc")
        .seeds(seeds)
        .fields([0usize, 1, 2, 6, 10, 14, 18, 22, 26, 42, 46])
        .budget(INPUTS * 2, TIME)
        .run(exercise_rpc);
    finish(&summary);
}
