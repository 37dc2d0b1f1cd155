//! The radix3 table over the GSP-RM image (reference gsp.md 3.4): the
//! image need not be contiguous on the bus, so the firmware finds its
//! pages through three levels of 4 KiB tables of u64 bus addresses. Level
//! 0 is one page naming the level-1 pages, which name the level-2 pages,
//! which name the image's pages in order. The WPR meta carries the level-0
//! page's address and the image's length.

use super::error::{BareError, Context};
use super::staging::{HostStaging, Piece};
use super::CardBus;
use macuda_hw::gsp_boot::radix3::{ENTRIES_PER_PAGE, ENTRY_BYTES, MAX_IMAGE_PAGES, PAGE_BYTES};

/// How many pages each level takes for an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Radix3Shape {
    pub image_pages: u64,
    pub level2_pages: u64,
    pub level1_pages: u64,
}

/// Level 0 is always one page.
pub const LEVEL0_PAGES: u64 = 1;

impl Radix3Shape {
    /// The shape for an image of `image_bytes`.
    ///
    /// # Errors
    /// [`BareError::TooLarge`] past what the table may map, or for an
    /// empty image.
    pub fn for_image(image_bytes: u64) -> Result<Radix3Shape, BareError> {
        let image_pages = image_bytes.div_ceil(PAGE_BYTES);
        if image_pages == 0 || image_pages > MAX_IMAGE_PAGES {
            return Err(BareError::TooLarge {
                what: "the GSP-RM image",
                bytes: image_bytes,
                limit: MAX_IMAGE_PAGES * PAGE_BYTES,
            });
        }
        let level2_pages = image_pages.div_ceil(ENTRIES_PER_PAGE);
        let level1_pages = level2_pages.div_ceil(ENTRIES_PER_PAGE);
        Ok(Radix3Shape {
            image_pages,
            level2_pages,
            level1_pages,
        })
    }

    /// Pages of table: level 0, then level 1, then level 2.
    pub fn table_pages(&self) -> u64 {
        LEVEL0_PAGES + self.level1_pages + self.level2_pages
    }
}

/// The bytes of every table page, level 0 first, given the table pages'
/// and the image pages' bus addresses (in the same order). Entries past a
/// level's count are zero.
pub fn table_bytes(shape: &Radix3Shape, table: &[u64], image: &[u64]) -> Vec<u8> {
    let mut out = vec![0u8; (shape.table_pages() * PAGE_BYTES) as usize];
    let level1 = &table[LEVEL0_PAGES as usize..][..shape.level1_pages as usize];
    let level2 = &table[(LEVEL0_PAGES + shape.level1_pages) as usize..];
    // Each level is written from its first page on, so its entries simply
    // follow each other across the level's pages.
    let levels: [(u64, &[u64]); 3] = [
        (0, level1),
        (LEVEL0_PAGES, level2),
        (LEVEL0_PAGES + shape.level1_pages, image),
    ];
    for (first_page, entries) in levels {
        let at = (first_page * PAGE_BYTES) as usize;
        for (i, e) in entries.iter().enumerate() {
            let o = at + i * ENTRY_BYTES as usize;
            out[o..o + ENTRY_BYTES as usize].copy_from_slice(&e.to_le_bytes());
        }
    }
    out
}

/// A staged radix3 table and image.
#[derive(Debug, Clone)]
pub struct Radix3 {
    pub shape: Radix3Shape,
    /// Bus address of the level-0 page (`sysmemAddrOfRadix3Elf`).
    pub root: u64,
    /// The image's length in bytes (`sizeOfRadix3Elf`).
    pub image_bytes: u64,
    /// Where the tables and the image were put, as bus-contiguous runs.
    pub table_runs: Vec<Piece>,
    pub image_runs: Vec<Piece>,
}

/// Each page's bus address, in order, from runs of whole pages.
fn page_addresses(runs: &[Piece]) -> Vec<u64> {
    runs.iter()
        .flat_map(|r| (0..r.bytes / PAGE_BYTES).map(move |i| r.bus + i * PAGE_BYTES))
        .collect()
}

