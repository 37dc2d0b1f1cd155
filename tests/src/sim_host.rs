//! The host side of the simulated card's boot, for the sim's tests: a
//! firmware set whose FMC is signed with a test key the card is told to
//! trust, staged and sent by the gsp actor's own bare-metal boot
//! (`macuda_gsp::bare`), raw packets through the FSP's EMEM channel for
//! the tests that break the request on purpose, and (`rpc`) the GSP-RM
//! message queues: RM arguments, the shared block with its PTEs, messages
//! with their element headers and checksums, the doorbell.

use macuda_gsp::bare::{self, FspChannel};
use macuda_gsp::firmware::bootloader::{bin_hdr, ucode_desc};
use macuda_gsp::firmware::{Bootloader, FirmwareChip, FirmwareSet, FmcImage, GspImage};
use macuda_hw::fsp::{self, CommandResponse, CotPayload};
use macuda_hw::regs::NV_PGC6_AON_SECURE_SCRATCH_GROUP_42;
use macuda_pci::tinygpu::{TinyGpuOpener, TinyGpuTransport};
use macuda_pci::{DmaRegion, Transport};
use macuda_sim::fsp::Trust;
use macuda_sim::{Card, Listen, Server, SimChip};
use p384::ecdsa::signature::hazmat::PrehashSigner;
use sha2::{Digest, Sha256, Sha384};
use std::path::Path;
use std::time::Duration;

pub mod bar1;
pub mod rpc;

pub const PAGE: u64 = 4096;
/// The test FMC image: a header saying 72 + payload bytes, then noise.
pub const FMC_PAYLOAD: u32 = 20_000;
pub const FMC_HEADER: u32 = 72;
/// A small GSP-RM image: 3 pages, so radix3 has one page a level.
pub const RM_IMAGE_BYTES: u64 = 3 * PAGE + 100;
/// The test bootloader's image, with its manifest and monitor regions
/// on the descriptor's 256-byte boundaries.
pub const BOOTLOADER_IMAGE_BYTES: u32 = 0x400;

pub fn test_key() -> p384::ecdsa::SigningKey {
    p384::ecdsa::SigningKey::from_slice(&[0x42; 48]).unwrap()
}

