//! The message queues, the host's end (reference/gsp.md 5): commands
//! written into the command queue with their element and RPC headers,
//! sequence numbers and checksums, wrapping round the ring, split into
//! continuation records when longer than one record, then the doorbell;
//! status messages read back with every check RM's own receiver makes
//! (header, element count, checksum, sequence, version and signature)
//! and continuation records put back together.
//!
//! The status queue is written by firmware the host does not trust to be
//! well-formed: every field read from it is checked before it is used,
//! a malformed message is a typed error (the read pointer stays where it
//! was, so the queue is not read past a message that did not check out),
//! and every wait is bounded.

use super::rpc_error::RpcError;
use super::shared::SharedBlock;
use super::transcript::{Direction, RpcTranscript};
use super::CardBus;
use macuda_hw::gsp_rpc::{
    self, element, function, rm_alloc, rm_control, rpc_header, tx_header, DOORBELL_VALUE,
    ENTRY_OFF, MESSAGE_MAX_BYTES, MSGQ_VERSION, MSG_COUNT, MSG_SIZE, QUEUE_BYTES,
    RPC_HEADER_VERSION, RPC_PAYLOAD_MAX, RPC_SIGNATURE,
};
use macuda_hw::le::{put_u32, u32_at};
use macuda_hw::regs::NV_PGSP_QUEUE_HEAD_0;
use std::time::{Duration, Instant};

const CMD: u64 = gsp_rpc::CMD_QUEUE_OFFSET;
const STAT: u64 = gsp_rpc::STAT_QUEUE_OFFSET;
/// The host's read pointer into the status queue lives in the command
/// queue (SWAP_RX), GSP-RM's into the command queue in the status queue.
const HOST_READ_PTR: u64 = CMD + gsp_rpc::RX_HDR_OFF as u64;
const GSP_READ_PTR: u64 = STAT + gsp_rpc::RX_HDR_OFF as u64;
const ELEMENT: usize = MSG_SIZE as usize;
/// Between looks at the queue while waiting: short, as a reply often
/// comes within microseconds, but not a busy spin over a socket.
const POLL_INTERVAL: Duration = Duration::from_micros(200);

/// The longest message put back together from continuation records: RM
/// controls' parameters are kilobytes, so a header claiming more than
/// this is corrupt, and the host does not buffer what it claims.
pub const REASSEMBLED_MAX: usize = 4 << 20;

/// A message GSP-RM sent: a reply under its command's function, or an
/// event (`function` >= 0x1000).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub seq: u32,
    pub function: u32,
    /// `rpc_result`: 0, an RM status, or an NV_VGPU_MSG_RESULT_*.
    pub result: u32,
    pub payload: Vec<u8>,
}

/// How long the queue waits, for each thing it waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Patience {
    /// For room in the command queue: RM waits up to a second an element.
    pub room: Duration,
}

impl Default for Patience {
    fn default() -> Self {
        Patience {
            room: Duration::from_secs(1),
        }
    }
}

/// One record, ready for the ring: element header with sequence number,
/// element count and checksum, RPC header, payload, zero-padded to whole
/// elements.
///
/// # Errors
/// A payload larger than one record carries.
pub fn encode_record(seq: u32, function: u32, payload: &[u8]) -> Result<Vec<u8>, RpcError> {
    if payload.len() > RPC_PAYLOAD_MAX {
        return Err(RpcError::TooLarge {
            bytes: payload.len(),
            max: RPC_PAYLOAD_MAX,
        });
    }
    let length = rpc_header::BYTES + payload.len();
    let elements = gsp_rpc::elements_for(length);
    let mut m = vec![0u8; elements * ELEMENT];
    let r = element::BYTES;
    // CAST: at most 16 elements and 64 KiB.
    put_u32(&mut m, element::SEQ_NUM, seq);
    put_u32(&mut m, element::ELEM_COUNT, elements as u32);
    put_u32(&mut m, r + rpc_header::HEADER_VERSION, RPC_HEADER_VERSION);
    put_u32(&mut m, r + rpc_header::SIGNATURE, RPC_SIGNATURE);
    put_u32(&mut m, r + rpc_header::LENGTH, length as u32);
    put_u32(&mut m, r + rpc_header::FUNCTION, function);
    put_u32(
        &mut m,
        r + rpc_header::RPC_RESULT,
        gsp_rpc::result::RPC_PENDING,
    );
    put_u32(
        &mut m,
        r + rpc_header::RPC_RESULT_PRIVATE,
        gsp_rpc::result::RPC_PENDING,
    );
    m[r + rpc_header::BYTES..r + length].copy_from_slice(payload);
    let sum = gsp_rpc::checksum(&m[..r + length]);
    put_u32(&mut m, element::CHECKSUM, sum);
    Ok(m)
}

