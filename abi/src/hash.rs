//! The hash for the runtime's tables, whose keys are addresses and handle
//! numbers the runtime or the program's linker chose (never an attacker's
//! choice of many colliding keys): one multiply, where the default
//! (SipHash) costs a fifth of a launch.

use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default, Clone, Copy)]
pub struct AddressHasher(u64);

/// Fibonacci hashing's multiplier (2^64 / the golden ratio).
const MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(MULTIPLIER);
        }
    }

    fn write_usize(&mut self, n: usize) {
        // The high bits pick dashmap's shard, the low ones the bucket:
        // fold the product so both vary with the address.
        let p = (n as u64 ^ self.0).wrapping_mul(MULTIPLIER);
        self.0 = p ^ (p >> 32);
    }

    fn write_u64(&mut self, n: u64) {
        self.write_usize(n as usize);
    }
}

pub type AddressMap<V> = dashmap::DashMap<usize, V, BuildHasherDefault<AddressHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn nearby_addresses_spread() {
        let b = BuildHasherDefault::<AddressHasher>::default();
        let hashes: std::collections::HashSet<u64> = (0..4096usize)
            .map(|i| b.hash_one(0x5555_0000 + i * 16))
            .collect();
        assert_eq!(hashes.len(), 4096);
        let high: std::collections::HashSet<u64> = hashes.iter().map(|h| h >> 60).collect();
        assert_eq!(high.len(), 16, "every shard is used");
    }
}
