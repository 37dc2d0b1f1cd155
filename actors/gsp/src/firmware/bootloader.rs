//! GSP-RM's RISC-V bootloader (`bootloader-570.144.bin`): an `nvfw_bin_hdr`,
//! then an `RM_RISCV_UCODE_DESC` at its `header_offset`, then the image at
//! its `data_offset`. The host copies the image into DMA memory and hands
//! the descriptor's manifest and monitor offsets to the firmware through
//! `GspFwWprMeta`, so those offsets must land inside the image and on the
//! 256-byte boundaries the firmware requires. Layouts: `nvfw_bin_hdr` is
//! pinned to the project oracle (tests/firmware_oracle.rs);
//! `RM_RISCV_UCODE_DESC` is not in the oracle, its offsets are reference
//! gsp.md 3.3's (NVIDIA's rmRiscvUcode.h, GA102 and later).

use super::error::FirmwareError;
use super::fields::FileBytes;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// `nvfw_bin_hdr` field offsets and size.
pub mod bin_hdr {
    pub const BIN_MAGIC: u64 = 0;
    pub const BIN_VER: u64 = 4;
    pub const BIN_SIZE: u64 = 8;
    pub const HEADER_OFFSET: u64 = 12;
    pub const DATA_OFFSET: u64 = 16;
    pub const DATA_SIZE: u64 = 20;
    pub const SIZE: u64 = 24;
    /// NVIDIA's PCI vendor id marks the container.
    pub const MAGIC: u64 = 0x10DE;
    pub const VERSION: u64 = 1;
    /// `bin_size` is the container's size rounded up to this (the file
    /// itself is not padded).
    pub const SIZE_ROUNDING: u64 = 256;
}

/// `RM_RISCV_UCODE_DESC` field offsets and size (GA102 and later).
pub mod ucode_desc {
    pub const VERSION: u64 = 0;
    pub const APP_VERSION: u64 = 28;
    pub const MANIFEST_OFFSET: u64 = 32;
    pub const MANIFEST_SIZE: u64 = 36;
    pub const MONITOR_DATA_OFFSET: u64 = 40;
    pub const MONITOR_DATA_SIZE: u64 = 44;
    pub const MONITOR_CODE_OFFSET: u64 = 48;
    pub const MONITOR_CODE_SIZE: u64 = 52;
    pub const IS_MONITOR_ENABLED: u64 = 56;
    pub const FB_RESERVED_SIZE: u64 = 76;
    pub const SIGNED_AS_CODE: u64 = 80;
    pub const SIZE: u64 = 84;
    /// The oldest descriptor layout with these fields.
    pub const MIN_VERSION: u64 = 4;
    /// The manifest and the monitor's code and data start on this boundary.
    pub const REGION_ALIGN: u64 = 256;
}

/// The descriptor's fields the boot uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UcodeDesc {
    pub version: u32,
    /// What RM writes into NV_PFALCON_FALCON_OS once it runs.
    pub app_version: u32,
    /// Byte ranges inside [`Bootloader::image`].
    pub manifest: (u32, u32),
    pub monitor_data: (u32, u32),
    pub monitor_code: (u32, u32),
    pub monitor_enabled: bool,
    pub fb_reserved_size: u32,
    pub signed_as_code: bool,
}

/// A parsed bootloader container.
#[derive(Debug, Clone)]
pub struct Bootloader {
    pub path: PathBuf,
    pub desc: UcodeDesc,
    bytes: Vec<u8>,
    image: Range<usize>,
}

