//! The host's end of the FSP's EMEM channel 0 (reference gsp.md 4.3-4.4):
//! a packet is written dword by dword through the EMEM port, the queue's
//! tail set to its last dword and its head written last, which is the
//! doorbell. The FSP answers in the same EMEM, between its message
//! queue's head and tail; the host reads it and acknowledges by moving the
//! tail to the head. Every wait is bounded, and a timeout names the
//! registers as they were.

use super::error::{BareError, Context};
use super::CardBus;
use macuda_hw::fsp::{
    self, nvdm, CommandResponse, COMMAND_RESPONSE_BYTES, EMEM_BLOCK_DWORDS, EMEM_CHANNEL_BYTES,
    PACKET_HEADER_BYTES,
};
use macuda_hw::regs::{
    Field, NV_PFSP_EMEMC_0, NV_PFSP_EMEMD_0, NV_PFSP_FALCON_COMMON_SCRATCH_GROUP_2_0,
    NV_PFSP_MSGQ_HEAD_0, NV_PFSP_MSGQ_TAIL_0, NV_PFSP_QUEUE_HEAD_0, NV_PFSP_QUEUE_TAIL_0,
};
use std::time::{Duration, Instant};

/// EMEM is read and written a dword at a time.
const DWORD_BYTES: usize = 4;

/// How long the channel waits for the FSP: tinygrad gives the COT
/// response 10 s; nouveau about 1-2 s, so 10 s is generous.
pub const FSP_RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the registers are read while waiting.
pub const FSP_POLL_INTERVAL: Duration = Duration::from_micros(200);

/// EMEMC's auto-increment fields, in the order `regs` declares them
/// (offs, blk, aincw, aincr; a test checks the names).
const EMEMC_AINCW: Field = NV_PFSP_EMEMC_0::FIELDS[2];
const EMEMC_AINCR: Field = NV_PFSP_EMEMC_0::FIELDS[3];

/// EMEMC at dword 0 of block 0, advancing on writes (`aincw`) or reads
/// (`aincr`).
fn ememc_from_start(advance: Field) -> u32 {
    advance.set(0, 1)
}

/// The port's dword position, from EMEMC.
fn ememc_position(ememc: u32) -> u32 {
    let c = NV_PFSP_EMEMC_0(ememc);
    c.blk() * EMEM_BLOCK_DWORDS + c.offs()
}

/// The channel's timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FspChannel {
    pub timeout: Duration,
    pub poll: Duration,
}

impl Default for FspChannel {
    fn default() -> FspChannel {
        FspChannel {
            timeout: FSP_RESPONSE_TIMEOUT,
            poll: FSP_POLL_INTERVAL,
        }
    }
}

fn read(bus: &mut dyn CardBus, reg: u32, name: &str) -> Result<u32, BareError> {
    bus.read32(reg).context(|| format!("reading {name}"))
}

fn write(bus: &mut dyn CardBus, reg: u32, value: u32, name: &str) -> Result<(), BareError> {
    bus.write32(reg, value)
        .context(|| format!("writing {value:#x} to {name}"))
}

/// The queue registers and the FSP's scratch, for a timeout's message.
fn queue_state(bus: &mut dyn CardBus) -> String {
    let mut s = String::new();
    for (name, reg) in [
        ("QUEUE_HEAD", NV_PFSP_QUEUE_HEAD_0::ADDR),
        ("QUEUE_TAIL", NV_PFSP_QUEUE_TAIL_0::ADDR),
        ("MSGQ_HEAD", NV_PFSP_MSGQ_HEAD_0::ADDR),
        ("MSGQ_TAIL", NV_PFSP_MSGQ_TAIL_0::ADDR),
        (
            "SCRATCH_GROUP_2(0)",
            NV_PFSP_FALCON_COMMON_SCRATCH_GROUP_2_0::ADDR,
        ),
    ] {
        if !s.is_empty() {
            s.push_str(", ");
        }
        match bus.read32(reg) {
            Ok(v) => s.push_str(&format!("{name} {v:#x}")),
            Err(e) => s.push_str(&format!("{name} unreadable ({e})")),
        }
    }
    s
}

/// A packet: the MCTP single-packet header, the NVDM header, the payload
/// zero-padded to whole dwords.
pub fn packet(nvdm_type: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(PACKET_HEADER_BYTES + payload.len() + DWORD_BYTES);
    p.extend_from_slice(&fsp::mctp_single_packet().to_le_bytes());
    p.extend_from_slice(&fsp::nvdm_header(nvdm_type).to_le_bytes());
    p.extend_from_slice(payload);
    p.resize(p.len().next_multiple_of(DWORD_BYTES), 0);
    p
}

