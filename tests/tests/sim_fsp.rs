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
    self, nvdm, CommandResponse, CotPayload, COT_HASH_BYTES, COT_KEY_FIELD_BYTES,
    COT_PAYLOAD_BYTES, COT_SIGNATURE_FIELD_BYTES, PACKET_HEADER_BYTES,
};
use macuda_hw::gsp_boot::{
    dma_target, wpr_meta_offset as at, FmcBootParams, WprMeta, WPR_META_BYTES, WPR_META_MAGIC,
    WPR_META_REVISION, WPR_META_VERIFIED,
};
use macuda_hw::regs::*;
use macuda_pci::tinygpu::{TinyGpuOpener, TinyGpuTransport};
use macuda_pci::{enable_bus_master, DmaRegion, Transport};
use macuda_sim::fsp::{FspFailure, Trust};
use macuda_sim::gsp_falcon::GspStage;
use macuda_sim::{Card, Listen, Server, SimChip};
use p384::ecdsa::signature::hazmat::PrehashSigner;
use sha2::{Digest, Sha256, Sha384};
use std::time::{Duration, Instant};

const PAGE: u64 = 4096;
/// The test FMC image: a header saying 72 + payload bytes, then noise.
const FMC_PAYLOAD: u32 = 20_000;
const FMC_HEADER: u32 = 72;
/// A small GSP-RM image: 3 pages, so radix3 has one page a level.
const RM_IMAGE_BYTES: u64 = 3 * PAGE + 100;

fn test_key() -> p384::ecdsa::SigningKey {
    p384::ecdsa::SigningKey::from_slice(&[0x42; 48]).unwrap()
}

fn card_trusting_the_test_key() -> SimChip {
    let public = test_key().verifying_key().to_encoded_point(false);
    SimChip {
        boot_time: Duration::from_millis(1),
        trust: Trust {
            cot_version: fsp::COT_VERSION_GB20X,
            key_sha256: Some(Sha256::digest(public.as_bytes()).into()),
        },
        ..SimChip::gb202()
    }
}

fn fmc_image() -> Vec<u8> {
    let mut img = vec![0u8; (FMC_HEADER + FMC_PAYLOAD) as usize];
    img[..4].copy_from_slice(&((FMC_HEADER << 16) | 0x0403).to_le_bytes());
    img[4..8].copy_from_slice(&FMC_PAYLOAD.to_le_bytes());
    for (i, b) in img.iter_mut().enumerate().skip(FMC_HEADER as usize) {
        *b = (i * 7 + 3) as u8;
    }
    img
}

/// Everything the host stages, in one shared mapping, and where.
struct Staged {
    region: DmaRegion,
    fmc: u64,
    params: u64,
    meta: u64,
}

fn bus(region: &DmaRegion, offset: u64) -> u64 {
    region.bus_addr(offset).expect("inside the mapping")
}

/// Stage the FMC image, boot params, WPR meta, radix3 (3 table pages and
/// the image), bootloader, signature and the libos page.
fn stage(t: &mut TinyGpuTransport) -> Staged {
    let region = t.alloc_dma(64 * PAGE).unwrap();
    let id = region.id;
    // Page 0 and 1 hold the segment table the server wrote: skip them.
    let (fmc_at, params_at, meta_at, libos_at) = (4 * PAGE, 12 * PAGE, 13 * PAGE, 14 * PAGE);
    let (radix_at, image_at, boot_at, sig_at) = (16 * PAGE, 19 * PAGE, 24 * PAGE, 25 * PAGE);
    t.dma_write(id, fmc_at, &fmc_image()).unwrap();
    // radix3: level 0 -> level 1 -> level 2 -> the image's pages.
    let l0 = [bus(&region, radix_at + PAGE)];
    let l1 = [bus(&region, radix_at + 2 * PAGE)];
    let l2: Vec<u64> = (0..RM_IMAGE_BYTES.div_ceil(PAGE))
        .map(|i| bus(&region, image_at + i * PAGE))
        .collect();
    for (level, entries) in [(0u64, &l0[..]), (1, &l1[..]), (2, &l2[..])] {
        let raw: Vec<u8> = entries.iter().flat_map(|e| e.to_le_bytes()).collect();
        t.dma_write(id, radix_at + level * PAGE, &raw).unwrap();
    }
    let mut meta = WprMeta::zeroed();
    for (offset, value) in [
        (at::MAGIC, WPR_META_MAGIC),
        (at::REVISION, WPR_META_REVISION),
        (at::SYSMEM_ADDR_OF_RADIX3_ELF, bus(&region, radix_at)),
        (at::SIZE_OF_RADIX3_ELF, RM_IMAGE_BYTES),
        (at::SYSMEM_ADDR_OF_BOOTLOADER, bus(&region, boot_at)),
        (at::SIZE_OF_BOOTLOADER, PAGE),
        (at::SYSMEM_ADDR_OF_SIGNATURE, bus(&region, sig_at)),
        (at::SIZE_OF_SIGNATURE, PAGE),
        (at::NON_WPR_HEAP_SIZE, 0x22_0000),
        (at::GSP_FW_HEAP_SIZE, 0x870_0000),
        (at::FRTS_SIZE, 0x10_0000),
        (at::VGA_WORKSPACE_SIZE, 0x2_0000),
    ] {
        meta.set(offset, value);
    }
    meta.set_pmu_reserved_size(0x182_0000);
    t.dma_write(id, meta_at, &meta.0).unwrap();
    let params = FmcBootParams {
        boot_gsp_rm_target: dma_target::COHERENT_SYSTEM,
        gsp_rm_desc_size: WPR_META_BYTES as u32,
        gsp_rm_desc_offset: bus(&region, meta_at),
        is_gsp_rm_boot: true,
        gsp_rm_target: dma_target::COHERENT_SYSTEM,
        boot_args_offset: bus(&region, libos_at),
        ..FmcBootParams::default()
    };
    t.dma_write(id, params_at, &params.encode()).unwrap();
    Staged {
        fmc: bus(&region, fmc_at),
        params: bus(&region, params_at),
        meta: bus(&region, meta_at),
        region,
    }
}