/// The payload bytes a message of `function` has in all, where its own
/// header says (a reply to an allocation or a control echoes its
/// parameter size): what continuation records must bring it to.
fn whole_length(function: u32, payload: &[u8]) -> Option<usize> {
    let at = |o: usize| payload.get(o..o + 4).map(|_| u32_at(payload, o) as usize);
    match function {
        function::GSP_RM_ALLOC => Some(rm_alloc::BYTES + at(rm_alloc::PARAMS_SIZE)?),
        function::GSP_RM_CONTROL => Some(rm_control::BYTES + at(rm_control::PARAMS_SIZE)?),
        _ => None,
    }
}

/// The host's end of the two queues.
pub struct RpcQueue {
    block: SharedBlock,
    tx_seq: u32,
    rx_seq: u32,
    linked: bool,
    /// A message coming in continuation records, and its whole length.
    pending: Option<(Message, usize)>,
    patience: Patience,
    transcript: RpcTranscript,
}

impl RpcQueue {
    pub fn new(block: SharedBlock) -> RpcQueue {
        RpcQueue {
            block,
            tx_seq: 0,
            rx_seq: 0,
            linked: false,
            pending: None,
            patience: Patience::default(),
            transcript: RpcTranscript::default(),
        }
    }

    /// The last messages both ways, for reports.
    pub fn transcript(&self) -> &RpcTranscript {
        &self.transcript
    }

    pub fn with_patience(mut self, patience: Patience) -> RpcQueue {
        self.patience = patience;
        self
    }

    pub fn block(&self) -> &SharedBlock {
        &self.block
    }

    /// The sequence number the next record sent will carry.
    pub fn next_tx_seq(&self) -> u32 {
        self.tx_seq
    }

    /// Send `function(payload)`: one record, or a first record and
    /// continuation records for a payload longer than one carries, each
    /// followed by the doorbell.
    ///
    /// # Errors
    /// The transport's, or no room in the command queue in time.
    pub fn send(
        &mut self,
        bus: &mut dyn CardBus,
        function: u32,
        payload: &[u8],
    ) -> Result<(), RpcError> {
        let mut parts = payload.chunks(RPC_PAYLOAD_MAX);
        let first = parts.next().unwrap_or(&[]);
        self.transcript
            .note(Direction::Sent, self.tx_seq, function, 0, payload.len());
        let record = encode_record(self.tx_seq, function, first)?;
        self.send_record(bus, &record)?;
        for part in parts {
            let record = encode_record(self.tx_seq, function::CONTINUATION_RECORD, part)?;
            self.send_record(bus, &record)?;
        }
        Ok(())
    }

