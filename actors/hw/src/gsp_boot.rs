//! What the host hands the GSP's first code (the FMC) on the FSP path:
//! `GSP_FMC_BOOT_PARAMS`, whose address the COT request carries, and the
//! `GspFwWprMeta` it points at, which says where the GSP-RM image, its
//! bootloader and signature are and how large the heaps must be; the FMC
//! fills in the FB layout it chose. Offsets of the boot params are pinned to
//! the oracle; the meta's r570 layout is reference/gsp.md section 3.6.

use crate::le::{put_u32, put_u64, u32_at, u64_at};

/// `GSP_FW_WPR_META_MAGIC`.
pub const WPR_META_MAGIC: u64 = 0xDC3A_AE21_371A_60B3;
/// `GSP_FW_WPR_META_REVISION`.
pub const WPR_META_REVISION: u64 = 1;
/// `GSP_FW_WPR_META_VERIFIED`: the meta's `verified` once accepted.
pub const WPR_META_VERIFIED: u64 = 0xA0A0_A0A0_A0A0_A0A0;
/// `sizeof(GspFwWprMeta)`: what `gspRmDescSize` must say.
pub const WPR_META_BYTES: usize = 256;
/// `sizeof(GSP_FMC_BOOT_PARAMS)`.
pub const FMC_BOOT_PARAMS_BYTES: usize = 80;
/// GSP_DMA_TARGET_*: where a buffer the firmware reads lives.
pub mod dma_target {
    pub const LOCAL_FB: u32 = 0;
    pub const COHERENT_SYSTEM: u32 = 1;
    pub const NONCOHERENT_SYSTEM: u32 = 2;
}

/// Field offsets of `GSP_FMC_BOOT_PARAMS`.
pub mod boot_params_offset {
    pub const REGKEYS: usize = 0;
    pub const BOOT_GSP_RM_TARGET: usize = 8;
    pub const GSP_RM_DESC_SIZE: usize = 12;
    pub const GSP_RM_DESC_OFFSET: usize = 16;
    pub const WPR_CARVEOUT_OFFSET: usize = 24;
    pub const WPR_CARVEOUT_SIZE: usize = 32;
    pub const IS_GSP_RM_BOOT: usize = 36;
    pub const GSP_RM_TARGET: usize = 40;
    pub const BOOT_ARGS_OFFSET: usize = 48;
    pub const SPDM_TARGET: usize = 56;
    pub const SPDM_PAYLOAD_OFFSET: usize = 64;
    pub const SPDM_PAYLOAD_SIZE: usize = 72;
}

/// `GSP_FMC_BOOT_PARAMS`, the fields the FSP path uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FmcBootParams {
    pub regkeys: u32,
    /// Where the WPR meta lives (`dma_target`).
    pub boot_gsp_rm_target: u32,
    pub gsp_rm_desc_size: u32,
    /// Bus address of the WPR meta.
    pub gsp_rm_desc_offset: u64,
    pub wpr_carveout_offset: u64,
    pub wpr_carveout_size: u32,
    pub is_gsp_rm_boot: bool,
    /// Where the libos arguments live.
    pub gsp_rm_target: u32,
    /// Bus address of the libos init-arguments page.
    pub boot_args_offset: u64,
}

impl FmcBootParams {
    pub fn encode(&self) -> [u8; FMC_BOOT_PARAMS_BYTES] {
        use boot_params_offset::*;
        let mut b = [0u8; FMC_BOOT_PARAMS_BYTES];
        put_u32(&mut b, REGKEYS, self.regkeys);
        put_u32(&mut b, BOOT_GSP_RM_TARGET, self.boot_gsp_rm_target);
        put_u32(&mut b, GSP_RM_DESC_SIZE, self.gsp_rm_desc_size);
        put_u64(&mut b, GSP_RM_DESC_OFFSET, self.gsp_rm_desc_offset);
        put_u64(&mut b, WPR_CARVEOUT_OFFSET, self.wpr_carveout_offset);
        put_u32(&mut b, WPR_CARVEOUT_SIZE, self.wpr_carveout_size);
        b[IS_GSP_RM_BOOT] = u8::from(self.is_gsp_rm_boot);
        put_u32(&mut b, GSP_RM_TARGET, self.gsp_rm_target);
        put_u64(&mut b, BOOT_ARGS_OFFSET, self.boot_args_offset);
        b
    }

