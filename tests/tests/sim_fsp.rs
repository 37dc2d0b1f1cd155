//! The simulated card's boot through its FSP, driven over the TinyGPU
//! protocol as a driver drives it: the FMC image, GSP_FMC_BOOT_PARAMS, the
//! WPR meta, a radix3 table over a GSP-RM image, a bootloader and a
//! signature staged in shared memory; the COT request written into EMEM
//! dword by dword, the doorbell, the response read back; then WPR2 and the
//! GSP's fence, lockdown and release. And the failures a card shows: a
//! wrong hash, a key it does not trust, a bad signature, no bus mastering.
//!
//! The card is told to trust a test key (the real key's digest is what a
//! GB202 profile carries; the real images are the tinygrad check's).

use macuda_hw::fsp::{
    self, nvdm, CommandResponse, CotPayload, COT_KEY_FIELD_BYTES, COT_SIGNATURE_FIELD_BYTES,
};
use macuda_hw::gsp_boot::{wpr_meta_offset as at, WprMeta, WPR_META_VERIFIED};
use macuda_hw::regs::*;
use macuda_pci::tinygpu::TinyGpuOpener;
use macuda_pci::{enable_bus_master, Transport};
use macuda_sim::fsp::FspFailure;
use macuda_sim::gsp_falcon::GspStage;
use macuda_sim::{Card, Listen, Server, SimChip};
use macuda_tests::sim_host::*;
use std::time::{Duration, Instant};

#[test]
fn a_good_cot_boots_the_fmc_which_lays_out_wpr2_and_releases_the_gsp() {
    let (server, _dir, mut t) = world();
    enable_bus_master(&mut t).unwrap();
    let s = stage(&mut t);
    assert_eq!(
        gsp(&mut t, NV_PGSP_FALCON_HWCFG2::ADDR),
        PRI_ERROR_FENCED,
        "fenced before the COT"
    );
    let packet = cot(&s, &test_key()).encode();
    // tinygrad pads the payload with a dword of zeros; the FSP takes both.
    let mut padded = packet.to_vec();
    padded.extend_from_slice(&[0; 4]);
    let r = send(&mut t, &padded, nvdm::COT);
    assert_eq!(
        r,
        CommandResponse {
            task_id: 0,
            command_nvdm_type: u32::from(nvdm::COT),
            error_code: 0
        }
    );
    // Fenced, then locked down, then running with mailbox 0 at 0.
    let start = Instant::now();
    let mut seen = Vec::new();
    loop {
        let stage = server.device().gsp().0;
        if seen.last() != Some(&stage) {
            seen.push(stage);
        }
        if stage == GspStage::Running {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(1));
    }
    assert_eq!(
        seen,
        [GspStage::Fenced, GspStage::Locked, GspStage::Running]
    );
    let hwcfg2 = NV_PGSP_FALCON_HWCFG2(gsp(&mut t, NV_PGSP_FALCON_HWCFG2::ADDR));
    assert_eq!(hwcfg2.riscv_br_priv_lockdown(), 0);
    assert_eq!(gsp(&mut t, NV_PGSP_FALCON_MAILBOX0::ADDR), 0);
    assert_eq!(
        NV_PGSP_RISCV_CPUCTL(gsp(&mut t, NV_PGSP_RISCV_CPUCTL::ADDR)).active_stat(),
        1
    );
    // WPR2 is up in both copies, where the meta says, and below FRTS's end.
    let hi = NV_PFB_PRI_MMU_WPR2_ADDR_HI(gsp(&mut t, NV_PFB_PRI_MMU_WPR2_ADDR_HI::ADDR));
    assert_ne!(hi.val(), 0, "firmware resident now");
    assert_eq!(gsp(&mut t, NV_HUBMMU_PRI_MMU_WPR2_ADDR_HI), hi.0);
    let mut meta = WprMeta::zeroed();
    let at_meta = s.bare.wpr_meta;
    t.dma_read(at_meta.mapping, at_meta.offset, &mut meta.0)
        .unwrap();
    assert_eq!(meta.get(at::VERIFIED), WPR_META_VERIFIED);
    let start = meta.get(at::GSP_FW_WPR_START);
    let end = meta.get(at::GSP_FW_WPR_END);
    assert_eq!(
        u64::from(
            NV_PFB_PRI_MMU_WPR2_ADDR_LO(gsp(&mut t, NV_PFB_PRI_MMU_WPR2_ADDR_LO::ADDR)).val()
        ) << 12,
        start
    );
    assert_eq!((u64::from(hi.val()) << 12) + 0x2_0000, end);
    assert_eq!(meta.get(at::FB_SIZE), 32 << 30);
    assert!(meta.get(at::NON_WPR_HEAP_OFFSET) < start && start < meta.get(at::GSP_FW_HEAP_OFFSET));
    assert!(meta.get(at::GSP_FW_OFFSET) < meta.get(at::BOOT_BIN_OFFSET));
    assert!(
        meta.get(at::BOOT_BIN_OFFSET) < meta.get(at::FRTS_OFFSET)
            && meta.get(at::FRTS_OFFSET) < end
    );
    let boot = server.device().gsp().1.unwrap();
    assert_eq!(boot.meta, s.meta);
    assert_eq!(server.device().fsp_outcomes(), &[Ok(())]);
}

