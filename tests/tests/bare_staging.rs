//! The gsp actor's own FSP boot (`macuda_gsp::bare`) against the simulated
//! card over the TinyGPU unix socket: everything staged in bounded,
//! scattered mappings, the COT request sent through the FSP's EMEM channel,
//! and the FMC booting from what was staged. Then what a driver must report
//! when the card refuses: a wrong hash as the FSP's code, a stale message
//! in the FSP's queue as a timeout naming its registers. NVIDIA's real
//! 570.144 images take the same path in an ignored test.

use macuda_gsp::bare::{
    self, libos::LOG_BUFFERS, send_cot, send_cot_with, stage_for_fsp, BareError, FspChannel,
    StagingLimits,
};
use macuda_gsp::firmware::{FirmwareChip, FirmwareSet, Progress, SearchPath};
use macuda_hw::gsp_boot::{wpr_meta_offset as at, WprMeta, WPR_META_VERIFIED};
use macuda_hw::gsp_rpc::{id8, libos_region};
use macuda_hw::regs::*;
use macuda_pci::tinygpu::{wire::SEGMENT_TABLE_BYTES, TinyGpuOpener, TinyGpuTransport};
use macuda_pci::{enable_bus_master, Transport};
use macuda_sim::fsp::FspFailure;
use macuda_sim::gsp_falcon::GspStage;
use macuda_sim::{Card, Listen, Server, SimChip};
use macuda_tests::sim_host::{test_firmware, vram_bytes};
use std::time::{Duration, Instant};

/// A card served over a unix socket, bus mastering on.
fn world(card: Card) -> (Server<Card>, tempfile::TempDir, TinyGpuTransport) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&Listen::Unix(dir.path().join("s.sock")), card).unwrap();
    let mut t = TinyGpuOpener::new(server.endpoint(), macuda_pci::TRANSPORT_TIMEOUT)
        .connect()
        .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    enable_bus_master(&mut t).unwrap();
    (server, dir, t)
}