    pub fn decode(b: &[u8; FMC_BOOT_PARAMS_BYTES]) -> FmcBootParams {
        use boot_params_offset::*;
        FmcBootParams {
            regkeys: u32_at(b, REGKEYS),
            boot_gsp_rm_target: u32_at(b, BOOT_GSP_RM_TARGET),
            gsp_rm_desc_size: u32_at(b, GSP_RM_DESC_SIZE),
            gsp_rm_desc_offset: u64_at(b, GSP_RM_DESC_OFFSET),
            wpr_carveout_offset: u64_at(b, WPR_CARVEOUT_OFFSET),
            wpr_carveout_size: u32_at(b, WPR_CARVEOUT_SIZE),
            is_gsp_rm_boot: b[IS_GSP_RM_BOOT] != 0,
            gsp_rm_target: u32_at(b, GSP_RM_TARGET),
            boot_args_offset: u64_at(b, BOOT_ARGS_OFFSET),
        }
    }
}

/// `GspFwWprMeta` (r570), as u64 slots: every field the FSP path uses is
/// a u64 at a multiple of 8 up to `vgaWorkspaceSize`, then `pmuReservedSize`
/// (u32 at 244) and `verified` (u64 at 248).
pub mod wpr_meta_offset {
    pub const MAGIC: usize = 0;
    pub const REVISION: usize = 8;
    pub const SYSMEM_ADDR_OF_RADIX3_ELF: usize = 16;
    pub const SIZE_OF_RADIX3_ELF: usize = 24;
    pub const SYSMEM_ADDR_OF_BOOTLOADER: usize = 32;
    pub const SIZE_OF_BOOTLOADER: usize = 40;
    pub const BOOTLOADER_CODE_OFFSET: usize = 48;
    pub const BOOTLOADER_DATA_OFFSET: usize = 56;
    pub const BOOTLOADER_MANIFEST_OFFSET: usize = 64;
    pub const SYSMEM_ADDR_OF_SIGNATURE: usize = 72;
    pub const SIZE_OF_SIGNATURE: usize = 80;
    pub const GSP_FW_RSVD_START: usize = 88;
    pub const NON_WPR_HEAP_OFFSET: usize = 96;
    pub const NON_WPR_HEAP_SIZE: usize = 104;
    pub const GSP_FW_WPR_START: usize = 112;
    pub const GSP_FW_HEAP_OFFSET: usize = 120;
    pub const GSP_FW_HEAP_SIZE: usize = 128;
    pub const GSP_FW_OFFSET: usize = 136;
    pub const BOOT_BIN_OFFSET: usize = 144;
    pub const FRTS_OFFSET: usize = 152;
    pub const FRTS_SIZE: usize = 160;
    pub const GSP_FW_WPR_END: usize = 168;
    pub const FB_SIZE: usize = 176;
    pub const VGA_WORKSPACE_OFFSET: usize = 184;
    pub const VGA_WORKSPACE_SIZE: usize = 192;
    pub const BOOT_COUNT: usize = 200;
    pub const PMU_RESERVED_SIZE: usize = 244;
    pub const VERIFIED: usize = 248;
}

/// A WPR meta in its bytes, read and written field by field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WprMeta(pub [u8; WPR_META_BYTES]);

impl WprMeta {
    pub fn zeroed() -> WprMeta {
        WprMeta([0; WPR_META_BYTES])
    }

    pub fn get(&self, offset: usize) -> u64 {
        u64_at(&self.0, offset)
    }

    pub fn set(&mut self, offset: usize, value: u64) {
        put_u64(&mut self.0, offset, value);
    }

    pub fn pmu_reserved_size(&self) -> u32 {
        u32_at(&self.0, wpr_meta_offset::PMU_RESERVED_SIZE)
    }

    pub fn set_pmu_reserved_size(&mut self, value: u32) {
        put_u32(&mut self.0, wpr_meta_offset::PMU_RESERVED_SIZE, value);
    }
}

