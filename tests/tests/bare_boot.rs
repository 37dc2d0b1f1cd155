//! The gsp actor's whole boot through the FSP (`bare::boot_through_fsp`)
//! on the simulated GB202, over both forms of the TinyGPU socket: from a
//! fresh card, or one whose firmware is resident, to GSP_INIT_DONE with
//! every step timed, WPR2 read back and BAR1 physical; then the faults a
//! real card shows, each ending in a typed error naming its step with bus
//! mastering off; and a GH100 through its own FSP (COT version 1, its own
//! boot-status register, no BAR firewall, its WPR sizes). NVIDIA's real
//! 570.144 images, GB202's and GH100's, take the same path in an ignored
//! test.

use macuda_gsp::bare::CardBus;
use macuda_gsp::bare::{
    boot_through_fsp, BareError, BootError, BootFailed, BootPatience, BootStep, BootedGsp,
    Direction, RmAlloc, RpcError,
};
use macuda_gsp::firmware::{FirmwareChip, FirmwareSet, Progress, SearchPath};
use macuda_hw::class;
use macuda_hw::gsp_rpc::function;
use macuda_hw::regs::NV_PFSP_QUEUE_HEAD_0;
use macuda_hw::regs::{NV_PBUS_BAR1_BLOCK, NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_LOW_ADDR};
use macuda_pci::tinygpu::{TinyGpuOpener, TinyGpuTransport};
use macuda_pci::{enable_bus_master, Transport};
use macuda_pci::{DmaId, DmaRegion, PciError};
use macuda_sim::faults::DeviceFault;
use macuda_sim::gsp_rm::BootScript;
use macuda_sim::{Card, Listen, Server, SimChip};
use macuda_tests::sim_host;
use macuda_tests::sim_host::{card_trusting_the_test_key, test_firmware, test_firmware_for};
use std::ops::Range;
use std::time::Duration;

use macuda_tests::sim_host::sim_boot_patience as patience;

enum Socket {
    Unix,
    Tcp,
}

/// A card served on `socket`, connected, memory decoding and bus mastering
/// on (as the pci actor leaves a card it opened).
fn world(card: Card, socket: Socket) -> (Server<Card>, tempfile::TempDir, TinyGpuTransport) {
    let dir = tempfile::tempdir().unwrap();
    let listen = match socket {
        Socket::Unix => Listen::Unix(dir.path().join("s.sock")),
        Socket::Tcp => Listen::Tcp(0),
    };
    let server = Server::start(&listen, card).unwrap();
    let mut t = TinyGpuOpener::new(server.endpoint(), macuda_pci::TRANSPORT_TIMEOUT)
        .connect()
        .unwrap();
    enable_bus_master(&mut t).unwrap();
    (server, dir, t)
}

const ALL_STEPS: [BootStep; 15] = [
    BootStep::Identify,
    BootStep::ResidentFirmware,
    BootStep::Vram,
    BootStep::Stage,
    BootStep::QueueBlock,
    BootStep::InitMessages,
    BootStep::ChainOfTrust,
    BootStep::TargetMask,
    BootStep::Lockdown,
    BootStep::RiscvStart,
    BootStep::QueueLink,
    BootStep::InitDone,
    BootStep::StaticInfo,
    BootStep::Wpr2,
    BootStep::Bar1Physical,
];

