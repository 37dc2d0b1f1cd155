//! The card before anything is staged (reference/gsp.md sections 1 and 2):
//! which chip answers and whether the bare-metal boot knows it, whether
//! firmware already ran this power cycle (WPR2 up in either register copy)
//! and, if so, the reset that must come first, the card's own boot
//! finishing, and the VRAM its VBIOS says is usable. Each step checks its
//! postcondition and says what it found when it fails.

use super::poll::{poll_register, PollError};
use super::CardBus;
use crate::firmware::FirmwareChip;
use macuda_hw::chip::{Chip, ChipIdentity};
use macuda_hw::pci::{BAR_FIREWALL_ENGAGE, GB202_VSEC_DEBUG_SEC_2};
use macuda_hw::regs::{
    FSP_BOOT_COMPLETE, NV_HUBMMU_PRI_MMU_WPR2_ADDR_HI, NV_HUBMMU_PRI_MMU_WPR2_ADDR_LO,
    NV_PFB_PRI_MMU_WPR2_ADDR_HI, NV_PFB_PRI_MMU_WPR2_ADDR_LO,
    NV_PFSP_FALCON_COMMON_SCRATCH_GROUP_2_0, NV_PFSP_FALCON_COMMON_SCRATCH_GROUP_2_WORDS,
    NV_PGC6_AON_SECURE_SCRATCH_GROUP_42, NV_PMC_BOOT_0, NV_PMC_BOOT_42, NV_THERM_I2CS_SCRATCH,
    NV_THERM_I2CS_SCRATCH_GH100,
};
use macuda_hw::wpr2;
use macuda_pci::PciError;
use std::ops::Range;
use std::time::Duration;

/// How long the card's own boot may take after power-on or a reset: RM's
/// and nova-core's 5 s (tinygrad waits 10 s).
pub const CARD_BOOT_PATIENCE: Duration = Duration::from_secs(5);

/// What a register of a card off the bus reads.
const OFF_BUS: u32 = u32::MAX;
/// NV_PGC6_AON_SECURE_SCRATCH_GROUP_42 counts MiB.
const VRAM_UNIT_BYTES: u64 = 1 << 20;

/// Why the card is not ready for staging.
#[derive(Debug, thiserror::Error)]
pub enum EarlyError {
    #[error("{what}: {source}")]
    Bus {
        what: &'static str,
        #[source]
        source: PciError,
    },
    #[error("NV_PMC_BOOT_0 reads all ones: the card is off the bus")]
    OffBus,
    #[error(
        "{chip:?} (NV_PMC_BOOT_42 {boot_42:#010x}) has no bare-metal boot here: \
         only GB20x and GH100, which boot through the FSP"
    )]
    Unsupported { chip: Chip, boot_42: u32 },
    #[error(
        "WPR2 is still up at {region:#x?} after a function-level reset: \
         the firmware of an earlier boot is resident and the card needs a power cycle"
    )]
    StillResident { region: Range<u64> },
    #[error(
        "the card's own boot did not finish: {poll}; \
         the FSP's scratch group 2 reads {scratch:#010x?}"
    )]
    CardBoot {
        #[source]
        poll: PollError,
        scratch: Vec<u32>,
    },
    #[error(
        "GB202's BAR firewall (config {offset:#x}) is still engaged after {waited:?}: \
         the FSP never released BAR0"
    )]
    BarFirewall { offset: u16, waited: Duration },
    #[error("NV_USABLE_FB_SIZE_IN_MB reads {raw:#x}: no usable video memory")]
    NoVram { raw: u32 },
}

fn read(
    bus: &mut (impl CardBus + ?Sized),
    what: &'static str,
    reg: u32,
) -> Result<u32, EarlyError> {
    bus.read32(reg)
        .map_err(|source| EarlyError::Bus { what, source })
}

