//! WPR2, the write-protected region the firmware places at the top of video
//! memory, as its two registers describe it (reference/gsp.md section 2.2):
//! LO holds the start and HI the start of the *last* 128 KiB granule, both
//! as address >> 12 in bits 31:4. The exclusive end is therefore HI's
//! address plus one granule; readers that take HI as the end are 128 KiB
//! short, which matters to anything that must stay out of the region.

use std::ops::Range;

/// The address shift of both registers' `val` field (`ALIGNMENT 12`).
pub const ADDR_SHIFT: u32 = 12;
/// Where `val` sits in each register (bits 31:4).
pub const VAL_SHIFT: u32 = 4;
/// WPR2's granularity: HI names the start of its last granule.
pub const GRANULE_BYTES: u64 = 128 << 10;

fn to_register(addr: u64) -> u32 {
    // CAST: VRAM addresses below 2^40 fit the 28-bit field once shifted.
    ((addr >> ADDR_SHIFT) << VAL_SHIFT) as u32
}

fn from_register(value: u32) -> u64 {
    u64::from(value >> VAL_SHIFT) << ADDR_SHIFT
}

/// The two registers for the region `[start, end)`; `end` a granule
/// multiple above `start`.
pub fn encode(region: &Range<u64>) -> (u32, u32) {
    (
        to_register(region.start),
        to_register(region.end - GRANULE_BYTES),
    )
}

/// Whether a HI register says WPR2 exists (firmware ran this power cycle).
pub fn is_up(hi: u32) -> bool {
    hi >> VAL_SHIFT != 0
}

/// The region the registers describe, by the firmware's rule; `None`
/// while WPR2 is down or when the registers contradict each other.
pub fn decode(lo: u32, hi: u32) -> Option<Range<u64>> {
    if !is_up(hi) {
        return None;
    }
    let (start, last) = (from_register(lo), from_register(hi));
    (start <= last).then(|| start..last + GRANULE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_is_one_granule_past_what_hi_names() {
        let region = 0x7_F400_0000..0x7_FA00_0000;
        let (lo, hi) = encode(&region);
        assert_eq!(lo, 0x07F4_0000);
        assert_eq!(hi, 0x07F9_FE00);
        assert_eq!(decode(lo, hi), Some(region));
    }

    #[test]
    fn down_or_contradictory_registers_describe_nothing() {
        assert_eq!(decode(0, 0), None);
        assert_eq!(decode(0x0000_000F, 0x0000_000F), None);
        assert_eq!(decode(0x0800_0000, 0x0700_0000), None);
        assert!(is_up(0x10));
    }
}
