//! A first-fit range allocator with coalescing, used for both VRAM and GPU
//! virtual addresses. Free blocks are kept by start address so neighbours
//! merge on free in O(log n).

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("out of space: {wanted} bytes wanted, largest free block {largest}")]
    Exhausted { wanted: u64, largest: u64 },
    #[error("{addr:#x} is not the start of a live allocation")]
    NotAllocated { addr: u64 },
    #[error("zero-byte allocation")]
    Empty,
    #[error("alignment {0} is not a power of two")]
    BadAlignment(u64),
}

#[derive(Debug, Clone)]
pub struct RangeAllocator {
    base: u64,
    size: u64,
    granule: u64,
    free: BTreeMap<u64, u64>,
    live: BTreeMap<u64, u64>,
}

impl RangeAllocator {
    /// Manage `[base, base + size)`, handing out multiples of `granule`.
    pub fn new(base: u64, size: u64, granule: u64) -> RangeAllocator {
        let mut free = BTreeMap::new();
        if size > 0 {
            free.insert(base, size);
        }
        RangeAllocator {
            base,
            size,
            granule: granule.max(1),
            free,
            live: BTreeMap::new(),
        }
    }

    /// # Errors
    /// Zero size, a bad alignment, or no free block large enough.
    pub fn alloc(&mut self, bytes: u64, align: u64) -> Result<u64, RangeError> {
        if bytes == 0 {
            return Err(RangeError::Empty);
        }
        if !align.is_power_of_two() {
            return Err(RangeError::BadAlignment(align));
        }
        let exhausted = || RangeError::Exhausted {
            wanted: bytes,
            largest: 0,
        };
        let len = bytes
            .checked_next_multiple_of(self.granule)
            .ok_or_else(exhausted)?;
        let mut pick = None;
        for (&start, &blen) in &self.free {
            let Some(aligned) = start.checked_next_multiple_of(align) else {
                continue;
            };
            let pad = aligned - start;
            if blen >= pad && blen - pad >= len {
                pick = Some((start, blen, aligned));
                break;
            }
        }
        let Some((start, blen, aligned)) = pick else {
            return Err(RangeError::Exhausted {
                wanted: len,
                largest: self.free.values().copied().max().unwrap_or(0),
            });
        };
        self.free.remove(&start);
        if aligned > start {
            self.free.insert(start, aligned - start);
        }
        let end = aligned + len;
        if start + blen > end {
            self.free.insert(end, start + blen - end);
        }
        self.live.insert(aligned, len);
        Ok(aligned)
    }

    /// Free the allocation starting at `addr`; returns its length.
    ///
    /// # Errors
    /// `addr` is not the start of a live allocation.
    pub fn free(&mut self, addr: u64) -> Result<u64, RangeError> {
        let len = self
            .live
            .remove(&addr)
            .ok_or(RangeError::NotAllocated { addr })?;
        let mut start = addr;
        let mut blen = len;
        if let Some((&pstart, &plen)) = self.free.range(..addr).next_back() {
            if pstart + plen == addr {
                self.free.remove(&pstart);
                start = pstart;
                blen += plen;
            }
        }
        if let Some(&nlen) = self.free.get(&(addr + len)) {
            self.free.remove(&(addr + len));
            blen += nlen;
        }
        self.free.insert(start, blen);
        Ok(len)
    }

    pub fn used(&self) -> u64 {
        self.live.values().sum()
    }

    pub fn capacity(&self) -> u64 {
        self.size
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    /// Number of free blocks: 1 when everything freed has merged back.
    pub fn fragments(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_and_rounds_to_the_granule() {
        let mut a = RangeAllocator::new(0x1000, 0x10_0000, 0x100);
        let p = a.alloc(1, 0x100).unwrap();
        assert_eq!(p % 0x100, 0);
        let q = a.alloc(0x10, 0x1_0000).unwrap();
        assert_eq!(q % 0x1_0000, 0);
        assert_eq!(a.used(), 0x200);
    }

    #[test]
    fn frees_coalesce_back_to_one_block() {
        let mut a = RangeAllocator::new(0, 1 << 20, 4096);
        let ptrs: Vec<u64> = (0..16)
            .map(|i| a.alloc(4096 * (i % 3 + 1), 4096).unwrap())
            .collect();
        for (i, p) in ptrs.iter().enumerate() {
            if i % 2 == 0 {
                a.free(*p).unwrap();
            }
        }
        for (i, p) in ptrs.iter().enumerate() {
            if i % 2 == 1 {
                a.free(*p).unwrap();
            }
        }
        assert_eq!(a.used(), 0);
        assert_eq!(a.fragments(), 1);
        assert_eq!(a.alloc(1 << 20, 4096).unwrap(), 0);
    }

    #[test]
    fn reports_exhaustion_and_bad_frees() {
        let mut a = RangeAllocator::new(0, 8192, 4096);
        a.alloc(4096, 4096).unwrap();
        let p = a.alloc(4096, 4096).unwrap();
        assert!(matches!(a.alloc(1, 1), Err(RangeError::Exhausted { .. })));
        assert_eq!(a.free(p + 1), Err(RangeError::NotAllocated { addr: p + 1 }));
        assert_eq!(a.alloc(0, 1), Err(RangeError::Empty));
        assert_eq!(a.alloc(1, 3), Err(RangeError::BadAlignment(3)));
    }

    #[test]
    fn never_overlaps() {
        let mut a = RangeAllocator::new(0, 1 << 24, 256);
        let mut live: Vec<(u64, u64)> = Vec::new();
        let mut seed = 0x9E37_79B9u64;
        for step in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            if step % 3 == 2 && !live.is_empty() {
                let (p, _) = live.swap_remove((seed as usize) % live.len());
                a.free(p).unwrap();
            } else if let Ok(p) = a.alloc(seed % 50_000 + 1, 256) {
                let len = (seed % 50_000 + 1).next_multiple_of(256);
                assert!(
                    live.iter().all(|&(q, l)| p + len <= q || q + l <= p),
                    "overlap at {p:#x}"
                );
                live.push((p, len));
            }
        }
        assert_eq!(a.used(), live.iter().map(|&(_, l)| l).sum::<u64>());
    }
}
