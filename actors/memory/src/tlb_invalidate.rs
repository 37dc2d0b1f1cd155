//! What a change to the page tables obliges the caller to do: invalidate
//! the GPU's TLB for one VA space and range. The GPU keeps translations
//! (and directory entries) it read until told to forget them, so a page
//! unmapped but not invalidated is still reached, and a table freed but
//! not invalidated may be walked after it holds something else. Every map
//! and unmap hands back one of these; the tables it freed stay out of the
//! pool until the value is handed back as done
//! ([`crate::PageTables::invalidated`]).

use std::ops::Range;

/// A VA space's root: where its top directory (PD4) lies in video memory.
/// The instance block's `PAGE_DIR_BASE` and the invalidate's `PDB` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PageDirectoryBase {
    /// Physical address in video memory.
    pub address: u64,
}

/// An invalidation owed to the GPU after the tables changed.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "the GPU still uses the old translations until its TLB is invalidated"]
pub struct TlbInvalidate {
    /// The VA space whose translations changed.
    pub pdb: PageDirectoryBase,
    /// The VAs whose translations changed.
    pub va: Range<u64>,
    /// The shallowest table whose entries changed, by depth: 0 is PD4,
    /// 4 is PD0, 5 a page table. Directory caches from this depth down
    /// hold stale entries; an invalidate of all levels covers any value.
    pub shallowest_level: usize,
    /// Tables emptied and unlinked: they go back to the pool once the
    /// invalidation is done, never before.
    pub(crate) freed_tables: Vec<FreedTable>,
}

/// A table's memory waiting for the invalidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FreedTable {
    Page(u64),
    Slot(u64),
}

impl TlbInvalidate {
    /// How many tables wait on this invalidation to be reused.
    pub fn freed_tables(&self) -> usize {
        self.freed_tables.len()
    }
}
