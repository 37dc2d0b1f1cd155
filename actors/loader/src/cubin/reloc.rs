//! CUDA ELF relocation types (`R_CUDA_*`, the low 32 bits of `r_info`) and
//! how each patches its target. Numbers from reference/cuda-binary-and-
//! runtime-abi.md section 2.7. Only the types real nvcc output carries are
//! implemented: R_CUDA_64 (every whole-program cubin: the bank-4 address
//! table) and the 32-bit immediates nvlink leaves (ABS32_LO_32/HI_32), plus
//! the plain R_CUDA_32; anything else is refused by number.

pub const R_CUDA_32: u32 = 1;
pub const R_CUDA_64: u32 = 2;
pub const R_CUDA_ABS32_LO_32: u32 = 56;
pub const R_CUDA_ABS32_HI_32: u32 = 57;

/// Known names, for reports (including types the loader refuses).
pub fn name(kind: u32) -> Option<&'static str> {
    Some(match kind {
        0 => "R_CUDA_NONE",
        R_CUDA_32 => "R_CUDA_32",
        R_CUDA_64 => "R_CUDA_64",
        3 => "R_CUDA_G32",
        4 => "R_CUDA_G64",
        5 => "R_CUDA_ABS32_26",
        35 => "R_CUDA_FUNC_DESC_64",
        55 => "R_CUDA_ABS32_32",
        R_CUDA_ABS32_LO_32 => "R_CUDA_ABS32_LO_32",
        R_CUDA_ABS32_HI_32 => "R_CUDA_ABS32_HI_32",
        58 => "R_CUDA_ABS47_34",
        59 => "R_CUDA_ABS16_32",
        75 => "R_CUDA_ABS55_16_34",
        102 => "R_CUDA_UNIFIED",
        114 => "R_CUDA_ABS56_16_34",
        _ => return None,
    })
}

/// Where a relocation writes, relative to `r_offset`, and how many bytes.
fn field(kind: u32) -> Option<(usize, usize)> {
    match kind {
        R_CUDA_32 => Some((0, 4)),
        R_CUDA_64 => Some((0, 8)),
        // The 32-bit immediate in the upper half of the instruction word.
        R_CUDA_ABS32_LO_32 | R_CUDA_ABS32_HI_32 => Some((4, 4)),
        _ => None,
    }
}

/// Whether the loader can apply this type.
pub fn supported(kind: u32) -> bool {
    field(kind).is_some()
}

/// The value a REL (addend-less) relocation finds in place, as its addend.
pub fn implicit_addend(kind: u32, bytes: &[u8], offset: usize) -> Option<i64> {
    let (at, len) = field(kind)?;
    let b = bytes.get(offset + at..offset + at + len)?;
    Some(match len {
        4 => i64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        _ => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
    })
}

/// Write `target` (symbol address + addend) into `bytes` at `offset` as
/// `kind` says. `None` when the type is unsupported or the field does not
/// fit in `bytes`.
pub fn apply(kind: u32, bytes: &mut [u8], offset: usize, target: u64) -> Option<()> {
    let (at, len) = field(kind)?;
    let dst = bytes.get_mut(offset.checked_add(at)?..offset.checked_add(at + len)?)?;
    match kind {
        R_CUDA_64 => dst.copy_from_slice(&target.to_le_bytes()),
        // CAST: these fields take the low or high 32 bits by definition.
        R_CUDA_32 | R_CUDA_ABS32_LO_32 => dst.copy_from_slice(&(target as u32).to_le_bytes()),
        R_CUDA_ABS32_HI_32 => dst.copy_from_slice(&((target >> 32) as u32).to_le_bytes()),
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_the_documented_fields() {
        let mut b = [0u8; 16];
        apply(R_CUDA_64, &mut b, 8, 0x1122_3344_5566_7788).unwrap();
        assert_eq!(&b[8..], &0x1122_3344_5566_7788u64.to_le_bytes());
        let mut i = [0xEEu8; 16];
        apply(R_CUDA_ABS32_LO_32, &mut i, 0, 0xAAAA_BBBB_CCCC_DDDD).unwrap();
        apply(R_CUDA_ABS32_HI_32, &mut i, 8, 0xAAAA_BBBB_CCCC_DDDD).unwrap();
        assert_eq!(&i[0..4], &[0xEE; 4], "the opcode half is untouched");
        assert_eq!(&i[4..8], &0xCCCC_DDDDu32.to_le_bytes());
        assert_eq!(&i[12..16], &0xAAAA_BBBBu32.to_le_bytes());
        assert_eq!(
            implicit_addend(R_CUDA_ABS32_LO_32, &i, 0),
            Some(0xCCCC_DDDD)
        );
    }

    #[test]
    fn refuses_unknown_types_and_short_targets() {
        let mut b = [0u8; 8];
        assert!(!supported(75));
        assert_eq!(apply(75, &mut b, 0, 1), None);
        assert_eq!(apply(R_CUDA_64, &mut b, 4, 1), None);
        assert_eq!(apply(R_CUDA_64, &mut b, usize::MAX, 1), None);
        assert_eq!(name(75), Some("R_CUDA_ABS55_16_34"));
    }
}
