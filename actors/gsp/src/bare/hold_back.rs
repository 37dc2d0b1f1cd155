//! How much VRAM at the top of a card we leave to the firmware, declared
//! once from every size we hand it, with the sum checked against the
//! hold-back when this crate compiles; and, after the boot, the check that
//! our ceiling lies below the lowest byte the firmware actually took
//! (reference memory.md 3.2 to 3.5). The sizes are what the host tells the
//! FMC (it chooses the offsets itself); the images' sizes are those of the
//! pinned 570.144 release, and a boot refuses images larger than what the
//! hold-back accounts for.

use crate::firmware::FirmwareChip;
use macuda_hw::gsp_boot::{WprSizes, WPR_SIZES_GB20X, WPR_SIZES_GH100};
use std::ops::Range;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The firmware regions are placed on 2 MiB boundaries at most (FRTS's
/// offset; the heaps on 1 MiB, the image on 64 KiB): one such step of
/// slack per region below FRTS.
pub const REGION_ALIGN: u64 = 2 * MIB;
/// The `.fwimage` of GSP-RM 570.144 (the pinned file), and its bootloader.
pub const GSP_RM_IMAGE_BYTES: u64 = 63_541_248;
pub const BOOTLOADER_BYTES: u64 = 0x3_1000;
/// The WPR meta's page inside WPR2.
pub const WPR_META_PAGE: u64 = 4096;

/// Every part of the firmware's carve-out at the top of FB, for a board
/// of at most `largest_fb` bytes: what lies above FRTS (the PMU
/// reservation and FB-end reserve, which `frtsVidmemOffset` spans), FRTS,
/// the bootloader, the GSP-RM image, its heap at the largest FB the
/// family ships, the meta, the non-WPR heap, and a step of alignment for
/// each region below FRTS.
pub const fn firmware_parts(sizes: &WprSizes, largest_fb: u64) -> [(&'static str, u64); 8] {
    [
        ("above FRTS (frtsVidmemOffset)", sizes.frts_vidmem_offset()),
        ("FRTS", sizes.frts),
        ("the GSP-RM bootloader", BOOTLOADER_BYTES),
        ("the GSP-RM image", GSP_RM_IMAGE_BYTES),
        ("the GSP-RM heap", sizes.fw_heap.heap_bytes(largest_fb)),
        ("the WPR meta", WPR_META_PAGE),
        ("the non-WPR heap", sizes.non_wpr_heap),
        ("alignment, a step per region below FRTS", 5 * REGION_ALIGN),
    ]
}

const fn sum(parts: &[(&'static str, u64); 8]) -> u64 {
    let mut total = 0;
    let mut i = 0;
    while i < parts.len() {
        total += parts[i].1;
        i += 1;
    }
    total
}

/// What we leave at the top of VRAM, per family: GB20x boards carry at
/// most 32 GiB, GH100 at most 96 GiB (its heap grows with FB).
pub const HOLD_BACK_GB20X: u64 = 256 * MIB;
pub const HOLD_BACK_GH100: u64 = 256 * MIB;
pub const LARGEST_FB_GB20X: u64 = 32 * GIB;
pub const LARGEST_FB_GH100: u64 = 96 * GIB;

// The declaration's promise, checked when the crate compiles.
const _: () = assert!(sum(&firmware_parts(&WPR_SIZES_GB20X, LARGEST_FB_GB20X)) <= HOLD_BACK_GB20X);
const _: () = assert!(sum(&firmware_parts(&WPR_SIZES_GH100, LARGEST_FB_GH100)) <= HOLD_BACK_GH100);

/// The family's hold-back and the sizes it was checked with.
pub fn hold_back(chip: FirmwareChip) -> (u64, &'static WprSizes) {
    match chip {
        FirmwareChip::Gb202 => (HOLD_BACK_GB20X, &WPR_SIZES_GB20X),
        FirmwareChip::Gh100 => (HOLD_BACK_GH100, &WPR_SIZES_GH100),
    }
}

/// The top of the VRAM we hand out: the hold-back below the end, rounded
/// down to a region step.
pub fn vram_ceiling(chip: FirmwareChip, vram_bytes: u64) -> u64 {
    let (back, _) = hold_back(chip);
    (vram_bytes.saturating_sub(back) / REGION_ALIGN) * REGION_ALIGN
}

/// The lowest byte the firmware took, as the card reports it after the
/// boot: the non-WPR heap below WPR2, and the end of the FB region GSP-RM
/// leaves to the driver that holds our space (GSP-RM's own reservations
/// sit above it).
pub fn firmware_floor(
    wpr2: &Range<u64>,
    non_wpr_heap: u64,
    driver_regions: &[Range<u64>],
    ceiling: u64,
) -> u64 {
    let below_wpr2 = wpr2.start.saturating_sub(non_wpr_heap);
    let region_end = driver_regions
        .iter()
        .filter(|r| r.start < ceiling)
        .map(|r| r.end)
        .max()
        .unwrap_or(0);
    below_wpr2.min(region_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_fit_with_room_and_the_ceiling_leaves_over_99_percent() {
        let parts = firmware_parts(&WPR_SIZES_GB20X, LARGEST_FB_GB20X);
        let used = sum(&parts);
        // FRTS 28 MiB from the end, 1 MiB of FRTS, the 135 MiB heap of a
        // 32 GiB board, the 63.5 MB image: about 242 MiB.
        assert!(used > 200 * MIB && used <= HOLD_BACK_GB20X, "{used:#x}");
        let vram = 32 * GIB;
        let ceiling = vram_ceiling(FirmwareChip::Gb202, vram);
        assert_eq!(ceiling, vram - HOLD_BACK_GB20X);
        assert!(ceiling as f64 / vram as f64 >= 0.99);
    }

    #[test]
    fn the_floor_is_the_lower_of_the_heap_below_wpr2_and_the_drivers_region() {
        let wpr2 = 0x7_F1E0_0000..0x7_FE40_0000;
        let regions = [Range {
            start: 0,
            end: 0x7_F1BE_0000,
        }];
        let floor = firmware_floor(&wpr2, 0x22_0000, &regions, 0x7_F000_0000);
        assert_eq!(floor, 0x7_F1BE_0000);
        // A region that stops lower wins; one wholly above the ceiling
        // (not ours) does not count.
        let lower = [0..0x7_E000_0000, 0x7_F100_0000..0x7_F180_0000];
        assert_eq!(
            firmware_floor(&wpr2, 0x22_0000, &lower, 0x7_D000_0000),
            0x7_E000_0000
        );
        assert_eq!(firmware_floor(&wpr2, 0x22_0000, &[], 1), 0);
    }
}
