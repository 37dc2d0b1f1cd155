//! PCI configuration space, as the PCI Local Bus specification lays it out.

/// NVIDIA's PCI vendor id.
pub const VENDOR_NVIDIA: u16 = 0x10DE;

/// Configuration-space offsets.
pub mod offset {
    pub const VENDOR_ID: u16 = 0x00;
    pub const DEVICE_ID: u16 = 0x02;
    pub const COMMAND: u16 = 0x04;
    pub const REVISION_AND_CLASS: u16 = 0x08;
    /// BAR n lives at `BAR0 + 4 * n`.
    pub const BAR0: u16 = 0x10;
    /// Subsystem vendor id (16 bits), then subsystem id.
    pub const SUBSYSTEM_VENDOR_ID: u16 = 0x2C;
}

/// GB202's BAR firewall (NV_EP_PCFG_GPU_VSEC_DEBUG_SEC_2, in the vendor
/// capability beyond the first 64 bytes): bit BAR_FIREWALL_ENGAGE is set
/// after a reset until the FSP is ready for BAR0 accesses
/// (reference/gsp.md section 1.3).
pub const GB202_VSEC_DEBUG_SEC_2: u16 = 0x2B8;
/// BAR_FIREWALL_ENGAGE, bit 24 of that register.
pub const BAR_FIREWALL_ENGAGE: u32 = 1 << 24;

/// Base address registers a type-0 (endpoint) function has: BAR0 to BAR5
/// (PCI Local Bus Specification, the type-0 configuration header).
pub const BAR_COUNT: usize = 6;

/// Size of the configuration space a PCIe function exposes.
pub const CONFIG_SPACE_BYTES: usize = 4096;

/// The 16-bit command register (offset 0x04).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Command(pub u16);

impl Command {
    pub const IO_SPACE: u16 = 1 << 0;
    pub const MEMORY_SPACE: u16 = 1 << 1;
    /// Lets the device master the bus (DMA). Cleared on every exit so a
    /// firmware that keeps running cannot write into host pages the OS
    /// reuses.
    pub const BUS_MASTER: u16 = 1 << 2;

    pub fn bus_master(self) -> bool {
        self.0 & Self::BUS_MASTER != 0
    }

    pub fn with_bus_master(self, on: bool) -> Command {
        if on {
            Command(self.0 | Self::BUS_MASTER)
        } else {
            Command(self.0 & !Self::BUS_MASTER)
        }
    }

    pub fn with_memory_space(self) -> Command {
        Command(self.0 | Self::MEMORY_SPACE)
    }
}

/// Width of a configuration access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Width {
    U8,
    U16,
    U32,
}

impl Width {
    pub fn bytes(self) -> usize {
        match self {
            Width::U8 => 1,
            Width::U16 => 2,
            Width::U32 => 4,
        }
    }
}

/// Segments one host-memory mapping may have: the macOS extension
/// TinyGPU drives lists at most this many and silently drops the rest;
/// the simulated card refuses a mapping that needs more.
pub const DMA_MAPPING_MAX_SEGMENTS: usize = 32;

/// The BAR that opens onto video memory (BAR1 on every NVIDIA GPU here):
/// its size is how much VRAM the CPU can reach, 256 MiB on a small-BAR
/// card.
pub const FB_BAR_INDEX: u8 = 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_master_is_bit_2() {
        let c = Command(0x0006);
        assert!(c.bus_master());
        assert_eq!(c.with_bus_master(false), Command(0x0002));
        assert_eq!(Command(0).with_bus_master(true).0, 0x0004);
        assert_eq!(Command(0).with_memory_space().0, 0x0002);
    }
}
