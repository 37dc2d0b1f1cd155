//! Our runtime and cuBLAS as a program loads them: abi/build-libs.sh's
//! libraries, built once per test process into target/abi-programs (in a
//! target directory of their own, so the cargo running the tests is not
//! waited on). Shared by the runtime's and cuBLAS's program tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Where the program tests build and keep what they link.
pub fn scratch() -> PathBuf {
    workspace().join("target").join("abi-programs")
}

/// libcudart.a, libcublas.a, the shared libraries and the export lists.
pub fn libraries() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = scratch().join("lib");
        let status = Command::new("bash")
            .arg(workspace().join("abi/build-libs.sh"))
            .arg(&out)
            .arg("--debug")
            .env("CARGO", env!("CARGO"))
            .env("CARGO_TARGET_DIR", scratch().join("cargo"))
            .status()
            .expect("bash runs");
        assert!(status.success(), "abi/build-libs.sh failed");
        out
    })
}

/// The ABI test programs under tests/cuda/abi, built by its build.sh
/// (NVIDIA's nvcc from PyPI) and linked against our libcudart.a, once per
/// test process.
pub fn abi_programs() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let lib = libraries().join("libcudart.a");
        let out = scratch().join("bin");
        let build = Command::new("bash")
            .arg(workspace().join("tests/cuda/abi/build.sh"))
            .arg(&out)
            .arg(&lib)
            .output()
            .expect("bash runs");
        assert!(
            build.status.success(),
            "tests/cuda/abi/build.sh failed (it needs python3 with pip to fetch NVIDIA's nvcc, and gcc):\n{}{}",
            String::from_utf8_lossy(&build.stdout),
            String::from_utf8_lossy(&build.stderr)
        );
        out
    })
}
