//! A two-level segregated-fit (TLSF) allocator for GPU virtual addresses.
//! Free blocks sit in lists by size class: the first level is the power
//! of two of the size, the second splits each power into 32 equal steps.
//! One bitmap says which first levels have a non-empty list and one per
//! level which second levels do, so finding a list whose every block is
//! large enough is a couple of bit scans, and alloc and free take the
//! same time however many blocks there are. Blocks keep their physical
//! neighbours, so a freed block merges with free neighbours at once.
//!
//! Like every good-fit TLSF it looks first in the lists every block of
//! which is large enough; only when those are empty does it search the
//! few lists below, whose blocks may or may not hold the request (so an
//! allocation fails only when no free block holds it).
//!
//! The blocks are bookkeeping on the host (a GPU VA is not memory the CPU
//! can keep headers in). Every address is a multiple of the granule
//! (256 bytes: CUDA's promise, ggml's assumption); larger alignments
//! (2 MiB for huge pages) are given on request.

use crate::allocation::{granular_request, AllocError, FreeSpace};
use std::collections::HashMap;

/// The granule of device pointers: every one is 256-byte aligned, as
/// CUDA promises and ggml assumes.
pub const DEVICE_POINTER_ALIGN: u64 = 256;

/// Second-level steps per power of two.
const SL_BITS: u32 = 5;
const SL_COUNT: usize = 1 << SL_BITS;
/// First levels: one per bit of a size in granules.
const FL_COUNT: usize = u64::BITS as usize;
/// The block at the range's base: made first, and a merge always keeps
/// the lower block.
const FIRST_BLOCK: usize = 0;

/// A block of the range, free or handed out.
#[derive(Debug, Clone)]
struct Block {
    start: u64,
    size: u64,
    free: bool,
    prev_phys: Option<usize>,
    next_phys: Option<usize>,
    prev_free: Option<usize>,
    next_free: Option<usize>,
}

/// The size class of a block of `units` granules: exact below
/// `SL_COUNT`, then 32 steps a power of two.
fn class(units: u64) -> (usize, usize) {
    if units < SL_COUNT as u64 {
        // CAST: below SL_COUNT.
        return (0, units as usize);
    }
    let log = units.ilog2();
    // CAST: log < 64 and the step < SL_COUNT.
    (
        (log - SL_BITS + 1) as usize,
        (units >> (log - SL_BITS)) as usize & (SL_COUNT - 1),
    )
}

/// The lowest class whose every block holds `units` granules.
fn class_holding(units: u64) -> Option<(usize, usize)> {
    if units < SL_COUNT as u64 {
        return Some(class(units));
    }
    let step = 1u64 << (units.ilog2() - SL_BITS);
    units.checked_add(step - 1).map(class)
}

/// GPU virtual addresses `[base, base + size)`.
#[derive(Debug, Clone)]
pub struct TlsfAllocator {
    base: u64,
    size: u64,
    granule: u64,
    blocks: Vec<Block>,
    /// Slots of `blocks` no block uses.
    unused: Vec<usize>,
    heads: Vec<Option<usize>>,
    first_level: u64,
    second_level: [u32; FL_COUNT],
    live: HashMap<u64, usize>,
    free_bytes: u64,
    free_blocks: u64,
}

