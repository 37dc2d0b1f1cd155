//! Little-endian reads out of a firmware file. A read past the end is a
//! [`FirmwareError::Truncated`] naming the structure being read, never a
//! panic: these files come from outside.

use super::error::FirmwareError;
use std::path::Path;

/// A file's bytes and its path, for reads whose failure names the file.
#[derive(Clone, Copy)]
pub(crate) struct FileBytes<'a> {
    pub path: &'a Path,
    pub bytes: &'a [u8],
}

impl<'a> FileBytes<'a> {
    pub fn new(path: &'a Path, bytes: &'a [u8]) -> Self {
        FileBytes { path, bytes }
    }

    /// `len` bytes at `offset`, or `Truncated` for `what`.
    pub fn range(&self, offset: u64, len: u64, what: &str) -> Result<&'a [u8], FirmwareError> {
        let end = offset.checked_add(len);
        let have = self.bytes.len() as u64;
        match end {
            Some(end) if end <= have => {
                // CAST: both bounds are at most the slice's length, a usize.
                Ok(&self.bytes[offset as usize..end as usize])
            }
            _ => Err(FirmwareError::Truncated {
                path: self.path.to_path_buf(),
                what: what.to_string(),
                need: end.unwrap_or(u64::MAX),
                have,
            }),
        }
    }

    pub fn u16_at(&self, offset: u64, what: &str) -> Result<u16, FirmwareError> {
        let b = self.range(offset, 2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u32_at(&self, offset: u64, what: &str) -> Result<u32, FirmwareError> {
        let b = self.range(offset, 4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A field read as `width` bytes (1, 2 or 4), widened to u64.
    pub fn field(&self, offset: u64, width: u8, what: &str) -> Result<u64, FirmwareError> {
        Ok(match width {
            1 => u64::from(self.range(offset, 1, what)?[0]),
            2 => u64::from(self.u16_at(offset, what)?),
            _ => u64::from(self.u32_at(offset, what)?),
        })
    }

    /// `BadField` unless `found == expected`.
    pub fn expect(&self, what: &str, found: u64, expected: u64) -> Result<(), FirmwareError> {
        if found == expected {
            Ok(())
        } else {
            Err(FirmwareError::BadField {
                path: self.path.to_path_buf(),
                what: what.to_string(),
                found,
                expected,
            })
        }
    }

    pub fn malformed(&self, what: impl Into<String>) -> FirmwareError {
        FirmwareError::Malformed {
            path: self.path.to_path_buf(),
            what: what.into(),
        }
    }
}
