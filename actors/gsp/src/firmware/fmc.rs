//! The GSP-FMC container (`fmc-570.144.bin`): a minimal little-endian
//! ELF32 with no program headers and six sections, of which four carry
//! what the FSP's chain of trust needs: `hash` (SHA-384 of the image),
//! `signature`, `publickey` and `image`. The header must be exactly the
//! one NVIDIA writes (nouveau refuses any other), and each payload section
//! records the CRC-32 of its bytes in `sh_info`. See reference gsp.md 3.2.
//!
//! Two facts the reference gives as inferred were checked against
//! NVIDIA's 570.144 images for GB202 and GH100 before being made rules
//! here: `sh_info` is the zlib CRC-32 of the section's bytes, and `hash`
//! is the SHA-384 of `image`.

use super::error::FirmwareError;
use super::fields::FileBytes;
use super::pins::FirmwareChip;
use sha2::{Digest, Sha384};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The ELF32 file header's fields and the one value each must hold:
/// (name, offset, width in bytes, value). Together they cover all of its
/// 52 bytes.
pub const FMC_HEADER_FIELDS: &[(&str, u64, u8, u64)] = &[
    ("EI_MAG0", 0, 1, 0x7F),
    ("EI_MAG1", 1, 1, b'E' as u64),
    ("EI_MAG2", 2, 1, b'L' as u64),
    ("EI_MAG3", 3, 1, b'F' as u64),
    ("EI_CLASS (1: ELF32)", 4, 1, 1),
    ("EI_DATA (1: little-endian)", 5, 1, 1),
    ("EI_VERSION", 6, 1, 1),
    ("EI_OSABI", 7, 1, 0),
    ("EI_ABIVERSION", 8, 1, 0),
    ("EI_PAD (bytes 9-12)", 9, 4, 0),
    ("EI_PAD (bytes 13-14)", 13, 2, 0),
    ("EI_PAD (byte 15)", 15, 1, 0),
    ("e_type", 16, 2, 0),
    ("e_machine", 18, 2, 0),
    ("e_version", 20, 4, 1),
    ("e_entry", 24, 4, 0),
    ("e_phoff", 28, 4, 0),
    ("e_shoff", 32, 4, FMC_SECTION_TABLE_OFFSET),
    ("e_flags", 36, 4, 0),
    ("e_ehsize", 40, 2, FMC_HEADER_BYTES),
    ("e_phentsize", 42, 2, 0),
    ("e_phnum", 44, 2, 0),
    ("e_shentsize", 46, 2, ELF32_SECTION_HEADER_BYTES),
    ("e_shnum", 48, 2, FMC_SECTION_COUNT),
    ("e_shstrndx", 50, 2, FMC_SHSTRTAB_INDEX),
];

/// The ELF32 file header's size; the section table follows it directly.
pub const FMC_HEADER_BYTES: u64 = 52;
pub const FMC_SECTION_TABLE_OFFSET: u64 = FMC_HEADER_BYTES;
pub const ELF32_SECTION_HEADER_BYTES: u64 = 40;
pub const FMC_SECTION_COUNT: u64 = 6;
pub const FMC_SHSTRTAB_INDEX: u64 = 1;

/// Offsets inside an ELF32 section header.
pub const SH_NAME: u64 = 0;
pub const SH_TYPE: u64 = 4;
pub const SH_FLAGS: u64 = 8;
pub const SH_OFFSET: u64 = 16;
pub const SH_SIZE: u64 = 20;
pub const SH_INFO: u64 = 28;
pub const SH_ADDRALIGN: u64 = 32;

pub const SHT_PROGBITS: u64 = 1;
pub const SHT_STRTAB: u64 = 3;
/// SHF_STRINGS, the string table's only flag.
pub const FMC_SHSTRTAB_FLAGS: u64 = 0x20;
/// The flags NVIDIA gives every payload section.
pub const FMC_PAYLOAD_FLAGS: u64 = 0xFFF0_0102;
/// Payload sections are aligned, and padded, to 4 bytes.
pub const FMC_PAYLOAD_ALIGN: u64 = 4;

