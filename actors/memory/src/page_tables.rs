//! The MMU v3 page tables of one GPU VA space, built by us (bare metal,
//! where no RM owns them): PD4 down to PD0's dual entries, whose big half
//! points at a 64 KiB-page table and small half at a 4 KiB-page one, and
//! 2 MiB pages in PD0's own slots. Tables come from a pool of video
//! memory the caller sets aside and go back when they empty.
//!
//! A copy of every table is kept here: the builder never reads the
//! tables back (over Thunderbolt every BAR1 read is a round trip), and
//! the copy is what overlap and unmapping are checked against. A new
//! table is zeroed before its parent points at it, so the GPU never walks
//! memory that was not written as a table. Each change hands back the
//! [`TlbInvalidate`] it makes owed.

use crate::page_mapping::{AddressKind, Aperture, MappedPage, PageFlags, PageSize, PageTableError};
use crate::table_memory::TableMemory;
use crate::table_pool::TablePool;
use crate::tlb_invalidate::{FreedTable, PageDirectoryBase, TlbInvalidate};
use macuda_hw::mmu::{
    dual_pde, pde, pte, Level, PdeAperture, PteAperture, DIRECTORY_LEVELS, PT_BIG, PT_SMALL,
    VA_BITS,
};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

/// PD0, the directory of dual entries (and 2 MiB pages).
const PD0: usize = DIRECTORY_LEVELS.len() - 1;

/// Every table's placement: directories and the 4 KiB-page table are
/// addressed in 4 KiB units, so each takes a page of the pool.
const TABLE_PAGE: u64 = 1 << pde::ADDRESS_SHIFT;
/// The 64 KiB-page table is addressed in 256-byte units: a slot.
const BIG_TABLE_ALIGN: u64 = 1 << dual_pde::ADDRESS_BIG_SHIFT;

/// Which table: a directory by its depth from the root, or one of the two
/// page tables under a PD0 entry. Ordered root first, page tables last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum TableKind {
    Directory(usize),
    Big,
    Small,
}

impl TableKind {
    fn level(self) -> &'static Level {
        match self {
            TableKind::Directory(d) => &DIRECTORY_LEVELS[d],
            TableKind::Big => &PT_BIG,
            TableKind::Small => &PT_SMALL,
        }
    }

    fn entries(self) -> usize {
        1 << self.level().index_bits
    }

    fn bytes(self) -> u64 {
        (1 << self.level().index_bits) * self.level().entry_bytes
    }

    /// The VA bytes one table of this kind covers.
    fn span(self) -> u64 {
        let l = self.level();
        1 << (l.va_shift + l.index_bits)
    }

    /// Depth from the root: PD4 is 0, the page tables one past PD0.
    fn depth(self) -> usize {
        match self {
            TableKind::Directory(d) => d,
            TableKind::Big | TableKind::Small => PD0 + 1,
        }
    }
}

/// A table by kind and the first VA it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct TableKey {
    kind: TableKind,
    va: u64,
}

impl TableKey {
    fn of(kind: TableKind, va: u64) -> TableKey {
        TableKey {
            kind,
            va: va & !(kind.span() - 1),
        }
    }

    /// The directory entry pointing at this table: the parent table and
    /// the slot in it. The root has none.
    fn parent(self) -> Option<(TableKey, usize)> {
        let d = match self.kind {
            TableKind::Directory(0) => return None,
            TableKind::Directory(d) => d - 1,
            TableKind::Big | TableKind::Small => PD0,
        };
        let parent = TableKey::of(TableKind::Directory(d), self.va);
        Some((parent, slot(parent.kind, self.va)))
    }
}

/// The index of `va`'s entry in a table of `kind`.
fn slot(kind: TableKind, va: u64) -> usize {
    // CAST: at most 9 index bits.
    kind.level().index(va) as usize
}

/// A table's copy here: where it lies and its entries (8-byte entries in
/// the low half).
#[derive(Debug)]
struct Table {
    address: u64,
    entries: Vec<u128>,
    /// Entries not zero: the table is freed when none is left.
    live: usize,
}

/// The directory entry for a table at `address`, in video memory.
fn directory_entry(address: u64) -> u128 {
    let mut e = pde::APERTURE.set(0, PdeAperture::Video.encode());
    e = pde::PCF.set(e, pde::PCF_VALID_CACHED_ATS_NOT_ALLOWED);
    pde::ADDRESS.set(e, address >> pde::ADDRESS_SHIFT)
}

