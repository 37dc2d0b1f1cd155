//! Where the firmware images are looked for. A directory the user names
//! (`--firmware DIR`, else `MACUDA_FIRMWARE=DIR`) is the only place
//! searched, so that a typo or a stale directory is reported rather than
//! silently replaced by whatever the system has; with neither, the
//! standard firmware directories are searched in the order the kernel's
//! loader uses. Each directory is laid out as linux-firmware's
//! `nvidia/<chip>/gsp/`. Distributions may ship the files zstd-compressed
//! (`<name>.zst`); those are found too, and decompressed when read.

use super::error::FirmwareError;
use super::pins::Pin;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The variable that names a firmware directory.
pub const FIRMWARE_DIR_VAR: &str = "MACUDA_FIRMWARE";

/// Where distributions install firmware, in the order searched.
pub const SYSTEM_FIRMWARE_DIRS: [&str; 2] = ["/lib/firmware", "/usr/lib/firmware"];

/// The suffix of a zstd-compressed firmware file.
const ZSTD_SUFFIX: &str = ".zst";

/// How the directories to search were chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchOrigin {
    /// `--firmware DIR`.
    Flag,
    /// `MACUDA_FIRMWARE`.
    Environment,
    /// Nothing named: the system's firmware directories.
    System,
}

/// The directories searched for images, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPath {
    pub dirs: Vec<PathBuf>,
    pub origin: SearchOrigin,
}

impl SearchPath {
    /// The named directory if any (the flag's before the variable's),
    /// else the system's.
    pub fn new(flag: Option<PathBuf>) -> SearchPath {
        Self::choose(flag, std::env::var_os(FIRMWARE_DIR_VAR))
    }

    /// As [`SearchPath::new`], with the variable's value given.
    pub fn choose(flag: Option<PathBuf>, variable: Option<OsString>) -> SearchPath {
        if let Some(dir) = flag {
            return SearchPath {
                dirs: vec![dir],
                origin: SearchOrigin::Flag,
            };
        }
        if let Some(dir) = variable.filter(|v| !v.is_empty()) {
            return SearchPath {
                dirs: vec![PathBuf::from(dir)],
                origin: SearchOrigin::Environment,
            };
        }
        SearchPath {
            dirs: SYSTEM_FIRMWARE_DIRS.iter().map(PathBuf::from).collect(),
            origin: SearchOrigin::System,
        }
    }

    /// The first file that exists for `pin`: per directory, each of the
    /// pin's names, plain before compressed.
    ///
    /// # Errors
    /// `Missing`, naming the image, every directory searched and the
    /// SHA-256 expected.
    pub fn locate(&self, pin: &Pin) -> Result<Located, FirmwareError> {
        for dir in &self.dirs {
            for name in pin.names {
                let plain = dir.join(name);
                if plain.is_file() {
                    return Ok(Located {
                        path: plain,
                        compression: Compression::None,
                    });
                }
                let compressed = with_suffix(&plain, ZSTD_SUFFIX);
                if compressed.is_file() {
                    return Ok(Located {
                        path: compressed,
                        compression: Compression::Zstd,
                    });
                }
            }
        }
        Err(FirmwareError::Missing {
            name: pin.names[0],
            searched: self.dirs.clone(),
            expected_sha256: pin.sha256,
        })
    }
}

/// How a found file is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Zstd,
}

/// A file found for a pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub path: PathBuf,
    pub compression: Compression,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firmware::pins::{pin, FirmwareChip, ImageKind};

    #[test]
    fn the_flag_wins_over_the_variable_and_both_over_the_system() {
        let flag = SearchPath::choose(Some("/a".into()), Some("/b".into()));
        assert_eq!(
            (flag.dirs, flag.origin),
            (vec![PathBuf::from("/a")], SearchOrigin::Flag)
        );
        let var = SearchPath::choose(None, Some("/b".into()));
        assert_eq!(
            (var.dirs, var.origin),
            (vec![PathBuf::from("/b")], SearchOrigin::Environment)
        );
        let system = SearchPath::choose(None, Some("".into()));
        assert_eq!(system.origin, SearchOrigin::System);
        assert_eq!(system.dirs.len(), SYSTEM_FIRMWARE_DIRS.len());
    }

    #[test]
    fn finds_the_shared_gsp_image_under_ga102_and_compressed_files() {
        let dir = tempfile::tempdir().unwrap();
        let search = SearchPath::choose(Some(dir.path().into()), None);
        let gsp = pin(FirmwareChip::Gh100, ImageKind::GspRm);
        let shared = dir.path().join("nvidia/ga102/gsp/gsp-570.144.bin");
        std::fs::create_dir_all(shared.parent().unwrap()).unwrap();
        std::fs::write(&shared, b"x").unwrap();
        assert_eq!(search.locate(gsp).unwrap().path, shared);

        let fmc = pin(FirmwareChip::Gh100, ImageKind::Fmc);
        let zst = dir.path().join("nvidia/gh100/gsp/fmc-570.144.bin.zst");
        std::fs::create_dir_all(zst.parent().unwrap()).unwrap();
        std::fs::write(&zst, b"x").unwrap();
        let found = search.locate(fmc).unwrap();
        assert_eq!((found.path, found.compression), (zst, Compression::Zstd));
    }

    #[test]
    fn a_missing_image_names_itself_the_directories_and_the_hash() {
        let dir = tempfile::tempdir().unwrap();
        let search = SearchPath::choose(Some(dir.path().into()), None);
        let p = pin(FirmwareChip::Gb202, ImageKind::Bootloader);
        match search.locate(p) {
            Err(FirmwareError::Missing {
                name,
                searched,
                expected_sha256,
            }) => {
                assert_eq!(name, "nvidia/gb202/gsp/bootloader-570.144.bin");
                assert_eq!(searched, vec![dir.path().to_path_buf()]);
                assert_eq!(expected_sha256, p.sha256);
            }
            other => panic!("{other:?}"),
        }
    }
}