/// What every good boot must show, and an RM client allocated through
/// the conversation it leaves.
fn check_booted(server: &Server<Card>, t: &mut TinyGpuTransport, booted: &mut BootedGsp) {
    let steps: Vec<BootStep> = booted.timings.iter().map(|(s, _)| *s).collect();
    assert_eq!(steps, ALL_STEPS);
    assert_eq!(
        FirmwareChip::by_name(server.device().chip().name),
        Some(booted.chip)
    );
    let card = server.device();
    assert_eq!(booted.vram_bytes, card.chip().vram_bytes());
    let layout = card.gsp().1.expect("the FMC booted").layout;
    assert_eq!(
        booted.wpr2,
        layout.gsp_fw_wpr_start..layout.gsp_fw_wpr_end,
        "WPR2 as the FMC placed it"
    );
    assert!(card.gsp_rm().init_done());
    // GSP-RM's word on the card, and the FB it leaves below the firmware.
    let info = &booted.static_info;
    assert_eq!(info.name, card.chip().marketing_name);
    assert_eq!(info.fb_length, card.chip().vram_bytes());
    assert_eq!(
        info.fb_regions,
        [Range {
            start: 0,
            end: layout.non_wpr_heap_offset
        }]
    );
    // Our ceiling sits below the firmware's lowest byte, which is what the
    // card reported, and leaves at least 99% of VRAM to hand out.
    assert_eq!(booted.firmware_floor, layout.non_wpr_heap_offset);
    assert!(booted.vram_ceiling <= booted.firmware_floor);
    assert!(booted.vram_ceiling as f64 >= 0.99 * booted.vram_bytes as f64);
    assert!(card.bus_master());
    drop(card);
    assert!(booted.rpc.init_done());
    // BAR1 is physical in both of its registers.
    for reg in [
        NV_PBUS_BAR1_BLOCK::ADDR,
        NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_LOW_ADDR::ADDR,
    ] {
        assert_eq!(t.mmio_read32(u64::from(reg)).unwrap(), 0);
    }
    const CLIENT: u32 = 0xC1E0_0001;
    // NV0000_ALLOC_PARAMETERS, zero.
    let root_params = [0u8; 120];
    booted
        .rpc
        .rm_alloc(
            t,
            &RmAlloc {
                client: CLIENT,
                parent: 0,
                object: CLIENT,
                class: class::NV01_ROOT,
                params: &root_params,
            },
        )
        .unwrap();
}

#[test]
fn a_fresh_gb202_boots_to_init_done_over_the_unix_socket() {
    let (server, _dir, mut t) = world(Card::new(card_trusting_the_test_key()), Socket::Unix);
    let mut booted = boot_through_fsp(&mut t, &test_firmware(), &patience()).unwrap();
    assert_eq!(booted.was_resident, None);
    check_booted(&server, &mut t, &mut booted);
    assert_eq!(server.device().resets(), 0);
}

#[test]
fn a_fresh_gb202_boots_to_init_done_over_tcp() {
    let (server, _dir, mut t) = world(Card::new(card_trusting_the_test_key()), Socket::Tcp);
    let mut booted = boot_through_fsp(&mut t, &test_firmware(), &patience()).unwrap();
    check_booted(&server, &mut t, &mut booted);
}

#[test]
fn a_gh100_boots_through_its_own_fsp_with_its_own_numbers() {
    let chip = SimChip {
        boot_time: Duration::from_millis(1),
        ..SimChip::gh100()
    };
    let (server, _dir, mut t) = world(Card::new(chip), Socket::Unix);
    let mut booted =
        boot_through_fsp(&mut t, &test_firmware_for(FirmwareChip::Gh100), &patience()).unwrap();
    assert_eq!(booted.chip, FirmwareChip::Gh100);
    assert_eq!(booted.vram_bytes, 80 << 30);
    check_booted(&server, &mut t, &mut booted);
}

#[test]
fn a_second_boot_resets_the_resident_firmware_first() {
    let (server, _dir, mut t) = world(Card::new(card_trusting_the_test_key()), Socket::Unix);
    let first = boot_through_fsp(&mut t, &test_firmware(), &patience()).unwrap();
    let mut second = boot_through_fsp(&mut t, &test_firmware(), &patience()).unwrap();
    assert_eq!(second.was_resident, Some(first.wpr2.clone()));
    assert_eq!(server.device().resets(), 1);
    check_booted(&server, &mut t, &mut second);
}

#[test]
fn the_boot_runs_the_sequencer_script_gsp_rm_sends_before_init_done() {
    let mut card = Card::new(card_trusting_the_test_key());
    card.send_boot_sequencer();
    let (server, _dir, mut t) = world(card, Socket::Unix);
    let mut booted = boot_through_fsp(&mut t, &test_firmware(), &patience()).unwrap();
    assert_eq!(booted.rpc.sequencer_runs().len(), 1);
    check_booted(&server, &mut t, &mut booted);
}

/// A failed boot names its step, leaves bus mastering off, and carries
/// what a report needs: the steps that finished, and once the queues
/// exist, the messages sent (the two init messages first).
fn assert_failed_at(server: &Server<Card>, e: &BootFailed, step: BootStep) {
    assert_eq!(e.step(), step, "{e}");
    assert!(!server.device().bus_master(), "bus mastering left on: {e}");
    let done: Vec<BootStep> = e.timings.iter().map(|(s, _)| *s).collect();
    let at = ALL_STEPS.iter().position(|s| *s == step).unwrap();
    assert_eq!(done, ALL_STEPS[..at], "{e}");
    if at
        > ALL_STEPS
            .iter()
            .position(|s| *s == BootStep::QueueBlock)
            .unwrap()
    {
        let sent: Vec<u32> = e
            .transcript
            .iter()
            .filter(|m| m.direction == Direction::Sent)
            .map(|m| m.function)
            .collect();
        assert_eq!(
            sent[..2],
            [function::GSP_SET_SYSTEM_INFO, function::SET_REGISTRY],
            "{e}"
        );
    }
}