fn refused(
    mutate: impl FnOnce(&mut CotPayload),
    bus_master: bool,
) -> (Server<Card>, FspFailure, u32) {
    let (server, _dir, mut t) = world();
    enable_bus_master(&mut t).unwrap();
    let s = stage(&mut t);
    if !bus_master {
        macuda_pci::clear_bus_master(&mut t).unwrap();
    }
    let mut c = cot(&s, &test_key());
    mutate(&mut c);
    let r = send(&mut t, &c.encode(), nvdm::COT);
    assert_ne!(r.error_code, 0);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        gsp(&mut t, NV_PGSP_FALCON_MAILBOX0::ADDR),
        PRI_ERROR_FENCED,
        "no boot"
    );
    assert_eq!(gsp(&mut t, NV_PFB_PRI_MMU_WPR2_ADDR_HI::ADDR), 0, "no WPR2");
    let scratch = gsp(&mut t, NV_PFSP_FALCON_COMMON_SCRATCH_GROUP_2_0::ADDR);
    assert_eq!(
        scratch, r.error_code,
        "the FSP leaves its code in its debug scratch"
    );
    let failure = server.device().fsp_outcomes()[0].clone().unwrap_err();
    (server, failure, r.error_code)
}

#[test]
fn a_wrong_hash_is_refused_with_the_fsp_error_code_and_nothing_boots() {
    let (_s, failure, code) = refused(|c| c.hash384[5] ^= 1, true);
    assert!(matches!(failure, FspFailure::Hash { .. }), "{failure}");
    assert_eq!(code, failure.code());
}

#[test]
fn a_key_the_card_does_not_trust_is_refused() {
    let other = p384::ecdsa::SigningKey::from_slice(&[0x17; 48]).unwrap();
    let (_s, failure, _) = refused(
        |c| {
            c.public_key[..97]
                .copy_from_slice(other.verifying_key().to_encoded_point(false).as_bytes());
        },
        true,
    );
    assert!(matches!(failure, FspFailure::UntrustedKey(_)), "{failure}");
}

#[test]
fn a_signature_that_does_not_verify_is_refused() {
    let (_s, failure, _) = refused(|c| c.signature[10] ^= 0x80, true);
    assert!(matches!(failure, FspFailure::Signature), "{failure}");
}

#[test]
fn without_bus_mastering_the_fsp_reads_nothing_and_refuses() {
    let (_s, failure, _) = refused(|_| {}, false);
    assert!(
        matches!(&failure, FspFailure::Dma { why, .. } if why.contains("bus mastering is off")),
        "{failure}"
    );
}

