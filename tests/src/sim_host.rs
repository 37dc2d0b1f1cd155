//! The host side of the simulated card's boot, for the sim's tests: what
//! a driver stages for the FSP and FMC (an FMC image signed with a test key
//! the card is told to trust, boot params, WPR meta, radix3, bootloader,
//! signature, libos page), the COT request through EMEM, and (`rpc`) the
//! GSP-RM message queues: RM arguments, the shared block with its PTEs,
//! messages with their element headers and checksums, the doorbell.
//! Written for the tests, to drive the sim over the TinyGPU protocol as a
//! driver does; the driver's own boot is the gsp actor's.

use macuda_hw::fsp::{
    self, nvdm, CommandResponse, CotPayload, COT_HASH_BYTES, COT_KEY_FIELD_BYTES,
    COT_PAYLOAD_BYTES, COT_SIGNATURE_FIELD_BYTES, PACKET_HEADER_BYTES,
};
use macuda_hw::gsp_boot::{
    dma_target, wpr_meta_offset as at, FmcBootParams, WprMeta, WPR_META_BYTES, WPR_META_MAGIC,
    WPR_META_REVISION,
};
use macuda_hw::regs::*;
use macuda_pci::tinygpu::{TinyGpuOpener, TinyGpuTransport};
use macuda_pci::{DmaRegion, Transport};
use macuda_sim::fsp::Trust;
use macuda_sim::{Card, Listen, Server, SimChip};
use p384::ecdsa::signature::hazmat::PrehashSigner;
use sha2::{Digest, Sha256, Sha384};
use std::time::{Duration, Instant};

pub mod rpc;

pub const PAGE: u64 = 4096;
/// The test FMC image: a header saying 72 + payload bytes, then noise.
pub const FMC_PAYLOAD: u32 = 20_000;
pub const FMC_HEADER: u32 = 72;
/// A small GSP-RM image: 3 pages, so radix3 has one page a level.
pub const RM_IMAGE_BYTES: u64 = 3 * PAGE + 100;

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

/// Everything the host stages, in one shared mapping, and where.
pub struct Staged {
    pub region: DmaRegion,
    pub fmc: u64,
    pub params: u64,
    pub meta: u64,
    /// Where the libos page is in `region`.
    pub libos_at: u64,
}

pub fn bus(region: &DmaRegion, offset: u64) -> u64 {
    region.bus_addr(offset).expect("inside the mapping")
}

/// Stage the FMC image, boot params, WPR meta, radix3 (3 table pages and
/// the image), bootloader, signature and the libos page.
pub fn stage(t: &mut TinyGpuTransport) -> Staged {
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
        libos_at,
        fmc: bus(&region, fmc_at),
        params: bus(&region, params_at),
        meta: bus(&region, meta_at),
        region,
    }
}

/// The COT request for what was staged, signed by `key`.
pub fn cot(s: &Staged, key: &p384::ecdsa::SigningKey) -> CotPayload {
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
pub fn send(t: &mut TinyGpuTransport, payload: &[u8], nvdm_type: u8) -> CommandResponse {
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
    let r = send(
        &mut t,
        &cot(&s, &test_key()).encode(),
        macuda_hw::fsp::nvdm::COT,
    );
    assert_eq!(r.error_code, 0);
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
