//! The FSP as the host sees it: EMEM channel 0 behind its control and data
//! ports, the host-to-FSP queue whose head write is the doorbell, the
//! FSP-to-host message queue, and the chain of trust: a COT request is
//! checked field by field against the FMC image it names in host memory
//! (its SHA-384, the public key the card trusts, the ECDSA P-384 signature,
//! the FRTS and size fields, the boot parameters' address), answered with
//! a command response, and on success the FMC runs (`fmc.rs`). A failed
//! check answers with an error code, leaves it in the FSP's debug scratch,
//! and boots nothing: the host then waits in vain for the GSP, as on a card.

use crate::boot_record::{self, BootRecord};
use crate::dma::Dma;
use crate::fmc::{self, FmcBoot};
use macuda_hw::fsp::{
    self, nvdm, CommandResponse, CotPayload, COT_HASH_BYTES, COT_KEY_FIELD_BYTES,
    COT_PAYLOAD_BYTES, COT_SIGNATURE_FIELD_BYTES, EMEM_BLOCK_DWORDS, EMEM_CHANNEL_BYTES,
    FMC_IMAGE_HEADER_BYTES, PACKET_HEADER_BYTES,
};
use macuda_hw::regs::{
    NV_PFSP_EMEMC_0, NV_PFSP_EMEMD_0, NV_PFSP_FALCON_COMMON_SCRATCH_GROUP_2_0, NV_PFSP_MSGQ_HEAD_0,
    NV_PFSP_MSGQ_TAIL_0, NV_PFSP_QUEUE_HEAD_0, NV_PFSP_QUEUE_TAIL_0,
};
use sha2::{Digest, Sha256, Sha384};

/// The FRTS region the FSP carves: 1 MiB.
pub const FRTS_BYTES: u32 = 1 << 20;
/// FRTS sits at a 2 MiB-aligned offset from the end of FB.
const FRTS_ALIGN: u64 = 2 << 20;
/// A P-384 public key as the COT carries it: 0x04, X, Y.
const P384_KEY_BYTES: usize = 97;
/// A P-384 signature: r then s, big-endian.
const P384_SIGNATURE_BYTES: usize = 96;
/// The FMC images are a few hundred KiB; the FSP reads no more than this.
const MAX_FMC_BYTES: u64 = 4 << 20;
/// The FSP's debug scratch words.
const SCRATCH_WORDS: u32 = 4;

/// Why the FSP refused a request: the code it answers with (the sim's own
/// numbering: the real FSP's codes for these are not published; RM maps
/// every non-zero code to an error) and what it found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FspFailure {
    #[error("the packet is malformed: {0}")]
    Packet(String),
    #[error("NVDM type {0:#x} is not one the sim's FSP takes")]
    Unsupported(u8),
    #[error("the COT payload: {0}")]
    Payload(String),
    #[error("the FSP's DMA read at {address:#x} failed: {why}")]
    Dma { address: u64, why: String },
    #[error("the FMC image's SHA-384 is not the hash the request carries (computed {computed}, sent {sent})")]
    Hash { computed: String, sent: String },
    #[error("the public key is not the one this card trusts (its SHA-256 is {0})")]
    UntrustedKey(String),
    #[error("the signature does not verify over the image's hash with that key")]
    Signature,
    #[error("the FMC refused to boot GSP-RM: {0}")]
    Fmc(String),
}

impl FspFailure {
    pub fn code(&self) -> u32 {
        match self {
            FspFailure::Packet(_) => 0x01,
            FspFailure::Unsupported(_) => 0x02,
            FspFailure::Payload(_) => 0x03,
            FspFailure::Dma { .. } => 0x04,
            FspFailure::Hash { .. } => 0x05,
            FspFailure::UntrustedKey(_) => 0x06,
            FspFailure::Signature => 0x07,
            FspFailure::Fmc(_) => 0x08,
        }
    }
}

