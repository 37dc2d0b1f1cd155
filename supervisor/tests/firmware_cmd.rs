//! `macuda firmware` as a user runs it: an empty directory is refused with
//! the missing file named and the way to fetch the images; the real
//! images, where `MACUDA_FIRMWARE` names them, are summarised.

mod common;

use common::{macuda, run};

#[test]
fn an_empty_firmware_directory_names_the_missing_file_and_how_to_fetch_it() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run(macuda().args(["firmware", "--firmware"]).arg(dir.path()));
    assert_ne!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("nvidia/gb202/gsp/fmc-570.144.bin"), "{err}");
    assert!(
        err.contains("cb59a35c1d4bd1274d7267fd10243c29f843ff41c851b9cbd59f5af2ddd7fece"),
        "{err}"
    );
    assert!(err.contains("tests/sim/firmware.sh"), "{err}");
    assert!(out.contains(&dir.path().display().to_string()), "{out}");
}

#[test]
fn the_chip_chooses_the_set_and_an_unknown_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = run(macuda()
        .args(["firmware", "--chip", "gh100", "--firmware"])
        .arg(dir.path()));
    assert_ne!(code, 0);
    assert!(err.contains("nvidia/gh100/gsp/fmc-570.144.bin"), "{err}");
    let (code, _, err) = run(macuda().args(["firmware", "--chip", "tu102"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("gb202 and gh100"), "{err}");
}

#[test]
fn a_wrong_image_is_a_wrong_hash_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["fmc", "bootloader", "gsp"] {
        let path = dir
            .path()
            .join(format!("nvidia/gb202/gsp/{name}-570.144.bin"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"not NVIDIA's").unwrap();
    }
    let (code, _, err) = run(macuda().args(["firmware", "--firmware"]).arg(dir.path()));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("fmc-570.144.bin: SHA-256 is"), "{err}");
}

#[test]
#[ignore = "needs NVIDIA's 570.144 images: MACUDA_FIRMWARE=DIR (tests/sim/firmware.sh fetches them)"]
fn the_real_images_are_summarised() {
    let dir = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let (code, out, err) = run(macuda().env("MACUDA_FIRMWARE", dir).arg("firmware"));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains(".fwsignature_gb20x 4096 bytes"), "{out}");
    assert!(out.contains("every image as pinned"), "{out}");
}