/// The chip, and the firmware family that boots it.
///
/// # Errors
/// A card off the bus, or a chip without an FSP boot.
pub fn identify(
    bus: &mut (impl CardBus + ?Sized),
) -> Result<(ChipIdentity, FirmwareChip), EarlyError> {
    let boot_0 = read(bus, "reading NV_PMC_BOOT_0", NV_PMC_BOOT_0::ADDR)?;
    if boot_0 == OFF_BUS {
        return Err(EarlyError::OffBus);
    }
    let boot_42 = read(bus, "reading NV_PMC_BOOT_42", NV_PMC_BOOT_42::ADDR)?;
    let identity = ChipIdentity::decode(boot_0, boot_42);
    let family = match identity.chip {
        // GB203..GB207 boot GB202's images (linux-firmware links them).
        Chip::BlackwellConsumer { .. } => FirmwareChip::Gb202,
        Chip::Hopper { .. } => FirmwareChip::Gh100,
        chip => return Err(EarlyError::Unsupported { chip, boot_42 }),
    };
    Ok((identity, family))
}

/// WPR2 as both register copies describe it (r570 RM reads the PFB copy,
/// newer RM the HUBMMU one; until tested on a card, either being up counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wpr2Registers {
    pub lo: u32,
    pub hi: u32,
    pub hub_lo: u32,
    pub hub_hi: u32,
}

impl Wpr2Registers {
    /// # Errors
    /// The transport's.
    pub fn read(bus: &mut (impl CardBus + ?Sized)) -> Result<Wpr2Registers, EarlyError> {
        Ok(Wpr2Registers {
            lo: read(bus, "reading WPR2", NV_PFB_PRI_MMU_WPR2_ADDR_LO::ADDR)?,
            hi: read(bus, "reading WPR2", NV_PFB_PRI_MMU_WPR2_ADDR_HI::ADDR)?,
            hub_lo: read(bus, "reading WPR2", NV_HUBMMU_PRI_MMU_WPR2_ADDR_LO)?,
            hub_hi: read(bus, "reading WPR2", NV_HUBMMU_PRI_MMU_WPR2_ADDR_HI)?,
        })
    }

    /// The region firmware holds, from whichever copy is up.
    pub fn region(&self) -> Option<Range<u64>> {
        wpr2::decode(self.lo, self.hi).or_else(|| wpr2::decode(self.hub_lo, self.hub_hi))
    }

    /// Whether either copy says WPR2 exists, even with contradictory halves.
    pub fn is_up(&self) -> bool {
        wpr2::is_up(self.hi) || wpr2::is_up(self.hub_hi)
    }
}

/// The register that says the card's own boot is done, per family.
pub fn boot_status_register(chip: FirmwareChip) -> u32 {
    match chip {
        FirmwareChip::Gb202 => NV_THERM_I2CS_SCRATCH::ADDR,
        FirmwareChip::Gh100 => NV_THERM_I2CS_SCRATCH_GH100,
    }
}

/// On GB20x, wait until the FSP drops the BAR firewall it raises at a
/// reset (RM polls it for 4 s before touching BAR0; tinygrad does not).
///
/// # Errors
/// [`EarlyError::BarFirewall`], and the transport's.
pub fn wait_bar_firewall(
    bus: &mut (impl CardBus + ?Sized),
    chip: FirmwareChip,
    patience: Duration,
) -> Result<(), EarlyError> {
    if chip != FirmwareChip::Gb202 {
        return Ok(());
    }
    let start = std::time::Instant::now();
    loop {
        let v = bus
            .config_read32(GB202_VSEC_DEBUG_SEC_2)
            .map_err(|source| EarlyError::Bus {
                what: "reading GB202's BAR firewall",
                source,
            })?;
        if v & BAR_FIREWALL_ENGAGE == 0 {
            return Ok(());
        }
        let waited = start.elapsed();
        if waited >= patience {
            return Err(EarlyError::BarFirewall {
                offset: GB202_VSEC_DEBUG_SEC_2,
                waited,
            });
        }
        std::thread::sleep(super::poll::POLL_INTERVAL);
    }
}

/// Wait for the FSP to finish the card's own secure boot.
///
/// # Errors
/// [`EarlyError::CardBoot`] with the FSP's debug scratch, read as RM does.
pub fn wait_card_boot(
    bus: &mut (impl CardBus + ?Sized),
    chip: FirmwareChip,
    patience: Duration,
) -> Result<(), EarlyError> {
    let reg = boot_status_register(chip);
    match poll_register(bus, "the card's own boot", reg, patience, |v| {
        v == FSP_BOOT_COMPLETE
    }) {
        Ok(_) => Ok(()),
        Err(poll) => {
            let scratch = (0..NV_PFSP_FALCON_COMMON_SCRATCH_GROUP_2_WORDS)
                .map(|i| {
                    let reg = NV_PFSP_FALCON_COMMON_SCRATCH_GROUP_2_0::ADDR + 4 * i;
                    bus.read32(reg).unwrap_or(OFF_BUS)
                })
                .collect();
            Err(EarlyError::CardBoot { poll, scratch })
        }
    }
}

