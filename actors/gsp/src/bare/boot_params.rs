//! `GSP_FMC_BOOT_PARAMS` (reference gsp.md 3.7): what the FMC reads first,
//! from the address the COT request carries. It points at the WPR meta and
//! at the libos page GSP-RM boots from, both in coherent system memory.

use macuda_hw::gsp_boot::{dma_target, FmcBootParams, WPR_META_BYTES};

/// The boot params for a meta and a libos page at these bus addresses.
pub fn fmc_boot_params(meta: u64, libos_page: u64) -> FmcBootParams {
    FmcBootParams {
        boot_gsp_rm_target: dma_target::COHERENT_SYSTEM,
        // CAST: the meta is 256 bytes.
        gsp_rm_desc_size: WPR_META_BYTES as u32,
        gsp_rm_desc_offset: meta,
        is_gsp_rm_boot: true,
        gsp_rm_target: dma_target::COHERENT_SYSTEM,
        boot_args_offset: libos_page,
        ..FmcBootParams::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_hw::gsp_boot::boot_params_offset as at;

    #[test]
    fn the_params_point_at_the_meta_and_the_libos_page() {
        let b = fmc_boot_params(0x8_0000_1000, 0x8_0000_2000).encode();
        assert_eq!(b[at::BOOT_GSP_RM_TARGET], 1);
        assert_eq!(b[at::GSP_RM_DESC_SIZE], 0);
        assert_eq!(b[at::GSP_RM_DESC_SIZE + 1], 1, "256");
        assert_eq!(
            &b[at::GSP_RM_DESC_OFFSET..][..8],
            &0x8_0000_1000u64.to_le_bytes()
        );
        assert_eq!(b[at::IS_GSP_RM_BOOT], 1);
        assert_eq!(b[at::GSP_RM_TARGET], 1);
        assert_eq!(
            &b[at::BOOT_ARGS_OFFSET..][..8],
            &0x8_0000_2000u64.to_le_bytes()
        );
        assert_eq!(b[at::SPDM_TARGET], 0);
    }
}
