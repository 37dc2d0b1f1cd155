//! The committed corpus (`tests/fuzz/corpus/<target>/`): small inputs that
//! reach deep paths, and every input that once found a bug, replayed first
//! on every run. Findings are written elsewhere (a scratch directory) for
//! a person to look at and, once fixed, to copy in.

use crate::rng::fnv64;
use std::path::{Path, PathBuf};

/// Where each target's committed inputs live.
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

/// The committed inputs of `target`, sorted by file name so the replay
/// order (and so the run) is the same everywhere. A missing directory is
/// an empty corpus.
pub fn load(target: &str) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(corpus_dir(target)) else {
        return Vec::new();
    };
    let mut files: Vec<(String, Vec<u8>)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_file())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            std::fs::read(e.path()).ok().map(|b| (name, b))
        })
        .collect();
    files.sort();
    files
}

/// The file name an input is saved under: what it is, and its hash, so
/// saving the same input twice writes one file.
pub fn file_name(prefix: &str, input: &[u8]) -> String {
    format!("{prefix}-{:016x}", fnv64(input))
}

/// Write `input` into `dir` as `prefix-<hash>`; the path, or why not.
pub fn save(dir: &Path, prefix: &str, input: &[u8]) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(file_name(prefix, input));
    std::fs::write(&path, input).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}
