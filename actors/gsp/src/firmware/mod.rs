//! NVIDIA's GSP firmware for the bare-metal boot: finding the 570.144
//! images, checking each against its SHA-256 pin, and parsing their
//! containers into the pieces the boot hands to the card (the FMC's image,
//! hash, signature and public key for the FSP; the bootloader's image and
//! descriptor; GSP-RM's image and the chip family's signature). Nothing
//! here touches a card: a bad image is caught, with a typed error naming
//! the file, before any boot step runs.
//!
//! - `pins`: which files make a chip's set, and their SHA-256;
//! - `locate`: which directories are searched, and how files are found;
//! - `read`: reading a file (zstd-compressed or not) and checking its hash;
//! - `fmc`, `bootloader`, `gsp_image`: the three containers;
//! - `error`: what can be wrong.

pub mod bootloader;
pub mod error;
mod fields;
pub mod fmc;
pub mod gsp_image;
pub mod locate;
pub mod pins;
pub mod read;

pub use bootloader::{Bootloader, UcodeDesc};
pub use error::FirmwareError;
pub use fmc::FmcImage;
pub use gsp_image::GspImage;
pub use locate::{Compression, Located, SearchOrigin, SearchPath, FIRMWARE_DIR_VAR};
pub use pins::{pin, FirmwareChip, ImageKind, Pin, FIRMWARE_RELEASE};
pub use read::{read_verified, Progress, VerifiedFile};

use std::fmt::Write as _;

/// The three images of a chip's firmware set, each checked and parsed.
#[derive(Debug, Clone)]
pub struct FirmwareSet {
    pub chip: FirmwareChip,
    pub fmc: FmcImage,
    pub bootloader: Bootloader,
    pub gsp: GspImage,
    /// How each file was found, in `ImageKind::ALL` order.
    pub files: Vec<VerifiedFile>,
}

impl FirmwareSet {
    /// Find, check and parse `chip`'s images in `search`.
    ///
    /// # Errors
    /// The first image's [`FirmwareError`]: missing, unreadable, with
    /// another hash, or breaking a rule of its container.
    pub fn load(
        chip: FirmwareChip,
        search: &SearchPath,
        progress: Progress,
    ) -> Result<FirmwareSet, FirmwareError> {
        let fetch = |kind| -> Result<VerifiedFile, FirmwareError> {
            let p = pin(chip, kind);
            read_verified(&search.locate(p)?, p, progress)
        };
        // Locate every image before reading the big one, so a missing
        // small file is reported without waiting for 60 MB.
        for kind in ImageKind::ALL {
            search.locate(pin(chip, kind))?;
        }
        let mut fmc_file = fetch(ImageKind::Fmc)?;
        let mut bootloader_file = fetch(ImageKind::Bootloader)?;
        let mut gsp_file = fetch(ImageKind::GspRm)?;
        // The containers keep the bytes; the records keep path and hash.
        let fmc = FmcImage::parse(&fmc_file.path, std::mem::take(&mut fmc_file.bytes), chip)?;
        let bootloader = Bootloader::parse(
            &bootloader_file.path,
            std::mem::take(&mut bootloader_file.bytes),
        )?;
        let gsp = GspImage::parse(&gsp_file.path, std::mem::take(&mut gsp_file.bytes), chip)?;
        let files = vec![fmc_file, bootloader_file, gsp_file];
        Ok(FirmwareSet {
            chip,
            fmc,
            bootloader,
            gsp,
            files,
        })
    }

    /// What was found, one fact a line: each file with its size and hash,
    /// and the containers' sections.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "firmware: {} {FIRMWARE_RELEASE}, every image as pinned (SHA-256)",
            self.chip.dir_name().to_uppercase()
        );
        let sizes = [
            self.fmc.file_bytes(),
            self.bootloader.file_bytes(),
            self.gsp.file_bytes(),
        ];
        for ((kind, file), size) in ImageKind::ALL.iter().zip(&self.files).zip(sizes) {
            let zst = match file.compression {
                Compression::Zstd => ", zstd-compressed",
                Compression::None => "",
            };
            let _ = writeln!(
                s,
                "  {:<10} {} ({size} bytes{zst}), sha256 {} ok",
                kind.to_string(),
                file.path.display(),
                file.sha256
            );
        }
        let _ = writeln!(
            s,
            "  FMC:        image {} bytes, hash {} (SHA-384 of the image: ok), signature {}, public key {}, CRC-32 of each section ok",
            self.fmc.image().len(),
            self.fmc.hash().len(),
            self.fmc.signature().len(),
            self.fmc.public_key().len()
        );
        let d = &self.bootloader.desc;
        let _ = writeln!(
            s,
            "  bootloader: image {} bytes, descriptor v{}, app version {:#x}, manifest {:#x}+{:#x}, monitor data {:#x}+{:#x}, monitor code {:#x}+{:#x}{}",
            self.bootloader.image().len(),
            d.version,
            d.app_version,
            d.manifest.0,
            d.manifest.1,
            d.monitor_data.0,
            d.monitor_data.1,
            d.monitor_code.0,
            d.monitor_code.1,
            if d.monitor_enabled { ", monitor enabled" } else { "" }
        );
        let _ = writeln!(
            s,
            "  GSP-RM:     .fwimage {} bytes ({} pages of 4 KiB), {} {} bytes, .fwversion {}",
            self.gsp.image().len(),
            self.gsp.image().len().div_ceil(4096),
            self.gsp.signature_section,
            self.gsp.signature().len(),
            self.gsp.version.as_deref().unwrap_or("(none)")
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(dir: &std::path::Path) -> SearchPath {
        SearchPath::choose(Some(dir.to_path_buf()), None)
    }

    #[test]
    fn an_empty_directory_names_the_first_missing_image() {
        let dir = tempfile::tempdir().unwrap();
        match FirmwareSet::load(FirmwareChip::Gb202, &search(dir.path()), Progress::Hidden) {
            Err(FirmwareError::Missing { name, .. }) => {
                assert_eq!(name, "nvidia/gb202/gsp/fmc-570.144.bin")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_well_formed_image_of_another_build_is_a_wrong_hash() {
        let dir = tempfile::tempdir().unwrap();
        let chip = FirmwareChip::Gb202;
        let files = [
            (ImageKind::Fmc, fmc::tests::synthetic_fmc(chip, b"fmc")),
            (ImageKind::Bootloader, vec![0; 16]),
            (ImageKind::GspRm, gsp_image::tests::synthetic_gsp()),
        ];
        for (kind, bytes) in &files {
            let path = dir.path().join(pin(chip, *kind).names[0]);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, bytes).unwrap();
        }
        match FirmwareSet::load(chip, &search(dir.path()), Progress::Hidden) {
            Err(e @ FirmwareError::WrongHash { .. }) => {
                let text = e.to_string();
                assert!(text.contains("fmc-570.144.bin"), "{text}");
                assert!(text.contains(pin(chip, ImageKind::Fmc).sha256), "{text}");
            }
            other => panic!("{other:?}"),
        }
    }
}