#[test]
fn bad_frts_fields_and_versions_are_refused_by_name() {
    let (_s, f, _) = refused(|c| c.frts_vidmem_offset = 0x1C0_1000, true);
    assert!(f.to_string().contains("frtsVidmemOffset"), "{f}");
    let (_s, f, _) = refused(|c| c.version = fsp::COT_VERSION_GH100, true);
    assert!(f.to_string().contains("version 1"), "{f}");
}

/// NVIDIA's 570.144 firmware, where `MACUDA_FIRMWARE` names a directory
/// laid out as linux-firmware's (tests/sim/firmware.sh fetches it).
fn firmware_file(path: &str) -> Option<Vec<u8>> {
    let dir = std::env::var_os("MACUDA_FIRMWARE")?;
    std::fs::read(std::path::Path::new(&dir).join(path)).ok()
}

/// A section of an FMC container by name.
fn section<'a>(elf: &'a object::File<'a>, name: &str) -> &'a [u8] {
    use object::{Object, ObjectSection};
    elf.section_by_name(name)
        .unwrap_or_else(|| panic!("no {name} section"))
        .data()
        .unwrap()
}

#[test]
#[ignore = "needs NVIDIA's 570.144 GSP images: tests/sim/firmware.sh DIR, then MACUDA_FIRMWARE=DIR (CI does both)"]
fn nvidias_gb202_fmc_passes_the_simulated_fsp_with_the_key_a_gb202_trusts() {
    let file = firmware_file("nvidia/gb202/gsp/fmc-570.144.bin")
        .expect("MACUDA_FIRMWARE has the GB202 FMC");
    let elf = object::File::parse(&*file).unwrap();
    let (image, hash, key, sig) = (
        section(&elf, "image"),
        section(&elf, "hash"),
        section(&elf, "publickey"),
        section(&elf, "signature"),
    );
    let dir = tempfile::tempdir().unwrap();
    let chip = SimChip {
        boot_time: Duration::from_millis(1),
        ..SimChip::gb202()
    };
    let server = Server::start(&Listen::Unix(dir.path().join("s.sock")), Card::new(chip)).unwrap();
    let mut t = TinyGpuOpener::new(server.endpoint(), macuda_pci::TRANSPORT_TIMEOUT)
        .connect()
        .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    enable_bus_master(&mut t).unwrap();
    let s = stage(&mut t);
    let fmc = t.alloc_dma(image.len() as u64 + 2 * PAGE).unwrap();
    t.dma_write(fmc.id, 2 * PAGE, image).unwrap();
    let mut c = cot(&s, &test_key());
    c.gsp_fmc_sysmem_offset = bus(&fmc, 2 * PAGE);
    c.hash384.copy_from_slice(hash);
    c.public_key = [0; COT_KEY_FIELD_BYTES];
    c.public_key[..key.len()].copy_from_slice(key);
    c.signature = [0; COT_SIGNATURE_FIELD_BYTES];
    c.signature[..sig.len()].copy_from_slice(sig);
    let r = send(&mut t, &c.encode(), nvdm::COT);
    assert_eq!(r.error_code, 0, "{:?}", server.device().fsp_outcomes());
    // One flipped byte of the real image stalls the boot with the hash code.
    let good = c.clone();
    t.dma_write(fmc.id, 2 * PAGE + 1000, &[image[1000] ^ 1])
        .unwrap();
    t.function_reset().unwrap();
    std::thread::sleep(Duration::from_millis(5));
    enable_bus_master(&mut t).unwrap();
    let r = send(&mut t, &good.encode(), nvdm::COT);
    assert_eq!(
        r.error_code,
        FspFailure::Hash {
            computed: String::new(),
            sent: String::new()
        }
        .code()
    );
}
