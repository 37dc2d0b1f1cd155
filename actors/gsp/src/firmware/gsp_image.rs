//! The GSP-RM image (`gsp-570.144.bin`): a little-endian ELF64 RISC-V
//! relocatable whose `.fwimage` section is what gets DMA'd into WPR2 and
//! whose `.fwsignature_<family>` sections hold one signature per chip
//! family; the file is the same for every chip. `.fwversion` names the
//! release. See reference gsp.md 3.4; NVIDIA's 570.144 file carries
//! `.fwsignature_gh100` for Hopper (not `_gh10x`).

use super::error::FirmwareError;
use super::fields::FileBytes;
use super::pins::FirmwareChip;
use object::elf;
use object::read::elf::{ElfFile64, FileHeader as _};
use object::{LittleEndian, Object as _, ObjectSection as _};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The image section.
pub const FWIMAGE_SECTION: &str = ".fwimage";
/// The release string's section (e.g. "570.144").
pub const FWVERSION_SECTION: &str = ".fwversion";
/// Signature sections are this prefix plus the chip family.
pub const FWSIGNATURE_PREFIX: &str = ".fwsignature_";
/// Where e_ident keeps the file's class and byte order.
const EI_CLASS_OFFSET: u64 = 4;
const EI_DATA_OFFSET: u64 = 5;
/// The radix3 table maps at most 512 × 512 pages of 4 KiB.
pub const RADIX3_MAX_IMAGE_BYTES: u64 = 512 * 512 * 4096;

/// The signature section's family suffix for a chip.
pub fn signature_family(chip: FirmwareChip) -> &'static str {
    match chip {
        FirmwareChip::Gb202 => "gb20x",
        FirmwareChip::Gh100 => "gh100",
    }
}

/// A parsed GSP-RM image. Holds the file; the sections are ranges in it.
#[derive(Debug, Clone)]
pub struct GspImage {
    pub path: PathBuf,
    /// The signature section used, e.g. `.fwsignature_gb20x`.
    pub signature_section: String,
    /// `.fwversion`'s text, if the file has one.
    pub version: Option<String>,
    bytes: Vec<u8>,
    image: Range<usize>,
    signature: Range<usize>,
}

impl GspImage {
    /// Parse `bytes`, read from `path`, and pick `chip`'s signature.
    ///
    /// # Errors
    /// `Elf` when it is not a readable ELF64, `BadField` for another
    /// class, byte order, type or machine, `MissingSection`, `Truncated`
    /// for a section past the end, `Malformed` for an empty or oversized
    /// section.
    pub fn parse(
        path: &Path,
        bytes: Vec<u8>,
        chip: FirmwareChip,
    ) -> Result<GspImage, FirmwareError> {
        let file = FileBytes::new(path, &bytes);
        let class = file.field(EI_CLASS_OFFSET, 1, "the ELF header")?;
        file.expect("EI_CLASS (2: ELF64)", class, elf::ELFCLASS64.0.into())?;
        let data = file.field(EI_DATA_OFFSET, 1, "the ELF header")?;
        file.expect(
            "EI_DATA (1: little-endian)",
            data,
            elf::ELFDATA2LSB.0.into(),
        )?;
        let elf_file = ElfFile64::<LittleEndian>::parse(bytes.as_slice()).map_err(|source| {
            FirmwareError::Elf {
                path: path.to_path_buf(),
                source,
            }
        })?;
        let header = elf_file.elf_header();
        let endian = elf_file.endian();
        file.expect(
            "e_type",
            header.e_type(endian).0.into(),
            elf::ET_REL.0.into(),
        )?;
        file.expect(
            "e_machine",
            header.e_machine(endian).0.into(),
            elf::EM_RISCV.0.into(),
        )?;

        let section_range = |name: &str| -> Result<Range<usize>, FirmwareError> {
            let section =
                elf_file
                    .section_by_name(name)
                    .ok_or_else(|| FirmwareError::MissingSection {
                        path: path.to_path_buf(),
                        section: name.to_string(),
                    })?;
            let (offset, size) = section.file_range().ok_or_else(|| {
                file.malformed(format!("section `{name}` has no bytes in the file"))
            })?;
            file.range(offset, size, &format!("section `{name}`"))?;
            if size == 0 {
                return Err(file.malformed(format!("section `{name}` is empty")));
            }
            // CAST: `range` checked both ends against the file's length.
            Ok(offset as usize..(offset + size) as usize)
        };
        let image = section_range(FWIMAGE_SECTION)?;
        if image.len() as u64 > RADIX3_MAX_IMAGE_BYTES {
            return Err(file.malformed(format!(
                "`{FWIMAGE_SECTION}` is {} bytes, more than a radix3 table maps ({RADIX3_MAX_IMAGE_BYTES})",
                image.len()
            )));
        }
        let signature_section = format!("{FWSIGNATURE_PREFIX}{}", signature_family(chip));
        let signature = section_range(&signature_section)?;
        let version = match section_range(FWVERSION_SECTION) {
            Ok(r) => {
                let text = &bytes[r];
                let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
                Some(String::from_utf8_lossy(&text[..end]).into_owned())
            }
            Err(FirmwareError::MissingSection { .. }) => None,
            Err(e) => return Err(e),
        };
        Ok(GspImage {
            path: path.to_path_buf(),
            signature_section,
            version,
            bytes,
            image,
            signature,
        })
    }

