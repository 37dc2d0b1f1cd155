//! A segregated-fit allocator for video memory's physical ranges. Free
//! blocks are kept twice: by start address, so a freed range merges with
//! free neighbours, and in one list per power-of-two size class, so a
//! request looks first among blocks of its own size and only then at
//! larger ones (a bitmap says which classes hold any). Within a class the
//! lowest address wins: video memory stays packed toward the bottom,
//! where the CPU's window is.
//!
//! Sizes are whole granules (the smallest page a range may be mapped
//! with); larger alignments (2 MiB for huge pages) are given on request.

use crate::allocation::{granular_request, AllocError, FreeSpace};
use std::collections::{BTreeMap, BTreeSet};

/// Size classes: one per bit of a size in granules.
const CLASSES: usize = u64::BITS as usize;

/// The class of a block of `units` granules: its power of two.
fn class(units: u64) -> usize {
    // CAST: a bit index.
    units.ilog2() as usize
}

/// Video memory `[base, base + size)`.
#[derive(Debug, Clone)]
pub struct SegregatedFitAllocator {
    base: u64,
    size: u64,
    granule: u64,
    /// Free blocks: start to length.
    free: BTreeMap<u64, u64>,
    /// Free blocks' starts by size class.
    classes: Vec<BTreeSet<u64>>,
    /// Classes holding a free block, one bit each.
    nonempty: u64,
    live: BTreeMap<u64, u64>,
    free_bytes: u64,
}