/// What a card's FSP takes: the COT version and, where it checks one, the
/// SHA-256 of the FMC public key fused into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trust {
    pub cot_version: u16,
    /// `None`: the key is not checked (GH100's RSA keys: the sim verifies
    /// the image's hash only).
    pub key_sha256: Option<[u8; 32]>,
}

pub struct Fsp {
    trust: Trust,
    emem: Vec<u8>,
    /// EMEMC: the port position (dword in block, block) and its
    /// auto-increment flags.
    ememc: u32,
    queue_head: u32,
    queue_tail: u32,
    msgq_head: u32,
    msgq_tail: u32,
    scratch: [u32; SCRATCH_WORDS as usize],
    /// Every request's outcome, in order.
    outcomes: Vec<Result<(), FspFailure>>,
    /// What the last COT request handed the card, until taken.
    record: Option<BootRecord>,
}

impl Fsp {
    pub fn new(trust: Trust) -> Fsp {
        Fsp {
            trust,
            emem: vec![0; EMEM_CHANNEL_BYTES],
            ememc: 0,
            queue_head: 0,
            queue_tail: 0,
            msgq_head: 0,
            msgq_tail: 0,
            scratch: [0; SCRATCH_WORDS as usize],
            outcomes: Vec::new(),
            record: None,
        }
    }

    /// The record of the last COT request whose payload decoded, once
    /// (`crate::boot_record`).
    pub fn take_record(&mut self) -> Option<BootRecord> {
        self.record.take()
    }

    /// Every request's outcome so far.
    pub fn outcomes(&self) -> &[Result<(), FspFailure>] {
        &self.outcomes
    }

    /// An FSP register's value; `None` for any other address.
    pub fn read(&mut self, address: u32) -> Option<u32> {
        Some(match address {
            NV_PFSP_EMEMC_0::ADDR => self.ememc,
            NV_PFSP_EMEMD_0::ADDR => {
                let v = self.emem_word(self.position());
                if NV_PFSP_EMEMC_0(self.ememc).aincr() != 0 {
                    self.advance();
                }
                v
            }
            NV_PFSP_QUEUE_HEAD_0::ADDR => self.queue_head,
            NV_PFSP_QUEUE_TAIL_0::ADDR => self.queue_tail,
            NV_PFSP_MSGQ_HEAD_0::ADDR => self.msgq_head,
            NV_PFSP_MSGQ_TAIL_0::ADDR => self.msgq_tail,
            a if scratch_index(a).is_some() => self.scratch[scratch_index(a)?],
            _ => return None,
        })
    }

    /// Write an FSP register (`false`: not an FSP register). A queue-head
    /// write is the doorbell: the packet is taken and answered at once,
    /// and a COT that passes runs the FMC, whose boot is returned.
    pub fn write(
        &mut self,
        address: u32,
        value: u32,
        dma: &mut dyn Dma,
        fb_bytes: u64,
    ) -> (bool, Option<FmcBoot>) {
        match address {
            NV_PFSP_EMEMC_0::ADDR => self.ememc = value,
            NV_PFSP_EMEMD_0::ADDR => {
                self.set_emem_word(self.position(), value);
                if NV_PFSP_EMEMC_0(self.ememc).aincw() != 0 {
                    self.advance();
                }
            }
            NV_PFSP_QUEUE_TAIL_0::ADDR => self.queue_tail = value,
            NV_PFSP_QUEUE_HEAD_0::ADDR => {
                self.queue_head = value;
                return (true, self.doorbell(dma, fb_bytes));
            }
            NV_PFSP_MSGQ_HEAD_0::ADDR => self.msgq_head = value,
            NV_PFSP_MSGQ_TAIL_0::ADDR => self.msgq_tail = value,
            a if scratch_index(a).is_some() => {}
            _ => return (false, None),
        }
        (true, None)
    }

    fn position(&self) -> u32 {
        let c = NV_PFSP_EMEMC_0(self.ememc);
        c.blk() * EMEM_BLOCK_DWORDS + c.offs()
    }