    /// A GSP-RM image from its `.fwimage` and `chip`'s signature, for
    /// images that are not NVIDIA's file (a small test image), with the
    /// same limits as [`GspImage::parse`].
    ///
    /// # Errors
    /// `Malformed` for an empty or oversized image or an empty signature.
    pub fn from_sections(
        path: &Path,
        chip: FirmwareChip,
        image: &[u8],
        signature: &[u8],
    ) -> Result<GspImage, FirmwareError> {
        let file = FileBytes::new(path, &[]);
        if image.is_empty() || signature.is_empty() {
            return Err(file.malformed("an empty image or signature"));
        }
        if image.len() as u64 > RADIX3_MAX_IMAGE_BYTES {
            return Err(file.malformed(format!(
                "`{FWIMAGE_SECTION}` is {} bytes, more than a radix3 table maps ({RADIX3_MAX_IMAGE_BYTES})",
                image.len()
            )));
        }
        let mut bytes = image.to_vec();
        bytes.extend_from_slice(signature);
        Ok(GspImage {
            path: path.to_path_buf(),
            signature_section: format!("{FWSIGNATURE_PREFIX}{}", signature_family(chip)),
            version: None,
            bytes,
            image: 0..image.len(),
            signature: image.len()..image.len() + signature.len(),
        })
    }