/// `entry` (a PD0 dual entry) with its big or small half pointing at
/// `address`, or at nothing.
fn dual_half(entry: u128, half: TableKind, address: Option<u64>) -> u128 {
    let (aperture, pcf, field, shift) = match half {
        TableKind::Big => (
            dual_pde::APERTURE_BIG,
            dual_pde::PCF_BIG,
            dual_pde::ADDRESS_BIG,
            dual_pde::ADDRESS_BIG_SHIFT,
        ),
        _ => (
            dual_pde::APERTURE_SMALL,
            dual_pde::PCF_SMALL,
            dual_pde::ADDRESS_SMALL,
            dual_pde::ADDRESS_SHIFT,
        ),
    };
    match address {
        Some(a) => {
            let e = aperture.set(entry, PdeAperture::Video.encode());
            let e = pcf.set(e, dual_pde::PCF_VALID_CACHED_ATS_NOT_ALLOWED);
            field.set(e, a >> shift)
        }
        None => {
            let e = aperture.set(entry, PdeAperture::Invalid.encode());
            let e = pcf.set(e, pde::PCF_INVALID_ATS_ALLOWED);
            field.set(e, 0)
        }
    }
}

/// A valid PTE for the page at `pa`.
fn page_entry(pa: u64, aperture: Aperture, flags: PageFlags) -> u128 {
    let mut e = pte::VALID.set(0, 1);
    e = pte::APERTURE.set(e, aperture.pte().encode());
    e = pte::PCF.set(e, flags.pcf());
    e = pte::KIND.set(e, pte::KIND_GENERIC_MEMORY);
    aperture.address_field().set(e, pa >> pte::ADDRESS_SHIFT)
}

/// The page a valid PTE maps.
fn decode_page(entry: u128, va: u64, size: PageSize) -> Result<MappedPage, PageTableError> {
    let aperture = Aperture::of_pte(PteAperture::decode(pte::APERTURE.get(entry))).ok_or(
        PageTableError::Invariant {
            reason: "a peer page in tables that never map one",
        },
    )?;
    Ok(MappedPage {
        va,
        pa: aperture.address_field().get(entry) << pte::ADDRESS_SHIFT,
        size,
        aperture,
        flags: PageFlags::of_pcf(pte::PCF.get(entry)),
    })
}

/// A page's place: its table and its entry.
#[derive(Debug, Clone, Copy)]
struct Leaf {
    key: TableKey,
    index: usize,
}

impl Leaf {
    fn of(size: PageSize, va: u64) -> Leaf {
        let kind = match size {
            PageSize::Huge => TableKind::Directory(PD0),
            PageSize::Big => TableKind::Big,
            PageSize::Small => TableKind::Small,
        };
        Leaf {
            key: TableKey::of(kind, va),
            index: slot(kind, va),
        }
    }
}

/// The page tables of one VA space, in `M`'s memory.
#[derive(Debug)]
pub struct PageTables<M: TableMemory> {
    memory: M,
    pool: TablePool,
    root: PageDirectoryBase,
    tables: BTreeMap<TableKey, Table>,
    /// The shallowest depth an entry was written at since the last change
    /// began.
    touched: usize,
}

impl<M: TableMemory> PageTables<M> {
    /// An empty VA space whose tables (the root first) come from `pool`,
    /// a range of video memory the CPU can write through `memory`.
    ///
    /// # Errors
    /// The pool is not whole 4 KiB pages, or the root could not be written.
    pub fn new(mut memory: M, pool: Range<u64>) -> Result<PageTables<M>, PageTableError> {
        let mut pool = TablePool::new(pool, TABLE_PAGE, BIG_TABLE_ALIGN)?;
        let root_kind = TableKind::Directory(0);
        let address = pool.page()?;
        // CAST: a table is at most a page.
        memory.write(address, &vec![0; root_kind.bytes() as usize])?;
        let mut tables = BTreeMap::new();
        tables.insert(
            TableKey::of(root_kind, 0),
            Table {
                address,
                entries: vec![0; root_kind.entries()],
                live: 0,
            },
        );
        Ok(PageTables {
            memory,
            pool,
            root: PageDirectoryBase { address },
            tables,
            touched: usize::MAX,
        })
    }

    /// Where the root lies: what the instance block and invalidates name.
    pub fn pdb(&self) -> PageDirectoryBase {
        self.root
    }

    /// The memory the tables are written to.
    pub fn memory(&self) -> &M {
        &self.memory
    }

