//! The chain-of-trust request (reference gsp.md 4.2): the FMC's hash,
//! public key and signature as the firmware file carries them, where the
//! FMC image and its boot params are, and where the FSP is to carve FRTS
//! (an offset from FB's end above the non-WPR heap and PMU reservation).
//! The FSP checks all of it; the host only copies.

use super::error::BareError;
use super::wpr_meta::wpr_sizes;
use crate::firmware::{FirmwareChip, FmcImage};
use macuda_hw::fsp::{
    CotPayload, COT_HASH_BYTES, COT_KEY_FIELD_BYTES, COT_PAYLOAD_BYTES, COT_SIGNATURE_FIELD_BYTES,
    COT_VERSION_GB20X, COT_VERSION_GH100,
};

/// The COT version a chip's FSP speaks.
pub fn cot_version(chip: FirmwareChip) -> u16 {
    match chip {
        FirmwareChip::Gb202 => COT_VERSION_GB20X,
        FirmwareChip::Gh100 => COT_VERSION_GH100,
    }
}

/// `src` at the start of a zeroed field of `N` bytes.
fn field<const N: usize>(src: &[u8], what: &'static str) -> Result<[u8; N], BareError> {
    let mut out = [0u8; N];
    out.get_mut(..src.len())
        .ok_or(BareError::TooLarge {
            what,
            bytes: src.len() as u64,
            limit: N as u64,
        })?
        .copy_from_slice(src);
    Ok(out)
}

/// The request for `fmc`, staged at `fmc_image` with its boot params at
/// `boot_params` (bus addresses).
///
/// # Errors
/// [`BareError::TooLarge`] when a section is longer than its field.
pub fn cot_request(
    chip: FirmwareChip,
    fmc: &FmcImage,
    fmc_image: u64,
    boot_params: u64,
) -> Result<CotPayload, BareError> {
    let sizes = wpr_sizes(chip);
    Ok(CotPayload {
        version: cot_version(chip),
        // CAST: the packed payload is 860 bytes.
        size: COT_PAYLOAD_BYTES as u16,
        gsp_fmc_sysmem_offset: fmc_image,
        frts_sysmem_offset: 0,
        frts_sysmem_size: 0,
        frts_vidmem_offset: sizes.frts_vidmem_offset(),
        frts_vidmem_size: u32::try_from(sizes.frts).map_err(|_| BareError::TooLarge {
            what: "FRTS",
            bytes: sizes.frts,
            limit: u32::MAX.into(),
        })?,
        hash384: field::<COT_HASH_BYTES>(fmc.hash(), "the FMC's hash")?,
        public_key: field::<COT_KEY_FIELD_BYTES>(fmc.public_key(), "the FMC's public key")?,
        signature: field::<COT_SIGNATURE_FIELD_BYTES>(fmc.signature(), "the FMC's signature")?,
        gsp_boot_args_sysmem_offset: boot_params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_zero_padded_and_overlong_ones_refused() {
        let f: [u8; 8] = field(&[1, 2, 3], "x").unwrap();
        assert_eq!(f, [1, 2, 3, 0, 0, 0, 0, 0]);
        assert!(matches!(
            field::<2>(&[1, 2, 3], "x"),
            Err(BareError::TooLarge {
                bytes: 3,
                limit: 2,
                ..
            })
        ));
    }

    #[test]
    fn a_gb202_request_carries_the_fmc_and_frts_fields() {
        let fmc = crate::firmware::fmc::tests::synthetic_fmc(FirmwareChip::Gb202, b"fmc image");
        let fmc = FmcImage::parse(std::path::Path::new("fmc"), fmc, FirmwareChip::Gb202).unwrap();
        let c = cot_request(FirmwareChip::Gb202, &fmc, 0x1000, 0x2000).unwrap();
        assert_eq!((c.version, c.size), (2, 860));
        assert_eq!(c.frts_vidmem_offset, 0x1C0_0000);
        assert_eq!(c.frts_vidmem_size, 0x10_0000);
        assert_eq!(&c.hash384[..], fmc.hash());
        assert_eq!(&c.public_key[..97], fmc.public_key());
        assert!(c.public_key[97..].iter().all(|&b| b == 0));
        assert_eq!(&c.signature[..96], fmc.signature());
        assert_eq!(
            (c.gsp_fmc_sysmem_offset, c.gsp_boot_args_sysmem_offset),
            (0x1000, 0x2000)
        );
    }
}
