//! The chips the sim plays: what each shows on the bus (ids, BARs), how
//! much video memory it has, and where its boot status lives.

use crate::fsp::Trust;
use crate::gsp_rm::objects::Kind;
use macuda_hw::fsp::{COT_VERSION_GB20X, COT_VERSION_GH100};
use macuda_hw::methods::{compute, copy};
use macuda_hw::pci::{BAR_FIREWALL_ENGAGE, GB202_VSEC_DEBUG_SEC_2};
use macuda_hw::regs::{NV_THERM_I2CS_SCRATCH, NV_THERM_I2CS_SCRATCH_GH100};
use macuda_hw::rm::class;
use std::time::Duration;

/// The engine classes a chip's GSP-RM allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmClasses {
    pub gpfifo: u32,
    pub compute: u32,
    pub copy: u32,
    pub usermode: u32,
}

impl RmClasses {
    /// The role a class plays in the object tree; `None` for a class this
    /// chip's RM does not allocate.
    pub fn kind_of(&self, c: u32) -> Option<Kind> {
        Some(match c {
            class::NV01_DEVICE_0 => Kind::Device,
            class::NV20_SUBDEVICE_0 => Kind::Subdevice,
            class::FERMI_VASPACE_A => Kind::VaSpace,
            class::NV1_MEMORY_USER
            | class::NV1_MEMORY_SYSTEM
            | class::NV01_MEMORY_VIRTUAL
            | class::NV01_MEMORY_LIST_SYSTEM => Kind::Memory,
            class::KEPLER_CHANNEL_GROUP_A => Kind::ChannelGroup,
            class::FERMI_CONTEXT_SHARE_A => Kind::ContextShare,
            class::GT200_DEBUGGER => Kind::Debugger,
            c if c == self.gpfifo => Kind::Channel,
            c if c == self.compute || c == self.copy => Kind::Engine,
            c if c == self.usermode => Kind::Usermode,
            _ => return None,
        })
    }
}

/// One BAR: where the server says it is and how large it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bar {
    pub address: u64,
    pub size: u64,
    /// A 64-bit BAR (taking two config slots).
    pub wide: bool,
}

/// A chip profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimChip {
    /// The firmware directory's name for it (gb202, gh100).
    pub name: &'static str,
    pub device_id: u16,
    /// Config offset 0x08: class code in 31:8, revision in 7:0.
    pub class_and_revision: u32,
    /// Config offset 0x2C: subsystem device in 31:16, vendor in 15:0.
    pub subsystem: u32,
    pub boot_0: u32,
    pub boot_42: u32,
    /// By resource index (a 64-bit BAR leaves the next index empty).
    pub bars: [Option<Bar>; 6],
    /// Video memory, in MiB (what NV_PGC6_AON_SECURE_SCRATCH_GROUP_42 reads).
    pub vram_mib: u32,
    /// What GSP-RM calls the card (GSP_STATIC_INFO's name string).
    pub marketing_name: &'static str,
    /// Its L2 cache, in bytes.
    pub l2_bytes: u32,
    /// Its SMs' compute capability (90: Hopper, 120: GB20x).
    pub sm: u32,
    /// Where the FSP's boot status reads FSP_BOOT_COMPLETE when booted.
    pub boot_status: u32,
    /// The BAR firewall bit in config space: (offset, bit), on GB20x.
    pub bar_firewall: Option<(u16, u32)>,
    /// What its FSP accepts in a COT request.
    pub trust: Trust,
    /// The engine classes its GSP-RM allocates.
    pub classes: RmClasses,
    /// How long the card's own boot takes after power-on or a reset
    /// (about 1.5 s on a 5090; the sim's default is shorter, so tests run
    /// quickly, and the CLI takes the real figure).
    pub boot_time: Duration,
}

/// The BARs' bus addresses as the server reports them.
const BAR0_ADDRESS: u64 = 0xF000_0000;
const BAR1_ADDRESS: u64 = 0x40_0000_0000;
const BAR3_ADDRESS: u64 = 0x60_0000_0000;
/// BAR3's size on both chips.
const BAR3_BYTES: u64 = 32 << 20;
/// The SHA-256 of the public key of NVIDIA's GB20x FMC (570.144's
/// `publickey` section): the key a GB202's FSP is fused to trust. A digest
/// of a public key, read from the firmware the tests fetch.
const GB20X_FMC_KEY_SHA256: [u8; 32] = [
    0xaf, 0x87, 0x0e, 0x5d, 0xde, 0x97, 0x28, 0x40, 0x58, 0x8b, 0xfb, 0x94, 0xa8, 0x7f, 0x94, 0xb1,
    0x9a, 0xd6, 0x65, 0x9d, 0xae, 0x6e, 0x13, 0x43, 0xdd, 0x0d, 0x22, 0xf1, 0x60, 0x74, 0xba, 0x39,
];

/// The default boot time of a simulated card.
pub const DEFAULT_BOOT_TIME: Duration = Duration::from_millis(30);