    /// The directory tables on the walk to `va`, the root first, as far
    /// down as they exist: what GSP-RM is handed to share a window of
    /// this VA space (COPY_SERVER_RESERVED_PDES).
    pub fn directories_of(&self, va: u64) -> Vec<u64> {
        (0..=PD0)
            .map_while(|d| {
                self.tables
                    .get(&TableKey::of(TableKind::Directory(d), va))
                    .map(|t| t.address)
            })
            .collect()
    }

    /// Tables alive, the root included.
    pub fn tables(&self) -> usize {
        self.tables.len()
    }

    /// Pages of the pool holding no table, freed ones waiting on an
    /// invalidation not counted.
    pub fn free_pool_pages(&self) -> u64 {
        self.pool.free_pages()
    }

    /// Pages in the pool.
    pub fn pool_pages(&self) -> u64 {
        self.pool.pages()
    }

    /// Map `size` bytes at `va` to memory at `pa`, in pages of `page`.
    /// All of it or nothing: every check is made before a byte is written.
    ///
    /// # Errors
    /// Misaligned or zero-sized, outside the VA or the aperture's address
    /// bits, a page already mapped there, the pool without room for the
    /// tables, or the memory unreachable (then the pages written before
    /// the failure stay mapped).
    pub fn map(
        &mut self,
        va: u64,
        pa: u64,
        size: u64,
        page: PageSize,
        aperture: Aperture,
        flags: PageFlags,
    ) -> Result<TlbInvalidate, PageTableError> {
        let bytes = page.bytes();
        check_range(va, size, bytes)?;
        if !pa.is_multiple_of(bytes) {
            return Err(PageTableError::Misaligned {
                kind: AddressKind::Pa,
                value: pa,
                page: bytes,
            });
        }
        if pa
            .checked_add(size)
            .is_none_or(|end| end > aperture.address_limit())
        {
            return Err(PageTableError::PaOutOfRange { pa, size, aperture });
        }
        for at in (va..va + size).step_by(step(bytes)) {
            if self.occupied(at, page) {
                return Err(PageTableError::Overlap { va: at });
            }
        }
        self.touched = usize::MAX;
        self.make_tables(va, size, page)?;
        let mut run: Option<(Leaf, Vec<u128>)> = None;
        for (i, at) in (va..va + size).step_by(step(bytes)).enumerate() {
            let leaf = Leaf::of(page, at);
            let entry = page_entry(pa + i as u64 * bytes, aperture, flags);
            run = self.extend_run(run, leaf, entry)?;
        }
        if let Some((first, entries)) = run {
            self.write_entries(first.key, first.index, &entries)?;
        }
        Ok(self.owed(va..va + size, Vec::new()))
    }

    /// Unmap every page in `size` bytes at `va`; the range must hold whole
    /// mapped pages only. Tables left empty are unlinked and wait in the
    /// returned invalidation to go back to the pool.
    ///
    /// # Errors
    /// Misaligned or zero-sized, a VA in it not mapped, a page only
    /// partly inside it, or the memory unreachable.
    pub fn unmap(&mut self, va: u64, size: u64) -> Result<TlbInvalidate, PageTableError> {
        check_range(va, size, PageSize::Small.bytes())?;
        let end = va + size;
        let mut leaves = Vec::new();
        let mut at = va;
        while at < end {
            let page = self
                .lookup(at)?
                .ok_or(PageTableError::NotMapped { va: at })?;
            let bytes = page.size.bytes();
            if page.va != at || at + bytes > end {
                return Err(PageTableError::PartialPage {
                    page_va: page.va,
                    page: bytes,
                });
            }
            leaves.push(Leaf::of(page.size, at));
            at += bytes;
        }
        self.touched = usize::MAX;
        let mut run: Option<(Leaf, Vec<u128>)> = None;
        let mut emptied = BTreeSet::new();
        for leaf in leaves {
            emptied.insert(leaf.key);
            run = self.extend_run(run, leaf, 0)?;
        }
        if let Some((first, entries)) = run {
            self.write_entries(first.key, first.index, &entries)?;
        }
        let freed = self.prune(emptied)?;
        Ok(self.owed(va..end, freed))
    }

    /// The invalidation `done` asked for has been made: the tables it
    /// freed go back to the pool.
    ///
    /// # Errors
    /// `done` is another VA space's.
    pub fn invalidated(&mut self, done: TlbInvalidate) -> Result<(), PageTableError> {
        if done.pdb != self.root {
            return Err(PageTableError::ForeignInvalidate {
                pdb: done.pdb.address,
            });
        }
        for t in done.freed_tables {
            match t {
                FreedTable::Page(a) => self.pool.free_page(a),
                FreedTable::Slot(a) => self.pool.free_slot(a),
            }
        }
        Ok(())
    }