    /// Move the port to the next dword (carrying into the block number).
    fn advance(&mut self) {
        let next = self.position() + 1;
        let blk = next / EMEM_BLOCK_DWORDS;
        let offs = next % EMEM_BLOCK_DWORDS;
        let keep =
            self.ememc & !(NV_PFSP_EMEMC_0::FIELDS[0].mask() | NV_PFSP_EMEMC_0::FIELDS[1].mask());
        self.ememc = keep | (offs << 2) | ((blk & 0xFF) << 8);
    }

    fn emem_word(&self, dword: u32) -> u32 {
        let at = dword as usize * 4;
        self.emem
            .get(at..at + 4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn set_emem_word(&mut self, dword: u32, value: u32) {
        let at = dword as usize * 4;
        if let Some(b) = self.emem.get_mut(at..at + 4) {
            b.copy_from_slice(&value.to_le_bytes());
        }
    }

    /// Take the packet between head and tail, answer it, and boot the FMC
    /// if it was a COT that passed every check.
    fn doorbell(&mut self, dma: &mut dyn Dma, fb_bytes: u64) -> Option<FmcBoot> {
        let (head, tail) = (self.queue_head as usize, self.queue_tail as usize);
        self.queue_head = self.queue_tail;
        let packet = if tail >= head && tail + 4 <= EMEM_CHANNEL_BYTES {
            Ok(self.emem[head..tail + 4].to_vec())
        } else {
            Err(FspFailure::Packet(format!(
                "head {head:#x} and tail {tail:#x} do not frame a packet in {EMEM_CHANNEL_BYTES} bytes of EMEM"
            )))
        };
        let nvdm_type = packet.as_ref().ok().and_then(|p| packet_type(p).ok());
        let outcome = packet.and_then(|p| self.serve(&p, dma, fb_bytes));
        if let (Some(r), Err(failure)) = (self.record.as_mut(), &outcome) {
            r.refused = Some(failure.to_string());
        }
        let (error_code, boot) = match outcome {
            Ok(boot) => {
                self.outcomes.push(Ok(()));
                (0, Some(boot))
            }
            Err(failure) => {
                tracing::warn!("simulated FSP refused a request: {failure}");
                self.scratch[0] = failure.code();
                let code = failure.code();
                self.outcomes.push(Err(failure));
                (code, None)
            }
        };
        self.respond(nvdm_type.unwrap_or(0), error_code);
        boot
    }

    fn serve(
        &mut self,
        packet: &[u8],
        dma: &mut dyn Dma,
        fb_bytes: u64,
    ) -> Result<FmcBoot, FspFailure> {
        match packet_type(packet)? {
            nvdm::COT => {
                // Recorded before the FMC writes its layout into the meta.
                let body = &packet[PACKET_HEADER_BYTES..];
                if let Some(cot) = CotPayload::decode(body) {
                    self.record = Some(boot_record::record(&cot, body.len(), &*dma));
                }
                let cot = self.check_cot(packet, &*dma, fb_bytes)?;
                fmc::boot(&cot, dma, fb_bytes).map_err(FspFailure::Fmc)
            }
            other => Err(FspFailure::Unsupported(other)),
        }
    }

    /// Every field of a COT request against the image it names.
    fn check_cot(
        &self,
        packet: &[u8],
        dma: &dyn Dma,
        fb_bytes: u64,
    ) -> Result<CotPayload, FspFailure> {
        let body = &packet[PACKET_HEADER_BYTES..];
        let bad = |what: String| Err(FspFailure::Payload(what));
        // RM sends exactly the payload; tinygrad pads it with 4 zero bytes.
        if !(body.len() == COT_PAYLOAD_BYTES || body.len() == COT_PAYLOAD_BYTES + 4) {
            return bad(format!(
                "{} bytes after the headers; the payload is {COT_PAYLOAD_BYTES}",
                body.len()
            ));
        }
        if body[COT_PAYLOAD_BYTES..].iter().any(|&b| b != 0) {
            return bad("the padding after the payload is not zero".into());
        }
        let cot = CotPayload::decode(body).expect("length checked");
        if cot.version != self.trust.cot_version {
            return bad(format!(
                "version {}; this card takes {}",
                cot.version, self.trust.cot_version
            ));
        }
        if usize::from(cot.size) != COT_PAYLOAD_BYTES {
            return bad(format!(
                "size {}; the payload is {COT_PAYLOAD_BYTES}",
                cot.size
            ));
        }
        if cot.frts_vidmem_size != FRTS_BYTES {
            return bad(format!(
                "frtsVidmemSize {:#x}; FRTS is {FRTS_BYTES:#x}",
                cot.frts_vidmem_size
            ));
        }
        if cot.frts_vidmem_offset == 0
            || !cot.frts_vidmem_offset.is_multiple_of(FRTS_ALIGN)
            || cot.frts_vidmem_offset + u64::from(FRTS_BYTES) > fb_bytes
        {
            return bad(format!(
                "frtsVidmemOffset {:#x} is not a 2 MiB-aligned offset from the end of FB",
                cot.frts_vidmem_offset
            ));
        }
        if cot.frts_sysmem_offset != 0 || cot.frts_sysmem_size != 0 {
            return bad("a sysmem FRTS buffer is not modelled; send frtsSysmem* 0".into());
        }
        if cot.gsp_boot_args_sysmem_offset == 0 {
            return bad("gspBootArgsSysmemOffset is 0".into());
        }
        let image = read_fmc_image(dma, cot.gsp_fmc_sysmem_offset)?;
        let computed: [u8; COT_HASH_BYTES] = Sha384::digest(&image).into();
        if computed != cot.hash384 {
            return Err(FspFailure::Hash {
                computed: hex(&computed[..8]),
                sent: hex(&cot.hash384[..8]),
            });
        }
        if self.trust.cot_version == fsp::COT_VERSION_GB20X {
            verify_p384(&self.trust, &cot)?;
        }
        Ok(cot)
    }

    fn respond(&mut self, command: u8, error_code: u32) {
        let response = CommandResponse {
            task_id: 0,
            command_nvdm_type: u32::from(command),
            error_code,
        };
        let mut msg = Vec::with_capacity(PACKET_HEADER_BYTES + 12);
        msg.extend_from_slice(&fsp::mctp_single_packet().to_le_bytes());
        msg.extend_from_slice(&fsp::nvdm_header(nvdm::FSP_RESPONSE).to_le_bytes());
        msg.extend_from_slice(&response.encode());
        self.emem[..msg.len()].copy_from_slice(&msg);
        self.msgq_head = 0;
        // The tail names the last dword.
        self.msgq_tail = (msg.len() - 4) as u32;
    }
}

/// Which of the debug scratch words `address` is.
fn scratch_index(address: u32) -> Option<usize> {
    let first = NV_PFSP_FALCON_COMMON_SCRATCH_GROUP_2_0::ADDR;
    (address >= first && address < first + 4 * SCRATCH_WORDS && address.is_multiple_of(4))
        .then(|| ((address - first) / 4) as usize)
}

/// The NVDM type of a single-packet message.
fn packet_type(packet: &[u8]) -> Result<u8, FspFailure> {
    if packet.len() < PACKET_HEADER_BYTES {
        return Err(FspFailure::Packet(format!(
            "{} bytes: no room for the headers",
            packet.len()
        )));
    }
    let word =
        |i: usize| u32::from_le_bytes([packet[i], packet[i + 1], packet[i + 2], packet[i + 3]]);
    let mctp = word(0);
    if mctp != fsp::mctp_single_packet() {
        return Err(FspFailure::Packet(format!(
            "MCTP header {mctp:#010x}: a single packet has SOM and EOM set and nothing else"
        )));
    }
    fsp::nvdm_type_of(word(4)).ok_or_else(|| {
        FspFailure::Packet(format!(
            "NVDM header {:#010x} is not NVIDIA's vendor-defined type",
            word(4)
        ))
    })
}

/// The FMC image at `address`: its header says how long it is.
fn read_fmc_image(dma: &dyn Dma, address: u64) -> Result<Vec<u8>, FspFailure> {
    let fail = |why: String| FspFailure::Dma { address, why };
    let mut header = [0u8; FMC_IMAGE_HEADER_BYTES];
    dma.read(address, &mut header).map_err(fail)?;
    let len = fsp::fmc_image_len(&header);
    if len < FMC_IMAGE_HEADER_BYTES as u64 || len > MAX_FMC_BYTES {
        return Err(FspFailure::Payload(format!(
            "the FMC image's header gives {len} bytes, not an FMC image's size"
        )));
    }
    let mut image = vec![0u8; len as usize];
    dma.read(address, &mut image).map_err(fail)?;
    Ok(image)
}

/// GB20x: the key must be the fused one, and the signature (r and s,
/// big-endian) must verify over the image's SHA-384 with it. Both fields
/// are zero past their P-384 lengths.
fn verify_p384(trust: &Trust, cot: &CotPayload) -> Result<(), FspFailure> {
    use p384::ecdsa::signature::hazmat::PrehashVerifier;
    let key = &cot.public_key[..P384_KEY_BYTES];
    let sig = &cot.signature[..P384_SIGNATURE_BYTES];
    if cot.public_key[P384_KEY_BYTES..COT_KEY_FIELD_BYTES]
        .iter()
        .any(|&b| b != 0)
        || cot.signature[P384_SIGNATURE_BYTES..COT_SIGNATURE_FIELD_BYTES]
            .iter()
            .any(|&b| b != 0)
    {
        return Err(FspFailure::Payload(
            "bytes past the P-384 key or signature are not zero".into(),
        ));
    }
    let key_hash: [u8; 32] = Sha256::digest(key).into();
    if trust.key_sha256.is_some_and(|fused| fused != key_hash) {
        return Err(FspFailure::UntrustedKey(hex(&key_hash)));
    }
    let verifying = p384::ecdsa::VerifyingKey::from_sec1_bytes(key)
        .map_err(|_| FspFailure::UntrustedKey(hex(&key_hash)))?;
    let signature = p384::ecdsa::Signature::from_slice(sig).map_err(|_| FspFailure::Signature)?;
    verifying
        .verify_prehash(&cot.hash384, &signature)
        .map_err(|_| FspFailure::Signature)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emem_port_advances_across_blocks_and_reads_back_its_position() {
        let mut f = Fsp::new(Trust {
            cot_version: 2,
            key_sha256: None,
        });
        struct NoDma;
        impl Dma for NoDma {
            fn read(&self, _: u64, _: &mut [u8]) -> Result<(), String> {
                Err("none".into())
            }
            fn write(&mut self, _: u64, _: &[u8]) -> Result<(), String> {
                Err("none".into())
            }
        }
        let aincw = 1 << 24;
        f.write(
            NV_PFSP_EMEMC_0::ADDR,
            aincw | (63 << 2),
            &mut NoDma,
            1 << 30,
        );
        f.write(NV_PFSP_EMEMD_0::ADDR, 0x1111, &mut NoDma, 1 << 30);
        f.write(NV_PFSP_EMEMD_0::ADDR, 0x2222, &mut NoDma, 1 << 30);
        let c = NV_PFSP_EMEMC_0(f.read(NV_PFSP_EMEMC_0::ADDR).unwrap());
        assert_eq!((c.blk(), c.offs(), c.aincw()), (1, 1, 1));
        f.write(
            NV_PFSP_EMEMC_0::ADDR,
            (1 << 25) | (63 << 2),
            &mut NoDma,
            1 << 30,
        );
        assert_eq!(f.read(NV_PFSP_EMEMD_0::ADDR), Some(0x1111));
        assert_eq!(f.read(NV_PFSP_EMEMD_0::ADDR), Some(0x2222));
        assert_eq!(f.read(0x1234), None);
    }
}