/// The COT request for what was staged, signed by `key`.
fn cot(s: &Staged, key: &p384::ecdsa::SigningKey) -> CotPayload {
    let hash: [u8; COT_HASH_BYTES] = Sha384::digest(fmc_image()).into();
    let (signature, _): (p384::ecdsa::Signature, _) = (key.sign_prehash(&hash).unwrap(), ());
    let mut public_key = [0u8; COT_KEY_FIELD_BYTES];
    public_key[..97].copy_from_slice(key.verifying_key().to_encoded_point(false).as_bytes());
    let mut sig = [0u8; COT_SIGNATURE_FIELD_BYTES];
    sig[..96].copy_from_slice(&signature.to_bytes());
    CotPayload {
        version: fsp::COT_VERSION_GB20X,
        size: COT_PAYLOAD_BYTES as u16,
        gsp_fmc_sysmem_offset: s.fmc,
        frts_sysmem_offset: 0,
        frts_sysmem_size: 0,
        frts_vidmem_offset: 0x1C0_0000,
        frts_vidmem_size: 0x10_0000,
        hash384: hash,
        public_key,
        signature: sig,
        gsp_boot_args_sysmem_offset: s.params,
    }
}

/// Send one packet through EMEM channel 0 and read the FSP's answer.
fn send(t: &mut TinyGpuTransport, payload: &[u8], nvdm_type: u8) -> CommandResponse {
    let mut packet = Vec::new();
    packet.extend_from_slice(&fsp::mctp_single_packet().to_le_bytes());
    packet.extend_from_slice(&fsp::nvdm_header(nvdm_type).to_le_bytes());
    packet.extend_from_slice(payload);
    let aincw = 1 << 24;
    t.mmio_write32(u64::from(NV_PFSP_EMEMC_0::ADDR), aincw)
        .unwrap();
    for word in packet.chunks(4) {
        let mut w = [0u8; 4];
        w[..word.len()].copy_from_slice(word);
        t.mmio_write32(u64::from(NV_PFSP_EMEMD_0::ADDR), u32::from_le_bytes(w))
            .unwrap();
    }
    let tail = (packet.len().next_multiple_of(4) - 4) as u32;
    t.mmio_write32(u64::from(NV_PFSP_QUEUE_TAIL_0::ADDR), tail)
        .unwrap();
    t.mmio_write32(u64::from(NV_PFSP_QUEUE_HEAD_0::ADDR), 0)
        .unwrap();
    let start = Instant::now();
    let (head, tail) = loop {
        let h = t.mmio_read32(u64::from(NV_PFSP_MSGQ_HEAD_0::ADDR)).unwrap();
        let tl = t.mmio_read32(u64::from(NV_PFSP_MSGQ_TAIL_0::ADDR)).unwrap();
        if h != tl {
            break (h, tl);
        }
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "the FSP never answered"
        );
    };
    let aincr = 1 << 25;
    t.mmio_write32(u64::from(NV_PFSP_EMEMC_0::ADDR), aincr)
        .unwrap();
    let words = (tail - head + 4) / 4;
    let mut msg = Vec::new();
    for _ in 0..words {
        msg.extend_from_slice(
            &t.mmio_read32(u64::from(NV_PFSP_EMEMD_0::ADDR))
                .unwrap()
                .to_le_bytes(),
        );
    }
    t.mmio_write32(u64::from(NV_PFSP_MSGQ_TAIL_0::ADDR), head)
        .unwrap();
    assert_eq!(&msg[..4], &fsp::mctp_single_packet().to_le_bytes());
    assert_eq!(
        &msg[4..8],
        &fsp::nvdm_header(nvdm::FSP_RESPONSE).to_le_bytes()
    );
    CommandResponse::decode(&msg[PACKET_HEADER_BYTES..]).unwrap()
}

fn world() -> (Server<Card>, tempfile::TempDir, TinyGpuTransport) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &Listen::Unix(dir.path().join("s.sock")),
        Card::new(card_trusting_the_test_key()),
    )
    .unwrap();
    let t = TinyGpuOpener::new(server.endpoint(), Duration::from_secs(2))
        .connect()
        .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    (server, dir, t)
}

fn gsp(t: &mut TinyGpuTransport, reg: u32) -> u32 {
    t.mmio_read32(u64::from(reg)).unwrap()
}

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
    t.dma_read(s.region.id, 13 * PAGE, &mut meta.0).unwrap();
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
    let mut t = TinyGpuOpener::new(server.endpoint(), Duration::from_secs(2))
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
