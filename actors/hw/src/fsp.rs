//! The FSP's message format on Hopper and Blackwell: one MCTP packet in
//! EMEM, its NVDM header, and the two payloads of the chain of trust: the
//! host's COT request and the FSP's command response. Layouts from
//! reference/gsp.md section 4.2 and 4.4 (NVDM_PAYLOAD_COT is packed); the
//! NVDM types are pinned to the oracle.

use crate::le::{put_u32, put_u64, u32_at, u64_at};

/// MCTP transport header (dword 0): start and end of message.
pub const MCTP_SOM: u32 = 1 << 31;
pub const MCTP_EOM: u32 = 1 << 30;
/// MCTP message type: vendor-defined, PCI vendor id follows.
pub const MCTP_TYPE_VENDOR_PCI: u32 = 0x7E;
/// The vendor id in the NVDM header.
pub const NVDM_VENDOR_NVIDIA: u32 = 0x10DE;
/// EMEM is 1 KiB a channel; no packet may exceed it.
pub const EMEM_CHANNEL_BYTES: usize = 1024;
/// EMEM is addressed in blocks of 64 dwords.
pub const EMEM_BLOCK_DWORDS: u32 = 64;

/// NVDM message types (the oracle's NVDM_TYPE_*).
pub mod nvdm {
    pub const COT: u8 = 0x14;
    pub const FSP_RESPONSE: u8 = 0x15;
    /// Every type this crate names, for the oracle test.
    pub const ALL: &[(&str, u8)] = &[
        ("NVDM_TYPE_COT", COT),
        ("NVDM_TYPE_FSP_RESPONSE", FSP_RESPONSE),
    ];
}

/// Dword 0 of a single-packet message.
pub const fn mctp_single_packet() -> u32 {
    MCTP_SOM | MCTP_EOM
}

/// Dword 1: an NVDM header of `nvdm_type`.
pub const fn nvdm_header(nvdm_type: u8) -> u32 {
    ((nvdm_type as u32) << 24) | (NVDM_VENDOR_NVIDIA << 8) | MCTP_TYPE_VENDOR_PCI
}

/// The NVDM type of a header dword, if it is NVIDIA's vendor-defined one.
pub const fn nvdm_type_of(header: u32) -> Option<u8> {
    if header & 0x7F == MCTP_TYPE_VENDOR_PCI && (header >> 8) & 0xFFFF == NVDM_VENDOR_NVIDIA {
        Some((header >> 24) as u8)
    } else {
        None
    }
}

/// Bytes before a payload: the MCTP and NVDM header dwords.
pub const PACKET_HEADER_BYTES: usize = 8;

/// `NVDM_PAYLOAD_COT`: what the host tells the FSP to verify and boot.
/// Version 2 (GB20x) carries a P-384 key and signature in the first 97 and
/// 96 bytes of their fields; version 1 (GH100) fills 384 bytes of each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CotPayload {
    pub version: u16,
    pub size: u16,
    /// Bus address of the FMC image.
    pub gsp_fmc_sysmem_offset: u64,
    pub frts_sysmem_offset: u64,
    pub frts_sysmem_size: u32,
    /// FRTS in video memory: an offset from the end of FB.
    pub frts_vidmem_offset: u64,
    pub frts_vidmem_size: u32,
    pub hash384: [u8; COT_HASH_BYTES],
    pub public_key: [u8; COT_KEY_FIELD_BYTES],
    pub signature: [u8; COT_SIGNATURE_FIELD_BYTES],
    /// Bus address of GSP_FMC_BOOT_PARAMS.
    pub gsp_boot_args_sysmem_offset: u64,
}

/// The packed payload's size.
pub const COT_PAYLOAD_BYTES: usize = 860;
/// GB20x's COT version.
pub const COT_VERSION_GB20X: u16 = 2;
/// GH100's COT version.
pub const COT_VERSION_GH100: u16 = 1;
pub const COT_HASH_BYTES: usize = 48;
pub const COT_KEY_FIELD_BYTES: usize = 384;
pub const COT_SIGNATURE_FIELD_BYTES: usize = 384;