/// `hash` holds a SHA-384.
pub const FMC_HASH_BYTES: u64 = 48;

/// The payload sections, by name and by the index they have in the file.
pub const FMC_HASH: (&str, u64) = ("hash", 2);
pub const FMC_SIGNATURE: (&str, u64) = ("signature", 3);
pub const FMC_PUBLIC_KEY: (&str, u64) = ("publickey", 4);
pub const FMC_IMAGE: (&str, u64) = ("image", 5);
const SHSTRTAB_NAME: &str = ".shstrtab";

/// The signature's and public key's sizes for a chip: an ECDSA P-384
/// signature (r, s) and uncompressed point on Blackwell, RSA-3072 on Hopper.
pub fn signature_and_key_bytes(chip: FirmwareChip) -> (u64, u64) {
    match chip {
        FirmwareChip::Gb202 => (96, 97),
        FirmwareChip::Gh100 => (384, 384),
    }
}

/// A parsed FMC container. Holds the file; the sections are ranges in it.
#[derive(Debug, Clone)]
pub struct FmcImage {
    pub path: PathBuf,
    bytes: Vec<u8>,
    hash: Range<usize>,
    signature: Range<usize>,
    public_key: Range<usize>,
    image: Range<usize>,
}

impl FmcImage {
    /// Parse and check `bytes`, read from `path`, as `chip`'s FMC.
    ///
    /// # Errors
    /// `Truncated`, `BadField`, `Misaligned`, `MissingSection`, `BadCrc`,
    /// `ImageHashMismatch` or `Malformed`, naming the rule broken.
    pub fn parse(
        path: &Path,
        bytes: Vec<u8>,
        chip: FirmwareChip,
    ) -> Result<FmcImage, FirmwareError> {
        let file = FileBytes::new(path, &bytes);
        for &(what, offset, width, expected) in FMC_HEADER_FIELDS {
            let found = file.field(offset, width, "the ELF32 header")?;
            file.expect(what, found, expected)?;
        }
        let sections = read_sections(&file)?;
        let strtab = &sections[FMC_SHSTRTAB_INDEX as usize];
        file.expect(".shstrtab sh_type", strtab.sh_type, SHT_STRTAB)?;
        file.expect(".shstrtab sh_flags", strtab.sh_flags, FMC_SHSTRTAB_FLAGS)?;
        let names = file.range(strtab.offset, strtab.size, "section `.shstrtab`")?;
        let name_of = |s: &Section| section_name(names, s.name);
        if name_of(strtab) != Some(SHSTRTAB_NAME) {
            return Err(file.malformed("section 1 is not `.shstrtab`"));
        }
        let (signature_bytes, key_bytes) = signature_and_key_bytes(chip);
        let mut ranges = Vec::new();
        for (name, index, size) in [
            (FMC_HASH.0, FMC_HASH.1, Some(FMC_HASH_BYTES)),
            (FMC_SIGNATURE.0, FMC_SIGNATURE.1, Some(signature_bytes)),
            (FMC_PUBLIC_KEY.0, FMC_PUBLIC_KEY.1, Some(key_bytes)),
            (FMC_IMAGE.0, FMC_IMAGE.1, None),
        ] {
            let Some(found_at) = sections.iter().position(|s| name_of(s) == Some(name)) else {
                return Err(FirmwareError::MissingSection {
                    path: path.to_path_buf(),
                    section: name.to_string(),
                });
            };
            file.expect(
                &format!("the index of section `{name}`"),
                found_at as u64,
                index,
            )?;
            let s = &sections[found_at];
            file.expect(&format!("`{name}` sh_type"), s.sh_type, SHT_PROGBITS)?;
            file.expect(&format!("`{name}` sh_flags"), s.sh_flags, FMC_PAYLOAD_FLAGS)?;
            file.expect(
                &format!("`{name}` sh_addralign"),
                s.align,
                FMC_PAYLOAD_ALIGN,
            )?;
            if s.offset % FMC_PAYLOAD_ALIGN != 0 {
                return Err(FirmwareError::Misaligned {
                    path: path.to_path_buf(),
                    what: "a payload section's offset",
                    value: s.offset,
                    align: FMC_PAYLOAD_ALIGN,
                });
            }
            if let Some(size) = size {
                file.expect(&format!("the size of `{name}` for {chip}"), s.size, size)?;
            }
            let data = file.range(s.offset, s.size, &format!("section `{name}`"))?;
            let computed = crc32fast::hash(data);
            if u64::from(computed) != s.info {
                return Err(FirmwareError::BadCrc {
                    path: path.to_path_buf(),
                    section: name,
                    // CAST: sh_info is a 32-bit field.
                    recorded: s.info as u32,
                    computed,
                });
            }
            // CAST: `range` checked both ends against the file's length.
            ranges.push(s.offset as usize..(s.offset + s.size) as usize);
        }
        let [hash, signature, public_key, image] = <[Range<usize>; 4]>::try_from(ranges)
            .map_err(|_| file.malformed("payload sections"))?;
        if Sha384::digest(&bytes[image.clone()])[..] != bytes[hash.clone()] {
            return Err(FirmwareError::ImageHashMismatch {
                path: path.to_path_buf(),
            });
        }
        Ok(FmcImage {
            path: path.to_path_buf(),
            bytes,
            hash,
            signature,
            public_key,
            image,
        })
    }

