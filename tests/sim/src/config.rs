//! The card's PCI configuration space: identity, the command register
//! whose bus-master bit gates every DMA the card makes, the BARs, and
//! GB202's BAR firewall bit in its vendor-specific capability.

use crate::chip::SimChip;
use macuda_hw::pci::{offset, Command, CONFIG_SPACE_BYTES};

/// Subsystem vendor and device ids.
const SUBSYSTEM: u16 = 0x2C;
/// Header type 0 (a plain endpoint).
const HEADER_TYPE: u16 = 0x0E;
/// A BAR's low bits: 64-bit memory, prefetchable.
const BAR_64BIT_PREFETCHABLE: u32 = 0b1100;
/// A BAR's low bits: 32-bit memory.
const BAR_32BIT: u32 = 0;

/// Configuration space as the card holds it.
pub struct ConfigSpace {
    bytes: Vec<u8>,
    /// Where the BAR firewall bit lives on this chip, if it has one.
    firewall: Option<(u16, u32)>,
}

impl ConfigSpace {
    /// Power-on contents for `chip`, with its BARs placed at the
    /// addresses the server reports for them.
    pub fn power_on(chip: &SimChip) -> ConfigSpace {
        let mut c = ConfigSpace {
            bytes: vec![0u8; CONFIG_SPACE_BYTES],
            firewall: chip.bar_firewall,
        };
        c.put(
            offset::VENDOR_ID,
            2,
            u32::from(macuda_hw::pci::VENDOR_NVIDIA),
        );
        c.put(offset::DEVICE_ID, 2, u32::from(chip.device_id));
        c.put(offset::REVISION_AND_CLASS, 4, chip.class_and_revision);
        c.put(HEADER_TYPE, 1, 0);
        c.put(SUBSYSTEM, 4, chip.subsystem);
        for (i, bar) in chip.bars.iter().enumerate() {
            let Some(bar) = bar else { continue };
            let reg = offset::BAR0 + 4 * i as u16;
            let kind = if bar.wide {
                BAR_64BIT_PREFETCHABLE
            } else {
                BAR_32BIT
            };
            c.put(reg, 4, (bar.address as u32 & !0xF) | kind);
            if bar.wide {
                c.put(reg + 4, 4, (bar.address >> 32) as u32);
            }
        }
        c
    }

    /// A config read of `width` bytes (1, 2 or 4) at `offset`.
    pub fn read(&self, offset: u64, width: u64) -> Result<u64, String> {
        let range = self.range(offset, width)?;
        let mut v = [0u8; 8];
        v[..range.len()].copy_from_slice(&self.bytes[range]);
        Ok(u64::from_le_bytes(v))
    }

    /// A config write. The identity and BAR sizes are read-only, as on a
    /// card; everything else takes the value.
    pub fn write(&mut self, offset: u64, width: u64, value: u64) -> Result<(), String> {
        let range = self.range(offset, width)?;
        if range.start < usize::from(offset::COMMAND) {
            return Ok(());
        }
        let bytes = value.to_le_bytes();
        let n = range.len();
        self.bytes[range].copy_from_slice(&bytes[..n]);
        Ok(())
    }

    pub fn command(&self) -> Command {
        let at = usize::from(offset::COMMAND);
        Command(u16::from_le_bytes([self.bytes[at], self.bytes[at + 1]]))
    }

    /// Bus mastering on: the card may read and write host memory.
    pub fn bus_master(&self) -> bool {
        self.command().bus_master()
    }

    /// An FLR: the command register clears (the OS restores what it
    /// saved); the firewall engages until the card's boot releases it.
    pub fn reset(&mut self) {
        self.put(offset::COMMAND, 2, 0);
        self.set_firewall(true);
    }

    /// Engage or release GB202's BAR firewall.
    pub fn set_firewall(&mut self, engaged: bool) {
        if let Some((at, bit)) = self.firewall {
            let v = self.get(at);
            let v = if engaged { v | bit } else { v & !bit };
            self.put(at, 4, v);
        }
    }

    fn get(&self, at: u16) -> u32 {
        let a = usize::from(at);
        u32::from_le_bytes([
            self.bytes[a],
            self.bytes[a + 1],
            self.bytes[a + 2],
            self.bytes[a + 3],
        ])
    }

    fn put(&mut self, at: u16, width: usize, value: u32) {
        let a = usize::from(at);
        self.bytes[a..a + width].copy_from_slice(&value.to_le_bytes()[..width]);
    }

    fn range(&self, offset: u64, width: u64) -> Result<std::ops::Range<usize>, String> {
        if !matches!(width, 1 | 2 | 4) {
            return Err(format!("config access of width {width}: 1, 2 or 4 bytes"));
        }
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.saturating_add(width as usize);
        if end > self.bytes.len() {
            return Err(format!(
                "config access at {offset:#x} (+{width}) is past the {CONFIG_SPACE_BYTES} bytes of configuration space"
            ));
        }
        Ok(start..end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_read_only_and_the_command_register_gates_dma() {
        let chip = SimChip::gb202();
        let mut c = ConfigSpace::power_on(&chip);
        assert_eq!(c.read(0, 2).unwrap(), 0x10DE);
        assert_eq!(c.read(2, 2).unwrap(), u64::from(chip.device_id));
        c.write(0, 2, 0x1234).unwrap();
        assert_eq!(c.read(0, 2).unwrap(), 0x10DE);
        assert!(!c.bus_master());
        c.write(4, 2, 0x6).unwrap();
        assert!(c.bus_master());
        c.reset();
        assert!(!c.bus_master());
        assert!(c.read(4, 3).is_err());
        assert!(c.read(4095, 2).is_err());
    }

    #[test]
    fn the_gb202_firewall_engages_at_reset() {
        let chip = SimChip::gb202();
        let (at, bit) = chip.bar_firewall.unwrap();
        let mut c = ConfigSpace::power_on(&chip);
        assert_eq!(c.read(u64::from(at), 4).unwrap() as u32 & bit, 0);
        c.reset();
        assert_eq!(c.read(u64::from(at), 4).unwrap() as u32 & bit, bit);
        c.set_firewall(false);
        assert_eq!(c.read(u64::from(at), 4).unwrap() as u32 & bit, 0);
    }
}
