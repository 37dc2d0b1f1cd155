//! The simulated card's record of what a boot handed it
//! (`macuda_sim::boot_record`), filled by our own staging and COT exchange:
//! what it says must be what was staged, read back through the card's own
//! DMA. The ignored test is the driver side of the cross-check with
//! tinygrad (tests/sim/tinygrad/xcheck.sh): it boots a `macuda sim serve`
//! that writes the record, over TCP, with NVIDIA's real images.

use macuda_gsp::bare::libos::RMARGS;
use macuda_gsp::bare::{
    send_cot, stage_for_fsp, CardBus, LibosRegion, SharedBlock, Staged, RMARGS_BYTES,
};
use macuda_pci::enable_bus_master;
use macuda_pci::tinygpu::TinyGpuOpener;
use macuda_sim::{Card, Listen, Server};
use macuda_tests::sim_host::{card_trusting_the_test_key, test_firmware, vram_bytes};
use sha2::{Digest, Sha256};
use std::time::{Duration, Instant};

fn sha256(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// Wait for the card to have recorded a COT request.
fn wait_record(server: &Server<Card>) -> macuda_sim::BootRecord {
    let start = Instant::now();
    loop {
        if let Some(r) = server.device().boot_record() {
            return r.clone();
        }
        assert!(start.elapsed() < Duration::from_secs(2), "nothing recorded");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What the driver does between staging and the COT that the FMC and
/// GSP-RM see: the shared block staged and RMARGS named in the libos page
/// (the pre-queued messages are in the block, not in the record).
fn name_rm_args(bus: &mut dyn CardBus, s: &mut Staged) -> SharedBlock {
    let shared = SharedBlock::stage(bus).unwrap();
    s.set_libos_region(
        bus,
        LibosRegion {
            name: RMARGS,
            bus: shared.rmargs_bus_addr(),
            bytes: RMARGS_BYTES,
        },
    )
    .unwrap();
    shared
}

#[test]
fn the_record_of_our_boot_is_what_was_staged() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &Listen::Unix(dir.path().join("s.sock")),
        Card::new(card_trusting_the_test_key()),
    )
    .unwrap();
    assert!(server.device().boot_record().is_none());
    let mut t = TinyGpuOpener::new(server.endpoint(), macuda_pci::TRANSPORT_TIMEOUT)
        .connect()
        .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    enable_bus_master(&mut t).unwrap();
    let fw = test_firmware();
    let vram = vram_bytes(&mut t);
    let mut s = stage_for_fsp(&mut t, &fw, vram).unwrap();
    let _shared = name_rm_args(&mut t, &mut s);
    send_cot(&mut t, &s).unwrap();
    let r = wait_record(&server);
    assert_eq!(r.refused, None, "{:?}", r.errors);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(server.device().boot_records(), 1);
    assert_eq!(r.cot.gsp_fmc_sysmem_offset, s.fmc_image.bus);
    assert_eq!(r.cot.gsp_boot_args_sysmem_offset, s.boot_params.bus);
    let meta = r.wpr_meta.as_ref().unwrap();
    // As received: the FMC's layout is not in it yet.
    assert_eq!((meta["verified"], meta["gspFwWprStart"]), (0, 0));
    let radix3 = r.radix3.as_ref().unwrap();
    assert_eq!(radix3.root, s.radix3.root);
    assert_eq!(radix3.image_pages, s.radix3.shape.image_pages);
    assert_eq!(
        radix3.level_pages.iter().sum::<u64>(),
        s.radix3.shape.table_pages()
    );
    assert_eq!(radix3.image_sha256, sha256(fw.gsp.image()));
    let names: Vec<&str> = r
        .libos
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert!(
        names.contains(&"RMARGS") && names.contains(&"LOGINIT"),
        "{names:?}"
    );
    // And as JSON, the form `macuda sim serve --boot-record` writes.
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["cot"]["version"], 2);
}