    /// An FMC from its four sections, as a container would hold them: for
    /// FMCs that are not NVIDIA's files (a test image signed with a key a
    /// simulated FSP trusts). The same rules as [`FmcImage::parse`] apply
    /// to the sections: `chip`'s sizes, and `hash` the SHA-384 of `image`.
    ///
    /// # Errors
    /// `BadField` for a section of the wrong size, `Malformed` for an
    /// empty image, `ImageHashMismatch`.
    pub fn from_sections(
        path: &Path,
        chip: FirmwareChip,
        image: &[u8],
        hash: &[u8],
        signature: &[u8],
        public_key: &[u8],
    ) -> Result<FmcImage, FirmwareError> {
        let (signature_bytes, key_bytes) = signature_and_key_bytes(chip);
        let mut bytes = Vec::new();
        let file = FileBytes::new(path, &[]);
        if image.is_empty() {
            return Err(file.malformed("section `image` is empty"));
        }
        let mut ranges = Vec::new();
        for (name, data, size) in [
            (FMC_HASH.0, hash, Some(FMC_HASH_BYTES)),
            (FMC_SIGNATURE.0, signature, Some(signature_bytes)),
            (FMC_PUBLIC_KEY.0, public_key, Some(key_bytes)),
            (FMC_IMAGE.0, image, None),
        ] {
            if let Some(size) = size {
                file.expect(
                    &format!("the size of `{name}` for {chip}"),
                    data.len() as u64,
                    size,
                )?;
            }
            ranges.push(bytes.len()..bytes.len() + data.len());
            bytes.extend_from_slice(data);
        }
        let [hash, signature, public_key, image] = <[Range<usize>; 4]>::try_from(ranges)
            .map_err(|_| file.malformed("payload sections"))?;
        if Sha384::digest(&bytes[image.clone()])[..] != bytes[hash.clone()] {
            return Err(FirmwareError::ImageHashMismatch {
                path: path.to_path_buf(),
            });
        }
        Ok(FmcImage {
            path: path.to_path_buf(),
            bytes,
            hash,
            signature,
            public_key,
            image,
        })
    }

    /// The SHA-384 of [`FmcImage::image`].
    pub fn hash(&self) -> &[u8] {
        &self.bytes[self.hash.clone()]
    }
    pub fn signature(&self) -> &[u8] {
        &self.bytes[self.signature.clone()]
    }
    pub fn public_key(&self) -> &[u8] {
        &self.bytes[self.public_key.clone()]
    }
    /// What the FSP loads and runs.
    pub fn image(&self) -> &[u8] {
        &self.bytes[self.image.clone()]
    }
    pub fn file_bytes(&self) -> usize {
        self.bytes.len()
    }
}

/// One ELF32 section header's fields we use.
struct Section {
    name: u64,
    sh_type: u64,
    sh_flags: u64,
    offset: u64,
    size: u64,
    info: u64,
    align: u64,
}

