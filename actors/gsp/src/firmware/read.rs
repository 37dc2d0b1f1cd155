//! Reading a located image into memory while hashing it, and checking the
//! hash against its pin. The GSP-RM image is about 60 MB, so reading it
//! draws a progress bar, but only on a terminal: redirected output and
//! test logs stay clean.

use super::error::FirmwareError;
use super::locate::{Compression, Located};
use super::pins::Pin;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;

/// Files at least this large get a progress bar (the GSP-RM image does,
/// the FMC and bootloader, a few hundred KiB, do not).
const PROGRESS_MIN_BYTES: u64 = 8 << 20;

/// Bytes read at a time: large enough to be fast, small enough for the
/// bar to move.
const READ_CHUNK_BYTES: usize = 1 << 20;

/// Whether reading may draw a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// On stderr, when stderr is a terminal and the file is large.
    OnTerminal,
    /// Never.
    Hidden,
}

/// An image's content, checked against its pin.
#[derive(Debug, Clone)]
pub struct VerifiedFile {
    /// The file read (the `.zst` one when compressed).
    pub path: PathBuf,
    pub compression: Compression,
    /// The uncompressed content.
    pub bytes: Vec<u8>,
    /// Its SHA-256, equal to the pin's.
    pub sha256: &'static str,
}

/// Read `found` whole (decompressing it if need be) and check its SHA-256.
///
/// # Errors
/// `Read` when the file cannot be read or decompressed; `WrongHash` when
/// its content is not the pinned one.
pub fn read_verified(
    found: &Located,
    pin: &Pin,
    progress: Progress,
) -> Result<VerifiedFile, FirmwareError> {
    let read_error = |source| FirmwareError::Read {
        path: found.path.clone(),
        source,
    };
    let file = File::open(&found.path).map_err(read_error)?;
    let on_disk = file.metadata().map_err(read_error)?.len();
    let bar = progress_bar(progress, on_disk, &found.path);
    let counted = bar.wrap_read(file);
    let mut reader: Box<dyn Read> = match found.compression {
        Compression::None => Box::new(counted),
        Compression::Zstd => Box::new(
            ruzstd::decoding::StreamingDecoder::new(counted)
                .map_err(|e| read_error(std::io::Error::other(e)))?,
        ),
    };
    let mut bytes = Vec::with_capacity(usize::try_from(on_disk).unwrap_or(0));
    let mut hasher = Sha256::new();
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                bar.abandon();
                return Err(read_error(e));
            }
        };
        hasher.update(&chunk[..n]);
        bytes.extend_from_slice(&chunk[..n]);
    }
    bar.finish_and_clear();
    let found_hash = hex(&hasher.finalize());
    if found_hash != pin.sha256 {
        return Err(FirmwareError::WrongHash {
            path: found.path.clone(),
            expected: pin.sha256,
            found: found_hash,
        });
    }
    Ok(VerifiedFile {
        path: found.path.clone(),
        compression: found.compression,
        bytes,
        sha256: pin.sha256,
    })
}

fn progress_bar(progress: Progress, len: u64, path: &std::path::Path) -> ProgressBar {
    let wanted = progress == Progress::OnTerminal
        && len >= PROGRESS_MIN_BYTES
        && std::io::stderr().is_terminal();
    if !wanted {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{msg} [{bar:40}] {bytes}/{total_bytes} ({eta})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    bar.set_message(format!("reading {name}"));
    bar
}

/// Lower-case hex, as the pins are written.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firmware::pins::{FirmwareChip, ImageKind};

    fn pin_for(content: &[u8]) -> Pin {
        // Leaked once per test: a pin's hash is 'static.
        let sha: &'static str = Box::leak(hex(&Sha256::digest(content)).into_boxed_str());
        Pin {
            chip: FirmwareChip::Gb202,
            kind: ImageKind::Fmc,
            names: &["x.bin"],
            sha256: sha,
        }
    }

    #[test]
    fn reads_and_checks_the_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.bin");
        std::fs::write(&path, b"firmware").unwrap();
        let found = Located {
            path: path.clone(),
            compression: Compression::None,
        };
        let ok = read_verified(&found, &pin_for(b"firmware"), Progress::Hidden).unwrap();
        assert_eq!(ok.bytes, b"firmware");
        match read_verified(&found, &pin_for(b"other"), Progress::Hidden) {
            Err(FirmwareError::WrongHash {
                path: p,
                expected,
                found,
            }) => {
                assert_eq!(p, path);
                assert_eq!(expected, pin_for(b"other").sha256);
                assert_eq!(found, hex(&Sha256::digest(b"firmware")));
            }
            other => panic!("{other:?}"),
        }
    }

    /// A zstd frame holding "firmware" as one raw block (frame header with
    /// a single-segment content size, then a last raw block of 8 bytes).
    const ZSTD_FIRMWARE: &[u8] = &[
        0x28, 0xB5, 0x2F, 0xFD, // magic
        0x20, 0x08, // descriptor: single segment, 1-byte content size = 8
        0x41, 0x00, 0x00, // block header: last, raw, 8 bytes
        b'f', b'i', b'r', b'm', b'w', b'a', b'r', b'e',
    ];

    #[test]
    fn a_compressed_file_is_hashed_after_decompression() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.bin.zst");
        std::fs::write(&path, ZSTD_FIRMWARE).unwrap();
        let found = Located {
            path,
            compression: Compression::Zstd,
        };
        let ok = read_verified(&found, &pin_for(b"firmware"), Progress::Hidden).unwrap();
        assert_eq!(ok.bytes, b"firmware");
    }

    #[test]
    fn a_damaged_compressed_file_is_a_read_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.bin.zst");
        std::fs::write(&path, b"not zstd at all").unwrap();
        let found = Located {
            path: path.clone(),
            compression: Compression::Zstd,
        };
        match read_verified(&found, &pin_for(b"firmware"), Progress::Hidden) {
            Err(FirmwareError::Read { path: p, .. }) => assert_eq!(p, path),
            other => panic!("{other:?}"),
        }
    }
}