    /// What is DMA'd into WPR2 (through the radix3 table).
    pub fn image(&self) -> &[u8] {
        &self.bytes[self.image.clone()]
    }
    /// The chip family's signature of the image.
    pub fn signature(&self) -> &[u8] {
        &self.bytes[self.signature.clone()]
    }
    pub fn file_bytes(&self) -> usize {
        self.bytes.len()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal ELF64 RISC-V relocatable with the given sections, laid out
    /// as NVIDIA's: header, section data, then the section table.
    pub(crate) fn synthetic_elf64(machine: elf::Machine, sections: &[(&str, &[u8])]) -> Vec<u8> {
        let mut shstrtab = vec![0u8];
        let mut names = Vec::new();
        for (name, _) in sections.iter().copied().chain([(".shstrtab", &[][..])]) {
            names.push(shstrtab.len() as u32);
            shstrtab.extend_from_slice(name.as_bytes());
            shstrtab.push(0);
        }
        let mut out = vec![0u8; 64];
        let mut placed = Vec::new();
        for (_, data) in sections.iter().copied().chain([("", &shstrtab[..])]) {
            placed.push((out.len() as u64, data.len() as u64));
            out.extend_from_slice(data);
        }
        out.resize(out.len().next_multiple_of(8), 0);
        let shoff = out.len() as u64;
        let count = sections.len() + 2;
        out.extend_from_slice(&[0u8; 64]);
        for (i, (offset, size)) in placed.iter().enumerate() {
            let strtab = i == sections.len();
            let mut h = [0u8; 64];
            h[0..4].copy_from_slice(&names[i].to_le_bytes());
            h[4..8].copy_from_slice(&(if strtab { 3u32 } else { 1 }).to_le_bytes());
            h[24..32].copy_from_slice(&offset.to_le_bytes());
            h[32..40].copy_from_slice(&size.to_le_bytes());
            h[48..56].copy_from_slice(&1u64.to_le_bytes());
            out.extend_from_slice(&h);
        }
        out[0..4].copy_from_slice(b"\x7fELF");
        out[4] = 2; // ELF64
        out[5] = 1; // little-endian
        out[6] = 1;
        out[16..18].copy_from_slice(&1u16.to_le_bytes()); // ET_REL
        out[18..20].copy_from_slice(&machine.0.to_le_bytes());
        out[20..24].copy_from_slice(&1u32.to_le_bytes());
        out[40..48].copy_from_slice(&shoff.to_le_bytes());
        out[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
        out[58..60].copy_from_slice(&64u16.to_le_bytes()); // e_shentsize
        out[60..62].copy_from_slice(&(count as u16).to_le_bytes());
        out[62..64].copy_from_slice(&((count - 1) as u16).to_le_bytes());
        out
    }

    pub(crate) fn synthetic_gsp() -> Vec<u8> {
        synthetic_elf64(
            elf::EM_RISCV,
            &[
                (".fwimage", &[0xAB; 0x2000]),
                (".fwversion", b"570.144\0"),
                (".fwsignature_gb20x", &[0x11; 0x100]),
                (".fwsignature_gh100", &[0x22; 0x100]),
            ],
        )
    }

    fn parse(bytes: Vec<u8>, chip: FirmwareChip) -> Result<GspImage, FirmwareError> {
        GspImage::parse(Path::new("gsp.bin"), bytes, chip)
    }

    #[test]
    fn from_sections_names_the_chips_signature_and_refuses_empty_parts() {
        let p = Path::new("test-gsp");
        let g = GspImage::from_sections(p, FirmwareChip::Gb202, &[1; 5000], &[2; 64]).unwrap();
        assert_eq!((g.image().len(), g.signature()), (5000, &[2u8; 64][..]));
        assert_eq!(g.signature_section, ".fwsignature_gb20x");
        assert!(GspImage::from_sections(p, FirmwareChip::Gb202, &[], &[2; 64]).is_err());
    }

    #[test]
    fn picks_the_chips_signature() {
        let gb = parse(synthetic_gsp(), FirmwareChip::Gb202).unwrap();
        assert_eq!(gb.image().len(), 0x2000);
        assert_eq!(gb.signature()[0], 0x11);
        assert_eq!(gb.signature_section, ".fwsignature_gb20x");
        assert_eq!(gb.version.as_deref(), Some("570.144"));
        let gh = parse(synthetic_gsp(), FirmwareChip::Gh100).unwrap();
        assert_eq!(gh.signature()[0], 0x22);
    }

    #[test]
    fn a_missing_signature_section_is_named() {
        let only_gh = synthetic_elf64(
            elf::EM_RISCV,
            &[(".fwimage", &[1; 16]), (".fwsignature_gh100", &[2; 16])],
        );
        match parse(only_gh, FirmwareChip::Gb202) {
            Err(FirmwareError::MissingSection { section, .. }) => {
                assert_eq!(section, ".fwsignature_gb20x")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_truncated_file_is_an_error_not_a_panic() {
        let full = synthetic_gsp();
        for len in [0, 3, 40, 64, 0x1000, full.len() - 1] {
            assert!(
                parse(full[..len].to_vec(), FirmwareChip::Gb202).is_err(),
                "{len}"
            );
        }
        // `.fwimage`'s header claims more bytes than the file has.
        let mut long = synthetic_gsp();
        let shoff = u64::from_le_bytes(long[40..48].try_into().unwrap()) as usize;
        let fwimage_size = shoff + 64 + 32;
        long[fwimage_size..][..8].copy_from_slice(&0x10_0000u64.to_le_bytes());
        match parse(long, FirmwareChip::Gb202) {
            Err(FirmwareError::Truncated { what, need, .. }) => {
                assert_eq!(what, "section `.fwimage`");
                assert_eq!(need, 64 + 0x10_0000);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_wrong_class_or_machine_is_refused() {
        let mut elf32 = synthetic_gsp();
        elf32[4] = 1;
        assert!(matches!(
            parse(elf32, FirmwareChip::Gb202),
            Err(FirmwareError::BadField { .. })
        ));
        let x86 = synthetic_elf64(elf::EM_X86_64, &[(".fwimage", &[1; 16])]);
        match parse(x86, FirmwareChip::Gb202) {
            Err(FirmwareError::BadField { what, .. }) => assert_eq!(what, "e_machine"),
            other => panic!("{other:?}"),
        }
        let mut not_elf = synthetic_gsp();
        not_elf[0] = 0;
        assert!(matches!(
            parse(not_elf, FirmwareChip::Gb202),
            Err(FirmwareError::Elf { .. })
        ));
    }
}