/// Field offsets within the packed payload.
pub mod cot_offset {
    pub const VERSION: usize = 0;
    pub const SIZE: usize = 2;
    pub const GSP_FMC_SYSMEM_OFFSET: usize = 4;
    pub const FRTS_SYSMEM_OFFSET: usize = 12;
    pub const FRTS_SYSMEM_SIZE: usize = 20;
    pub const FRTS_VIDMEM_OFFSET: usize = 24;
    pub const FRTS_VIDMEM_SIZE: usize = 32;
    pub const HASH384: usize = 36;
    pub const PUBLIC_KEY: usize = 84;
    pub const SIGNATURE: usize = 468;
    pub const GSP_BOOT_ARGS_SYSMEM_OFFSET: usize = 852;
}

impl CotPayload {
    pub fn encode(&self) -> [u8; COT_PAYLOAD_BYTES] {
        use cot_offset::*;
        let mut b = [0u8; COT_PAYLOAD_BYTES];
        b[VERSION..VERSION + 2].copy_from_slice(&self.version.to_le_bytes());
        b[SIZE..SIZE + 2].copy_from_slice(&self.size.to_le_bytes());
        put_u64(&mut b, GSP_FMC_SYSMEM_OFFSET, self.gsp_fmc_sysmem_offset);
        put_u64(&mut b, FRTS_SYSMEM_OFFSET, self.frts_sysmem_offset);
        put_u32(&mut b, FRTS_SYSMEM_SIZE, self.frts_sysmem_size);
        put_u64(&mut b, FRTS_VIDMEM_OFFSET, self.frts_vidmem_offset);
        put_u32(&mut b, FRTS_VIDMEM_SIZE, self.frts_vidmem_size);
        b[HASH384..HASH384 + COT_HASH_BYTES].copy_from_slice(&self.hash384);
        b[PUBLIC_KEY..PUBLIC_KEY + COT_KEY_FIELD_BYTES].copy_from_slice(&self.public_key);
        b[SIGNATURE..SIGNATURE + COT_SIGNATURE_FIELD_BYTES].copy_from_slice(&self.signature);
        put_u64(
            &mut b,
            GSP_BOOT_ARGS_SYSMEM_OFFSET,
            self.gsp_boot_args_sysmem_offset,
        );
        b
    }

    /// `None` when `b` is shorter than the packed payload.
    pub fn decode(b: &[u8]) -> Option<CotPayload> {
        use cot_offset::*;
        if b.len() < COT_PAYLOAD_BYTES {
            return None;
        }
        let mut hash384 = [0u8; COT_HASH_BYTES];
        hash384.copy_from_slice(&b[HASH384..HASH384 + COT_HASH_BYTES]);
        let mut public_key = [0u8; COT_KEY_FIELD_BYTES];
        public_key.copy_from_slice(&b[PUBLIC_KEY..PUBLIC_KEY + COT_KEY_FIELD_BYTES]);
        let mut signature = [0u8; COT_SIGNATURE_FIELD_BYTES];
        signature.copy_from_slice(&b[SIGNATURE..SIGNATURE + COT_SIGNATURE_FIELD_BYTES]);
        Some(CotPayload {
            version: u16::from_le_bytes([b[VERSION], b[VERSION + 1]]),
            size: u16::from_le_bytes([b[SIZE], b[SIZE + 1]]),
            gsp_fmc_sysmem_offset: u64_at(b, GSP_FMC_SYSMEM_OFFSET),
            frts_sysmem_offset: u64_at(b, FRTS_SYSMEM_OFFSET),
            frts_sysmem_size: u32_at(b, FRTS_SYSMEM_SIZE),
            frts_vidmem_offset: u64_at(b, FRTS_VIDMEM_OFFSET),
            frts_vidmem_size: u32_at(b, FRTS_VIDMEM_SIZE),
            hash384,
            public_key,
            signature,
            gsp_boot_args_sysmem_offset: u64_at(b, GSP_BOOT_ARGS_SYSMEM_OFFSET),
        })
    }
}

/// `NVDM_PAYLOAD_COMMAND_RESPONSE`: the FSP's answer to a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandResponse {
    pub task_id: u32,
    /// The NVDM type of the command answered.
    pub command_nvdm_type: u32,
    /// 0 on success.
    pub error_code: u32,
}