/// Copy `bytes` across `runs` in order, zero-padding the last page.
fn write_runs(
    bus: &mut dyn CardBus,
    runs: &[Piece],
    bytes: &[u8],
    what: &str,
) -> Result<(), BareError> {
    let mut at = 0usize;
    for r in runs {
        let n = r.bytes as usize;
        let end = (at + n).min(bytes.len());
        let mut chunk = bytes.get(at..end).unwrap_or_default().to_vec();
        chunk.resize(n, 0);
        bus.dma_write(r.mapping, r.offset, &chunk)
            .context(|| format!("writing {what} at {:#x}", r.bus))?;
        at += n;
    }
    Ok(())
}

impl Radix3 {
    /// Stage `image` and its table.
    ///
    /// # Errors
    /// [`BareError::TooLarge`] for an image radix3 cannot map, and the
    /// staging's and transport's.
    pub fn stage(
        bus: &mut dyn CardBus,
        staging: &mut HostStaging,
        image: &[u8],
    ) -> Result<Radix3, BareError> {
        let shape = Radix3Shape::for_image(image.len() as u64)?;
        let table_runs = staging.place_pages(bus, shape.table_pages(), "the radix3 table")?;
        let image_runs = staging.place_pages(bus, shape.image_pages, "the GSP-RM image")?;
        let table = page_addresses(&table_runs);
        let pages = page_addresses(&image_runs);
        write_runs(
            bus,
            &table_runs,
            &table_bytes(&shape, &table, &pages),
            "the radix3 table",
        )?;
        write_runs(bus, &image_runs, image, "the GSP-RM image")?;
        Ok(Radix3 {
            shape,
            root: table[0],
            image_bytes: image.len() as u64,
            table_runs,
            image_runs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bare::staging::tests::FakeBus;
    use crate::bare::staging::StagingLimits;

    /// NVIDIA's 570.144 `.fwimage`.
    const REAL_IMAGE_BYTES: u64 = 63_541_248;

    #[test]
    fn the_real_images_shape_is_the_references() {
        let s = Radix3Shape::for_image(REAL_IMAGE_BYTES).unwrap();
        assert_eq!(
            (s.image_pages, s.level2_pages, s.level1_pages),
            (15_513, 31, 1)
        );
        assert_eq!(s.table_pages(), 33);
        assert!(Radix3Shape::for_image(0).is_err());
        assert!(matches!(
            Radix3Shape::for_image((1 << 30) + 1),
            Err(BareError::TooLarge { .. })
        ));
    }

    fn u64_at(b: &[u8], at: u64) -> u64 {
        u64::from_le_bytes(b[at as usize..][..8].try_into().unwrap())
    }

    /// Walk the table from the root as the firmware does, and read the
    /// image back through it.
    fn walk(bus: &FakeBus, r: &Radix3) -> Vec<u8> {
        let entries = |pages: &[u64], count: u64| -> Vec<u64> {
            (0..count)
                .map(|i| {
                    let page = pages[(i / ENTRIES_PER_PAGE) as usize];
                    let raw = bus.read_bus(page + (i % ENTRIES_PER_PAGE) * 8, 8);
                    u64_at(&raw, 0)
                })
                .collect()
        };
        let l1 = entries(&[r.root], r.shape.level1_pages);
        let l2 = entries(&l1, r.shape.level2_pages);
        let pages = entries(&l2, r.shape.image_pages);
        let mut image = Vec::new();
        for p in pages {
            image.extend(bus.read_bus(p, PAGE_BYTES as usize));
        }
        image.truncate(r.image_bytes as usize);
        image
    }

    #[test]
    fn a_63_5_mb_image_stages_over_scattered_mappings_and_walks_back() {
        let mut bus = FakeBus::new(4 << 20);
        let mut staging = HostStaging::new(StagingLimits::TINYGPU);
        let image: Vec<u8> = (0..REAL_IMAGE_BYTES).map(|i| (i % 251) as u8).collect();
        let r = Radix3::stage(&mut bus, &mut staging, &image).unwrap();
        assert_eq!(r.image_bytes, REAL_IMAGE_BYTES);
        assert!(staging.mappings().count() >= 4);
        assert!(
            walk(&bus, &r) == image,
            "the image reads back through radix3"
        );
    }

    #[test]
    fn a_small_image_has_one_page_a_level() {
        let mut bus = FakeBus::new(64 << 10);
        let mut staging = HostStaging::new(StagingLimits::TINYGPU);
        let image = vec![7u8; 3 * 4096 + 100];
        let r = Radix3::stage(&mut bus, &mut staging, &image).unwrap();
        assert_eq!(r.shape.table_pages(), 3);
        assert_eq!(walk(&bus, &r), image);
    }
}