/// Make the card ready for a fresh boot: BAR0 open (GB20x's firewall
/// down), and if firmware is resident, reset the function (bus mastering
/// off around it) and prove WPR2 came down; then wait for the card's own
/// boot. Returns the region that was up, if
/// a reset was needed.
///
/// # Errors
/// The transport's, a card that does not finish booting, or WPR2 that
/// survives the reset.
pub fn ensure_fresh(
    bus: &mut (impl CardBus + ?Sized),
    chip: FirmwareChip,
    patience: Duration,
) -> Result<Option<Range<u64>>, EarlyError> {
    wait_bar_firewall(bus, chip, patience)?;
    let before = Wpr2Registers::read(bus)?;
    if !before.is_up() {
        wait_card_boot(bus, chip, patience)?;
        return Ok(None);
    }
    tracing::info!(wpr2 = ?before.region(), "firmware is resident: resetting the function");
    bus.reset_function().map_err(|source| EarlyError::Bus {
        what: "resetting the function",
        source,
    })?;
    wait_bar_firewall(bus, chip, patience)?;
    wait_card_boot(bus, chip, patience)?;
    let after = Wpr2Registers::read(bus)?;
    if after.is_up() {
        return Err(EarlyError::StillResident {
            region: after.region().unwrap_or(0..0),
        });
    }
    Ok(before.region())
}

