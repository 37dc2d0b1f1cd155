//! Little-endian fields of the byte layouts declared here (and read by the
//! sim): one set of helpers, so each layout's code says only where.

/// The u32 at `at`.
pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The u64 at `at`.
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

pub fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_little_endian() {
        let mut b = [0u8; 12];
        put_u32(&mut b, 0, 0x0403_0201);
        put_u64(&mut b, 4, 0x0C0B_0A09_0807_0605);
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(
            (u32_at(&b, 0), u64_at(&b, 4)),
            (0x0403_0201, 0x0C0B_0A09_0807_0605)
        );
    }
}