    /// Read every table back and compare it with the copy kept here: a
    /// check that the writes landed (a window misprogrammed, a write lost
    /// on the way), for tests and after a reset. Reads every table.
    ///
    /// # Errors
    /// The first entry that differs, or the memory unreachable.
    pub fn verify(&self) -> Result<(), PageTableError> {
        for (key, table) in &self.tables {
            let size = key.kind.level().entry_bytes;
            // CAST: a table is at most a page, an entry 16 bytes.
            let mut bytes = vec![0; key.kind.bytes() as usize];
            self.memory.read(table.address, &mut bytes)?;
            for (i, (chunk, &expected)) in
                bytes.chunks(size as usize).zip(&table.entries).enumerate()
            {
                let mut raw = [0u8; 16];
                raw[..chunk.len()].copy_from_slice(chunk);
                let found = u128::from_le_bytes(raw);
                if found != expected {
                    return Err(PageTableError::Diverged {
                        address: table.address + i as u64 * size,
                        expected,
                        found,
                    });
                }
            }
        }
        Ok(())
    }

    /// The page mapping `va`, from the copy kept here.
    ///
    /// # Errors
    /// The copy holds an entry this builder never writes.
    pub fn lookup(&self, va: u64) -> Result<Option<MappedPage>, PageTableError> {
        for size in [PageSize::Huge, PageSize::Big, PageSize::Small] {
            let page_va = va & !(size.bytes() - 1);
            let e = self.entry(Leaf::of(size, va));
            if pte::VALID.get(e) == 1 {
                return decode_page(e, page_va, size).map(Some);
            }
        }
        Ok(None)
    }

    /// The entry of the copy at `leaf`, zero where no table is.
    fn entry(&self, leaf: Leaf) -> u128 {
        self.tables
            .get(&leaf.key)
            .map_or(0, |t| t.entries[leaf.index])
    }

    /// Whether any page already maps part of the `page`-sized page at `va`.
    fn occupied(&self, va: u64, page: PageSize) -> bool {
        let pd0 = self.entry(Leaf::of(PageSize::Huge, va));
        if page == PageSize::Huge {
            return pd0 != 0;
        }
        if dual_pde::IS_PTE.get(pd0) == 1
            || pte::VALID.get(self.entry(Leaf::of(PageSize::Big, va))) == 1
        {
            return true;
        }
        let bytes = page.bytes();
        (va..va + bytes)
            .step_by(step(PageSize::Small.bytes()))
            .any(|at| pte::VALID.get(self.entry(Leaf::of(PageSize::Small, at))) == 1)
    }

    /// Make every table the pages of a mapping need and that is missing:
    /// all taken from the pool first (so a full pool changes nothing),
    /// then each zeroed and linked, parents before children.
    fn make_tables(&mut self, va: u64, size: u64, page: PageSize) -> Result<(), PageTableError> {
        let leaf_kind = Leaf::of(page, va).key.kind;
        let chunk = PageSize::Huge.bytes();
        let mut missing = BTreeSet::new();
        let mut at = va & !(chunk - 1);
        while at < va + size {
            let mut key = TableKey::of(leaf_kind, at);
            while !self.tables.contains_key(&key) && missing.insert(key) {
                let Some((parent, _)) = key.parent() else {
                    break;
                };
                key = parent;
            }
            at += chunk;
        }
        let mut placed: Vec<(TableKey, u64)> = Vec::with_capacity(missing.len());
        for &key in &missing {
            let got = if key.kind == TableKind::Big {
                self.pool.slot()
            } else {
                self.pool.page()
            };
            match got {
                Ok(address) => placed.push((key, address)),
                Err(e) => {
                    for (k, a) in placed {
                        self.give_back(k.kind, a);
                    }
                    return Err(e.into());
                }
            }
        }
        let mut placed = placed.into_iter();
        while let Some((key, address)) = placed.next() {
            // CAST: a table is at most a page.
            if let Err(e) = self
                .memory
                .write(address, &vec![0; key.kind.bytes() as usize])
            {
                // Tables not yet linked were never seen by the GPU.
                self.give_back(key.kind, address);
                for (k, a) in placed {
                    self.give_back(k.kind, a);
                }
                return Err(e.into());
            }
            self.tables.insert(
                key,
                Table {
                    address,
                    entries: vec![0; key.kind.entries()],
                    live: 0,
                },
            );
            self.link(key, Some(address))?;
        }
        Ok(())
    }

    fn give_back(&mut self, kind: TableKind, address: u64) {
        if kind == TableKind::Big {
            self.pool.free_slot(address);
        } else {
            self.pool.free_page(address);
        }
    }

