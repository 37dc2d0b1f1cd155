//! The FSP path's two steps: stage everything the FSP, the FMC and
//! GSP-RM's bootloader read from host memory, then send the COT request
//! and check the FSP's answer. Between the two, the RPC side names its RM
//! arguments in the libos page ([`Staged::set_libos_region`]) and
//! pre-queues its first messages, as drivers do before the COT.

use super::boot_params::fmc_boot_params;
use super::cot::cot_request;
use super::error::{BareError, Context};
use super::fsp_channel::FspChannel;
use super::libos::{stage_log_buffers, LibosArgs, LibosRegion};
use super::radix3::Radix3;
use super::staging::{HostStaging, Piece, StagingLimits};
use super::wpr_meta::{wpr_meta, WprMetaInputs};
use super::CardBus;
use crate::firmware::{FirmwareChip, FirmwareSet};
use macuda_hw::fsp::{nvdm, CotPayload};
use macuda_hw::gsp_rpc::libos_region;
use macuda_pci::DmaRegion;

/// What was staged, where, and the request that names it.
#[derive(Debug)]
pub struct Staged {
    pub chip: FirmwareChip,
    pub fmc_image: Piece,
    pub boot_params: Piece,
    pub wpr_meta: Piece,
    pub radix3: Radix3,
    pub bootloader: Piece,
    pub signature: Piece,
    pub libos_page: Piece,
    /// What the libos page says now.
    pub libos: LibosArgs,
    pub log_buffers: Vec<(LibosRegion, Piece)>,
    /// The request [`send_cot`] sends.
    pub cot: CotPayload,
    /// Every mapping the pieces live in: keep them while GSP-RM runs.
    pub mappings: Vec<DmaRegion>,
}

impl Staged {
    /// Name `region` in the libos page (or move the one of that name) and
    /// rewrite the page. The RPC side names RMARGS this way.
    ///
    /// # Errors
    /// [`BareError::LibosPageFull`], and the transport's.
    pub fn set_libos_region(
        &mut self,
        bus: &mut dyn CardBus,
        region: LibosRegion,
    ) -> Result<(), BareError> {
        self.libos.set(region)?;
        write_libos_page(bus, &self.libos_page, &self.libos)
    }
}

fn write_libos_page(
    bus: &mut dyn CardBus,
    page: &Piece,
    libos: &LibosArgs,
) -> Result<(), BareError> {
    bus.dma_write(page.mapping, page.offset, &libos.encode())
        .context(|| "writing the libos init-arguments page".into())
}

/// Stage `fw` for a card with `vram_bytes` of VRAM over the TinyGPU
/// transport's mapping rules.
///
/// # Errors
/// As [`stage_for_fsp_with`].
pub fn stage_for_fsp(
    bus: &mut dyn CardBus,
    fw: &FirmwareSet,
    vram_bytes: u64,
) -> Result<Staged, BareError> {
    stage_for_fsp_with(bus, fw, vram_bytes, StagingLimits::default())
}

/// Stage the FMC image, the GSP-RM image behind radix3, the bootloader,
/// the signature, the WPR meta, the libos page with zeroed log buffers,
/// and the boot params, and build the COT request naming them.
///
/// # Errors
/// [`BareError::NoContiguousRun`] or [`BareError::TooLarge`] for a piece
/// that cannot be placed, and the transport's with what was being done.
pub fn stage_for_fsp_with(
    bus: &mut dyn CardBus,
    fw: &FirmwareSet,
    vram_bytes: u64,
    limits: StagingLimits,
) -> Result<Staged, BareError> {
    let mut s = HostStaging::new(limits);
    // The large contiguous pieces first, while mappings are fresh.
    let fmc_image = s.place_bytes(bus, fw.fmc.image(), "the FMC image")?;
    let bootloader = s.place_bytes(bus, fw.bootloader.image(), "the GSP-RM bootloader")?;
    let signature = s.place_bytes(bus, fw.gsp.signature(), "the GSP-RM signature")?;
    let radix3 = Radix3::stage(bus, &mut s, fw.gsp.image())?;
    let log_buffers = stage_log_buffers(bus, &mut s)?;
    let mut libos = LibosArgs::new();
    for (region, _) in &log_buffers {
        libos.set(*region)?;
    }
    let libos_page = s.place(
        bus,
        libos_region::INIT_ARGUMENTS_MAX as u64,
        "the libos init-arguments page",
    )?;
    write_libos_page(bus, &libos_page, &libos)?;
    let meta = wpr_meta(&WprMetaInputs {
        chip: fw.chip,
        vram_bytes,
        radix3_root: radix3.root,
        image_bytes: radix3.image_bytes,
        bootloader: bootloader.bus,
        bootloader_bytes: fw.bootloader.image().len() as u64,
        desc: &fw.bootloader.desc,
        signature: signature.bus,
        signature_bytes: fw.gsp.signature().len() as u64,
    });
    let wpr_meta = s.place_bytes(bus, &meta.0, "the WPR meta")?;
    let params = fmc_boot_params(wpr_meta.bus, libos_page.bus).encode();
    let boot_params = s.place_bytes(bus, &params, "GSP_FMC_BOOT_PARAMS")?;
    let cot = cot_request(fw.chip, &fw.fmc, fmc_image.bus, boot_params.bus)?;
    Ok(Staged {
        chip: fw.chip,
        fmc_image,
        boot_params,
        wpr_meta,
        radix3,
        bootloader,
        signature,
        libos_page,
        libos,
        log_buffers,
        cot,
        mappings: s.into_mappings(),
    })
}

/// Send the staged COT request and require the FSP to accept it.
///
/// # Errors
/// As [`send_cot_with`].
pub fn send_cot(bus: &mut dyn CardBus, staged: &Staged) -> Result<(), BareError> {
    send_cot_with(bus, staged, &FspChannel::default())
}

/// Send the staged COT request over `channel`.
///
/// # Errors
/// [`BareError::FspRefused`] with the FSP's code, a timeout naming the
/// queue registers, [`BareError::BadResponse`], and the transport's.
pub fn send_cot_with(
    bus: &mut dyn CardBus,
    staged: &Staged,
    channel: &FspChannel,
) -> Result<(), BareError> {
    let r = channel.exchange(bus, nvdm::COT, &staged.cot.encode())?;
    if r.error_code != 0 {
        return Err(BareError::FspRefused { code: r.error_code });
    }
    Ok(())
}