fn wait_running(server: &Server<Card>) {
    let start = Instant::now();
    while server.device().gsp().0 != GspStage::Running {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "the GSP never ran: {:?}",
            server.device().fsp_outcomes()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn read_meta(t: &mut TinyGpuTransport, s: &bare::Staged) -> WprMeta {
    let mut meta = WprMeta::zeroed();
    t.dma_read(s.wpr_meta.mapping, s.wpr_meta.offset, &mut meta.0)
        .unwrap();
    meta
}

/// Every piece lies past its mapping's segment table, inside the
/// segments the card reaches, at the bus address the mapping says.
fn assert_pieces_are_well_placed(s: &bare::Staged) {
    let mut pieces = vec![
        s.fmc_image,
        s.boot_params,
        s.wpr_meta,
        s.bootloader,
        s.signature,
        s.libos_page,
    ];
    pieces.extend(s.radix3.table_runs.iter().copied());
    pieces.extend(s.radix3.image_runs.iter().copied());
    pieces.extend(s.log_buffers.iter().map(|(_, p)| *p));
    for p in pieces {
        let m = s.mappings.iter().find(|m| m.id == p.mapping).unwrap();
        assert!(m.segments.len() <= bare::staging::TINYGPU_MAX_SEGMENTS);
        assert!(p.offset >= SEGMENT_TABLE_BYTES as u64, "{p:?}");
        assert_eq!(p.offset % 4096, 0);
        assert_eq!(m.bus_addr(p.offset), Some(p.bus));
        // Contiguous on the bus from the first byte to the last.
        assert_eq!(
            m.bus_addr(p.offset + p.bytes - 1),
            Some(p.bus + p.bytes - 1)
        );
    }
}

#[test]
fn the_drivers_staging_and_cot_boot_the_simulated_fmc() {
    let (server, _dir, mut t) = world(Card::new(
        macuda_tests::sim_host::card_trusting_the_test_key(),
    ));
    let fw = test_firmware();
    let vram = vram_bytes(&mut t);
    let s = stage_for_fsp(&mut t, &fw, vram).unwrap();
    assert_pieces_are_well_placed(&s);
    send_cot(&mut t, &s).unwrap();
    wait_running(&server);
    assert_eq!(server.device().fsp_outcomes(), &[Ok(())]);
    let boot = server.device().gsp().1.unwrap();
    assert_eq!(
        (boot.meta, boot.boot_args),
        (s.wpr_meta.bus, s.libos_page.bus)
    );
    // The FMC accepted the meta and wrote its layout back.
    let meta = read_meta(&mut t, &s);
    assert_eq!(meta.get(at::VERIFIED), WPR_META_VERIFIED);
    assert_eq!(meta.get(at::FB_SIZE), vram);
    assert_eq!(meta.get(at::GSP_FW_HEAP_SIZE), 0x870_0000);
    assert_eq!(meta.get(at::SYSMEM_ADDR_OF_RADIX3_ELF), s.radix3.root);
    // The libos page names the zeroed log buffers.
    let mut page = vec![0u8; libos_region::INIT_ARGUMENTS_MAX];
    t.dma_read(s.libos_page.mapping, s.libos_page.offset, &mut page)
        .unwrap();
    for (i, (name, (region, piece))) in LOG_BUFFERS.iter().zip(&s.log_buffers).enumerate() {
        let e = &page[i * libos_region::BYTES..][..libos_region::BYTES];
        assert_eq!(&e[..8], &id8(name.as_bytes()).to_le_bytes());
        assert_eq!(&e[8..16], &region.bus.to_le_bytes());
        let mut log = vec![0xFFu8; region.bytes as usize];
        t.dma_read(piece.mapping, piece.offset, &mut log).unwrap();
        assert!(log.iter().all(|&b| b == 0), "{name} is zeroed");
    }
}

#[test]
fn small_segments_scatter_the_pieces_and_the_boot_still_reaches_the_fmc() {
    // 64 KiB segments: the 64 KiB log buffers never fit the first segment
    // (its first 8 KiB are the table), and radix3's image spans segments.
    let (server, _dir, mut t) = world(Card::with_segments(
        macuda_tests::sim_host::card_trusting_the_test_key(),
        64 << 10,
    ));
    let limits = StagingLimits {
        mapping_bytes: 512 << 10,
        ..StagingLimits::TINYGPU
    };
    let vram = vram_bytes(&mut t);
    let s = bare::stage_for_fsp_with(&mut t, &test_firmware(), vram, limits).unwrap();
    assert_pieces_are_well_placed(&s);
    send_cot(&mut t, &s).unwrap();
    wait_running(&server);
}

#[test]
fn a_wrong_hash_ends_in_the_fsps_error_code() {
    let (server, _dir, mut t) = world(Card::new(
        macuda_tests::sim_host::card_trusting_the_test_key(),
    ));
    let vram = vram_bytes(&mut t);
    let s = stage_for_fsp(&mut t, &test_firmware(), vram).unwrap();
    // The staged image no longer matches the hash the request carries.
    let at = s.fmc_image.offset + 1000;
    let mut byte = [0u8];
    t.dma_read(s.fmc_image.mapping, at, &mut byte).unwrap();
    t.dma_write(s.fmc_image.mapping, at, &[byte[0] ^ 1])
        .unwrap();
    let expected = FspFailure::Hash {
        computed: String::new(),
        sent: String::new(),
    }
    .code();
    match send_cot(&mut t, &s) {
        Err(e @ BareError::FspRefused { code }) => {
            assert_eq!(code, expected);
            assert!(e.to_string().contains(&format!("{expected:#x}")), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        server.device().fsp_outcomes(),
        [Err(FspFailure::Hash { .. })]
    ));
    assert_eq!(server.device().gsp().0, GspStage::Fenced, "nothing boots");
}

#[test]
fn a_stale_fsp_message_holds_the_cot_back_until_a_timeout_naming_the_queues() {
    let (_server, _dir, mut t) = world(Card::new(
        macuda_tests::sim_host::card_trusting_the_test_key(),
    ));
    let vram = vram_bytes(&mut t);
    let s = stage_for_fsp(&mut t, &test_firmware(), vram).unwrap();
    // A message the host never acknowledged: the queue is not free.
    t.mmio_write32(u64::from(NV_PFSP_MSGQ_TAIL_0::ADDR), 16)
        .unwrap();
    let channel = FspChannel {
        timeout: Duration::from_millis(50),
        ..FspChannel::default()
    };
    match send_cot_with(&mut t, &s, &channel) {
        Err(e @ BareError::Timeout { .. }) => {
            let text = e.to_string();
            assert!(text.contains("queues to be empty"), "{text}");
            assert!(text.contains("MSGQ_TAIL 0x10"), "{text}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn nvidias_570_144_images_stage_and_pass_the_simulated_fsp() {
    let dir = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let search = SearchPath::choose(Some(dir.into()), None);
    let fw = FirmwareSet::load(FirmwareChip::Gb202, &search, Progress::Hidden).unwrap();
    assert_eq!(fw.gsp.image().len(), 63_541_248);
    // The GB202 profile trusts NVIDIA's key, as a real GB202 does.
    let chip = SimChip {
        boot_time: Duration::from_millis(1),
        ..SimChip::gb202()
    };
    let (server, _dir, mut t) = world(Card::new(chip));
    let vram = vram_bytes(&mut t);
    let s = stage_for_fsp(&mut t, &fw, vram).unwrap();
    assert_eq!(
        (s.radix3.shape.image_pages, s.radix3.shape.table_pages()),
        (15_513, 33)
    );
    assert_pieces_are_well_placed(&s);
    send_cot(&mut t, &s).unwrap();
    wait_running(&server);
    let meta = read_meta(&mut t, &s);
    assert_eq!(meta.get(at::VERIFIED), WPR_META_VERIFIED);
    assert_eq!(meta.get(at::SIZE_OF_RADIX3_ELF), 63_541_248);
    assert_eq!(
        meta.get(at::BOOTLOADER_CODE_OFFSET),
        u64::from(fw.bootloader.desc.monitor_code.0)
    );
}
