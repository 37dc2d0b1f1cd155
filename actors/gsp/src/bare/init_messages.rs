//! The two messages a driver puts in the command queue before GSP-RM
//! starts (reference/gsp.md 3.10, 3.11, 6.4): GSP_SET_SYSTEM_INFO, what
//! GSP-RM cannot find out itself about the machine (where the BARs are on
//! the bus, the PCI identity, the function's address), and SET_REGISTRY,
//! the registry keys RM reads at start. GSP-RM takes both before it
//! creates its GPU object, so they must be queued before the boot.

use macuda_hw::gsp_rpc::{registry as reg, system_info as si};
use macuda_hw::le::{put_u32, put_u64};

/// What is wrong with an init message's contents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InitMessageError {
    #[error("PCI device {device} function {function}: a device is 5 bits, a function 3")]
    Address { device: u8, function: u8 },
    #[error("registry key {name:?} is not a NUL-free ASCII name")]
    KeyName { name: String },
    #[error("a registry table of {bytes} bytes does not fit its 32-bit size field")]
    TooLarge { bytes: usize },
}

/// A PCI function's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciAddress {
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

/// Device numbers are below this, function numbers below `FUNCTIONS`.
const DEVICES: u8 = 32;
const FUNCTIONS: u8 = 8;

impl PciAddress {
    /// `nvDomainBusDeviceFunc`.
    ///
    /// # Errors
    /// A device or function number too large for its field.
    pub fn encode(&self) -> Result<u64, InitMessageError> {
        if self.device >= DEVICES || self.function >= FUNCTIONS {
            return Err(InitMessageError::Address {
                device: self.device,
                function: self.function,
            });
        }
        Ok((u64::from(self.bus) << si::BUS_SHIFT)
            | (u64::from(self.device) << si::DEVICE_SHIFT)
            | u64::from(self.function))
    }
}

/// What the host tells GSP-RM of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SystemInfo {
    /// Bus addresses of BAR0 (registers), BAR1 (the FB aperture) and the
    /// instance-memory BAR after it; 0 where the transport does not say
    /// (a card behind a USB or network bridge).
    pub bar0: u64,
    pub bar1: u64,
    pub instance_bar: u64,
    /// `None` for transports that hide it (TinyGPU): GSP-RM takes 0.
    pub address: Option<PciAddress>,
    /// Config dword 0 (vendor | device << 16) and dword 0x2C (subsystem
    /// vendor | subsystem << 16), and the revision byte.
    pub pci_ids: u32,
    pub pci_subsystem_ids: u32,
    pub revision: u8,
    /// Where BAR0 mirrors config space: [`si::CONFIG_MIRROR_BASE_FSP`] on
    /// chips booted through the FSP.
    pub config_mirror_base: u32,
}

impl SystemInfo {
    /// The 928-byte `GspSystemInfo`; every field not named here zero, as
    /// tinygrad sends it, with `bIsPassthru` set (the card is handed to a
    /// driver outside the machine's own kernel, as a VM's would be).
    ///
    /// # Errors
    /// A PCI address out of range.
    pub fn encode(&self) -> Result<Vec<u8>, InitMessageError> {
        let mut b = vec![0u8; si::BYTES];
        put_u64(&mut b, si::GPU_PHYS_ADDR, self.bar0);
        put_u64(&mut b, si::GPU_PHYS_FB_ADDR, self.bar1);
        put_u64(&mut b, si::GPU_PHYS_INST_ADDR, self.instance_bar);
        let bdf = self.address.map(|a| a.encode()).transpose()?.unwrap_or(0);
        put_u64(&mut b, si::NV_DOMAIN_BUS_DEVICE_FUNC, bdf);
        put_u64(&mut b, si::MAX_USER_VA, si::USER_VA_LIMIT);
        put_u32(&mut b, si::PCI_CONFIG_MIRROR_BASE, self.config_mirror_base);
        put_u32(&mut b, si::PCI_CONFIG_MIRROR_SIZE, si::CONFIG_MIRROR_BYTES);
        put_u32(&mut b, si::PCI_DEVICE_ID, self.pci_ids);
        put_u32(&mut b, si::PCI_SUB_DEVICE_ID, self.pci_subsystem_ids);
        put_u32(&mut b, si::PCI_REVISION_ID, u32::from(self.revision));
        b[si::IS_PASSTHRU] = 1;
        Ok(b)
    }
}

