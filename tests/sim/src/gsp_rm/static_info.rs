//! GET_GSP_STATIC_INFO: what GSP-RM tells the driver of the card once it
//! runs (`GspStaticConfigInfo_t`): its name, its memory and L2, the FB
//! regions left to the driver below the firmware's, and the handles of
//! GSP-RM's own client, device and subdevice (made in the object tree, so
//! controls on them are answered like any other).

use super::objects::Objects;
use crate::chip::{RmClasses, SimChip};
use crate::fmc::WprLayout;
use macuda_hw::gsp_rpc::static_info::{self as si, fb_regions as r};
use macuda_hw::le::{put_u32, put_u64};
use macuda_hw::rm::class;

/// GSP-RM's own client, device and subdevice.
pub const INTERNAL_CLIENT: u32 = 0xC1D0_0001;
pub const INTERNAL_DEVICE: u32 = 0xC1D0_0002;
pub const INTERNAL_SUBDEVICE: u32 = 0xC1D0_0003;

/// What the reply is made from.
#[derive(Debug, Clone, Copy)]
pub struct CardFacts {
    pub name: &'static str,
    pub short_name: &'static str,
    pub vram_bytes: u64,
    pub l2_bytes: u32,
    /// NV_PMC_BOOT_42, which the boot's CPU-sequencer script polls for.
    pub boot_42: u32,
}

impl CardFacts {
    pub fn of(chip: &SimChip) -> CardFacts {
        CardFacts {
            name: chip.marketing_name,
            short_name: chip.name,
            vram_bytes: chip.vram_bytes(),
            l2_bytes: chip.l2_bytes,
            boot_42: chip.boot_42,
        }
    }
}

/// GSP-RM's own objects, made when it starts.
pub fn make_internal_objects(objects: &mut Objects, classes: &RmClasses) {
    for (parent, handle, class) in [
        (0, INTERNAL_CLIENT, class::NV01_ROOT),
        (INTERNAL_CLIENT, INTERNAL_DEVICE, class::NV01_DEVICE_0),
        (INTERNAL_DEVICE, INTERNAL_SUBDEVICE, class::NV20_SUBDEVICE_0),
    ] {
        // A fresh object tree takes these: nothing else is in it yet.
        let made = objects.alloc(classes, INTERNAL_CLIENT, parent, handle, class);
        debug_assert!(made.is_ok(), "{made:?}");
    }
}

/// The reply: `GspStaticConfigInfo_t`. The FB left to the driver is one
/// region from 0 up to the firmware's lowest (the non-WPR heap), once the
/// FMC has laid the FB out.
pub fn reply(facts: &CardFacts, layout: Option<&WprLayout>) -> Vec<u8> {
    let mut p = vec![0u8; si::BYTES];
    put_u64(&mut p, si::FB_LENGTH, facts.vram_bytes);
    put_u32(&mut p, si::L2_CACHE_SIZE, facts.l2_bytes);
    for (at, text) in [
        (si::GPU_NAME_STRING, facts.name),
        (si::GPU_SHORT_NAME_STRING, facts.short_name),
    ] {
        // NUL-terminated within its field.
        let bytes = text.as_bytes();
        let n = bytes.len().min(si::NAME_BYTES - 1);
        p[at..at + n].copy_from_slice(&bytes[..n]);
    }
    put_u32(&mut p, si::H_INTERNAL_CLIENT, INTERNAL_CLIENT);
    put_u32(&mut p, si::H_INTERNAL_DEVICE, INTERNAL_DEVICE);
    put_u32(&mut p, si::H_INTERNAL_SUBDEVICE, INTERNAL_SUBDEVICE);
    if let Some(l) = layout {
        let regions = si::FB_REGION_INFO;
        put_u32(&mut p, regions + r::COUNT, 1);
        let first = regions + r::FIRST;
        put_u64(&mut p, first + r::BASE, 0);
        put_u64(&mut p, first + r::LIMIT, l.non_wpr_heap_offset - 1);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_hw::le::{u32_at, u64_at};

    #[test]
    fn the_reply_names_the_card_and_leaves_the_fb_below_the_firmware() {
        let chip = SimChip::gb202();
        let facts = CardFacts::of(&chip);
        let layout = WprLayout {
            fb_size: chip.vram_bytes(),
            vga_workspace_offset: 0,
            frts_offset: 0,
            boot_bin_offset: 0,
            gsp_fw_offset: 0,
            gsp_fw_heap_offset: 0,
            gsp_fw_wpr_start: 0,
            gsp_fw_wpr_end: 0,
            non_wpr_heap_offset: 0x7_F000_0000,
        };
        let p = reply(&facts, Some(&layout));
        assert_eq!(p.len(), si::BYTES);
        let name = &p[si::GPU_NAME_STRING..si::GPU_NAME_STRING + si::NAME_BYTES];
        assert!(name.starts_with(b"NVIDIA GeForce RTX 5090\0"));
        assert_eq!(u64_at(&p, si::FB_LENGTH), 32 << 30);
        assert_eq!(u32_at(&p, si::L2_CACHE_SIZE), 96 << 20);
        let regions = si::FB_REGION_INFO;
        assert_eq!(u32_at(&p, regions + r::COUNT), 1);
        assert_eq!(u64_at(&p, regions + r::FIRST + r::LIMIT), 0x7_EFFF_FFFF);
        assert_eq!(u32_at(&p, si::H_INTERNAL_SUBDEVICE), INTERNAL_SUBDEVICE);
        // Before the FMC laid the FB out: no region.
        assert_eq!(u32_at(&reply(&facts, None), regions + r::COUNT), 0);
    }
}