/// The VRAM the VBIOS reports usable, in bytes.
///
/// # Errors
/// The transport's, or a register reading zero or all ones.
pub fn usable_vram(bus: &mut (impl CardBus + ?Sized)) -> Result<u64, EarlyError> {
    let raw = read(
        bus,
        "reading NV_USABLE_FB_SIZE_IN_MB",
        NV_PGC6_AON_SECURE_SCRATCH_GROUP_42::ADDR,
    )?;
    if raw == 0 || raw == OFF_BUS {
        return Err(EarlyError::NoVram { raw });
    }
    Ok(u64::from(raw) * VRAM_UNIT_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_pci::{DmaId, DmaRegion};
    use std::collections::HashMap;

    /// Registers as a map; a reset clears WPR2 unless told it sticks.
    #[derive(Default)]
    struct Regs {
        values: HashMap<u32, u32>,
        resets: u32,
        wpr2_sticks: bool,
        /// GB202's BAR firewall stays engaged.
        firewall_stuck: bool,
    }

    impl CardBus for Regs {
        fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
            Ok(self.values.get(&reg).copied().unwrap_or(0))
        }
        fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
            self.values.insert(reg, value);
            Ok(())
        }
        fn alloc_dma(&mut self, _: u64) -> Result<DmaRegion, PciError> {
            unreachable!("early steps stage nothing")
        }
        fn dma_write(&mut self, _: DmaId, _: u64, _: &[u8]) -> Result<(), PciError> {
            unreachable!("early steps stage nothing")
        }
        fn dma_read(&mut self, _: DmaId, _: u64, _: u64) -> Result<Vec<u8>, PciError> {
            unreachable!("early steps stage nothing")
        }
        fn config_read32(&mut self, offset: u16) -> Result<u32, PciError> {
            Ok(if offset == GB202_VSEC_DEBUG_SEC_2 && self.firewall_stuck {
                BAR_FIREWALL_ENGAGE
            } else {
                0
            })
        }

        fn reset_function(&mut self) -> Result<(), PciError> {
            self.resets += 1;
            if !self.wpr2_sticks {
                self.values.remove(&NV_PFB_PRI_MMU_WPR2_ADDR_HI::ADDR);
                self.values.remove(&NV_HUBMMU_PRI_MMU_WPR2_ADDR_HI);
            }
            Ok(())
        }
        fn clear_bus_master(&mut self) -> Result<(), PciError> {
            Ok(())
        }
    }

    fn gb202_booted() -> Regs {
        let mut r = Regs::default();
        r.values.insert(NV_PMC_BOOT_0::ADDR, 0x1B20_00A1);
        r.values.insert(NV_PMC_BOOT_42::ADDR, 0x1B20_00A1);
        r.values
            .insert(NV_THERM_I2CS_SCRATCH::ADDR, FSP_BOOT_COMPLETE);
        r.values
            .insert(NV_PGC6_AON_SECURE_SCRATCH_GROUP_42::ADDR, 0x7F80);
        r
    }

    #[test]
    fn gb20x_boots_gb202_images_and_ampere_has_no_fsp_boot() {
        let mut r = gb202_booted();
        assert_eq!(identify(&mut r).unwrap().1, FirmwareChip::Gb202);
        r.values.insert(NV_PMC_BOOT_42::ADDR, 0x1720_00A1);
        assert!(matches!(
            identify(&mut r),
            Err(EarlyError::Unsupported { .. })
        ));
        r.values.insert(NV_PMC_BOOT_0::ADDR, OFF_BUS);
        assert!(matches!(identify(&mut r), Err(EarlyError::OffBus)));
    }

    #[test]
    fn resident_firmware_is_reset_away_once() {
        let mut r = gb202_booted();
        let (lo, hi) = wpr2::encode(&(0x7_F400_0000..0x7_FA00_0000));
        r.values.insert(NV_HUBMMU_PRI_MMU_WPR2_ADDR_LO, lo);
        r.values.insert(NV_HUBMMU_PRI_MMU_WPR2_ADDR_HI, hi);
        let was = ensure_fresh(&mut r, FirmwareChip::Gb202, Duration::from_millis(10)).unwrap();
        assert_eq!(was, Some(0x7_F400_0000..0x7_FA00_0000));
        assert_eq!(r.resets, 1);
        // Fresh now: no second reset.
        assert_eq!(
            ensure_fresh(&mut r, FirmwareChip::Gb202, Duration::from_millis(10)).unwrap(),
            None
        );
        assert_eq!(r.resets, 1);
    }

    #[test]
    fn wpr2_that_survives_the_reset_is_refused() {
        let mut r = gb202_booted();
        r.wpr2_sticks = true;
        r.values.insert(NV_PFB_PRI_MMU_WPR2_ADDR_HI::ADDR, 0x10);
        assert!(matches!(
            ensure_fresh(&mut r, FirmwareChip::Gb202, Duration::from_millis(10)),
            Err(EarlyError::StillResident { .. })
        ));
    }

    #[test]
    fn a_card_that_never_boots_times_out_with_the_fsp_scratch() {
        let mut r = gb202_booted();
        r.values.insert(NV_THERM_I2CS_SCRATCH::ADDR, 0x3);
        r.values
            .insert(NV_PFSP_FALCON_COMMON_SCRATCH_GROUP_2_0::ADDR + 4, 0xDEAD);
        let e = wait_card_boot(&mut r, FirmwareChip::Gb202, Duration::from_millis(5)).unwrap_err();
        let EarlyError::CardBoot { poll, scratch } = &e else {
            panic!("{e}")
        };
        assert!(matches!(poll, PollError::Timeout { last: 0x3, .. }));
        assert_eq!(scratch, &[0, 0xDEAD, 0, 0]);
        // GH100's status sits elsewhere: GB202's register does not count.
        assert!(wait_card_boot(&mut r, FirmwareChip::Gh100, Duration::from_millis(1)).is_err());
    }

    #[test]
    fn a_bar_firewall_that_stays_up_is_named_and_only_gb202_has_one() {
        let mut r = gb202_booted();
        r.firewall_stuck = true;
        assert!(matches!(
            ensure_fresh(&mut r, FirmwareChip::Gb202, Duration::from_millis(5)),
            Err(EarlyError::BarFirewall {
                offset: GB202_VSEC_DEBUG_SEC_2,
                ..
            })
        ));
        assert!(wait_bar_firewall(&mut r, FirmwareChip::Gh100, Duration::ZERO).is_ok());
    }

    #[test]
    fn vram_is_counted_in_mib_and_zero_is_refused() {
        let mut r = gb202_booted();
        assert_eq!(usable_vram(&mut r).unwrap(), 0x7F80 << 20);
        r.values
            .insert(NV_PGC6_AON_SECURE_SCRATCH_GROUP_42::ADDR, 0);
        assert!(matches!(
            usable_vram(&mut r),
            Err(EarlyError::NoVram { raw: 0 })
        ));
    }
}