/// The registry keys a driver sets (tinygrad's): save PCIe config space
/// across resets, and allow a secondary bus reset.
pub const DRIVER_REGISTRY: &[(&str, u32)] =
    &[("RMForcePcieConfigSave", 1), ("RMSecBusResetEnable", 1)];

/// A `PACKED_REGISTRY_TABLE` of DWORD keys: header, entries, then the
/// names, each entry pointing at its name from the table's start.
///
/// # Errors
/// A name that is not NUL-free ASCII, or a table too large.
pub fn packed_registry(keys: &[(&str, u32)]) -> Result<Vec<u8>, InitMessageError> {
    let names_at = reg::HEADER_BYTES + keys.len() * reg::ENTRY_BYTES;
    let names_len: usize = keys.iter().map(|(n, _)| n.len() + 1).sum();
    let total = names_at + names_len;
    let size = u32::try_from(total).map_err(|_| InitMessageError::TooLarge { bytes: total })?;
    let mut t = vec![0u8; names_at];
    put_u32(&mut t, reg::SIZE, size);
    // CAST: fewer keys than bytes, which fit in u32.
    put_u32(&mut t, reg::NUM_ENTRIES, keys.len() as u32);
    for (i, (name, value)) in keys.iter().enumerate() {
        if !name.is_ascii() || name.bytes().any(|c| c == 0) {
            return Err(InitMessageError::KeyName {
                name: (*name).to_string(),
            });
        }
        let e = reg::HEADER_BYTES + i * reg::ENTRY_BYTES;
        // CAST: below `size`.
        let name_at = t.len() as u32;
        put_u32(&mut t, e + reg::NAME_OFFSET, name_at);
        t[e + reg::TYPE] = reg::TYPE_DWORD;
        put_u32(&mut t, e + reg::DATA, *value);
        put_u32(&mut t, e + reg::LENGTH, reg::DWORD_BYTES);
        t.extend_from_slice(name.as_bytes());
        t.push(0);
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_hw::le::{u32_at, u64_at};

    #[test]
    fn the_drivers_registry_is_the_references_82_bytes() {
        let t = packed_registry(DRIVER_REGISTRY).unwrap();
        assert_eq!(t.len(), 82);
        assert_eq!((u32_at(&t, 0), u32_at(&t, 4)), (82, 2));
        assert_eq!(u32_at(&t, 8 + reg::NAME_OFFSET), 40);
        assert_eq!(u32_at(&t, 8 + 16 + reg::NAME_OFFSET), 62);
        assert_eq!(t[8 + reg::TYPE], reg::TYPE_DWORD);
        assert_eq!(&t[40..62], b"RMForcePcieConfigSave\0");
        assert!(matches!(
            packed_registry(&[("bad\0key", 1)]),
            Err(InitMessageError::KeyName { .. })
        ));
    }

    #[test]
    fn system_info_has_the_fields_tinygrad_sets() {
        let info = SystemInfo {
            bar0: 0xF000_0000,
            bar1: 0x38_0000_0000,
            instance_bar: 0x3C_0000_0000,
            address: Some(PciAddress {
                bus: 0x41,
                device: 0,
                function: 0,
            }),
            pci_ids: 0x2B85_10DE,
            pci_subsystem_ids: 0x0000_10DE,
            revision: 0xA1,
            config_mirror_base: si::CONFIG_MIRROR_BASE_FSP,
        };
        let b = info.encode().unwrap();
        assert_eq!(b.len(), 928);
        assert_eq!(u64_at(&b, si::GPU_PHYS_FB_ADDR), 0x38_0000_0000);
        assert_eq!(u64_at(&b, si::NV_DOMAIN_BUS_DEVICE_FUNC), 0x4100);
        assert_eq!(u64_at(&b, si::MAX_USER_VA), 0x7FFF_FFFF_F000);
        assert_eq!(u32_at(&b, si::PCI_CONFIG_MIRROR_BASE), 0x92000);
        assert_eq!(u32_at(&b, si::PCI_CONFIG_MIRROR_SIZE), 0x1000);
        assert_eq!(u32_at(&b, si::PCI_REVISION_ID), 0xA1);
        assert_eq!(b[si::IS_PASSTHRU], 1);
        let bad = SystemInfo {
            address: Some(PciAddress {
                bus: 0,
                device: 32,
                function: 0,
            }),
            ..info
        };
        assert!(matches!(
            bad.encode(),
            Err(InitMessageError::Address { device: 32, .. })
        ));
    }
}