/// The radix3 table that maps the GSP-RM image (reference gsp.md 3.4):
/// three levels of 4 KiB pages of u64 bus addresses over the image's pages.
pub mod radix3 {
    /// `LIBOS_MEMORY_REGION_RADIX_PAGE_SIZE`: every table and image page.
    pub const PAGE_BYTES: u64 = 1 << PAGE_LOG2;
    /// `LIBOS_MEMORY_REGION_RADIX_PAGE_LOG2`.
    pub const PAGE_LOG2: u32 = 12;
    /// An entry is a u64 bus address.
    pub const ENTRY_BYTES: u64 = 8;
    pub const ENTRIES_PER_PAGE: u64 = PAGE_BYTES / ENTRY_BYTES;
    /// The largest image the boot hands over: nouveau bounds radix3 to
    /// 512 × 512 pages (1 GiB), as the firmware parser does, though three
    /// full levels could name more.
    pub const MAX_IMAGE_PAGES: u64 = ENTRIES_PER_PAGE * ENTRIES_PER_PAGE;
}

/// `sizeOfSignature` as tinygrad declares it: the signature gets a page.
pub const SIGNATURE_BUFFER_BYTES: u64 = 0x1000;

/// The FRTS region the FSP carves in FB: `FWSECLIC_FRTS_REGION_SIZE_1MB_IN_4K`
/// pages of 4 KiB.
pub const FRTS_SIZE_IN_4K: u64 = 0x100;
pub const FRTS_BYTES: u64 = FRTS_SIZE_IN_4K << 12;
/// `frtsVidmemOffset` (from FB's end) is aligned to this.
pub const FRTS_VIDMEM_ALIGN: u64 = 2 << 20;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// RM's GSP firmware heap formula (`gsp_fw_heap.h`, reference memory.md
/// 3.4): an OS carve-out, a base for RM, a term per GiB of FB and a term
/// for client allocations, each per-term sum aligned, then clamped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FwHeapRule {
    /// `GSP_FW_HEAP_PARAM_OS_SIZE_*`.
    pub os_carveout: u64,
    /// `GSP_FW_HEAP_PARAM_BASE_RM_SIZE_*`.
    pub base_rm: u64,
    /// `GSP_FW_HEAP_PARAM_SIZE_PER_GB_FB`, for each started GiB of FB.
    pub per_gib_fb: u64,
    /// `GSP_FW_HEAP_PARAM_CLIENT_ALLOC_SIZE`: per client allocation...
    pub per_client_alloc: u64,
    /// ...times this many.
    pub client_allocs: u64,
    /// The FB and client terms are each aligned up to this.
    pub term_align: u64,
    /// `GSP_FW_HEAP_SIZE_OVERRIDE_LIBOS3_BAREMETAL_MIN_MB` and `_MAX_MB`.
    pub min: u64,
    pub max: u64,
}

impl FwHeapRule {
    /// `gspFwHeapSize` for a board with `fb_bytes` of VRAM.
    pub const fn heap_bytes(&self, fb_bytes: u64) -> u64 {
        let fb_term = (self.per_gib_fb * fb_bytes.div_ceil(GIB)).next_multiple_of(self.term_align);
        let client_term =
            (self.per_client_alloc * self.client_allocs).next_multiple_of(self.term_align);
        let heap = self.os_carveout + self.base_rm + fb_term + client_term;
        // `clamp`, in a form a constant can use.
        if heap < self.min {
            self.min
        } else if heap > self.max {
            self.max
        } else {
            heap
        }
    }
}

/// Hopper and later, LIBOS3 on bare metal.
pub const FW_HEAP_GH100_AND_LATER: FwHeapRule = FwHeapRule {
    os_carveout: 22 * MIB,
    base_rm: 14 * MIB,
    per_gib_fb: 96 * KIB,
    per_client_alloc: 48 * KIB,
    client_allocs: 2048,
    term_align: MIB,
    min: 88 * MIB,
    max: 280 * MIB,
};

/// The parts of nouveau's GB20x PMU reservation (`rsvd_size_pmu`), summed
/// and aligned to [`PMU_RESERVED_ALIGN`].
pub const PMU_RESERVED_PARTS_GB20X: [u64; 3] = [0x80_0000, 0x100_0000, 0x1000];
pub const PMU_RESERVED_ALIGN: u64 = 0x2_0000;

/// The sizes the host puts into the WPR meta on the FSP path, per family
/// (reference gsp.md 3.6, r570).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WprSizes {
    pub non_wpr_heap: u64,
    pub pmu_reserved: u64,
    pub vga_workspace: u64,
    pub frts: u64,
    pub fw_heap: FwHeapRule,
}