impl TlsfAllocator {
    /// Manage `[base, base + size)` in multiples of `granule` (a power of
    /// two; `base` and `size` multiples of it).
    ///
    /// # Errors
    /// `granule` is not a power of two, or the range not whole granules.
    pub fn new(base: u64, size: u64, granule: u64) -> Result<TlsfAllocator, AllocError> {
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
        let mut a = TlsfAllocator {
            base,
            size,
            granule,
            blocks: Vec::new(),
            unused: Vec::new(),
            heads: vec![None; FL_COUNT * SL_COUNT],
            first_level: 0,
            second_level: [0; FL_COUNT],
            live: HashMap::new(),
            free_bytes: 0,
            free_blocks: 0,
        };
        if size > 0 {
            let b = a.new_block(base, size);
            a.insert_free(b);
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
        let exhausted = |largest| AllocError::OutOfSpace {
            wanted: bytes,
            largest,
        };
        let units = len / self.granule;
        // Room for the block's start to be moved up to the alignment.
        let Some(need) = units.checked_add(align / self.granule - 1) else {
            return Err(exhausted(self.largest_free()));
        };
        let found = class_holding(need)
            .and_then(|(fl, sl)| self.nonempty_from(fl, sl))
            .and_then(|(fl, sl)| self.heads[fl * SL_COUNT + sl])
            .or_else(|| self.fitting_below(class(units), class(need), len, align));
        let Some(b) = found else {
            return Err(exhausted(self.largest_free()));
        };
        self.remove_free(b);
        let start = self.blocks[b].start;
        let aligned = start.next_multiple_of(align);
        let b = if aligned > start {
            let rest = self.split(b, aligned - start);
            self.insert_free(b);
            rest
        } else {
            b
        };
        if self.blocks[b].size > len {
            let tail = self.split(b, len);
            self.insert_free(tail);
        }
        self.live.insert(aligned, b);
        Ok(aligned)
    }

    /// Free the allocation at `addr`; returns its length.
    ///
    /// # Errors
    /// `addr` lies in free space (freed twice), or is no allocation's
    /// start. (Telling these apart walks the blocks: errors only.)
    pub fn free(&mut self, addr: u64) -> Result<u64, AllocError> {
        let Some(mut b) = self.live.remove(&addr) else {
            return Err(self.bad_free(addr));
        };
        let len = self.blocks[b].size;
        if let Some(p) = self.blocks[b].prev_phys.filter(|&p| self.blocks[p].free) {
            self.remove_free(p);
            self.absorb(p, b);
            b = p;
        }
        if let Some(n) = self.blocks[b].next_phys.filter(|&n| self.blocks[n].free) {
            self.remove_free(n);
            self.absorb(b, n);
        }
        self.insert_free(b);
        Ok(len)
    }

    /// The free space now.
    pub fn free_space(&self) -> FreeSpace {
        FreeSpace {
            free_bytes: self.free_bytes,
            largest_free_block: self.largest_free(),
            free_blocks: self.free_blocks,
        }
    }

    fn bad_free(&self, addr: u64) -> AllocError {
        // The block at the base is never merged away nor moved: the first.
        let mut at = (self.size > 0).then_some(FIRST_BLOCK);
        while let Some(b) = at {
            let blk = &self.blocks[b];
            if blk.start <= addr && addr - blk.start < blk.size {
                return if blk.free {
                    AllocError::DoubleFree { addr }
                } else {
                    AllocError::Foreign { addr }
                };
            }
            at = blk.next_phys;
        }
        AllocError::Foreign { addr }
    }

    /// The largest free block: the longest of the highest non-empty list.
    fn largest_free(&self) -> u64 {
        if self.first_level == 0 {
            return 0;
        }
        // CAST: a bit index.
        let fl = self.first_level.ilog2() as usize;
        let sl = self.second_level[fl].ilog2() as usize;
        let mut at = self.heads[fl * SL_COUNT + sl];
        let mut largest = 0;
        while let Some(b) = at {
            largest = largest.max(self.blocks[b].size);
            at = self.blocks[b].next_free;
        }
        largest
    }

    /// The first non-empty list at class `(fl, sl)` or above.
    fn nonempty_from(&self, fl: usize, sl: usize) -> Option<(usize, usize)> {
        let here = self.second_level[fl] & (u32::MAX << sl);
        if here != 0 {
            // CAST: a bit index.
            return Some((fl, here.trailing_zeros() as usize));
        }
        let above = if fl + 1 < FL_COUNT {
            self.first_level & (u64::MAX << (fl + 1))
        } else {
            0
        };
        if above == 0 {
            return None;
        }
        let fl = above.trailing_zeros() as usize;
        Some((fl, self.second_level[fl].trailing_zeros() as usize))
    }

    /// A block holding `len` at `align` in the classes from `from` to
    /// `to`, whose blocks may or may not: the lists above them were empty.
    fn fitting_below(
        &self,
        from: (usize, usize),
        to: (usize, usize),
        len: u64,
        align: u64,
    ) -> Option<usize> {
        let mut next = self.nonempty_from(from.0, from.1);
        while let Some((fl, sl)) = next.filter(|&c| c <= to) {
            let mut at = self.heads[fl * SL_COUNT + sl];
            while let Some(b) = at {
                let blk = &self.blocks[b];
                let pad = blk.start.next_multiple_of(align) - blk.start;
                if blk.size >= pad && blk.size - pad >= len {
                    return Some(b);
                }
                at = blk.next_free;
            }
            next = if sl + 1 < SL_COUNT {
                self.nonempty_from(fl, sl + 1)
            } else if fl + 1 < FL_COUNT {
                self.nonempty_from(fl + 1, 0)
            } else {
                None
            };
        }
        None
    }

    fn new_block(&mut self, start: u64, size: u64) -> usize {
        let blk = Block {
            start,
            size,
            free: false,
            prev_phys: None,
            next_phys: None,
            prev_free: None,
            next_free: None,
        };
        match self.unused.pop() {
            Some(i) => {
                self.blocks[i] = blk;
                i
            }
            None => {
                self.blocks.push(blk);
                self.blocks.len() - 1
            }
        }
    }

    /// Cut `b` at `offset`: `b` keeps the front, the returned block (used,
    /// not in any list) the rest.
    fn split(&mut self, b: usize, offset: u64) -> usize {
        let (start, size, next) = {
            let blk = &self.blocks[b];
            (blk.start, blk.size, blk.next_phys)
        };
        let rest = self.new_block(start + offset, size - offset);
        self.blocks[rest].prev_phys = Some(b);
        self.blocks[rest].next_phys = next;
        if let Some(n) = next {
            self.blocks[n].prev_phys = Some(rest);
        }
        self.blocks[b].size = offset;
        self.blocks[b].next_phys = Some(rest);
        rest
    }

    /// Merge `next` (its physical successor, in no list) into `b`.
    fn absorb(&mut self, b: usize, next: usize) {
        let (size, after) = (self.blocks[next].size, self.blocks[next].next_phys);
        self.blocks[b].size += size;
        self.blocks[b].next_phys = after;
        if let Some(a) = after {
            self.blocks[a].prev_phys = Some(b);
        }
        self.unused.push(next);
    }

    fn insert_free(&mut self, b: usize) {
        let (fl, sl) = class(self.blocks[b].size / self.granule);
        let slot = fl * SL_COUNT + sl;
        let head = self.heads[slot];
        {
            let blk = &mut self.blocks[b];
            blk.free = true;
            blk.prev_free = None;
            blk.next_free = head;
        }
        if let Some(h) = head {
            self.blocks[h].prev_free = Some(b);
        }
        self.heads[slot] = Some(b);
        self.first_level |= 1 << fl;
        self.second_level[fl] |= 1 << sl;
        self.free_bytes += self.blocks[b].size;
        self.free_blocks += 1;
    }

    fn remove_free(&mut self, b: usize) {
        let (fl, sl) = class(self.blocks[b].size / self.granule);
        let slot = fl * SL_COUNT + sl;
        let (prev, next) = (self.blocks[b].prev_free, self.blocks[b].next_free);
        match prev {
            Some(p) => self.blocks[p].next_free = next,
            None => self.heads[slot] = next,
        }
        if let Some(n) = next {
            self.blocks[n].prev_free = prev;
        }
        if self.heads[slot].is_none() {
            self.second_level[fl] &= !(1 << sl);
            if self.second_level[fl] == 0 {
                self.first_level &= !(1 << fl);
            }
        }
        let blk = &mut self.blocks[b];
        blk.free = false;
        blk.prev_free = None;
        blk.next_free = None;
        self.free_bytes -= blk.size;
        self.free_blocks -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_exact_below_the_steps_and_32_a_power_above() {
        assert_eq!(class(1), (0, 1));
        assert_eq!(class(31), (0, 31));
        assert_eq!(class(32), (1, 0));
        assert_eq!(class(63), (1, 31));
        assert_eq!(class(64), (2, 0));
        assert_eq!(class(65), (2, 0));
        assert_eq!(class(66), (2, 1));
        // Every block of the class found holds the request.
        assert_eq!(class_holding(65), Some((2, 1)));
        assert_eq!(class_holding(64), Some((2, 0)));
        assert_eq!(class(u64::MAX).0, FL_COUNT - SL_BITS as usize);
    }

    #[test]
    fn aligns_splits_and_merges_back() {
        let mut a = TlsfAllocator::new(0x1000, 64 << 20, DEVICE_POINTER_ALIGN).unwrap();
        let p = a.alloc(1, 1).unwrap();
        assert_eq!(p % 256, 0);
        let q = a.alloc(100, 2 << 20).unwrap();
        assert_eq!(q % (2 << 20), 0);
        assert_eq!(a.free_space().free_bytes, (64 << 20) - 512);
        assert_eq!(a.free(q), Ok(256));
        assert_eq!(a.free(p), Ok(256));
        assert_eq!(
            a.free_space(),
            FreeSpace {
                free_bytes: 64 << 20,
                largest_free_block: 64 << 20,
                free_blocks: 1
            }
        );
        assert_eq!(
            a.alloc(64 << 20, 256),
            Ok(0x1000),
            "the whole range fits again"
        );
    }

    #[test]
    fn refuses_with_typed_errors() {
        let mut a = TlsfAllocator::new(0, 1 << 20, DEVICE_POINTER_ALIGN).unwrap();
        assert_eq!(a.alloc(0, 256), Err(AllocError::ZeroSize));
        assert_eq!(a.alloc(1, 3), Err(AllocError::BadAlignment { align: 3 }));
        let p = a.alloc(4096, 256).unwrap();
        assert_eq!(a.free(p + 256), Err(AllocError::Foreign { addr: p + 256 }));
        assert_eq!(a.free(1 << 30), Err(AllocError::Foreign { addr: 1 << 30 }));
        a.free(p).unwrap();
        assert_eq!(a.free(p), Err(AllocError::DoubleFree { addr: p }));
        assert_eq!(
            a.alloc(2 << 20, 256),
            Err(AllocError::OutOfSpace {
                wanted: 2 << 20,
                largest: 1 << 20
            })
        );
        assert!(matches!(
            TlsfAllocator::new(100, 1 << 20, DEVICE_POINTER_ALIGN),
            Err(AllocError::BadRange { .. })
        ));
    }
}
