//! The chip table: from NV_PMC_BOOT_0/42 to a chip name and family.

use crate::regs::NV_PMC_BOOT_42;
use serde::{Deserialize, Serialize};
use std::fmt;

/// NV_PMC_BOOT_42 architecture values (NV_PMC_BOOT_42_ARCHITECTURE_*).
pub mod architecture {
    pub const GA100: u32 = 0x17;
    pub const GH100: u32 = 0x18;
    pub const AD100: u32 = 0x19;
    pub const GB100: u32 = 0x1A;
    pub const GB200: u32 = 0x1B;

    /// Every value declared here, for the oracle test.
    pub const ALL: &[(&str, u32)] = &[
        ("GA100", GA100),
        ("GH100", GH100),
        ("AD100", AD100),
        ("GB100", GB100),
        ("GB200", GB200),
    ];
}

/// The chip families the stack knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Chip {
    Ampere {
        implementation: u32,
    },
    Hopper {
        implementation: u32,
    },
    Ada {
        implementation: u32,
    },
    BlackwellDatacenter {
        implementation: u32,
    },
    BlackwellConsumer {
        implementation: u32,
    },
    Unknown {
        architecture: u32,
        implementation: u32,
    },
}

impl Chip {
    pub fn from_boot_42(boot_42: NV_PMC_BOOT_42) -> Chip {
        Chip::from_architecture(boot_42.architecture(), boot_42.implementation())
    }

    /// From the architecture as NV_PMC_BOOT_42 holds it (0x18 for GH100)
    /// and the implementation.
    pub fn from_architecture(architecture: u32, implementation: u32) -> Chip {
        match architecture {
            architecture::GA100 => Chip::Ampere { implementation },
            architecture::GH100 => Chip::Hopper { implementation },
            architecture::AD100 => Chip::Ada { implementation },
            architecture::GB100 => Chip::BlackwellDatacenter { implementation },
            architecture::GB200 => Chip::BlackwellConsumer { implementation },
            architecture => Chip::Unknown {
                architecture,
                implementation,
            },
        }
    }
}

impl Chip {
    /// The CUDA compute capability as major*10 + minor, for the chips whose
    /// capability is fixed by the chip: GA100 8.0 and the other GA10x 8.6,
    /// AD10x 8.9, GH100 9.0, GB100 10.0, GB20x 12.0.
    pub fn compute_capability(self) -> Option<u32> {
        match self {
            Chip::Ampere { implementation: 0 } => Some(80),
            Chip::Ampere { .. } => Some(86),
            Chip::Ada { .. } => Some(89),
            Chip::Hopper { .. } => Some(90),
            Chip::BlackwellDatacenter { .. } => Some(100),
            Chip::BlackwellConsumer { .. } => Some(120),
            Chip::Unknown { .. } => None,
        }
    }

    /// The compute capability to build launches for: the chip's, or for a
    /// chip the table does not know, [`ASSUMED_SM`].
    pub fn sm(self) -> u32 {
        self.compute_capability().unwrap_or(ASSUMED_SM)
    }
}

/// The compute capability assumed for a chip the table does not know: the
/// first target's (the RTX 5090, GB202).
pub const ASSUMED_SM: u32 = 120;

impl fmt::Display for Chip {
    /// NVIDIA's chip names: family prefix, then the implementation as two
    /// digits (GB202, GH100, AD102).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Chip::Ampere { implementation } => write!(f, "GA1{implementation:02}"),
            Chip::Hopper { implementation } => write!(f, "GH1{implementation:02}"),
            Chip::Ada { implementation } => write!(f, "AD1{implementation:02}"),
            Chip::BlackwellDatacenter { implementation } => write!(f, "GB1{implementation:02}"),
            Chip::BlackwellConsumer { implementation } => write!(f, "GB2{implementation:02}"),
            Chip::Unknown {
                architecture,
                implementation,
            } => write!(
                f,
                "unknown chip (architecture {architecture:#x}, implementation {implementation})"
            ),
        }
    }
}

/// The identification registers as read from a card, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChipIdentity {
    pub boot_0: u32,
    pub boot_42: u32,
    pub chip: Chip,
}

impl ChipIdentity {
    pub fn decode(boot_0: u32, boot_42: u32) -> ChipIdentity {
        ChipIdentity {
            boot_0,
            boot_42,
            chip: Chip::from_boot_42(NV_PMC_BOOT_42(boot_42)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_are_built_for_the_chips_capability_or_the_assumed_one() {
        assert_eq!(Chip::Hopper { implementation: 0 }.sm(), 90);
        let unknown = Chip::Unknown {
            architecture: 0x30,
            implementation: 0,
        };
        assert_eq!(unknown.compute_capability(), None);
        assert_eq!(unknown.sm(), ASSUMED_SM);
    }

    #[test]
    fn compute_capabilities() {
        assert_eq!(
            ChipIdentity::decode(0, 0x1B20_00A1)
                .chip
                .compute_capability(),
            Some(120)
        );
        assert_eq!(
            ChipIdentity::decode(0, 0x1800_0000)
                .chip
                .compute_capability(),
            Some(90)
        );
        assert_eq!(
            ChipIdentity::decode(0, 0x0500_0000)
                .chip
                .compute_capability(),
            None
        );
    }

    #[test]
    fn names_chips() {
        assert_eq!(
            ChipIdentity::decode(0, 0x1B20_00A1).chip.to_string(),
            "GB202"
        );
        assert_eq!(
            ChipIdentity::decode(0, 0x1800_0000).chip.to_string(),
            "GH100"
        );
        assert_eq!(
            ChipIdentity::decode(0, 0x1920_0000).chip.to_string(),
            "AD102"
        );
        assert!(matches!(
            ChipIdentity::decode(0, 0x0500_0000).chip,
            Chip::Unknown {
                architecture: 5,
                ..
            }
        ));
    }
}