impl Bootloader {
    /// Parse and check `bytes`, read from `path`.
    ///
    /// # Errors
    /// `Truncated`, `BadField` or `Misaligned`, naming the rule broken.
    pub fn parse(path: &Path, bytes: Vec<u8>) -> Result<Bootloader, FirmwareError> {
        let file = FileBytes::new(path, &bytes);
        let hdr = |field: u64| file.u32_at(field, "nvfw_bin_hdr").map(u64::from);
        file.expect(
            "nvfw_bin_hdr.bin_magic",
            hdr(bin_hdr::BIN_MAGIC)?,
            bin_hdr::MAGIC,
        )?;
        file.expect(
            "nvfw_bin_hdr.bin_ver",
            hdr(bin_hdr::BIN_VER)?,
            bin_hdr::VERSION,
        )?;
        let header_offset = hdr(bin_hdr::HEADER_OFFSET)?;
        file.expect("nvfw_bin_hdr.header_offset", header_offset, bin_hdr::SIZE)?;
        let data_offset = hdr(bin_hdr::DATA_OFFSET)?;
        file.expect(
            "nvfw_bin_hdr.data_offset",
            data_offset,
            header_offset + ucode_desc::SIZE,
        )?;
        let data_size = hdr(bin_hdr::DATA_SIZE)?;
        file.expect(
            "nvfw_bin_hdr.bin_size",
            hdr(bin_hdr::BIN_SIZE)?,
            (data_offset + data_size).next_multiple_of(bin_hdr::SIZE_ROUNDING),
        )?;
        let d = |field: u64| file.u32_at(header_offset + field, "RM_RISCV_UCODE_DESC");
        let version = d(ucode_desc::VERSION)?;
        if u64::from(version) < ucode_desc::MIN_VERSION {
            return Err(file.malformed(format!(
                "RM_RISCV_UCODE_DESC version {version} is older than {}",
                ucode_desc::MIN_VERSION
            )));
        }
        let desc = UcodeDesc {
            version,
            app_version: d(ucode_desc::APP_VERSION)?,
            manifest: (
                d(ucode_desc::MANIFEST_OFFSET)?,
                d(ucode_desc::MANIFEST_SIZE)?,
            ),
            monitor_data: (
                d(ucode_desc::MONITOR_DATA_OFFSET)?,
                d(ucode_desc::MONITOR_DATA_SIZE)?,
            ),
            monitor_code: (
                d(ucode_desc::MONITOR_CODE_OFFSET)?,
                d(ucode_desc::MONITOR_CODE_SIZE)?,
            ),
            monitor_enabled: d(ucode_desc::IS_MONITOR_ENABLED)? != 0,
            fb_reserved_size: d(ucode_desc::FB_RESERVED_SIZE)?,
            signed_as_code: d(ucode_desc::SIGNED_AS_CODE)? != 0,
        };
        let image_bytes = file.range(data_offset, data_size, "the bootloader image")?;
        for (what, (offset, size)) in [
            ("manifestOffset", desc.manifest),
            ("monitorDataOffset", desc.monitor_data),
            ("monitorCodeOffset", desc.monitor_code),
        ] {
            if u64::from(offset) % ucode_desc::REGION_ALIGN != 0 {
                return Err(FirmwareError::Misaligned {
                    path: path.to_path_buf(),
                    what,
                    value: offset.into(),
                    align: ucode_desc::REGION_ALIGN,
                });
            }
            let end = u64::from(offset) + u64::from(size);
            if end > image_bytes.len() as u64 {
                return Err(file.malformed(format!(
                    "the region at {what} {offset:#x} ({size:#x} bytes) ends past the image ({:#x} bytes)",
                    image_bytes.len()
                )));
            }
        }
        // CAST: `range` checked both ends against the file's length.
        let image = data_offset as usize..(data_offset + data_size) as usize;
        Ok(Bootloader {
            path: path.to_path_buf(),
            desc,
            bytes,
            image,
        })
    }

