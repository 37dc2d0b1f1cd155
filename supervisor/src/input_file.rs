//! Files the CLI reads whole (`inspect`, `report`): regular files only,
//! and no larger than the command can sensibly take. A FIFO would block
//! the open, a device such as /dev/zero would never end, and a huge file
//! would be read into memory before any parser could refuse it.

use std::io::Read;
use std::path::Path;

/// The largest file `macuda inspect` reads (a static llama.cpp with every
/// fat binary of ggml-cuda is about 60 MB).
pub const MAX_INSPECT_BYTES: u64 = 512 << 20;
/// The largest crash report `macuda report` reads.
pub const MAX_REPORT_BYTES: u64 = 64 << 20;

/// Read `path` whole if it is a regular file of at most `limit` bytes;
/// otherwise say why not (naming the file).
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let shown = path.display();
    // Looked at before opening: opening a FIFO waits for a writer.
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "{shown} is not a regular file (a directory, FIFO, socket or device); only regular files are read"
        ));
    }
    if meta.len() > limit {
        return Err(format!(
            "{shown} is {} bytes, more than the {limit} this command reads",
            meta.len()
        ));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let mut bytes = Vec::new();
    // A file that grows while read is cut at the limit and refused.
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!("{shown} grew past {limit} bytes while being read"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_within_the_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x");
        std::fs::write(&f, b"abcdef").unwrap();
        assert_eq!(read_bounded(&f, 6).unwrap(), b"abcdef");
        let e = read_bounded(&f, 5).unwrap_err();
        assert!(
            e.contains("6 bytes") && e.contains("more than the 5"),
            "{e}"
        );
    }

    #[test]
    fn devices_directories_and_fifos_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        for p in [Path::new("/dev/zero"), dir.path()] {
            let e = read_bounded(p, MAX_INSPECT_BYTES).unwrap_err();
            assert!(e.contains("not a regular file"), "{e}");
        }
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = read_bounded(&fifo, MAX_INSPECT_BYTES).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let e = read_bounded(&dir.path().join("missing"), 1).unwrap_err();
        assert!(e.contains("cannot read"), "{e}");
    }
}