impl WprSizes {
    /// `frtsVidmemOffset` for the COT: the non-WPR heap and the PMU
    /// reservation lie above FRTS at FB's end.
    pub const fn frts_vidmem_offset(&self) -> u64 {
        (self.non_wpr_heap + self.pmu_reserved).next_multiple_of(FRTS_VIDMEM_ALIGN)
    }
}

const fn sum_aligned(parts: [u64; 3], align: u64) -> u64 {
    (parts[0] + parts[1] + parts[2]).next_multiple_of(align)
}

/// RM sets a 128 KiB VGA workspace on Hopper and later.
pub const VGA_WORKSPACE_HOPPER_AND_LATER: u64 = 128 * KIB;

/// GB20x (nouveau's `r570_wpr_libos3_gb20x`).
pub const WPR_SIZES_GB20X: WprSizes = WprSizes {
    non_wpr_heap: 0x22_0000,
    pmu_reserved: sum_aligned(PMU_RESERVED_PARTS_GB20X, PMU_RESERVED_ALIGN),
    vga_workspace: VGA_WORKSPACE_HOPPER_AND_LATER,
    frts: FRTS_BYTES,
    fw_heap: FW_HEAP_GH100_AND_LATER,
};

/// GH100: a 2 MiB non-WPR heap and no PMU reservation.
pub const WPR_SIZES_GH100: WprSizes = WprSizes {
    non_wpr_heap: 0x20_0000,
    pmu_reserved: 0,
    vga_workspace: VGA_WORKSPACE_HOPPER_AND_LATER,
    frts: FRTS_BYTES,
    fw_heap: FW_HEAP_GH100_AND_LATER,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_params_round_trip() {
        let p = FmcBootParams {
            boot_gsp_rm_target: dma_target::COHERENT_SYSTEM,
            gsp_rm_desc_size: WPR_META_BYTES as u32,
            gsp_rm_desc_offset: 0x8_0000_1000,
            is_gsp_rm_boot: true,
            gsp_rm_target: dma_target::COHERENT_SYSTEM,
            boot_args_offset: 0x8_0000_2000,
            ..FmcBootParams::default()
        };
        let b = p.encode();
        assert_eq!(b[36], 1);
        assert_eq!(FmcBootParams::decode(&b), p);
    }

    #[test]
    fn the_meta_ends_with_pmu_reserve_and_verified() {
        use wpr_meta_offset::*;
        let mut m = WprMeta::zeroed();
        m.set(MAGIC, WPR_META_MAGIC);
        m.set(VERIFIED, WPR_META_VERIFIED);
        m.set_pmu_reserved_size(0x182_0000);
        assert_eq!(VERIFIED + 8, WPR_META_BYTES);
        assert_eq!(m.get(MAGIC), WPR_META_MAGIC);
        assert_eq!(m.pmu_reserved_size(), 0x182_0000);
        assert_eq!(m.get(VERIFIED), WPR_META_VERIFIED);
    }

    #[test]
    fn sizes_are_the_references_numbers() {
        assert_eq!(WPR_SIZES_GB20X.pmu_reserved, 0x182_0000);
        assert_eq!(WPR_SIZES_GB20X.frts_vidmem_offset(), 0x1C0_0000);
        assert_eq!(WPR_SIZES_GH100.frts_vidmem_offset(), 0x20_0000);
        assert_eq!(FRTS_BYTES, 0x10_0000);
        // 32 GiB GB202: 135 MiB, tinygrad's constant; 80 GiB H100: 140 MiB.
        assert_eq!(FW_HEAP_GH100_AND_LATER.heap_bytes(32 << 30), 0x870_0000);
        assert_eq!(FW_HEAP_GH100_AND_LATER.heap_bytes(80 << 30), 140 << 20);
        assert_eq!(
            FW_HEAP_GH100_AND_LATER.heap_bytes(0),
            22 * MIB + 14 * MIB + 96 * MIB
        );
        assert_eq!(
            FW_HEAP_GH100_AND_LATER.heap_bytes(u64::MAX >> 20),
            280 * MIB
        );
        assert_eq!(radix3::ENTRIES_PER_PAGE, 512);
        assert_eq!(radix3::MAX_IMAGE_PAGES * radix3::PAGE_BYTES, 1 << 30);
    }
}