impl SegregatedFitAllocator {
    /// Manage `[base, base + size)` in multiples of `granule` (a power of
    /// two; `base` and `size` multiples of it).
    ///
    /// # Errors
    /// `granule` is not a power of two, or the range not whole granules.
    pub fn new(base: u64, size: u64, granule: u64) -> Result<SegregatedFitAllocator, AllocError> {
        if !granule.is_power_of_two() {
            return Err(AllocError::BadAlignment { align: granule });
        }
        if !base.is_multiple_of(granule)
            || !size.is_multiple_of(granule)
            || base.checked_add(size).is_none()
        {
            return Err(AllocError::BadRange {
                base,
                size,
                granule,
            });
        }
        let mut a = SegregatedFitAllocator {
            base,
            size,
            granule,
            free: BTreeMap::new(),
            classes: vec![BTreeSet::new(); CLASSES],
            nonempty: 0,
            live: BTreeMap::new(),
            free_bytes: 0,
        };
        if size > 0 {
            a.insert_free(base, size);
        }
        Ok(a)
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn capacity(&self) -> u64 {
        self.size
    }

    pub fn granule(&self) -> u64 {
        self.granule
    }

    /// Allocations not freed.
    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    /// `bytes` (rounded up to the granule) aligned to `align` (at least
    /// the granule).
    ///
    /// # Errors
    /// Zero bytes, an alignment not a power of two, or no free block that
    /// holds it.
    pub fn alloc(&mut self, bytes: u64, align: u64) -> Result<u64, AllocError> {
        let (len, align) = granular_request(bytes, align, self.granule, || self.largest_free())?;
        let out_of_space = |largest| AllocError::OutOfSpace {
            wanted: bytes,
            largest,
        };
        let Some((start, size, aligned)) = self.find(len, align) else {
            return Err(out_of_space(self.largest_free()));
        };
        self.remove_free(start, size);
        if aligned > start {
            self.insert_free(start, aligned - start);
        }
        let end = aligned + len;
        if start + size > end {
            self.insert_free(end, start + size - end);
        }
        self.live.insert(aligned, len);
        Ok(aligned)
    }

    /// Free the allocation at `addr`; returns its length.
    ///
    /// # Errors
    /// `addr` lies in free space (freed twice), or is no allocation's
    /// start.
    pub fn free(&mut self, addr: u64) -> Result<u64, AllocError> {
        let Some(len) = self.live.remove(&addr) else {
            let in_free = self
                .free
                .range(..=addr)
                .next_back()
                .is_some_and(|(&s, &l)| addr - s < l);
            return Err(if in_free {
                AllocError::DoubleFree { addr }
            } else {
                AllocError::Foreign { addr }
            });
        };
        let (mut start, mut size) = (addr, len);
        if let Some((&ps, &pl)) = self.free.range(..addr).next_back() {
            if ps + pl == addr {
                self.remove_free(ps, pl);
                start = ps;
                size += pl;
            }
        }
        if let Some(&nl) = self.free.get(&(addr + len)) {
            self.remove_free(addr + len, nl);
            size += nl;
        }
        self.insert_free(start, size);
        Ok(len)
    }

    /// The free space now.
    pub fn free_space(&self) -> FreeSpace {
        FreeSpace {
            free_bytes: self.free_bytes,
            largest_free_block: self.largest_free(),
            free_blocks: self.free.len() as u64,
        }
    }

    /// The lowest free block of the smallest class that holds `len` at
    /// `align`: its start, length, and where the allocation would begin.
    fn find(&self, len: u64, align: u64) -> Option<(u64, u64, u64)> {
        let mut classes = self.nonempty & (u64::MAX << class(len / self.granule));
        while classes != 0 {
            // CAST: a bit index.
            let c = classes.trailing_zeros() as usize;
            classes &= classes - 1;
            for &start in &self.classes[c] {
                let size = self.free[&start];
                let aligned = start.next_multiple_of(align);
                if aligned - start <= size && size - (aligned - start) >= len {
                    return Some((start, size, aligned));
                }
            }
        }
        None
    }

    fn largest_free(&self) -> u64 {
        if self.nonempty == 0 {
            return 0;
        }
        // CAST: a bit index.
        let top = self.nonempty.ilog2() as usize;
        self.classes[top]
            .iter()
            .map(|s| self.free[s])
            .max()
            .unwrap_or(0)
    }

    fn insert_free(&mut self, start: u64, size: u64) {
        let c = class(size / self.granule);
        self.free.insert(start, size);
        self.classes[c].insert(start);
        self.nonempty |= 1 << c;
        self.free_bytes += size;
    }

    fn remove_free(&mut self, start: u64, size: u64) {
        let c = class(size / self.granule);
        self.free.remove(&start);
        self.classes[c].remove(&start);
        if self.classes[c].is_empty() {
            self.nonempty &= !(1 << c);
        }
        self.free_bytes -= size;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;

    #[test]
    fn a_hole_of_the_right_size_is_taken_before_the_big_block() {
        let mut a = SegregatedFitAllocator::new(0, 64 * MIB, 64 * KIB).unwrap();
        let p: Vec<u64> = (0..4).map(|_| a.alloc(64 * KIB, 1).unwrap()).collect();
        assert_eq!(p, [0, 64 * KIB, 128 * KIB, 192 * KIB]);
        a.free(p[1]).unwrap();
        assert_eq!(a.free_space().free_blocks, 2);
        assert_eq!(a.alloc(1, 1), Ok(64 * KIB), "the hole, not the tail");
        let huge = a.alloc(3 * MIB, 2 * MIB).unwrap();
        assert_eq!(huge, 2 * MIB);
        for q in [p[0], p[1], p[2], p[3], huge] {
            a.free(q).unwrap();
        }
        assert_eq!(
            a.free_space(),
            FreeSpace {
                free_bytes: 64 * MIB,
                largest_free_block: 64 * MIB,
                free_blocks: 1
            }
        );
    }

    #[test]
    fn refuses_with_typed_errors() {
        let mut a = SegregatedFitAllocator::new(0, MIB, 64 * KIB).unwrap();
        assert_eq!(a.alloc(0, 1), Err(AllocError::ZeroSize));
        assert_eq!(a.alloc(1, 6), Err(AllocError::BadAlignment { align: 6 }));
        let p = a.alloc(64 * KIB, 1).unwrap();
        assert_eq!(
            a.free(p + 4096),
            Err(AllocError::Foreign { addr: p + 4096 })
        );
        assert_eq!(a.free(8 * MIB), Err(AllocError::Foreign { addr: 8 * MIB }));
        a.free(p).unwrap();
        assert_eq!(a.free(p), Err(AllocError::DoubleFree { addr: p }));
        assert_eq!(
            a.alloc(2 * MIB, 1),
            Err(AllocError::OutOfSpace {
                wanted: 2 * MIB,
                largest: MIB
            })
        );
    }
}