    /// Put one encoded record (whole elements, as [`encode_record`] makes
    /// them) into the ring and ring the doorbell. Its sequence number is
    /// the caller's; the queue's count moves on by one. For tests and
    /// replays that send a record as it was captured or broken on purpose.
    ///
    /// # Errors
    /// The transport's, a record not a whole number of elements or longer
    /// than a record may be, or no room in time.
    pub fn send_record(&mut self, bus: &mut dyn CardBus, record: &[u8]) -> Result<(), RpcError> {
        if record.is_empty()
            || !record.len().is_multiple_of(ELEMENT)
            || record.len() > MESSAGE_MAX_BYTES
        {
            return Err(RpcError::TooLarge {
                bytes: record.len(),
                max: MESSAGE_MAX_BYTES,
            });
        }
        // CAST: at most 16.
        let elements = (record.len() / ELEMENT) as u32;
        let write = self.pointer(bus, CMD + tx_header::WRITE_PTR as u64, "command write")?;
        let start = Instant::now();
        loop {
            // Before GSP-RM links, its read pointer is the zeroed block's.
            let gsp_read = self.pointer(bus, GSP_READ_PTR, "GSP-RM's command read")?;
            let free = (gsp_read + MSG_COUNT - write - 1) % MSG_COUNT;
            if free >= elements {
                break;
            }
            let waited = start.elapsed();
            if waited >= self.patience.room * elements {
                return Err(RpcError::NoRoom { elements, waited });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        for (i, chunk) in record.chunks(ELEMENT).enumerate() {
            // CAST: i < 16.
            let slot = (write + i as u32) % MSG_COUNT;
            self.block.write(bus, element_at(CMD, slot), chunk)?;
        }
        self.block.write_u32(
            bus,
            CMD + tx_header::WRITE_PTR as u64,
            (write + elements) % MSG_COUNT,
        )?;
        self.tx_seq = self.tx_seq.wrapping_add(1);
        bus.write32(NV_PGSP_QUEUE_HEAD_0::ADDR, DOORBELL_VALUE)?;
        Ok(())
    }

    /// GSP-RM has published the status queue, and its header is what
    /// RM's `msgqRxLink` accepts.
    ///
    /// # Errors
    /// The transport's, or a published header that is wrong.
    pub fn linked(&mut self, bus: &mut dyn CardBus) -> Result<bool, RpcError> {
        if self.linked {
            return Ok(true);
        }
        // GSP-RM writes entryOff last: until then the header is not whole.
        let header = self.block.read(bus, STAT, tx_header::BYTES as u64)?;
        if u32_at(&header, tx_header::ENTRY_OFF) != ENTRY_OFF {
            return Ok(false);
        }
        for (at, want, field) in [
            (tx_header::VERSION, MSGQ_VERSION, "version"),
            (tx_header::SIZE, QUEUE_BYTES, "size"),
            (tx_header::MSG_SIZE, MSG_SIZE, "msgSize"),
            (tx_header::MSG_COUNT, MSG_COUNT, "msgCount"),
        ] {
            let got = u32_at(&header, at);
            if got != want {
                return Err(RpcError::StatusHeader { field, got, want });
            }
        }
        let rx = u32_at(&header, tx_header::RX_HDR_OFF);
        // The read pointer (4 bytes) at rxHdrOff must lie between the
        // header and the elements; an offset near 2^32 must not wrap.
        if rx < tx_header::BYTES as u32 || rx.checked_add(4).is_none_or(|end| end > ENTRY_OFF) {
            return Err(RpcError::StatusHeader {
                field: "rxHdrOff",
                got: rx,
                want: gsp_rpc::RX_HDR_OFF,
            });
        }
        self.linked = true;
        Ok(true)
    }

    /// Wait until GSP-RM has published the status queue.
    ///
    /// # Errors
    /// Not within `within`, a wrong header, or the transport's.
    pub fn wait_linked(&mut self, bus: &mut dyn CardBus, within: Duration) -> Result<(), RpcError> {
        let start = Instant::now();
        while !self.linked(bus)? {
            let waited = start.elapsed();
            if waited >= within {
                return Err(RpcError::NotLinked { waited });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        Ok(())
    }

    /// The next whole message, if one is there now (continuation records
    /// put back together; a message whose records are not all in yet
    /// waits for the next call).
    ///
    /// # Errors
    /// A message that does not check out, or the transport's.
    pub fn poll(&mut self, bus: &mut dyn CardBus) -> Result<Option<Message>, RpcError> {
        let m = self.poll_records(bus)?;
        if let Some(m) = &m {
            self.transcript.note(
                Direction::Received,
                m.seq,
                m.function,
                m.result,
                m.payload.len(),
            );
        }
        Ok(m)
    }

    /// [`RpcQueue::poll`]'s work, before the transcript sees its message.
    fn poll_records(&mut self, bus: &mut dyn CardBus) -> Result<Option<Message>, RpcError> {
        // A ring's worth of records per look, however fast GSP-RM refills
        // it: a message still incomplete after that waits for the next.
        for _ in 0..MSG_COUNT {
            let Some(record) = self.take_record(bus)? else {
                break;
            };
            if record.function == function::CONTINUATION_RECORD {
                let Some((mut message, whole)) = self.pending.take() else {
                    return Err(RpcError::StrayContinuation { seq: record.seq });
                };
                message.payload.extend(record.payload);
                let got = message.payload.len();
                if got > whole {
                    return Err(RpcError::ContinuationOverrun {
                        function: message.function,
                        got,
                        whole,
                    });
                }
                if got == whole {
                    return Ok(Some(message));
                }
                self.pending = Some((message, whole));
                continue;
            }
            if let Some((message, whole)) = self.pending.take() {
                return Err(RpcError::ContinuationCut {
                    function: message.function,
                    had: message.payload.len(),
                    whole,
                    seq: record.seq,
                    by: record.function,
                });
            }
            match whole_length(record.function, &record.payload) {
                Some(whole) if whole > REASSEMBLED_MAX => {
                    return Err(RpcError::TooLarge {
                        bytes: whole,
                        max: REASSEMBLED_MAX,
                    });
                }
                Some(whole)
                    if record.payload.len() == RPC_PAYLOAD_MAX && whole > RPC_PAYLOAD_MAX =>
                {
                    self.pending = Some((record, whole));
                }
                _ => return Ok(Some(record)),
            }
        }
        Ok(None)
    }

    /// The next whole message within `within`.
    ///
    /// # Errors
    /// [`RpcError::Timeout`] naming `awaiting`, a message that does not
    /// check out, or the transport's.
    pub fn receive(
        &mut self,
        bus: &mut dyn CardBus,
        within: Duration,
        awaiting: &str,
    ) -> Result<Message, RpcError> {
        let start = Instant::now();
        loop {
            if let Some(m) = self.poll(bus)? {
                return Ok(m);
            }
            let waited = start.elapsed();
            if waited >= within {
                return Err(RpcError::Timeout {
                    awaiting: awaiting.to_string(),
                    waited,
                });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// A queue pointer, checked to name an element.
    fn pointer(
        &self,
        bus: &mut dyn CardBus,
        at: u64,
        which: &'static str,
    ) -> Result<u32, RpcError> {
        let value = self.block.read_u32(bus, at)?;
        if value >= MSG_COUNT {
            return Err(RpcError::Pointer {
                which,
                value,
                count: MSG_COUNT,
            });
        }
        Ok(value)
    }

    /// One record from the status queue, checked; the read pointer moves
    /// past it only when it checks out.
    fn take_record(&mut self, bus: &mut dyn CardBus) -> Result<Option<Message>, RpcError> {
        if !self.linked(bus)? {
            return Ok(None);
        }
        let write = self.pointer(bus, STAT + tx_header::WRITE_PTR as u64, "status write")?;
        let read = self.pointer(bus, HOST_READ_PTR, "host's status read")?;
        if write == read {
            return Ok(None);
        }
        let (mut m, elem_count) = self.frame(bus, read, write)?;
        let seq = self.rx_seq;
        for i in 1..elem_count {
            let slot = (read + i) % MSG_COUNT;
            m.extend(
                self.block
                    .read(bus, element_at(STAT, slot), ELEMENT as u64)?,
            );
        }
        // `frame` checked the length against the elements read.
        let length = u32_at(&m, element::BYTES + rpc_header::LENGTH) as usize;
        m.truncate(element::BYTES + length);
        if gsp_rpc::checksum(&m) != 0 {
            let stored = u32_at(&m, element::CHECKSUM);
            put_u32(&mut m, element::CHECKSUM, 0);
            return Err(RpcError::Checksum {
                seq,
                function: u32_at(&m, element::BYTES + rpc_header::FUNCTION),
                stored,
                computed: gsp_rpc::checksum(&m),
            });
        }
        let got = u32_at(&m, element::SEQ_NUM);
        if got != seq {
            return Err(RpcError::OutOfSequence { got, expected: seq });
        }
        let rpc = &m[element::BYTES..];
        let (version, signature) = (
            u32_at(rpc, rpc_header::HEADER_VERSION),
            u32_at(rpc, rpc_header::SIGNATURE),
        );
        if version != RPC_HEADER_VERSION || signature != RPC_SIGNATURE {
            return Err(RpcError::Header {
                seq,
                version,
                signature,
                want_version: RPC_HEADER_VERSION,
                want_signature: RPC_SIGNATURE,
            });
        }
        let message = Message {
            seq,
            function: u32_at(rpc, rpc_header::FUNCTION),
            result: u32_at(rpc, rpc_header::RPC_RESULT),
            payload: rpc[rpc_header::BYTES..].to_vec(),
        };
        self.block
            .write_u32(bus, HOST_READ_PTR, (read + elem_count) % MSG_COUNT)?;
        self.rx_seq = self.rx_seq.wrapping_add(1);
        Ok(Some(message))
    }
}

impl RpcQueue {
    /// The first element of the message at `read`, and how many elements
    /// it spans, once its length, element count and what was written
    /// agree.
    fn frame(
        &self,
        bus: &mut dyn CardBus,
        read: u32,
        write: u32,
    ) -> Result<(Vec<u8>, u32), RpcError> {
        let seq = self.rx_seq;
        let m = self
            .block
            .read(bus, element_at(STAT, read), ELEMENT as u64)?;
        let elem_count = u32_at(&m, element::ELEM_COUNT);
        let length = u32_at(&m, element::BYTES + rpc_header::LENGTH) as usize;
        let max = MESSAGE_MAX_BYTES - element::BYTES;
        if !(rpc_header::BYTES..=max).contains(&length) {
            return Err(RpcError::Length {
                seq,
                length,
                min: rpc_header::BYTES,
                max,
            });
        }
        let want = gsp_rpc::elements_for(length);
        if elem_count as usize != want {
            return Err(RpcError::ElementCount {
                seq,
                elem_count,
                length,
                want,
            });
        }
        let written = (write + MSG_COUNT - read) % MSG_COUNT;
        if elem_count > written {
            return Err(RpcError::Truncated {
                seq,
                elem_count,
                written,
            });
        }
        Ok((m, elem_count))
    }

    /// Drop the status message at the read pointer, one that failed its
    /// checks, so the conversation can go on past it (for a caller that
    /// decided a corrupt message is not fatal and wants the next). Only a
    /// message whose framing (length, element count) is sound can be
    /// stepped over: broken framing leaves no way to find the next.
    ///
    /// # Errors
    /// Not linked, broken framing, or the transport's.
    pub fn discard(&mut self, bus: &mut dyn CardBus) -> Result<(), RpcError> {
        if !self.linked(bus)? {
            return Err(RpcError::NotLinked {
                waited: Duration::ZERO,
            });
        }
        let write = self.pointer(bus, STAT + tx_header::WRITE_PTR as u64, "status write")?;
        let read = self.pointer(bus, HOST_READ_PTR, "host's status read")?;
        if write == read {
            return Ok(());
        }
        let (_, elem_count) = self.frame(bus, read, write)?;
        self.block
            .write_u32(bus, HOST_READ_PTR, (read + elem_count) % MSG_COUNT)?;
        self.rx_seq = self.rx_seq.wrapping_add(1);
        self.pending = None;
        Ok(())
    }
}

/// Block offset of element `slot` of the queue at `queue`.
fn element_at(queue: u64, slot: u32) -> u64 {
    queue + u64::from(ENTRY_OFF) + u64::from(slot) * u64::from(MSG_SIZE)
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::fake::FakeCard;
    use super::*;
    use macuda_hw::gsp_rpc::event;
    use macuda_hw::le::u32_at;

    /// GSP-RM's side, played on the fake card's memory.
    pub struct Gsp {
        pub tx_seq: u32,
        pub rx_seq: u32,
    }

    impl Gsp {
        /// Publish the status queue's header (entryOff last).
        pub fn link(card: &mut FakeCard, q: &RpcQueue) -> Gsp {
            let mut h = super::super::shared::command_queue_header();
            put_u32(&mut h, tx_header::ENTRY_OFF, 0);
            poke(card, q, STAT, &h);
            poke(
                card,
                q,
                STAT + tx_header::ENTRY_OFF as u64,
                &ENTRY_OFF.to_le_bytes(),
            );
            Gsp {
                tx_seq: 0,
                rx_seq: 0,
            }
        }

        /// Post a record as GSP-RM would (or broken by `mangle`).
        pub fn post_with(
            &mut self,
            card: &mut FakeCard,
            q: &RpcQueue,
            function: u32,
            result: u32,
            payload: &[u8],
            mangle: impl FnOnce(&mut Vec<u8>),
        ) {
            let mut m = encode_record(self.tx_seq, function, payload).unwrap();
            let r = element::BYTES;
            put_u32(&mut m, r + rpc_header::RPC_RESULT, result);
            put_u32(&mut m, element::CHECKSUM, 0);
            let length = r + rpc_header::BYTES + payload.len();
            let sum = gsp_rpc::checksum(&m[..length]);
            put_u32(&mut m, element::CHECKSUM, sum);
            mangle(&mut m);
            let write = peek(card, q, STAT + tx_header::WRITE_PTR as u64);
            for (i, chunk) in m.chunks(ELEMENT).enumerate() {
                let slot = (write + i as u32) % MSG_COUNT;
                poke(card, q, element_at(STAT, slot), chunk);
            }
            let next = (write + (m.len() / ELEMENT) as u32) % MSG_COUNT;
            poke(
                card,
                q,
                STAT + tx_header::WRITE_PTR as u64,
                &next.to_le_bytes(),
            );
            self.tx_seq += 1;
        }

        pub fn post(&mut self, card: &mut FakeCard, q: &RpcQueue, function: u32, payload: &[u8]) {
            self.post_with(card, q, function, 0, payload, |_| {});
        }

        /// Take every command waiting: (function, payload) of each record.
        pub fn take(&mut self, card: &mut FakeCard, q: &RpcQueue) -> Vec<(u32, Vec<u8>)> {
            let mut out = Vec::new();
            loop {
                let write = peek(card, q, CMD + tx_header::WRITE_PTR as u64);
                let read = peek(card, q, GSP_READ_PTR);
                if write == read {
                    return out;
                }
                let first = card
                    .bytes(
                        q.block().region().id,
                        SharedBlock::mapping_offset(element_at(CMD, read)),
                        ELEMENT,
                    )
                    .to_vec();
                let n = u32_at(&first, element::ELEM_COUNT);
                let mut m = first;
                for i in 1..n {
                    let at = SharedBlock::mapping_offset(element_at(CMD, (read + i) % MSG_COUNT));
                    m.extend(card.bytes(q.block().region().id, at, ELEMENT));
                }
                let length = u32_at(&m, element::BYTES + rpc_header::LENGTH) as usize;
                m.truncate(element::BYTES + length);
                assert_eq!(gsp_rpc::checksum(&m), 0, "command checksum");
                assert_eq!(u32_at(&m, element::SEQ_NUM), self.rx_seq, "command seq");
                self.rx_seq += 1;
                let rpc = &m[element::BYTES..];
                out.push((
                    u32_at(rpc, rpc_header::FUNCTION),
                    rpc[rpc_header::BYTES..].to_vec(),
                ));
                poke(
                    card,
                    q,
                    GSP_READ_PTR,
                    &((read + n) % MSG_COUNT).to_le_bytes(),
                );
            }
        }
    }

    pub fn poke(card: &mut FakeCard, q: &RpcQueue, offset: u64, data: &[u8]) {
        card.bytes_mut(
            q.block().region().id,
            SharedBlock::mapping_offset(offset),
            data.len(),
        )
        .copy_from_slice(data);
    }

    pub fn peek(card: &FakeCard, q: &RpcQueue, offset: u64) -> u32 {
        u32_at(
            card.bytes(
                q.block().region().id,
                SharedBlock::mapping_offset(offset),
                4,
            ),
            0,
        )
    }

    pub fn linked_queue() -> (FakeCard, RpcQueue, Gsp) {
        let mut card = FakeCard::default();
        let q = RpcQueue::new(SharedBlock::stage(&mut card).unwrap());
        let gsp = Gsp::link(&mut card, &q);
        (card, q, gsp)
    }

    const SOON: Duration = Duration::from_millis(20);

    #[test]
    fn commands_carry_sequence_checksum_and_ring_the_doorbell() {
        let (mut card, mut q, mut gsp) = linked_queue();
        q.send(&mut card, function::GSP_SET_SYSTEM_INFO, &[7; 928])
            .unwrap();
        q.send(&mut card, function::NOP, &[]).unwrap();
        let got = gsp.take(&mut card, &q);
        assert_eq!(got[0], (function::GSP_SET_SYSTEM_INFO, vec![7; 928]));
        assert_eq!(got[1], (function::NOP, vec![]));
        let doorbells = card
            .writes
            .iter()
            .filter(|w| **w == (NV_PGSP_QUEUE_HEAD_0::ADDR, DOORBELL_VALUE))
            .count();
        assert_eq!(doorbells, 2);
    }

    #[test]
    fn the_ring_wraps_both_ways() {
        let (mut card, mut q, mut gsp) = linked_queue();
        // 5-element messages: the 13th starts at slot 60 and wraps.
        let payload = vec![0xA5; 4 * ELEMENT];
        for i in 0..30u32 {
            q.send(&mut card, 0x100 + i, &payload).unwrap();
            let got = gsp.take(&mut card, &q);
            assert_eq!(got, [(0x100 + i, payload.clone())]);
            gsp.post(&mut card, &q, 0x100 + i, &payload);
            let m = q.receive(&mut card, SOON, "an echo").unwrap();
            assert_eq!(
                (m.seq, m.function, m.payload.len()),
                (i, 0x100 + i, payload.len())
            );
        }
    }

    #[test]
    fn a_full_command_queue_is_a_bounded_wait() {
        let (mut card, q, _gsp) = linked_queue();
        let mut q = q.with_patience(Patience {
            room: Duration::from_millis(5),
        });
        let big = vec![0; RPC_PAYLOAD_MAX];
        let mut sent = 0;
        let e = loop {
            match q.send(&mut card, function::NOP, &big) {
                Ok(()) => sent += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(sent, 3, "62 usable elements hold three 16-element records");
        assert!(matches!(e, RpcError::NoRoom { elements: 16, .. }), "{e}");
    }

    #[test]
    fn long_commands_go_out_in_continuation_records() {
        let (mut card, mut q, mut gsp) = linked_queue();
        let payload: Vec<u8> = (0..RPC_PAYLOAD_MAX * 2 + 9).map(|i| i as u8).collect();
        q.send(&mut card, function::SET_REGISTRY, &payload).unwrap();
        let got = gsp.take(&mut card, &q);
        let functions: Vec<u32> = got.iter().map(|g| g.0).collect();
        assert_eq!(
            functions,
            [
                function::SET_REGISTRY,
                function::CONTINUATION_RECORD,
                function::CONTINUATION_RECORD
            ]
        );
        let joined: Vec<u8> = got.into_iter().flat_map(|g| g.1).collect();
        assert_eq!(joined, payload);
    }

    #[test]
    fn long_replies_come_back_whole_from_continuation_records() {
        let (mut card, mut q, mut gsp) = linked_queue();
        let params = RPC_PAYLOAD_MAX + 100;
        let mut whole = vec![3u8; rm_control::BYTES + params];
        put_u32(&mut whole, rm_control::PARAMS_SIZE, params as u32);
        let (first, rest) = whole.split_at(RPC_PAYLOAD_MAX);
        gsp.post(&mut card, &q, function::GSP_RM_CONTROL, first);
        assert_eq!(q.poll(&mut card).unwrap(), None, "not whole yet");
        gsp.post(&mut card, &q, function::CONTINUATION_RECORD, rest);
        let m = q.poll(&mut card).unwrap().unwrap();
        assert_eq!((m.function, m.payload), (function::GSP_RM_CONTROL, whole));
    }

    #[test]
    fn a_reply_claiming_more_than_can_be_reassembled_is_refused() {
        let (mut card, mut q, mut gsp) = linked_queue();
        let mut first = vec![0u8; RPC_PAYLOAD_MAX];
        put_u32(&mut first, rm_control::PARAMS_SIZE, u32::MAX);
        gsp.post(&mut card, &q, function::GSP_RM_CONTROL, &first);
        assert!(matches!(
            q.poll(&mut card),
            Err(RpcError::TooLarge {
                max: REASSEMBLED_MAX,
                ..
            })
        ));
    }

    #[test]
    fn stray_and_cut_continuations_are_errors() {
        let (mut card, mut q, mut gsp) = linked_queue();
        gsp.post(&mut card, &q, function::CONTINUATION_RECORD, &[1]);
        assert!(matches!(
            q.poll(&mut card),
            Err(RpcError::StrayContinuation { seq: 0 })
        ));
        let (mut card, mut q, mut gsp) = linked_queue();
        let mut first = vec![0u8; RPC_PAYLOAD_MAX];
        put_u32(&mut first, rm_alloc::PARAMS_SIZE, RPC_PAYLOAD_MAX as u32);
        gsp.post(&mut card, &q, function::GSP_RM_ALLOC, &first);
        gsp.post(&mut card, &q, event::POST_EVENT, &[0; 32]);
        let e = q.poll(&mut card).unwrap_err();
        assert!(matches!(e, RpcError::ContinuationCut { seq: 1, .. }), "{e}");
    }

    fn broken(mangle: impl FnOnce(&mut Vec<u8>)) -> RpcError {
        let (mut card, mut q, mut gsp) = linked_queue();
        gsp.post_with(&mut card, &q, event::GSP_INIT_DONE, 0, &[0; 4], mangle);
        let e = q.receive(&mut card, SOON, "GSP_INIT_DONE").unwrap_err();
        // Not consumed: the next look finds the same fault, not garbage.
        let again = q.poll(&mut card).unwrap_err();
        assert_eq!(e.to_string(), again.to_string());
        e
    }

    #[test]
    fn corrupt_status_messages_are_typed_errors() {
        let e = broken(|m| m[element::BYTES + rpc_header::BYTES] ^= 0x10);
        match e {
            RpcError::Checksum {
                seq: 0,
                function: event::GSP_INIT_DONE,
                stored,
                computed,
            } => assert_ne!(stored, computed),
            other => panic!("{other}"),
        }
        let e = broken(|m| {
            put_u32(m, element::SEQ_NUM, 9);
            put_u32(m, element::CHECKSUM, 0);
            let sum = gsp_rpc::checksum(&m[..element::BYTES + rpc_header::BYTES + 4]);
            put_u32(m, element::CHECKSUM, sum);
        });
        assert!(
            matches!(
                e,
                RpcError::OutOfSequence {
                    got: 9,
                    expected: 0
                }
            ),
            "{e}"
        );
        let e = broken(|m| put_u32(m, element::ELEM_COUNT, 3));
        assert!(
            matches!(e, RpcError::ElementCount { elem_count: 3, .. }),
            "{e}"
        );
        let e = broken(|m| put_u32(m, element::BYTES + rpc_header::LENGTH, 1 << 20));
        assert!(matches!(e, RpcError::Length { .. }), "{e}");
        let e = broken(|m| {
            // A 2-element length with a matching count, but one written.
            put_u32(m, element::BYTES + rpc_header::LENGTH, 5000);
            put_u32(m, element::ELEM_COUNT, 2);
        });
        assert!(matches!(e, RpcError::Truncated { written: 1, .. }), "{e}");
        let e = broken(|m| {
            put_u32(m, element::BYTES + rpc_header::SIGNATURE, 0xDEAD);
            put_u32(m, element::CHECKSUM, 0);
            let sum = gsp_rpc::checksum(&m[..element::BYTES + rpc_header::BYTES + 4]);
            put_u32(m, element::CHECKSUM, sum);
        });
        assert!(
            matches!(
                e,
                RpcError::Header {
                    signature: 0xDEAD,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_corrupt_message_can_be_stepped_over() {
        let (mut card, mut q, mut gsp) = linked_queue();
        gsp.post_with(&mut card, &q, event::POST_EVENT, 0, &[0; 32], |m| {
            m[90] ^= 1
        });
        gsp.post(&mut card, &q, event::GSP_INIT_DONE, &[0; 4]);
        assert!(matches!(q.poll(&mut card), Err(RpcError::Checksum { .. })));
        q.discard(&mut card).unwrap();
        let m = q.poll(&mut card).unwrap().unwrap();
        assert_eq!((m.seq, m.function), (1, event::GSP_INIT_DONE));
    }

    #[test]
    fn hostile_pointers_and_headers_are_errors_not_hangs() {
        let (mut card, mut q, _gsp) = linked_queue();
        poke(
            &mut card,
            &q,
            STAT + tx_header::WRITE_PTR as u64,
            &u32::MAX.to_le_bytes(),
        );
        assert!(matches!(
            q.poll(&mut card),
            Err(RpcError::Pointer {
                value: u32::MAX,
                ..
            })
        ));
        let (mut card, mut q, _gsp) = linked_queue();
        poke(&mut card, &q, GSP_READ_PTR, &500u32.to_le_bytes());
        assert!(matches!(
            q.send(&mut card, function::NOP, &[]),
            Err(RpcError::Pointer { value: 500, .. })
        ));
        let mut card = FakeCard::default();
        let mut q = RpcQueue::new(SharedBlock::stage(&mut card).unwrap());
        assert_eq!(q.poll(&mut card).unwrap(), None, "not linked yet");
        let e = q.wait_linked(&mut card, SOON).unwrap_err();
        assert!(matches!(e, RpcError::NotLinked { .. }), "{e}");
        Gsp::link(&mut card, &q);
        poke(
            &mut card,
            &q,
            STAT + tx_header::MSG_SIZE as u64,
            &64u32.to_le_bytes(),
        );
        assert!(matches!(
            q.poll(&mut card),
            Err(RpcError::StatusHeader {
                field: "msgSize",
                got: 64,
                ..
            })
        ));
        let (mut card, mut q, _gsp) = linked_queue();
        let e = q
            .receive(&mut card, SOON, "GSP_RM_ALLOC's reply")
            .unwrap_err();
        assert!(e.to_string().contains("GSP_RM_ALLOC's reply"), "{e}");
    }
}