#[test]
fn an_fmc_signed_by_a_key_the_card_does_not_trust_is_refused_by_the_fsp() {
    // The stock profile trusts NVIDIA's key, not the test key.
    let chip = SimChip {
        boot_time: Duration::from_millis(1),
        ..SimChip::gb202()
    };
    let (server, _dir, mut t) = world(Card::new(chip), Socket::Unix);
    let e = boot_through_fsp(&mut t, &test_firmware(), &patience())
        .err()
        .expect("the FSP refuses");
    assert!(
        matches!(
            e.error,
            BootError::Staging {
                source: BareError::FspRefused { .. },
                ..
            }
        ),
        "{e}"
    );
    assert_failed_at(&server, &e, BootStep::ChainOfTrust);
}

#[test]
fn a_corrupted_message_from_gsp_rm_is_caught_by_its_checksum() {
    let mut card = Card::new(card_trusting_the_test_key());
    card.inject(DeviceFault::CorruptReply { nth: 1 });
    let (server, _dir, mut t) = world(card, Socket::Unix);
    let e = boot_through_fsp(&mut t, &test_firmware(), &patience())
        .err()
        .expect("a corrupt status message");
    assert!(
        matches!(
            e.error,
            BootError::Rpc {
                source: RpcError::Checksum { .. },
                ..
            }
        ),
        "{e}"
    );
    assert_failed_at(&server, &e, BootStep::InitDone);
}

#[test]
fn a_sequencer_poll_that_never_completes_ends_the_boot_at_its_timeout() {
    let mut card = Card::new(card_trusting_the_test_key());
    card.send_boot_script(BootScript::PollNeverCompletes);
    let (server, _dir, mut t) = world(card, Socket::Unix);
    let e = boot_through_fsp(&mut t, &test_firmware(), &patience())
        .err()
        .expect("the script's poll times out");
    assert!(
        matches!(
            e.error,
            BootError::Rpc {
                source: RpcError::Sequencer(_),
                ..
            }
        ),
        "{e}"
    );
    assert_failed_at(&server, &e, BootStep::InitDone);
    assert!(!server.device().gsp_rm().init_done());
}

/// A bus that passes everything through to the sim, and meddles once:
/// `meddle` sees each access first and may act on the card or the data.
struct Meddling<'a> {
    t: &'a mut TinyGpuTransport,
    server: &'a Server<Card>,
    /// Called with the card on every BAR0 write (register, value).
    on_write: fn(&Server<Card>, u32, u32),
    /// Called on every DMA write's bytes before they go out.
    on_dma: fn(&mut [u8]),
}

impl CardBus for Meddling<'_> {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        CardBus::read32(self.t, reg)
    }
    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        let r = CardBus::write32(self.t, reg, value);
        (self.on_write)(self.server, reg, value);
        r
    }
    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        CardBus::alloc_dma(self.t, bytes)
    }
    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        let mut data = data.to_vec();
        (self.on_dma)(&mut data);
        CardBus::dma_write(self.t, id, offset, &data)
    }
    fn dma_read(&mut self, id: DmaId, offset: u64, len: u64) -> Result<Vec<u8>, PciError> {
        CardBus::dma_read(self.t, id, offset, len)
    }
    fn config_read32(&mut self, offset: u16) -> Result<u32, PciError> {
        CardBus::config_read32(self.t, offset)
    }
    fn reset_function(&mut self) -> Result<(), PciError> {
        CardBus::reset_function(self.t)
    }
    fn clear_bus_master(&mut self) -> Result<(), PciError> {
        CardBus::clear_bus_master(self.t)
    }
}

fn leave_alone(_: &Server<Card>, _: u32, _: u32) {}
fn keep_bytes(_: &mut [u8]) {}

