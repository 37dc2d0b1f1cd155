//! The `GspFwWprMeta` the host fills on the FSP path (reference gsp.md
//! 3.6): where the GSP-RM image (through radix3), its bootloader and its
//! signature are, the bootloader's code, data and manifest offsets from
//! its descriptor, and the sizes the FMC must reserve. The FB layout
//! fields stay 0: the FMC chooses the layout and writes it back.

use crate::firmware::{FirmwareChip, UcodeDesc};
use macuda_hw::gsp_boot::{
    wpr_meta_offset as at, WprMeta, WprSizes, WPR_META_MAGIC, WPR_META_REVISION, WPR_SIZES_GB20X,
    WPR_SIZES_GH100,
};

/// The sizes a chip's meta carries.
pub fn wpr_sizes(chip: FirmwareChip) -> WprSizes {
    match chip {
        FirmwareChip::Gb202 => WPR_SIZES_GB20X,
        FirmwareChip::Gh100 => WPR_SIZES_GH100,
    }
}

/// nouveau gives the signature a buffer of its length rounded up to this.
pub const SIGNATURE_ALIGN: u64 = 256;

/// Where the staged pieces the meta names are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WprMetaInputs<'a> {
    pub chip: FirmwareChip,
    /// Bytes of VRAM (the heap grows with it).
    pub vram_bytes: u64,
    /// Bus address of radix3's level-0 page, and the image's length.
    pub radix3_root: u64,
    pub image_bytes: u64,
    /// Bus address and length of the bootloader image.
    pub bootloader: u64,
    pub bootloader_bytes: u64,
    pub desc: &'a UcodeDesc,
    /// Bus address and length of the signature.
    pub signature: u64,
    pub signature_bytes: u64,
}

/// The meta for `inputs`.
pub fn wpr_meta(inputs: &WprMetaInputs<'_>) -> WprMeta {
    let sizes = wpr_sizes(inputs.chip);
    let mut m = WprMeta::zeroed();
    for (offset, value) in [
        (at::MAGIC, WPR_META_MAGIC),
        (at::REVISION, WPR_META_REVISION),
        (at::SYSMEM_ADDR_OF_RADIX3_ELF, inputs.radix3_root),
        (at::SIZE_OF_RADIX3_ELF, inputs.image_bytes),
        (at::SYSMEM_ADDR_OF_BOOTLOADER, inputs.bootloader),
        (at::SIZE_OF_BOOTLOADER, inputs.bootloader_bytes),
        (
            at::BOOTLOADER_CODE_OFFSET,
            u64::from(inputs.desc.monitor_code.0),
        ),
        (
            at::BOOTLOADER_DATA_OFFSET,
            u64::from(inputs.desc.monitor_data.0),
        ),
        (
            at::BOOTLOADER_MANIFEST_OFFSET,
            u64::from(inputs.desc.manifest.0),
        ),
        (at::SYSMEM_ADDR_OF_SIGNATURE, inputs.signature),
        (
            at::SIZE_OF_SIGNATURE,
            inputs.signature_bytes.next_multiple_of(SIGNATURE_ALIGN),
        ),
        (at::NON_WPR_HEAP_SIZE, sizes.non_wpr_heap),
        (
            at::GSP_FW_HEAP_SIZE,
            sizes.fw_heap.heap_bytes(inputs.vram_bytes),
        ),
        (at::FRTS_SIZE, sizes.frts),
        (at::VGA_WORKSPACE_SIZE, sizes.vga_workspace),
    ] {
        m.set(offset, value);
    }
    // CAST: the PMU reservations are constants well below 4 GiB.
    m.set_pmu_reserved_size(sizes.pmu_reserved as u32);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc() -> UcodeDesc {
        UcodeDesc {
            version: 5,
            app_version: 0x5701_4400,
            manifest: (0x300, 0x100),
            monitor_data: (0x100, 0x100),
            monitor_code: (0x200, 0x100),
            monitor_enabled: true,
            fb_reserved_size: 0,
            signed_as_code: false,
        }
    }

    #[test]
    fn a_32_gib_gb202_gets_the_references_values() {
        let d = desc();
        let m = wpr_meta(&WprMetaInputs {
            chip: FirmwareChip::Gb202,
            vram_bytes: 32 << 30,
            radix3_root: 0x10_0000,
            image_bytes: 63_541_248,
            bootloader: 0x20_0000,
            bootloader_bytes: 0x1234,
            desc: &d,
            signature: 0x30_0000,
            signature_bytes: 4096,
        });
        assert_eq!(m.get(at::MAGIC), 0xDC3A_AE21_371A_60B3);
        assert_eq!(m.get(at::REVISION), 1);
        assert_eq!(m.get(at::SIZE_OF_RADIX3_ELF), 63_541_248);
        assert_eq!(m.get(at::BOOTLOADER_CODE_OFFSET), 0x200);
        assert_eq!(m.get(at::BOOTLOADER_DATA_OFFSET), 0x100);
        assert_eq!(m.get(at::BOOTLOADER_MANIFEST_OFFSET), 0x300);
        assert_eq!(m.get(at::SIZE_OF_SIGNATURE), 0x1000);
        assert_eq!(m.get(at::NON_WPR_HEAP_SIZE), 0x22_0000);
        assert_eq!(m.get(at::GSP_FW_HEAP_SIZE), 0x870_0000);
        assert_eq!(m.get(at::FRTS_SIZE), 0x10_0000);
        assert_eq!(m.get(at::VGA_WORKSPACE_SIZE), 0x2_0000);
        assert_eq!(m.pmu_reserved_size(), 0x182_0000);
        for layout in [at::GSP_FW_WPR_START, at::FB_SIZE, at::FRTS_OFFSET] {
            assert_eq!(m.get(layout), 0, "the FMC fills the layout");
        }
    }

    #[test]
    fn gh100_has_no_pmu_reservation_and_a_2_mib_non_wpr_heap() {
        let d = desc();
        let m = wpr_meta(&WprMetaInputs {
            chip: FirmwareChip::Gh100,
            vram_bytes: 80 << 30,
            radix3_root: 1 << 12,
            image_bytes: 1,
            bootloader: 2 << 12,
            bootloader_bytes: 1,
            desc: &d,
            signature: 3 << 12,
            signature_bytes: 384,
        });
        assert_eq!(m.pmu_reserved_size(), 0);
        assert_eq!(m.get(at::NON_WPR_HEAP_SIZE), 0x20_0000);
        assert_eq!(m.get(at::GSP_FW_HEAP_SIZE), 140 << 20);
        assert_eq!(m.get(at::SIZE_OF_SIGNATURE), 512);
    }
}