pub const COMMAND_RESPONSE_BYTES: usize = 12;

impl CommandResponse {
    pub fn encode(&self) -> [u8; COMMAND_RESPONSE_BYTES] {
        let mut b = [0u8; COMMAND_RESPONSE_BYTES];
        put_u32(&mut b, 0, self.task_id);
        put_u32(&mut b, 4, self.command_nvdm_type);
        put_u32(&mut b, 8, self.error_code);
        b
    }

    pub fn decode(b: &[u8]) -> Option<CommandResponse> {
        if b.len() < COMMAND_RESPONSE_BYTES {
            return None;
        }
        Some(CommandResponse {
            task_id: u32_at(b, 0),
            command_nvdm_type: u32_at(b, 4),
            error_code: u32_at(b, 8),
        })
    }
}

/// The header of the FMC image (the `image` section of the FMC file): its
/// first u16 pair packs the header's own size in bits 31:16 of dword 0, and
/// dword 1 is the size of what follows. Inferred: in the 570.144 images for
/// GB202, GB100 and GH100, header + dword 1 equals the section's length
/// exactly (72 + 0x30A00, 72 + 0x30300, 72 + 0x28600). It is how the FSP,
/// given only the image's address, knows how much to read and hash.
pub const FMC_IMAGE_HEADER_BYTES: usize = 8;

/// The whole image's length from its first 8 bytes.
pub fn fmc_image_len(header: &[u8; FMC_IMAGE_HEADER_BYTES]) -> u64 {
    let d0 = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let d1 = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    u64::from(d0 >> 16) + u64::from(d1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_what_rm_and_the_reference_write() {
        assert_eq!(mctp_single_packet(), 0xC000_0000);
        assert_eq!(nvdm_header(nvdm::COT), 0x1410_DE7E);
        assert_eq!(nvdm_header(nvdm::FSP_RESPONSE), 0x1510_DE7E);
        assert_eq!(nvdm_type_of(0x1410_DE7E), Some(nvdm::COT));
        assert_eq!(nvdm_type_of(0x1410_DE7F), None);
        assert_eq!(PACKET_HEADER_BYTES + COT_PAYLOAD_BYTES, 868);
    }

    #[test]
    fn the_cot_payload_is_packed_and_round_trips() {
        use cot_offset::*;
        assert_eq!(GSP_BOOT_ARGS_SYSMEM_OFFSET + 8, COT_PAYLOAD_BYTES);
        assert_eq!(
            SIGNATURE + COT_SIGNATURE_FIELD_BYTES,
            GSP_BOOT_ARGS_SYSMEM_OFFSET
        );
        assert_eq!(PUBLIC_KEY + COT_KEY_FIELD_BYTES, SIGNATURE);
        let mut p = CotPayload {
            version: COT_VERSION_GB20X,
            size: COT_PAYLOAD_BYTES as u16,
            gsp_fmc_sysmem_offset: 0x1234_5000,
            frts_sysmem_offset: 0,
            frts_sysmem_size: 0,
            frts_vidmem_offset: 0x1C0_0000,
            frts_vidmem_size: 0x10_0000,
            hash384: [7; COT_HASH_BYTES],
            public_key: [0; COT_KEY_FIELD_BYTES],
            signature: [0; COT_SIGNATURE_FIELD_BYTES],
            gsp_boot_args_sysmem_offset: 0xABCD_E000,
        };
        p.public_key[0] = 4;
        p.signature[95] = 9;
        let b = p.encode();
        assert_eq!(&b[24..32], &0x1C0_0000u64.to_le_bytes());
        assert_eq!(b[84], 4);
        assert_eq!(CotPayload::decode(&b), Some(p));
        assert_eq!(CotPayload::decode(&b[..859]), None);
    }

    #[test]
    fn an_fmc_header_gives_the_image_length() {
        let mut h = [0u8; FMC_IMAGE_HEADER_BYTES];
        h[..4].copy_from_slice(&0x0048_0403u32.to_le_bytes());
        h[4..].copy_from_slice(&0x0003_0A00u32.to_le_bytes());
        assert_eq!(fmc_image_len(&h), 199_240);
    }
}
