//! The one source of randomness a fuzz run has: a small generator with a
//! fixed seed, so that a run, and the input it failed on, come out the same
//! every time (no dependency, no state outside the run).

/// The SplitMix64 increment (the golden ratio in 64 bits): consecutive
/// states are spread over the whole range.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;
/// SplitMix64's two output multipliers.
const MIX_1: u64 = 0xbf58_476d_1ce4_e5b9;
const MIX_2: u64 = 0x94d0_49bb_1331_11eb;
/// FNV-1a's offset basis and prime, for naming inputs and seeding targets.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// A deterministic generator (SplitMix64): statistically good enough to
/// choose mutations, and tiny.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(MIX_1);
        z = (z ^ (z >> 27)).wrapping_mul(MIX_2);
        z ^ (z >> 31)
    }

    pub fn next_u32(&mut self) -> u32 {
        // CAST: the high half, which mixes best.
        (self.next_u64() >> 32) as u32
    }

    /// A number in `0..n`; 0 when `n` is 0, so callers need not check.
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        // CAST: the result is below n, a usize.
        (self.next_u64() % n as u64) as usize
    }

    /// True once in `n` times on average.
    pub fn one_in(&mut self, n: u32) -> bool {
        n <= 1 || self.next_u32().is_multiple_of(n)
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            return None;
        }
        items.get(self.below(items.len()))
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        // CAST: the low byte of each draw.
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

/// A stable 64-bit hash (FNV-1a): seeds a target from its name and names
/// the file an input is written to, the same on every machine.
pub fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_numbers() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(Rng::new(7).next_u64(), Rng::new(8).next_u64());
    }

    #[test]
    fn below_stays_below_and_tolerates_zero() {
        let mut r = Rng::new(1);
        assert_eq!(r.below(0), 0);
        assert!((0..1000).all(|_| r.below(5) < 5));
    }
}