pub fn card_trusting_the_test_key() -> SimChip {
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

pub fn fmc_image() -> Vec<u8> {
    let mut img = vec![0u8; (FMC_HEADER + FMC_PAYLOAD) as usize];
    img[..4].copy_from_slice(&((FMC_HEADER << 16) | 0x0403).to_le_bytes());
    img[4..8].copy_from_slice(&FMC_PAYLOAD.to_le_bytes());
    for (i, b) in img.iter_mut().enumerate().skip(FMC_HEADER as usize) {
        *b = (i * 7 + 3) as u8;
    }
    img
}

/// [`fmc_image`] with its hash, signed by `key`.
pub fn test_fmc(key: &p384::ecdsa::SigningKey) -> FmcImage {
    let image = fmc_image();
    let hash = Sha384::digest(&image);
    let signature: p384::ecdsa::Signature = key.sign_prehash(&hash).unwrap();
    let public = key.verifying_key().to_encoded_point(false);
    FmcImage::from_sections(
        Path::new("test-fmc"),
        FirmwareChip::Gb202,
        &image,
        &hash,
        &signature.to_bytes(),
        public.as_bytes(),
    )
    .unwrap()
}

/// A bootloader container as NVIDIA lays it out: manifest, monitor data
/// and monitor code in a small image.
pub fn test_bootloader() -> Bootloader {
    let data_offset = (bin_hdr::SIZE + ucode_desc::SIZE) as u32;
    let bin_size =
        (data_offset + BOOTLOADER_IMAGE_BYTES).next_multiple_of(bin_hdr::SIZE_ROUNDING as u32);
    let mut out = Vec::new();
    for v in [
        bin_hdr::MAGIC as u32,
        bin_hdr::VERSION as u32,
        bin_size,
        bin_hdr::SIZE as u32,
        data_offset,
        BOOTLOADER_IMAGE_BYTES,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let mut desc = vec![0u8; ucode_desc::SIZE as usize];
    let region = ucode_desc::REGION_ALIGN as u32;
    for (at, v) in [
        (ucode_desc::VERSION, ucode_desc::MIN_VERSION as u32),
        (ucode_desc::MANIFEST_OFFSET, 0),
        (ucode_desc::MANIFEST_SIZE, region),
        (ucode_desc::MONITOR_DATA_OFFSET, region),
        (ucode_desc::MONITOR_DATA_SIZE, region),
        (ucode_desc::MONITOR_CODE_OFFSET, 2 * region),
        (ucode_desc::MONITOR_CODE_SIZE, 2 * region),
    ] {
        desc[at as usize..][..4].copy_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&desc);
    out.extend((0..BOOTLOADER_IMAGE_BYTES).map(|i| i as u8));
    Bootloader::parse(Path::new("test-bootloader"), out).unwrap()
}

/// The test firmware set: the FMC signed with [`test_key`], a test
/// bootloader, and a GSP-RM image of [`RM_IMAGE_BYTES`].
pub fn test_firmware() -> FirmwareSet {
    test_firmware_for(FirmwareChip::Gb202)
}

/// [`test_firmware`] for `chip`. GH100's FSP takes COT version 1, whose
/// RSA-3072 signature the sim does not check: its key and signature are
/// filler of the sizes the container must have.
pub fn test_firmware_for(chip: FirmwareChip) -> FirmwareSet {
    let image: Vec<u8> = (0..RM_IMAGE_BYTES).map(|i| (i % 253) as u8).collect();
    let fmc = match chip {
        FirmwareChip::Gb202 => test_fmc(&test_key()),
        FirmwareChip::Gh100 => {
            let image = fmc_image();
            let hash = Sha384::digest(&image);
            let (signature, key) = macuda_gsp::firmware::fmc::signature_and_key_bytes(chip);
            FmcImage::from_sections(
                Path::new("test-fmc-gh100"),
                chip,
                &image,
                &hash,
                &vec![0x51; signature as usize],
                &vec![0x4B; key as usize],
            )
            .unwrap()
        }
    };
    FirmwareSet {
        chip,
        fmc,
        bootloader: test_bootloader(),
        gsp: GspImage::from_sections(Path::new("test-gsp"), chip, &image, &[0x5A; PAGE as usize])
            .unwrap(),
        files: Vec::new(),
    }
}

/// What the driver staged, and where its libos page is (for `rpc`, which
/// writes its entries there).
pub struct Staged {
    pub bare: bare::Staged,
    /// The mapping holding the libos page, and the page's offset in it.
    pub region: DmaRegion,
    pub libos_at: u64,
    pub fmc: u64,
    pub params: u64,
    pub meta: u64,
}

pub fn bus(region: &DmaRegion, offset: u64) -> u64 {
    region.bus_addr(offset).expect("inside the mapping")
}

/// The card's VRAM, as it reports it.
pub fn vram_bytes(t: &mut TinyGpuTransport) -> u64 {
    let mib = t
        .mmio_read32(u64::from(NV_PGC6_AON_SECURE_SCRATCH_GROUP_42::ADDR))
        .unwrap();
    u64::from(mib) << 20
}

/// Stage `fw` with the driver's own boot.
pub fn stage_firmware(t: &mut TinyGpuTransport, fw: &FirmwareSet) -> Staged {
    let vram = vram_bytes(t);
    let bare = bare::stage_for_fsp(t, fw, vram).unwrap();
    let page = bare.libos_page;
    let region = bare
        .mappings
        .iter()
        .find(|m| m.id == page.mapping)
        .expect("the libos page's mapping is kept")
        .clone();
    Staged {
        region,
        libos_at: page.offset,
        fmc: bare.fmc_image.bus,
        params: bare.boot_params.bus,
        meta: bare.wpr_meta.bus,
        bare,
    }
}

/// Stage [`test_firmware`].
pub fn stage(t: &mut TinyGpuTransport) -> Staged {
    stage_firmware(t, &test_firmware())
}

/// The COT request the driver built for what was staged, its signature
/// and public key replaced by `key`'s (the driver's own, for
/// [`test_key`]).
pub fn cot(s: &Staged, key: &p384::ecdsa::SigningKey) -> CotPayload {
    let mut c = s.bare.cot.clone();
    let signature: p384::ecdsa::Signature = key.sign_prehash(&c.hash384).unwrap();
    let public = key.verifying_key().to_encoded_point(false);
    c.public_key = [0; fsp::COT_KEY_FIELD_BYTES];
    c.public_key[..public.as_bytes().len()].copy_from_slice(public.as_bytes());
    c.signature = [0; fsp::COT_SIGNATURE_FIELD_BYTES];
    c.signature[..signature.to_bytes().len()].copy_from_slice(&signature.to_bytes());
    c
}

/// Send one packet through EMEM channel 0 and read the FSP's answer,
/// whatever its error code.
pub fn send(t: &mut TinyGpuTransport, payload: &[u8], nvdm_type: u8) -> CommandResponse {
    let channel = FspChannel {
        timeout: Duration::from_secs(2),
        ..FspChannel::default()
    };
    channel.exchange(t, nvdm_type, payload).unwrap()
}

pub fn world() -> (Server<Card>, tempfile::TempDir, TinyGpuTransport) {
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

pub fn gsp(t: &mut TinyGpuTransport, reg: u32) -> u32 {
    t.mmio_read32(u64::from(reg)).unwrap()
}

/// A card booted through the FSP with the queues staged and whatever the
/// caller pre-queued (before the COT, as drivers do).
pub fn booted(
    prequeue: impl FnOnce(&mut rpc::HostQueues, &mut TinyGpuTransport),
) -> (
    Server<Card>,
    tempfile::TempDir,
    TinyGpuTransport,
    rpc::HostQueues,
) {
    let (server, dir, mut t) = world();
    macuda_pci::enable_bus_master(&mut t).unwrap();
    let s = stage(&mut t);
    let mut q = rpc::HostQueues::stage(&mut t, &s);
    prequeue(&mut q, &mut t);
    bare::send_cot(&mut t, &s.bare).unwrap();
    (server, dir, t, q)
}

/// What a driver pre-queues before the COT: the system info, then the
/// registry; GSP-RM posts GSP_INIT_DONE once it has both.
pub fn init_messages(q: &mut rpc::HostQueues, t: &mut TinyGpuTransport) {
    use macuda_hw::gsp_rpc::function;
    let info = system_info(t);
    q.send(t, function::GSP_SET_SYSTEM_INFO, &info);
    q.send(t, function::SET_REGISTRY, &rpc::registry_table());
}

/// GspSystemInfo as the gsp actor encodes it for a card over TinyGPU:
/// the PCI identity from config space; the BARs' bus addresses and the
/// function's address are the server's, not told.
pub fn system_info(t: &mut TinyGpuTransport) -> Vec<u8> {
    use macuda_gsp::bare::SystemInfo;
    use macuda_hw::gsp_rpc::system_info::CONFIG_MIRROR_BASE_FSP;
    use macuda_hw::pci::{offset, Width};
    let dword = |t: &mut TinyGpuTransport, at| t.config_read(at, Width::U32).unwrap();
    SystemInfo {
        bar0: 0,
        bar1: 0,
        instance_bar: 0,
        address: None,
        pci_ids: dword(t, offset::VENDOR_ID),
        pci_subsystem_ids: dword(t, offset::SUBSYSTEM_VENDOR_ID),
        // CAST: the revision is the dword's low byte.
        revision: dword(t, offset::REVISION_AND_CLASS) as u8,
        config_mirror_base: CONFIG_MIRROR_BASE_FSP,
    }
    .encode()
    .unwrap()
}

/// The boot's waits against the sim, which answers in milliseconds: short,
/// so a test that fails fails fast.
pub fn sim_boot_patience() -> macuda_gsp::bare::BootPatience {
    macuda_gsp::bare::BootPatience {
        card_boot: Duration::from_secs(2),
        fsp_answer: Duration::from_secs(2),
        gsp_start: Duration::from_secs(2),
        queue_link: Duration::from_secs(2),
        init_done: Duration::from_secs(2),
        bar1_bind: Duration::from_millis(200),
    }
}