/// Check a response's headers and decode it as the answer to `command`.
/// A non-zero error code is returned, not judged: the caller decides.
///
/// # Errors
/// [`BareError::BadResponse`] naming the header or field that is wrong.
pub fn parse_response(command: u8, msg: &[u8]) -> Result<CommandResponse, BareError> {
    let bad = |why: String| BareError::BadResponse { why };
    if msg.len() < PACKET_HEADER_BYTES + COMMAND_RESPONSE_BYTES {
        return Err(bad(format!(
            "{} bytes, a command response is {}",
            msg.len(),
            PACKET_HEADER_BYTES + COMMAND_RESPONSE_BYTES
        )));
    }
    let dword = |i: usize| u32::from_le_bytes([msg[i], msg[i + 1], msg[i + 2], msg[i + 3]]);
    let mctp = dword(0);
    if mctp & fsp::mctp_single_packet() != fsp::mctp_single_packet() {
        return Err(bad(format!(
            "MCTP header {mctp:#010x} is not a single packet (SOM and EOM)"
        )));
    }
    let header = dword(DWORD_BYTES);
    if fsp::nvdm_type_of(header) != Some(nvdm::FSP_RESPONSE) {
        return Err(bad(format!(
            "NVDM header {header:#010x}, expected {:#010x} (FSP_RESPONSE)",
            fsp::nvdm_header(nvdm::FSP_RESPONSE)
        )));
    }
    let r = CommandResponse::decode(&msg[PACKET_HEADER_BYTES..])
        .ok_or_else(|| bad("the command response is cut short".into()))?;
    if r.command_nvdm_type != u32::from(command) {
        return Err(bad(format!(
            "it answers NVDM type {:#x}, the command was {command:#x}",
            r.command_nvdm_type
        )));
    }
    Ok(r)
}

impl FspChannel {
    /// Poll `ready` on the registers until it holds, or time out.
    fn wait(
        &self,
        bus: &mut dyn CardBus,
        what: &'static str,
        mut ready: impl FnMut(&mut dyn CardBus) -> Result<bool, BareError>,
    ) -> Result<(), BareError> {
        let start = Instant::now();
        loop {
            if ready(bus)? {
                return Ok(());
            }
            if start.elapsed() >= self.timeout {
                return Err(BareError::Timeout {
                    what,
                    waited: start.elapsed(),
                    state: queue_state(bus),
                });
            }
            std::thread::sleep(self.poll);
        }
    }

    /// Write one packet and ring the doorbell.
    ///
    /// # Errors
    /// [`BareError::PacketTooLarge`], a timeout while the queue is busy,
    /// [`BareError::EmemPosition`] when the port did not advance, and the
    /// transport's.
    pub fn send(
        &self,
        bus: &mut dyn CardBus,
        nvdm_type: u8,
        payload: &[u8],
    ) -> Result<(), BareError> {
        let p = packet(nvdm_type, payload);
        if p.len() > EMEM_CHANNEL_BYTES {
            return Err(BareError::PacketTooLarge {
                bytes: p.len(),
                max: EMEM_CHANNEL_BYTES,
            });
        }
        // RM's order: the command queue empty and no message pending.
        self.wait(bus, "the FSP's queues to be empty", |bus| {
            let qh = read(bus, NV_PFSP_QUEUE_HEAD_0::ADDR, "NV_PFSP_QUEUE_HEAD(0)")?;
            let qt = read(bus, NV_PFSP_QUEUE_TAIL_0::ADDR, "NV_PFSP_QUEUE_TAIL(0)")?;
            let mh = read(bus, NV_PFSP_MSGQ_HEAD_0::ADDR, "NV_PFSP_MSGQ_HEAD(0)")?;
            let mt = read(bus, NV_PFSP_MSGQ_TAIL_0::ADDR, "NV_PFSP_MSGQ_TAIL(0)")?;
            Ok(qh == qt && mh == mt)
        })?;
        write(
            bus,
            NV_PFSP_EMEMC_0::ADDR,
            ememc_from_start(EMEMC_AINCW),
            "NV_PFSP_EMEMC(0)",
        )?;
        for word in p.chunks_exact(DWORD_BYTES) {
            let w = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
            write(bus, NV_PFSP_EMEMD_0::ADDR, w, "NV_PFSP_EMEMD(0)")?;
        }
        // CAST: at most 1 KiB.
        let dwords = (p.len() / DWORD_BYTES) as u32;
        let at = ememc_position(read(bus, NV_PFSP_EMEMC_0::ADDR, "NV_PFSP_EMEMC(0)")?);
        if at != dwords {
            return Err(BareError::EmemPosition {
                expected: dwords,
                found: at,
            });
        }
        // CAST: at most 1 KiB.
        let tail = (p.len() - DWORD_BYTES) as u32;
        write(
            bus,
            NV_PFSP_QUEUE_TAIL_0::ADDR,
            tail,
            "NV_PFSP_QUEUE_TAIL(0)",
        )?;
        write(bus, NV_PFSP_QUEUE_HEAD_0::ADDR, 0, "NV_PFSP_QUEUE_HEAD(0)")
    }