#[test]
fn an_fmc_image_changed_in_host_memory_fails_the_fsps_hash_check() {
    let (server, _dir, mut t) = world(Card::new(card_trusting_the_test_key()), Socket::Unix);
    let fmc = sim_host::fmc_image();
    // Whatever writes the FMC image's bytes, one of them flipped.
    fn flip_the_fmc(data: &mut [u8]) {
        if data.starts_with(&sim_host::fmc_image()) {
            data[100] ^= 1;
        }
    }
    assert!(fmc.len() > 100);
    let mut bus = Meddling {
        t: &mut t,
        server: &server,
        on_write: leave_alone,
        on_dma: flip_the_fmc,
    };
    let e = boot_through_fsp(&mut bus, &test_firmware(), &patience())
        .err()
        .expect("the FSP refuses");
    assert!(
        matches!(
            e.error,
            BootError::Staging {
                source: BareError::FspRefused { code: 0x05 },
                ..
            }
        ),
        "{e}"
    );
    assert_failed_at(&server, &e, BootStep::ChainOfTrust);
}

#[test]
fn a_card_that_drops_off_the_bus_mid_boot_ends_in_a_bounded_typed_error() {
    let (server, _dir, mut t) = world(Card::new(card_trusting_the_test_key()), Socket::Unix);
    // Gone the moment the COT request is rung in.
    fn drop_at_the_cot(server: &Server<Card>, reg: u32, _: u32) {
        if reg == NV_PFSP_QUEUE_HEAD_0::ADDR {
            server.device().inject(DeviceFault::OffTheBus);
        }
    }
    let mut bus = Meddling {
        t: &mut t,
        server: &server,
        on_write: drop_at_the_cot,
        on_dma: keep_bytes,
    };
    let start = std::time::Instant::now();
    let e = boot_through_fsp(&mut bus, &test_firmware(), &patience())
        .err()
        .expect("off the bus");
    // Bounded by the patience given, never a hang; a card off the bus
    // cannot have its bus mastering cleared, so that is not asserted.
    assert!(start.elapsed() < Duration::from_secs(10), "{e}");
    assert_eq!(e.step(), BootStep::ChainOfTrust, "{e}");
    assert!(
        matches!(
            e.error,
            BootError::Staging {
                source: BareError::Timeout { .. },
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_card_off_the_bus_stops_the_boot_at_identification() {
    let (server, _dir, mut t) = world(Card::new(card_trusting_the_test_key()), Socket::Unix);
    server.device().inject(DeviceFault::OffTheBus);
    let e = boot_through_fsp(&mut t, &test_firmware(), &patience())
        .err()
        .expect("off the bus");
    assert_eq!(e.step(), BootStep::Identify, "{e}");
}

#[test]
fn firmware_for_another_chip_is_refused_before_anything_is_staged() {
    let (server, _dir, mut t) = world(Card::new(card_trusting_the_test_key()), Socket::Unix);
    let mut fw: FirmwareSet = test_firmware();
    fw.chip = FirmwareChip::Gh100;
    let e = boot_through_fsp(&mut t, &fw, &patience())
        .err()
        .expect("wrong images");
    assert!(matches!(e.error, BootError::WrongFirmware { .. }), "{e}");
    assert_failed_at(&server, &e, BootStep::Identify);
    assert!(server.device().fsp_outcomes().is_empty());
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn nvidias_570_144_images_boot_the_simulated_gb202_and_gh100_to_init_done() {
    let dir = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let search = SearchPath::choose(Some(dir.into()), None);
    let fw = FirmwareSet::load(FirmwareChip::Gb202, &search, Progress::Hidden).unwrap();
    // The GB202 profile trusts NVIDIA's key, as a real GB202 does.
    let chip = SimChip {
        boot_time: Duration::from_millis(1),
        ..SimChip::gb202()
    };
    for socket in [Socket::Unix, Socket::Tcp] {
        let (server, _dir, mut t) = world(Card::new(chip.clone()), socket);
        let mut booted = boot_through_fsp(&mut t, &fw, &BootPatience::default()).unwrap();
        check_booted(&server, &mut t, &mut booted);
    }
    // Hopper's own FMC and bootloader, on the sim's GH100.
    let fw = FirmwareSet::load(FirmwareChip::Gh100, &search, Progress::Hidden).unwrap();
    let chip = SimChip {
        boot_time: Duration::from_millis(1),
        ..SimChip::gh100()
    };
    let (server, _dir, mut t) = world(Card::new(chip), Socket::Unix);
    let mut booted = boot_through_fsp(&mut t, &fw, &BootPatience::default()).unwrap();
    check_booted(&server, &mut t, &mut booted);
}
