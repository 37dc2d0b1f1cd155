//! The GPU MMU's page sizes (Hopper's and Blackwell's MMU v3): what a
//! mapping's VA and its memory are both aligned to. Memory RM allocates
//! with one of them can only be mapped at a VA aligned to the same one.

/// Small pages.
pub const SMALL: u64 = 4 << 10;
/// Big pages (the big-page size a VA space is made with: 64 KiB).
pub const BIG: u64 = 64 << 10;
/// Huge pages: one 2 MiB entry at the second-lowest level.
pub const HUGE: u64 = 2 << 20;

#[cfg(test)]
mod tests {
    #[test]
    fn each_size_holds_a_whole_number_of_the_one_below() {
        assert_eq!(super::BIG % super::SMALL, 0);
        assert_eq!(super::HUGE % super::BIG, 0);
        assert_eq!(super::HUGE / super::SMALL, 512, "one page-table level");
    }
}
