//! What every target shares: where findings go, the fixtures the loader
//! targets start from, and printing and checking a run's figures.

use macuda_fuzz::{Fuzz, Summary};
use std::path::PathBuf;

/// A target's loop, writing findings under this test's scratch directory.
pub fn fuzz(name: &str) -> Fuzz {
    Fuzz::new(name).findings_in(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-findings"))
}

/// Print the figures and fail on any panic or hang.
pub fn finish(summary: &Summary) {
    println!("{}", summary.line());
    summary.assert_clean();
}

/// A file of our own compiled fixtures (tests/cuda/fixtures: our CUDA
/// sources built with nvcc, see the README's "Loader and its fixtures").
pub fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../cuda/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
