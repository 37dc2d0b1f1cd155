//! The firmware parser on NVIDIA's real 570.144 images, found in the
//! directory `MACUDA_FIRMWARE` names (tests/sim/firmware.sh fetches them
//! from Debian). Sizes asserted here are what those images hold; a change
//! in them means another build, which the SHA-256 pins would refuse first.

use macuda_gsp::firmware::{
    FirmwareChip, FirmwareSet, Progress, SearchPath, FIRMWARE_DIR_VAR, FIRMWARE_RELEASE,
};

fn load(chip: FirmwareChip) -> FirmwareSet {
    let dir = std::env::var_os(FIRMWARE_DIR_VAR).expect("MACUDA_FIRMWARE names the images");
    let search = SearchPath::choose(None, Some(dir));
    FirmwareSet::load(chip, &search, Progress::Hidden).unwrap_or_else(|e| panic!("{chip}: {e}"))
}

#[test]
#[ignore = "needs NVIDIA's 570.144 images: MACUDA_FIRMWARE=DIR (tests/sim/firmware.sh fetches them)"]
fn gb202s_images_parse_as_pinned() {
    let set = load(FirmwareChip::Gb202);
    println!("{}", set.summary());
    assert_eq!(set.fmc.image().len(), 199_240);
    assert_eq!(set.fmc.signature().len(), 96);
    assert_eq!(set.fmc.public_key().len(), 97);
    assert_eq!(set.bootloader.image().len(), 200_704);
    assert_eq!(set.bootloader.desc.version, 5);
    assert_eq!(set.bootloader.desc.monitor_code, (45_568, 153_600));
    assert_eq!(set.gsp.image().len(), 0x3C9_9000);
    assert_eq!(set.gsp.signature_section, ".fwsignature_gb20x");
    assert_eq!(set.gsp.signature().len(), 4096);
    assert_eq!(set.gsp.version.as_deref(), Some(FIRMWARE_RELEASE));
}

#[test]
#[ignore = "needs NVIDIA's 570.144 images: MACUDA_FIRMWARE=DIR (tests/sim/firmware.sh fetches them)"]
fn gh100s_images_parse_as_pinned() {
    let set = load(FirmwareChip::Gh100);
    println!("{}", set.summary());
    assert_eq!(set.fmc.image().len(), 165_448);
    assert_eq!(set.fmc.signature().len(), 384);
    assert_eq!(set.fmc.public_key().len(), 384);
    assert_eq!(set.bootloader.image().len(), 167_936);
    assert_eq!(set.bootloader.desc.monitor_code, (45_312, 120_064));
    assert_eq!(set.gsp.image().len(), 0x3C9_9000);
    assert_eq!(set.gsp.signature_section, ".fwsignature_gh100");
    assert_eq!(set.gsp.signature().len(), 4096);
}
