//! The libos init-arguments page (reference gsp.md 3.8): GSP-RM's first
//! look at host memory. It is an array of `LibosMemoryRegionInitArgument`,
//! each naming a region by its id8 with a bus address and a size: the log
//! buffers libos writes into, and RMARGS, the RM arguments that say where
//! the message queues are. The log buffers are handed over zeroed (as
//! tinygrad does, and the firmware boots with), 64 KiB each (RM's and
//! nouveau's size), and must stay mapped while GSP-RM runs.

use super::error::BareError;
use super::staging::{HostStaging, Piece};
use super::CardBus;
use macuda_hw::gsp_rpc::{id8, libos_region};

/// One region named in the libos page: physically contiguous system
/// memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LibosRegion {
    /// At most 8 ASCII characters, e.g. "LOGINIT".
    pub name: &'static str,
    pub bus: u64,
    pub bytes: u64,
}

/// The log buffers RM hands over, in the order they are named.
pub const LOG_BUFFERS: [&str; 3] = ["LOGINIT", "LOGINTR", "LOGRM"];
/// Each log buffer's size.
pub const LOG_BUFFER_BYTES: u64 = 64 << 10;
/// The region the RM arguments are named by.
pub const RMARGS: &str = "RMARGS";
/// An id8 packs at most this many characters.
pub const ID8_MAX_CHARS: usize = 8;

/// The page's entries, built up before it is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LibosArgs {
    regions: Vec<LibosRegion>,
}

impl LibosArgs {
    pub fn new() -> LibosArgs {
        LibosArgs::default()
    }

    /// Name one more region, or replace the one of that name.
    ///
    /// # Errors
    /// [`BareError::LibosPageFull`] past the page's entries,
    /// [`BareError::BadRegionName`] for a name an id8 cannot hold.
    pub fn set(&mut self, region: LibosRegion) -> Result<(), BareError> {
        if region.name.len() > ID8_MAX_CHARS || !region.name.is_ascii() {
            return Err(BareError::BadRegionName {
                name: region.name.to_string(),
            });
        }
        if let Some(r) = self.regions.iter_mut().find(|r| r.name == region.name) {
            *r = region;
            return Ok(());
        }
        if self.regions.len() == libos_region::MAX_ENTRIES {
            return Err(BareError::LibosPageFull {
                what: region.name.to_string(),
                max: libos_region::MAX_ENTRIES,
            });
        }
        self.regions.push(region);
        Ok(())
    }

    pub fn regions(&self) -> &[LibosRegion] {
        &self.regions
    }

    /// The page's bytes; entries after the last region are zero
    /// (LIBOS_MEMORY_REGION_NONE).
    pub fn encode(&self) -> [u8; libos_region::INIT_ARGUMENTS_MAX] {
        let mut page = [0u8; libos_region::INIT_ARGUMENTS_MAX];
        for (i, r) in self.regions.iter().enumerate() {
            let e = &mut page[i * libos_region::BYTES..][..libos_region::BYTES];
            e[libos_region::ID8..][..8].copy_from_slice(&id8(r.name.as_bytes()).to_le_bytes());
            e[libos_region::PA..][..8].copy_from_slice(&r.bus.to_le_bytes());
            e[libos_region::SIZE..][..8].copy_from_slice(&r.bytes.to_le_bytes());
            e[libos_region::KIND] = libos_region::KIND_CONTIGUOUS;
            e[libos_region::LOC] = libos_region::LOC_SYSMEM;
        }
        page
    }
}

/// Stage the zeroed log buffers, each in its own contiguous piece.
///
/// # Errors
/// The staging's and transport's.
pub fn stage_log_buffers(
    bus: &mut dyn CardBus,
    staging: &mut HostStaging,
) -> Result<Vec<(LibosRegion, Piece)>, BareError> {
    LOG_BUFFERS
        .iter()
        .map(|&name| {
            let p = staging.place_zeroed(bus, LOG_BUFFER_BYTES, name)?;
            Ok((
                LibosRegion {
                    name,
                    bus: p.bus,
                    bytes: LOG_BUFFER_BYTES,
                },
                p,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bare::staging::tests::FakeBus;
    use crate::bare::staging::StagingLimits;

    #[test]
    fn entries_carry_id8_address_size_and_contiguous_sysmem() {
        let mut a = LibosArgs::new();
        a.set(LibosRegion {
            name: "LOGINIT",
            bus: 0x1000,
            bytes: 0x10000,
        })
        .unwrap();
        a.set(LibosRegion {
            name: RMARGS,
            bus: 0x5000,
            bytes: 0x1000,
        })
        .unwrap();
        a.set(LibosRegion {
            name: RMARGS,
            bus: 0x6000,
            bytes: 0x1000,
        })
        .unwrap();
        let p = a.encode();
        assert_eq!(&p[..8], &0x004C_4F47_494E_4954u64.to_le_bytes());
        assert_eq!(&p[32..40], &0x0000_524D_4152_4753u64.to_le_bytes());
        assert_eq!(&p[40..48], &0x6000u64.to_le_bytes(), "replaced in place");
        assert_eq!((p[56], p[57]), (1, 1));
        assert!(p[64..].iter().all(|&b| b == 0));
    }

    #[test]
    fn the_page_refuses_a_129th_region_and_long_names() {
        let mut a = LibosArgs::new();
        let names: Vec<&'static str> = (0..libos_region::MAX_ENTRIES)
            .map(|i| &*Box::leak(format!("R{i}").into_boxed_str()))
            .collect();
        for name in names {
            a.set(LibosRegion {
                name,
                bus: 0,
                bytes: 0,
            })
            .unwrap();
        }
        let one_more = LibosRegion {
            name: "EXTRA",
            bus: 0,
            bytes: 0,
        };
        assert!(matches!(
            a.set(one_more),
            Err(BareError::LibosPageFull { .. })
        ));
        let mut b = LibosArgs::new();
        let long = LibosRegion {
            name: "TOOLONGNAME",
            bus: 0,
            bytes: 0,
        };
        assert!(matches!(b.set(long), Err(BareError::BadRegionName { .. })));
    }

    #[test]
    fn log_buffers_are_zeroed_64_kib_pieces() {
        let mut bus = FakeBus::new(1 << 20);
        let mut s = HostStaging::new(StagingLimits::TINYGPU);
        let logs = stage_log_buffers(&mut bus, &mut s).unwrap();
        assert_eq!(logs.len(), 3);
        for (r, p) in logs {
            assert_eq!(r.bytes, LOG_BUFFER_BYTES);
            assert_eq!(r.bus, p.bus);
            assert!(bus
                .read_bus(p.bus, LOG_BUFFER_BYTES as usize)
                .iter()
                .all(|&b| b == 0));
        }
    }
}