    /// What the host copies into DMA memory for the GSP to run.
    pub fn image(&self) -> &[u8] {
        &self.bytes[self.image.clone()]
    }
    pub fn file_bytes(&self) -> usize {
        self.bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container as NVIDIA lays it out, with a 0x400-byte image holding
    /// a manifest, monitor data and monitor code.
    fn synthetic_bootloader() -> Vec<u8> {
        let image_len = 0x400u32;
        let data_offset = (bin_hdr::SIZE + ucode_desc::SIZE) as u32;
        let mut out = Vec::new();
        let words = |out: &mut Vec<u8>, w: &[u32]| {
            for v in w {
                out.extend_from_slice(&v.to_le_bytes());
            }
        };
        let bin_size = (data_offset + image_len).next_multiple_of(256);
        words(&mut out, &[0x10DE, 1, bin_size, 24, data_offset, image_len]);
        let mut desc = [0u32; 21];
        desc[0] = 5; // version
        desc[7] = 0x5701_4400; // appVersion
        desc[8] = 0; // manifest
        desc[9] = 0x100;
        desc[10] = 0x100; // monitor data
        desc[11] = 0x100;
        desc[12] = 0x200; // monitor code
        desc[13] = 0x200;
        desc[14] = 1;
        words(&mut out, &desc);
        out.extend((0..image_len).map(|i| i as u8));
        out
    }

    fn parse(bytes: Vec<u8>) -> Result<Bootloader, FirmwareError> {
        Bootloader::parse(Path::new("bootloader.bin"), bytes)
    }

    fn set(bytes: &mut [u8], offset: u64, value: u32) {
        bytes[offset as usize..][..4].copy_from_slice(&value.to_le_bytes());
    }

    #[test]
    fn a_well_formed_container_parses() {
        let b = parse(synthetic_bootloader()).unwrap();
        assert_eq!(b.image().len(), 0x400);
        assert_eq!(b.image()[1], 1);
        assert_eq!(b.desc.version, 5);
        assert_eq!(b.desc.app_version, 0x5701_4400);
        assert_eq!(b.desc.monitor_code, (0x200, 0x200));
        assert!(b.desc.monitor_enabled);
    }

    #[test]
    fn a_wrong_magic_is_refused() {
        let mut bad = synthetic_bootloader();
        set(&mut bad, bin_hdr::BIN_MAGIC, 0x10DF);
        match parse(bad) {
            Err(FirmwareError::BadField {
                what,
                found,
                expected,
                ..
            }) => {
                assert_eq!(what, "nvfw_bin_hdr.bin_magic");
                assert_eq!((found, expected), (0x10DF, 0x10DE));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_truncated_image_says_how_much_was_needed() {
        let full = synthetic_bootloader();
        match parse(full[..full.len() - 1].to_vec()) {
            Err(FirmwareError::Truncated {
                what, need, have, ..
            }) => {
                assert_eq!(what, "the bootloader image");
                assert_eq!((need, have), (full.len() as u64, full.len() as u64 - 1));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(full[..10].to_vec()),
            Err(FirmwareError::Truncated { .. })
        ));
        assert!(matches!(
            parse(full[..50].to_vec()),
            Err(FirmwareError::Truncated { .. })
        ));
    }

    #[test]
    fn a_misaligned_monitor_is_refused() {
        let mut bad = synthetic_bootloader();
        set(
            &mut bad,
            bin_hdr::SIZE + ucode_desc::MONITOR_CODE_OFFSET,
            0x280,
        );
        match parse(bad) {
            Err(FirmwareError::Misaligned {
                what, value, align, ..
            }) => {
                assert_eq!((what, value, align), ("monitorCodeOffset", 0x280, 256));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_region_past_the_image_or_an_old_descriptor_is_malformed() {
        let mut bad = synthetic_bootloader();
        set(
            &mut bad,
            bin_hdr::SIZE + ucode_desc::MONITOR_CODE_SIZE,
            0x300,
        );
        assert!(matches!(parse(bad), Err(FirmwareError::Malformed { .. })));
        let mut old = synthetic_bootloader();
        set(&mut old, bin_hdr::SIZE + ucode_desc::VERSION, 3);
        assert!(matches!(parse(old), Err(FirmwareError::Malformed { .. })));
    }

    #[test]
    fn bin_size_must_be_the_rounded_container_size() {
        let mut bad = synthetic_bootloader();
        set(&mut bad, bin_hdr::BIN_SIZE, 0x10);
        assert!(matches!(parse(bad), Err(FirmwareError::BadField { .. })));
    }
}
