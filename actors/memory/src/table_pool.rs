//! Where page tables are placed: a range of video memory the caller sets
//! aside (low, inside the CPU's BAR1 window, so every table can be
//! written). Every table is one 4 KiB page except the 64 KiB-page table,
//! which is 256 bytes: those are packed sixteen to a page, so a VA space
//! of big pages does not spend a page per 2 MiB.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

/// Why the pool could not be made or could not give a table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TablePoolError {
    #[error("the table pool {start:#x}..{end:#x} is not whole {page}-byte pages")]
    Misaligned { start: u64, end: u64, page: u64 },
    #[error("the table pool {start:#x}..{end:#x} is empty")]
    Empty { start: u64, end: u64 },
    #[error("the table pool is exhausted: all {pages} pages hold tables")]
    Exhausted { pages: u64 },
}

/// Free pages and partly used pages of small tables.
#[derive(Debug)]
pub struct TablePool {
    range: Range<u64>,
    page: u64,
    slot: u64,
    free_pages: BTreeSet<u64>,
    /// Pages cut into slots: which slots are taken, one bit each.
    slotted: BTreeMap<u64, u64>,
    /// Slotted pages with at least one free slot.
    with_room: BTreeSet<u64>,
}

impl TablePool {
    /// A pool of `range`, handing out `page`-byte pages and `slot`-byte
    /// slots (`slot` divides `page`, at most 64 slots a page).
    ///
    /// # Errors
    /// The range is empty or not whole pages.
    pub fn new(range: Range<u64>, page: u64, slot: u64) -> Result<TablePool, TablePoolError> {
        let (start, end) = (range.start, range.end);
        if !start.is_multiple_of(page) || !end.is_multiple_of(page) {
            return Err(TablePoolError::Misaligned { start, end, page });
        }
        if end <= start {
            return Err(TablePoolError::Empty { start, end });
        }
        debug_assert!(page.is_multiple_of(slot) && page / slot <= u64::from(u64::BITS));
        Ok(TablePool {
            free_pages: range.clone().step_by(page as usize).collect(),
            range,
            page,
            slot,
            slotted: BTreeMap::new(),
            with_room: BTreeSet::new(),
        })
    }

    fn slots_per_page(&self) -> u64 {
        self.page / self.slot
    }

    fn full(&self) -> u64 {
        let n = self.slots_per_page();
        if n == u64::from(u64::BITS) {
            u64::MAX
        } else {
            (1 << n) - 1
        }
    }

    fn exhausted(&self) -> TablePoolError {
        TablePoolError::Exhausted {
            pages: (self.range.end - self.range.start) / self.page,
        }
    }

    /// A whole page, the lowest free.
    ///
    /// # Errors
    /// No page is free.
    pub fn page(&mut self) -> Result<u64, TablePoolError> {
        self.free_pages.pop_first().ok_or_else(|| self.exhausted())
    }

    /// A slot, from a page already cut if one has room.
    ///
    /// # Errors
    /// No slot is free and no page either.
    pub fn slot(&mut self) -> Result<u64, TablePoolError> {
        let page = match self.with_room.first() {
            Some(&p) => p,
            None => {
                let p = self.page()?;
                self.slotted.insert(p, 0);
                self.with_room.insert(p);
                p
            }
        };
        let full = self.full();
        let taken = self.slotted.entry(page).or_insert(0);
        let index = u64::from((!*taken).trailing_zeros());
        *taken |= 1 << index;
        if *taken == full {
            self.with_room.remove(&page);
        }
        Ok(page + index * self.slot)
    }

    /// Give back a page [`TablePool::page`] gave.
    pub fn free_page(&mut self, page: u64) {
        debug_assert!(self.range.contains(&page) && !self.slotted.contains_key(&page));
        self.free_pages.insert(page);
    }

    /// Give back a slot [`TablePool::slot`] gave; its page goes back too
    /// once no slot of it is taken.
    pub fn free_slot(&mut self, at: u64) {
        let page = at - at % self.page;
        let index = (at - page) / self.slot;
        let Some(taken) = self.slotted.get_mut(&page) else {
            debug_assert!(false, "slot {at:#x} of a page never cut");
            return;
        };
        *taken &= !(1 << index);
        if *taken == 0 {
            self.slotted.remove(&page);
            self.with_room.remove(&page);
            self.free_pages.insert(page);
        } else {
            self.with_room.insert(page);
        }
    }

    /// Pages holding no table at all.
    pub fn free_pages(&self) -> u64 {
        self.free_pages.len() as u64
    }

    /// Pages in the pool.
    pub fn pages(&self) -> u64 {
        (self.range.end - self.range.start) / self.page
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_pack_a_page_and_return_it_when_all_are_free() {
        let mut p = TablePool::new(0x1000..0x3000, 0x1000, 0x100).unwrap();
        let slots: Vec<u64> = (0..16).map(|_| p.slot().unwrap()).collect();
        assert_eq!(slots[0], 0x1000);
        assert_eq!(slots[15], 0x1F00);
        assert_eq!(p.free_pages(), 1);
        let page = p.page().unwrap();
        assert_eq!(page, 0x2000);
        assert_eq!(p.slot(), Err(TablePoolError::Exhausted { pages: 2 }));
        p.free_slot(0x1300);
        assert_eq!(p.slot().unwrap(), 0x1300);
        for s in slots {
            p.free_slot(s);
        }
        p.free_page(page);
        assert_eq!(p.free_pages(), 2);
    }

    #[test]
    fn refuses_ranges_of_part_pages() {
        assert!(matches!(
            TablePool::new(0x800..0x2000, 0x1000, 0x100),
            Err(TablePoolError::Misaligned { .. })
        ));
        assert!(matches!(
            TablePool::new(0x1000..0x1000, 0x1000, 0x100),
            Err(TablePoolError::Empty { .. })
        ));
    }
}
