//! The bare-metal boot's first steps on the simulated card, over the
//! TinyGPU socket: the chip identified, the card's own boot awaited, VRAM
//! read, and a card whose firmware is already resident reset exactly once.

use macuda_gsp::bare::early::{self, Wpr2Registers, CARD_BOOT_PATIENCE};
use macuda_gsp::firmware::FirmwareChip;
use macuda_tests::sim_host;

#[test]
fn a_fresh_gb202_is_identified_and_needs_no_reset() {
    let (server, _dir, mut t) = sim_host::world();
    let (identity, family) = early::identify(&mut t).unwrap();
    assert_eq!(family, FirmwareChip::Gb202);
    assert_eq!(identity.boot_42 >> 20 & 0x3FF, 0x1B2);
    assert_eq!(
        early::ensure_fresh(&mut t, family, CARD_BOOT_PATIENCE).unwrap(),
        None
    );
    assert_eq!(
        early::usable_vram(&mut t).unwrap(),
        server.device().chip().vram_bytes()
    );
    assert_eq!(server.device().resets(), 0);
}

#[test]
fn resident_firmware_is_reset_and_wpr2_proven_down() {
    let (server, _dir, mut t, _queues) = sim_host::booted(|_, _| {});
    // The FMC placed WPR2 once the COT was accepted.
    let deadline = std::time::Instant::now() + CARD_BOOT_PATIENCE;
    while !Wpr2Registers::read(&mut t).unwrap().is_up() {
        assert!(std::time::Instant::now() < deadline, "WPR2 never came up");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let was = early::ensure_fresh(&mut t, FirmwareChip::Gb202, CARD_BOOT_PATIENCE)
        .unwrap()
        .expect("a resident region");
    assert!(was.end <= server.device().chip().vram_bytes());
    assert_eq!(server.device().resets(), 1);
    assert!(!Wpr2Registers::read(&mut t).unwrap().is_up());
}