    /// Point `key`'s parent entry at `address`, or at nothing.
    fn link(&mut self, key: TableKey, address: Option<u64>) -> Result<(), PageTableError> {
        let (parent, index) = key.parent().ok_or(PageTableError::Invariant {
            reason: "the root has no parent to link",
        })?;
        let old = self
            .tables
            .get(&parent)
            .ok_or(PageTableError::Invariant {
                reason: "a table's parent is missing",
            })?
            .entries[index];
        let entry = match (key.kind, address) {
            (TableKind::Big | TableKind::Small, a) => dual_half(old, key.kind, a),
            (TableKind::Directory(_), Some(a)) => directory_entry(a),
            (TableKind::Directory(_), None) => 0,
        };
        self.write_entries(parent, index, &[entry])
    }

    /// Add `entry` at `leaf` to the run of consecutive entries being
    /// gathered, writing the run out when `leaf` does not continue it.
    fn extend_run(
        &mut self,
        run: Option<(Leaf, Vec<u128>)>,
        leaf: Leaf,
        entry: u128,
    ) -> Result<Option<(Leaf, Vec<u128>)>, PageTableError> {
        match run {
            Some((first, mut entries))
                if first.key == leaf.key && first.index + entries.len() == leaf.index =>
            {
                entries.push(entry);
                Ok(Some((first, entries)))
            }
            Some((first, entries)) => {
                self.write_entries(first.key, first.index, &entries)?;
                Ok(Some((leaf, vec![entry])))
            }
            None => Ok(Some((leaf, vec![entry]))),
        }
    }

    /// Write consecutive entries of one table, in one write, then the copy.
    fn write_entries(
        &mut self,
        key: TableKey,
        first: usize,
        entries: &[u128],
    ) -> Result<(), PageTableError> {
        let table = self.tables.get_mut(&key).ok_or(PageTableError::Invariant {
            reason: "an entry written to a table never made",
        })?;
        let size = key.kind.level().entry_bytes;
        // CAST: entries are 8 or 16 bytes.
        let mut bytes = Vec::with_capacity(entries.len() * size as usize);
        for e in entries {
            bytes.extend_from_slice(&e.to_le_bytes()[..size as usize]);
        }
        self.memory
            .write(table.address + first as u64 * size, &bytes)?;
        for (slot, &e) in table.entries[first..].iter_mut().zip(entries) {
            table.live = table.live + usize::from(e != 0) - usize::from(*slot != 0);
            *slot = e;
        }
        self.touched = self.touched.min(key.kind.depth());
        Ok(())
    }

    /// Unlink and free every table of `candidates` left empty, then their
    /// parents left empty, deepest first; never the root.
    fn prune(
        &mut self,
        mut candidates: BTreeSet<TableKey>,
    ) -> Result<Vec<FreedTable>, PageTableError> {
        let mut freed = Vec::new();
        while let Some(key) = candidates.pop_last() {
            let Some(parent) = key.parent() else {
                continue;
            };
            let (address, live) = match self.tables.get(&key) {
                Some(t) => (t.address, t.live),
                None => continue,
            };
            if live != 0 {
                continue;
            }
            self.link(key, None)?;
            self.tables.remove(&key);
            freed.push(if key.kind == TableKind::Big {
                FreedTable::Slot(address)
            } else {
                FreedTable::Page(address)
            });
            candidates.insert(parent.0);
        }
        Ok(freed)
    }

    fn owed(&self, va: Range<u64>, freed_tables: Vec<FreedTable>) -> TlbInvalidate {
        TlbInvalidate {
            pdb: self.root,
            va,
            shallowest_level: self.touched.min(PD0 + 1),
            freed_tables,
        }
    }
}

/// `va` and `size` whole pages of `page` bytes, inside the MMU's VAs.
fn check_range(va: u64, size: u64, page: u64) -> Result<(), PageTableError> {
    if size == 0 {
        return Err(PageTableError::Empty);
    }
    for (kind, value) in [(AddressKind::Va, va), (AddressKind::Size, size)] {
        if !value.is_multiple_of(page) {
            return Err(PageTableError::Misaligned { kind, value, page });
        }
    }
    if va.checked_add(size).is_none_or(|end| end > 1 << VA_BITS) {
        return Err(PageTableError::VaOutOfRange {
            va,
            size,
            bits: VA_BITS,
        });
    }
    Ok(())
}

/// A page size as an iterator step.
fn step(bytes: u64) -> usize {
    // CAST: page sizes are at most 2 MiB.
    bytes as usize
}