    /// Wait for the FSP's message, read it and acknowledge it.
    ///
    /// # Errors
    /// A timeout naming the queue registers, [`BareError::BadResponse`]
    /// for a length outside the channel, and the transport's.
    pub fn receive(&self, bus: &mut dyn CardBus) -> Result<Vec<u8>, BareError> {
        let mut pointers = (0, 0);
        self.wait(bus, "the FSP's response", |bus| {
            let head = read(bus, NV_PFSP_MSGQ_HEAD_0::ADDR, "NV_PFSP_MSGQ_HEAD(0)")?;
            let tail = read(bus, NV_PFSP_MSGQ_TAIL_0::ADDR, "NV_PFSP_MSGQ_TAIL(0)")?;
            pointers = (head, tail);
            Ok(head != tail)
        })?;
        let (head, tail) = pointers;
        // The tail points at the message's last dword.
        let len = tail
            .checked_sub(head)
            .map(|d| d as usize + DWORD_BYTES)
            .filter(|&l| l <= EMEM_CHANNEL_BYTES && l % DWORD_BYTES == 0)
            .ok_or_else(|| BareError::BadResponse {
                why: format!("the message queue runs from {head:#x} to {tail:#x}"),
            })?;
        write(
            bus,
            NV_PFSP_EMEMC_0::ADDR,
            ememc_from_start(EMEMC_AINCR),
            "NV_PFSP_EMEMC(0)",
        )?;
        let mut msg = Vec::with_capacity(len);
        for _ in 0..len / DWORD_BYTES {
            let w = read(bus, NV_PFSP_EMEMD_0::ADDR, "NV_PFSP_EMEMD(0)")?;
            msg.extend_from_slice(&w.to_le_bytes());
        }
        // RM's acknowledgement: the tail, then the head, at the head.
        write(bus, NV_PFSP_MSGQ_TAIL_0::ADDR, head, "NV_PFSP_MSGQ_TAIL(0)")?;
        write(bus, NV_PFSP_MSGQ_HEAD_0::ADDR, head, "NV_PFSP_MSGQ_HEAD(0)")?;
        Ok(msg)
    }

    /// Send a command and return the FSP's response to it, whatever its
    /// error code.
    ///
    /// # Errors
    /// As [`FspChannel::send`], [`FspChannel::receive`] and
    /// [`parse_response`].
    pub fn exchange(
        &self,
        bus: &mut dyn CardBus,
        nvdm_type: u8,
        payload: &[u8],
    ) -> Result<CommandResponse, BareError> {
        self.send(bus, nvdm_type, payload)?;
        let msg = self.receive(bus)?;
        parse_response(nvdm_type, &msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bare::staging::tests::FakeBus;

    #[test]
    fn ememc_values_are_rms() {
        assert_eq!((EMEMC_AINCW.name, EMEMC_AINCR.name), ("aincw", "aincr"));
        assert_eq!(ememc_from_start(EMEMC_AINCW), 0x0100_0000);
        assert_eq!(ememc_from_start(EMEMC_AINCR), 0x0200_0000);
        assert_eq!(ememc_position((3 << 8) | (5 << 2)), 3 * 64 + 5);
    }

    #[test]
    fn a_cot_packet_is_868_bytes() {
        let p = packet(nvdm::COT, &[0; 860]);
        assert_eq!(p.len(), 868);
        assert_eq!(&p[4..8], &0x1410_DE7Eu32.to_le_bytes());
        assert_eq!(packet(nvdm::COT, &[1]).len(), 12);
    }

    fn response(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn responses_are_checked_header_by_header() {
        let ok = response(&[0xC000_0000, 0x1510_DE7E, 0, 0x14, 0]);
        assert_eq!(parse_response(nvdm::COT, &ok).unwrap().error_code, 0);
        let refused = response(&[0xC000_0000, 0x1510_DE7E, 0, 0x14, 0x1D]);
        assert_eq!(
            parse_response(nvdm::COT, &refused).unwrap().error_code,
            0x1D
        );
        for (bad, says) in [
            (response(&[0x4000_0000, 0x1510_DE7E, 0, 0x14, 0]), "MCTP"),
            (
                response(&[0xC000_0000, 0x1410_DE7E, 0, 0x14, 0]),
                "NVDM header",
            ),
            (response(&[0xC000_0000, 0x1510_DE7E, 0, 0x16, 0]), "answers"),
            (response(&[0xC000_0000, 0x1510_DE7E]), "bytes"),
        ] {
            let e = parse_response(nvdm::COT, &bad).unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
        }
    }

    #[test]
    fn an_fsp_that_never_answers_is_a_timeout_naming_the_queues() {
        // The fake's registers hold what was written: the packet goes in,
        // EMEMC never advances, so use receive alone.
        let mut bus = FakeBus::new(1 << 20);
        let ch = FspChannel {
            timeout: Duration::from_millis(20),
            poll: Duration::from_millis(1),
        };
        match ch.receive(&mut bus) {
            Err(BareError::Timeout { what, state, .. }) => {
                assert_eq!(what, "the FSP's response");
                assert!(state.contains("MSGQ_HEAD 0x0"), "{state}");
            }
            other => panic!("{other:?}"),
        }
        // And a port that does not advance is caught before the doorbell.
        match ch.send(&mut bus, nvdm::COT, &[0; 8]) {
            Err(BareError::EmemPosition {
                expected: 4,
                found: 0,
            }) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(
            bus.regs.get(&NV_PFSP_QUEUE_HEAD_0::ADDR),
            None,
            "no doorbell"
        );
    }
}