fn read_sections(file: &FileBytes<'_>) -> Result<Vec<Section>, FirmwareError> {
    (0..FMC_SECTION_COUNT)
        .map(|i| {
            let at = FMC_SECTION_TABLE_OFFSET + i * ELF32_SECTION_HEADER_BYTES;
            let what = "the section header table";
            let u = |field: u64| file.u32_at(at + field, what).map(u64::from);
            Ok(Section {
                name: u(SH_NAME)?,
                sh_type: u(SH_TYPE)?,
                sh_flags: u(SH_FLAGS)?,
                offset: u(SH_OFFSET)?,
                size: u(SH_SIZE)?,
                info: u(SH_INFO)?,
                align: u(SH_ADDRALIGN)?,
            })
        })
        .collect()
}

/// The NUL-terminated name at `offset` in the string table.
fn section_name(strtab: &[u8], offset: u64) -> Option<&str> {
    let rest = strtab.get(usize::try_from(offset).ok()?..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&rest[..end]).ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A well-formed FMC container around `image`, with `chip`'s signature
    /// and key sizes, built as NVIDIA lays it out.
    pub(crate) fn synthetic_fmc(chip: FirmwareChip, image: &[u8]) -> Vec<u8> {
        let (sig_len, key_len) = signature_and_key_bytes(chip);
        let strtab = b"\0.shstrtab\0hash\0signature\0publickey\0image\0";
        let payloads: [(&[u8], u32); 4] = [
            (&Sha384::digest(image)[..], 11),
            (&vec![0x5A; sig_len as usize], 16),
            (&vec![0x04; key_len as usize], 26),
            (image, 36),
        ];
        let mut out = Vec::new();
        for &(_, offset, width, value) in FMC_HEADER_FIELDS {
            out.resize(offset as usize, 0);
            out.extend_from_slice(&value.to_le_bytes()[..width as usize]);
        }
        let data_start = FMC_HEADER_BYTES + FMC_SECTION_COUNT * ELF32_SECTION_HEADER_BYTES;
        let mut data = strtab.to_vec();
        let mut headers = vec![[0u32; 10]];
        headers.push([
            1,
            SHT_STRTAB as u32,
            0x20,
            0,
            data_start as u32,
            strtab.len() as u32,
            0,
            0,
            1,
            1,
        ]);
        for (bytes, name) in payloads {
            data.resize(data.len().next_multiple_of(4), 0);
            let offset = data_start as usize + data.len();
            headers.push([
                name,
                SHT_PROGBITS as u32,
                FMC_PAYLOAD_FLAGS as u32,
                0,
                offset as u32,
                bytes.len() as u32,
                0,
                crc32fast::hash(bytes),
                4,
                0,
            ]);
            data.extend_from_slice(bytes);
        }
        for h in headers {
            for w in h {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
        out.extend_from_slice(&data);
        out
    }

    fn parse(bytes: Vec<u8>) -> Result<FmcImage, FirmwareError> {
        FmcImage::parse(Path::new("fmc.bin"), bytes, FirmwareChip::Gb202)
    }

    fn section_header(index: u64) -> usize {
        (FMC_SECTION_TABLE_OFFSET + index * ELF32_SECTION_HEADER_BYTES) as usize
    }

    #[test]
    fn from_sections_checks_sizes_and_the_hash_as_parse_does() {
        let chip = FirmwareChip::Gb202;
        let image = b"an fmc image".to_vec();
        let hash = Sha384::digest(&image).to_vec();
        let p = Path::new("test-fmc");
        let f = FmcImage::from_sections(p, chip, &image, &hash, &[1; 96], &[4; 97]).unwrap();
        assert_eq!((f.image(), f.hash()), (&image[..], &hash[..]));
        assert_eq!((f.signature().len(), f.public_key().len()), (96, 97));
        assert!(matches!(
            FmcImage::from_sections(p, chip, &image, &hash, &[1; 384], &[4; 97]),
            Err(FirmwareError::BadField { .. })
        ));
        assert!(matches!(
            FmcImage::from_sections(p, chip, b"another", &hash, &[1; 96], &[4; 97]),
            Err(FirmwareError::ImageHashMismatch { .. })
        ));
    }

    #[test]
    fn a_well_formed_container_parses() {
        let fmc = parse(synthetic_fmc(FirmwareChip::Gb202, b"fmc code!!")).unwrap();
        assert_eq!(fmc.image(), b"fmc code!!");
        assert_eq!(fmc.hash(), &Sha384::digest(b"fmc code!!")[..]);
        assert_eq!(fmc.signature().len(), 96);
        assert_eq!(fmc.public_key().len(), 97);
        let gh = FmcImage::parse(
            Path::new("fmc.bin"),
            synthetic_fmc(FirmwareChip::Gh100, b"x"),
            FirmwareChip::Gh100,
        )
        .unwrap();
        assert_eq!((gh.signature().len(), gh.public_key().len()), (384, 384));
    }

    #[test]
    fn the_header_table_covers_all_52_bytes() {
        let covered: u64 = FMC_HEADER_FIELDS.iter().map(|f| u64::from(f.2)).sum();
        assert_eq!(covered, FMC_HEADER_BYTES);
    }

    #[test]
    fn a_truncated_container_says_what_was_short() {
        let full = synthetic_fmc(FirmwareChip::Gb202, b"fmc code");
        match parse(full[..full.len() - 2].to_vec()) {
            Err(FirmwareError::Truncated {
                what, need, have, ..
            }) => {
                assert_eq!(what, "section `image`");
                assert_eq!((need, have), (full.len() as u64, full.len() as u64 - 2));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(full[..30].to_vec()),
            Err(FirmwareError::Truncated { .. })
        ));
    }

    #[test]
    fn a_wrong_magic_or_header_field_is_refused() {
        let mut bad = synthetic_fmc(FirmwareChip::Gb202, b"x");
        bad[1] = b'X';
        match parse(bad) {
            Err(FirmwareError::BadField {
                what,
                found,
                expected,
                ..
            }) => {
                assert_eq!(what, "EI_MAG1");
                assert_eq!((found, expected), (u64::from(b'X'), u64::from(b'E')));
            }
            other => panic!("{other:?}"),
        }
        let mut elf64 = synthetic_fmc(FirmwareChip::Gb202, b"x");
        elf64[4] = 2;
        assert!(matches!(parse(elf64), Err(FirmwareError::BadField { .. })));
    }

    #[test]
    fn a_bad_crc_names_the_section() {
        let mut bad = synthetic_fmc(FirmwareChip::Gb202, b"fmc code");
        let last = bad.len() - 1;
        bad[last] ^= 1;
        match parse(bad) {
            Err(FirmwareError::BadCrc { section, .. }) => assert_eq!(section, "image"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_hash_that_is_not_the_images_is_refused() {
        let mut bad = synthetic_fmc(FirmwareChip::Gb202, b"fmc code");
        let hash_at =
            u32::from_le_bytes(bad[section_header(2) + 16..][..4].try_into().unwrap()) as usize;
        bad[hash_at] ^= 1;
        let crc = crc32fast::hash(&bad[hash_at..hash_at + 48]);
        bad[section_header(2) + 28..][..4].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            parse(bad),
            Err(FirmwareError::ImageHashMismatch { .. })
        ));
    }

    #[test]
    fn a_missing_section_is_named() {
        let mut bad = synthetic_fmc(FirmwareChip::Gb202, b"x");
        // Rename `signature` to `signaturX` in the string table.
        let strtab_at = (FMC_HEADER_BYTES + 6 * ELF32_SECTION_HEADER_BYTES) as usize;
        bad[strtab_at + 24] = b'X';
        match parse(bad) {
            Err(FirmwareError::MissingSection { section, .. }) => assert_eq!(section, "signature"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_signature_of_the_other_chips_size_is_refused() {
        let gh = synthetic_fmc(FirmwareChip::Gh100, b"x");
        match parse(gh) {
            Err(FirmwareError::BadField {
                what,
                found,
                expected,
                ..
            }) => {
                assert_eq!(what, "the size of `signature` for gb202");
                assert_eq!((found, expected), (384, 96));
            }
            other => panic!("{other:?}"),
        }
    }
}
