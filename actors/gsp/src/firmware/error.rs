//! What can be wrong with NVIDIA's firmware images. Every variant names the
//! file it is about and what was expected, so that a user can tell a
//! missing file from a wrong release from a damaged download.

use std::path::PathBuf;

/// Why the firmware set could not be found, read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum FirmwareError {
    /// No candidate file exists in any searched directory.
    #[error(
        "{name} not found (searched {}); expected a file with SHA-256 {expected_sha256}",
        list(searched)
    )]
    Missing {
        /// The image's path inside a firmware directory.
        name: &'static str,
        /// Every directory looked in, in the order they were tried.
        searched: Vec<PathBuf>,
        expected_sha256: &'static str,
    },
    /// The file exists but could not be read (or decompressed).
    #[error("{}: cannot read it", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file's SHA-256 is not the pinned one: another release, or a
    /// damaged copy. The version is the hash, not the file name.
    #[error("{}: SHA-256 is {found}, expected {expected} (the 570.144 image)", path.display())]
    WrongHash {
        path: PathBuf,
        expected: &'static str,
        found: String,
    },
    /// A structure or region ends past the end of the file.
    #[error("{}: {what} needs {need} bytes, the file has {have}", path.display())]
    Truncated {
        path: PathBuf,
        what: String,
        need: u64,
        have: u64,
    },
    /// A header field does not hold the one value the format allows.
    #[error("{}: {what} is {found:#x}, expected {expected:#x}", path.display())]
    BadField {
        path: PathBuf,
        what: String,
        found: u64,
        expected: u64,
    },
    /// A value is not on the boundary the format requires.
    #[error("{}: {what} ({value:#x}) is not a multiple of {align:#x}", path.display())]
    Misaligned {
        path: PathBuf,
        what: &'static str,
        value: u64,
        align: u64,
    },
    /// A named section the container must carry is absent.
    #[error("{}: no section `{section}`", path.display())]
    MissingSection { path: PathBuf, section: String },
    /// A section's bytes do not match the CRC-32 its header records.
    #[error("{}: section `{section}` has CRC-32 {computed:#010x}, its header records {recorded:#010x}", path.display())]
    BadCrc {
        path: PathBuf,
        section: &'static str,
        recorded: u32,
        computed: u32,
    },
    /// The FMC's `hash` section is not the SHA-384 of its `image`.
    #[error("{}: section `hash` is not the SHA-384 of section `image`", path.display())]
    ImageHashMismatch { path: PathBuf },
    /// The ELF reader refused the file.
    #[error("{}: not a readable ELF file", path.display())]
    Elf {
        path: PathBuf,
        #[source]
        source: object::read::Error,
    },
    /// Any other rule of the format that the file breaks.
    #[error("{}: {what}", path.display())]
    Malformed { path: PathBuf, what: String },
}

fn list(dirs: &[PathBuf]) -> String {
    if dirs.is_empty() {
        return "no directory".to_string();
    }
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
