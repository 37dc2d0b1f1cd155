//! Which files make up a chip's 570.144 firmware set, and the SHA-256 each
//! must have. The release is identified by these hashes, not by the file
//! names: a file called `-570.144.bin` with another hash is another build.
//! The values are those tests/sim/firmware.sh checks after fetching the
//! images (tinygrad's pins for GB202 and the GSP-RM image, GH100's read
//! from Debian's firmware-nvidia-graphics 20260916-1).

use std::fmt;

/// The firmware release this driver speaks RPC to.
pub const FIRMWARE_RELEASE: &str = "570.144";

/// A chip whose firmware set we know, by its linux-firmware directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FirmwareChip {
    /// Blackwell consumer (RTX 5090); GB203..GB207 link to its directory.
    Gb202,
    /// Hopper (H100).
    Gh100,
}

impl FirmwareChip {
    pub const ALL: [FirmwareChip; 2] = [FirmwareChip::Gb202, FirmwareChip::Gh100];

    /// The directory name under `nvidia/` in linux-firmware.
    pub fn dir_name(self) -> &'static str {
        match self {
            FirmwareChip::Gb202 => "gb202",
            FirmwareChip::Gh100 => "gh100",
        }
    }

    /// By its directory name (`gb202`, `gh100`), case-insensitively.
    pub fn by_name(name: &str) -> Option<FirmwareChip> {
        Self::ALL
            .into_iter()
            .find(|c| c.dir_name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for FirmwareChip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.dir_name())
    }
}

/// The three images a bare-metal boot of GSP-RM needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageKind {
    /// GSP-FMC, handed to the FSP for the chain of trust.
    Fmc,
    /// GSP-RM's RISC-V bootloader.
    Bootloader,
    /// GSP-RM itself, with its per-family signatures.
    GspRm,
}

impl ImageKind {
    pub const ALL: [ImageKind; 3] = [ImageKind::Fmc, ImageKind::Bootloader, ImageKind::GspRm];
}

impl fmt::Display for ImageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ImageKind::Fmc => "FMC",
            ImageKind::Bootloader => "bootloader",
            ImageKind::GspRm => "GSP-RM",
        })
    }
}

/// One pinned image: where it may sit inside a firmware directory (tried
/// in order) and the SHA-256 of its whole, uncompressed content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pin {
    pub chip: FirmwareChip,
    pub kind: ImageKind,
    /// Relative paths, the chip's own first. The GSP-RM image is one file
    /// for every chip: linux-firmware keeps it under ga102 and links it
    /// from the other chips' directories, and a copy made without the
    /// links (tests/sim/firmware.sh copies it for GB202 only) has it under
    /// ga102 alone.
    pub names: &'static [&'static str],
    /// Lower-case hex.
    pub sha256: &'static str,
}

/// The GSP-RM image's SHA-256, the same file for GB202 and GH100.
const GSP_RM_SHA256: &str = "a8c3ebeed280323aedb51c061f321e73379cce7a9ae643a33dd03915df027f7f";

/// Every pinned image.
pub const PINS: &[Pin] = &[
    Pin {
        chip: FirmwareChip::Gb202,
        kind: ImageKind::Fmc,
        names: &["nvidia/gb202/gsp/fmc-570.144.bin"],
        sha256: "cb59a35c1d4bd1274d7267fd10243c29f843ff41c851b9cbd59f5af2ddd7fece",
    },
    Pin {
        chip: FirmwareChip::Gb202,
        kind: ImageKind::Bootloader,
        names: &["nvidia/gb202/gsp/bootloader-570.144.bin"],
        sha256: "d40b48e431d1707dc77af3605db358ed7a32ebfc2830eb74de2eddb4d3025071",
    },
    Pin {
        chip: FirmwareChip::Gb202,
        kind: ImageKind::GspRm,
        names: &[
            "nvidia/gb202/gsp/gsp-570.144.bin",
            "nvidia/ga102/gsp/gsp-570.144.bin",
        ],
        sha256: GSP_RM_SHA256,
    },
    Pin {
        chip: FirmwareChip::Gh100,
        kind: ImageKind::Fmc,
        names: &["nvidia/gh100/gsp/fmc-570.144.bin"],
        sha256: "f3ce25f3897c860e4cdde183ebf09b254d94a5d8191d666c12afb33cc7121107",
    },
    Pin {
        chip: FirmwareChip::Gh100,
        kind: ImageKind::Bootloader,
        names: &["nvidia/gh100/gsp/bootloader-570.144.bin"],
        sha256: "2176e42f05729ac4dd93ed6cd1b4c6c5650b6aa79c115dfcd9f26a71c1d8d82e",
    },
    Pin {
        chip: FirmwareChip::Gh100,
        kind: ImageKind::GspRm,
        names: &[
            "nvidia/gh100/gsp/gsp-570.144.bin",
            "nvidia/ga102/gsp/gsp-570.144.bin",
        ],
        sha256: GSP_RM_SHA256,
    },
];

/// The pin of `chip`'s image of `kind`.
pub fn pin(chip: FirmwareChip, kind: ImageKind) -> &'static Pin {
    PINS.iter()
        .find(|p| p.chip == chip && p.kind == kind)
        // PANIC: PINS has every (chip, kind) pair; the test below checks it.
        .expect("every chip has a pin for every image kind")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chip_has_every_image_once() {
        for chip in FirmwareChip::ALL {
            for kind in ImageKind::ALL {
                let n = PINS
                    .iter()
                    .filter(|p| p.chip == chip && p.kind == kind)
                    .count();
                assert_eq!(n, 1, "{chip} {kind}");
                assert_eq!(pin(chip, kind).chip, chip);
            }
        }
    }

    #[test]
    fn pins_are_lower_case_sha256_and_name_the_release() {
        for p in PINS {
            assert_eq!(p.sha256.len(), 64, "{p:?}");
            assert!(
                p.sha256
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "{p:?}"
            );
            for name in p.names {
                assert!(name.contains(FIRMWARE_RELEASE), "{name}");
            }
            assert!(p.names[0].contains(p.chip.dir_name()), "{p:?}");
        }
    }

    #[test]
    fn chips_are_found_by_directory_name() {
        assert_eq!(FirmwareChip::by_name("GB202"), Some(FirmwareChip::Gb202));
        assert_eq!(FirmwareChip::by_name("gh100"), Some(FirmwareChip::Gh100));
        assert_eq!(FirmwareChip::by_name("ga102"), None);
    }
}