/// NVIDIA's BAR layout: registers at 0 (32-bit), the video memory
/// aperture at 1 and 3 more at 3 (both 64-bit, each taking two slots).
fn bars(bar0: u64, bar1: u64) -> [Option<Bar>; 6] {
    let bar = |address, size, wide| {
        Some(Bar {
            address,
            size,
            wide,
        })
    };
    [
        bar(BAR0_ADDRESS, bar0, false),
        bar(BAR1_ADDRESS, bar1, true),
        None,
        bar(BAR3_ADDRESS, BAR3_BYTES, true),
        None,
        None,
    ]
}

impl SimChip {
    /// An RTX 5090: GB202, 32 GiB, the small 256 MiB BAR1 of a card
    /// without resizable BAR enabled.
    pub fn gb202() -> SimChip {
        SimChip {
            name: "gb202",
            marketing_name: "NVIDIA GeForce RTX 5090",
            l2_bytes: 96 << 20,
            sm: 120,
            device_id: 0x2B85,
            class_and_revision: 0x0300_00A1,
            subsystem: 0x2B85_10DE,
            boot_0: 0x1B20_00A1,
            boot_42: 0x1B2A_1000,
            bars: bars(64 << 20, 256 << 20),
            vram_mib: 32 << 10,
            boot_status: NV_THERM_I2CS_SCRATCH::ADDR,
            bar_firewall: Some((GB202_VSEC_DEBUG_SEC_2, BAR_FIREWALL_ENGAGE)),
            trust: Trust {
                cot_version: COT_VERSION_GB20X,
                key_sha256: Some(GB20X_FMC_KEY_SHA256),
            },
            classes: RmClasses {
                gpfifo: class::BLACKWELL_CHANNEL_GPFIFO_A,
                compute: compute::BLACKWELL_COMPUTE_B,
                copy: copy::BLACKWELL_DMA_COPY_B,
                usermode: class::BLACKWELL_USERMODE_A,
            },
            boot_time: DEFAULT_BOOT_TIME,
        }
    }

    /// An H100 PCIe: GH100, 80 GiB, a BAR1 that covers all of it.
    pub fn gh100() -> SimChip {
        SimChip {
            name: "gh100",
            marketing_name: "NVIDIA H100 PCIe",
            l2_bytes: 50 << 20,
            sm: 90,
            device_id: 0x2331,
            class_and_revision: 0x0302_00A1,
            subsystem: 0x1626_10DE,
            boot_0: 0x1800_00A1,
            boot_42: 0x180A_1000,
            bars: bars(16 << 20, 128 << 30),
            vram_mib: 80 << 10,
            boot_status: NV_THERM_I2CS_SCRATCH_GH100,
            bar_firewall: None,
            trust: Trust {
                cot_version: COT_VERSION_GH100,
                key_sha256: None,
            },
            classes: RmClasses {
                gpfifo: class::HOPPER_CHANNEL_GPFIFO_A,
                compute: compute::HOPPER_COMPUTE_A,
                copy: copy::HOPPER_DMA_COPY_A,
                usermode: class::HOPPER_USERMODE_A,
            },
            boot_time: DEFAULT_BOOT_TIME,
        }
    }

    /// By its firmware directory's name.
    pub fn by_name(name: &str) -> Option<SimChip> {
        match name {
            "gb202" => Some(SimChip::gb202()),
            "gh100" => Some(SimChip::gh100()),
            _ => None,
        }
    }

    pub fn vram_bytes(&self) -> u64 {
        u64::from(self.vram_mib) << 20
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_hw::{Chip, ChipIdentity};

    #[test]
    fn profiles_identify_as_their_chips() {
        let gb = SimChip::gb202();
        assert_eq!(
            ChipIdentity::decode(gb.boot_0, gb.boot_42).chip.to_string(),
            "GB202"
        );
        let gh = SimChip::gh100();
        assert_eq!(
            ChipIdentity::decode(gh.boot_0, gh.boot_42).chip,
            Chip::Hopper { implementation: 0 }
        );
        assert!(
            gb.bars[1].unwrap().size < gb.vram_bytes(),
            "GB202's BAR1 is small"
        );
        assert!(gh.bars[1].unwrap().size >= gh.vram_bytes());
        assert_eq!(SimChip::by_name("gb202"), Some(gb));
        assert_eq!(SimChip::by_name("ga102"), None);
    }

    #[test]
    fn every_bar_lies_below_the_host_memory_the_card_reaches_by_dma() {
        for chip in [SimChip::gb202(), SimChip::gh100()] {
            let mut ranges: Vec<(u64, u64)> = chip
                .bars
                .iter()
                .flatten()
                .map(|b| (b.address, b.address + b.size))
                .collect();
            ranges.sort();
            assert!(
                ranges.windows(2).all(|w| w[0].1 <= w[1].0),
                "{}: BARs overlap",
                chip.name
            );
            assert!(
                ranges.last().unwrap().1 <= crate::host_memory::HOST_BUS_BASE,
                "{}",
                chip.name
            );
        }
    }
}
