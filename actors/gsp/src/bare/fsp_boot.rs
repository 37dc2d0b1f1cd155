//! The boot of a card through its FSP (GB20x, and GH100 where its numbers
//! differ: they come from [`FirmwareChip`]), as one straight function from
//! a card in any state to GSP-RM answering RPCs (reference/gsp.md section
//! 0, steps 1 to 18, and RM's GET_GSP_STATIC_INFO). Each step checks its postcondition before the next
//! starts and every wait is bounded; a failure names its step, and every
//! failure after bus mastering went on turns it off again, so a card
//! left half-booted cannot write host memory the process is about to free.
//! The firmware is never unloaded: GSP-RM stays resident for the next
//! open, which resets it away (`early::ensure_fresh`).

use super::early::{self, EarlyError, CARD_BOOT_PATIENCE};
use super::hold_back;
use super::poll::{poll_register, PollError};
use super::{
    send_cot_with, stage_for_fsp, BareError, CardBus, FspChannel, GspRpc, GspStaticInfo,
    LibosRegion, RpcError, RpcQueue, SharedBlock, Staged, StaticInfoError, SystemInfo,
    RMARGS_BYTES,
};
use super::{Notice, RpcEntry};
use crate::bare::init_messages::{packed_registry, InitMessageError, DRIVER_REGISTRY};
use crate::firmware::{FirmwareChip, FirmwareSet};
use macuda_hw::chip::ChipIdentity;
use macuda_hw::gsp_rpc::{event, function, system_info::CONFIG_MIRROR_BASE_FSP};
use macuda_hw::pci::offset;
use macuda_hw::regs::{
    NV_PBUS_BAR1_BLOCK, NV_PGSP_FALCON_HWCFG2, NV_PGSP_FALCON_MAILBOX0, NV_PGSP_FALCON_MAILBOX1,
    NV_PGSP_FALCON_OS, NV_PGSP_RISCV_CPUCTL, NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_HIGH_ADDR,
    NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_LOW_ADDR, PRI_ERROR_FENCED, PRI_ERROR_MASK,
};
use macuda_pci::PciError;
use std::ops::Range;
use std::time::{Duration, Instant};

/// How long each stage of the boot may take. The defaults are the longest
/// any reference driver allows (tinygrad's 10 s for the firmware's own
/// steps, RM's 5 s for the card's boot); tests shorten them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootPatience {
    /// The card's own boot after power-on or a reset.
    pub card_boot: Duration,
    /// The FSP's answer to the COT request.
    pub fsp_answer: Duration,
    /// From the FSP's answer to the GSP's RISC-V core released.
    pub gsp_start: Duration,
    /// From the release to GSP-RM linking its status queue.
    pub queue_link: Duration,
    /// From the link to GSP_INIT_DONE.
    pub init_done: Duration,
    /// A BAR1 bind to finish.
    pub bar1_bind: Duration,
}

impl Default for BootPatience {
    fn default() -> BootPatience {
        BootPatience {
            card_boot: CARD_BOOT_PATIENCE,
            fsp_answer: FspChannel::default().timeout,
            gsp_start: Duration::from_secs(10),
            queue_link: Duration::from_secs(10),
            init_done: Duration::from_secs(10),
            bar1_bind: Duration::from_secs(1),
        }
    }
}

/// The steps, in order, as a failure names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootStep {
    Identify,
    ResidentFirmware,
    Vram,
    Stage,
    QueueBlock,
    InitMessages,
    ChainOfTrust,
    TargetMask,
    Lockdown,
    RiscvStart,
    QueueLink,
    InitDone,
    StaticInfo,
    Wpr2,
    Bar1Physical,
}

/// Why the boot stopped, and at which step.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error("boot step {step:?}: {source}")]
    Early {
        step: BootStep,
        #[source]
        source: EarlyError,
    },
    #[error("the card is a {card:?} but the firmware set is {images:?}'s")]
    WrongFirmware {
        card: FirmwareChip,
        images: FirmwareChip,
    },
    #[error("boot step {step:?}: {source}")]
    Staging {
        step: BootStep,
        #[source]
        source: BareError,
    },
    #[error("boot step {step:?}: {source}")]
    Rpc {
        step: BootStep,
        #[source]
        source: RpcError,
    },
    #[error("boot step {step:?}: {source}")]
    Poll {
        step: BootStep,
        #[source]
        source: PollError,
    },
    #[error("boot step {step:?}: {source}")]
    InitMessage {
        step: BootStep,
        #[source]
        source: InitMessageError,
    },
    #[error("boot step {step:?}: {what}: {source}")]
    Bus {
        step: BootStep,
        what: &'static str,
        #[source]
        source: PciError,
    },
    #[error(
        "the FMC failed to boot GSP-RM: mailbox 0/1 read {mailbox0:#010x}/{mailbox1:#010x} \
         after the lockdown was released (0 means booted)"
    )]
    FmcFailed { mailbox0: u32, mailbox1: u32 },
    #[error("the GSP's RISC-V core is not running after its release (CPUCTL {cpuctl:#010x})")]
    RiscvInactive { cpuctl: u32 },
    #[error("boot step {step:?}: {source}")]
    StaticInfo {
        step: BootStep,
        #[source]
        source: StaticInfoError,
    },
    #[error("GSP-RM leaves the driver FB region {region:#x?}, which reaches into WPR2 {wpr2:#x?}")]
    RegionInWpr2 {
        region: Range<u64>,
        wpr2: Range<u64>,
    },
    #[error(
        "our VRAM ceiling {ceiling:#x} is above the firmware's floor {floor:#x}: \
         the hold-back does not cover what this firmware took"
    )]
    CeilingAboveFloor { ceiling: u64, floor: u64 },
    #[error("{what} is {bytes} bytes, more than the {accounted} the VRAM hold-back accounts for")]
    ImageLargerThanAccounted {
        what: &'static str,
        bytes: u64,
        accounted: u64,
    },
    #[error("GSP_INIT_DONE came but WPR2 is down: the firmware did not place itself")]
    Wpr2Down,
    #[error("WPR2 {region:#x?} lies outside the card's {vram_bytes:#x} bytes of VRAM")]
    Wpr2Outside { region: Range<u64>, vram_bytes: u64 },
}

impl BootError {
    /// The step that failed.
    pub fn step(&self) -> BootStep {
        match self {
            BootError::Early { step, .. }
            | BootError::Staging { step, .. }
            | BootError::Rpc { step, .. }
            | BootError::Poll { step, .. }
            | BootError::InitMessage { step, .. }
            | BootError::StaticInfo { step, .. }
            | BootError::Bus { step, .. } => *step,
            BootError::WrongFirmware { .. } => BootStep::Identify,
            BootError::FmcFailed { .. } => BootStep::Lockdown,
            BootError::RiscvInactive { .. } => BootStep::RiscvStart,
            BootError::Wpr2Down
            | BootError::Wpr2Outside { .. }
            | BootError::RegionInWpr2 { .. }
            | BootError::CeilingAboveFloor { .. } => BootStep::Wpr2,
            BootError::ImageLargerThanAccounted { .. } => BootStep::Identify,
        }
    }
}

/// A failed boot: the error, and what a report needs to explain it (the
/// steps that finished and their times, the last messages both ways, the
/// notices GSP-RM sent). Bus mastering is already off.
#[derive(Debug, thiserror::Error)]
#[error("our boot of GSP-RM through the FSP stopped at step {:?}", .error.step())]
pub struct BootFailed {
    #[source]
    pub error: BootError,
    pub timings: Vec<(BootStep, Duration)>,
    pub transcript: Vec<RpcEntry>,
    pub notices: Vec<Notice>,
}

impl BootFailed {
    /// The step that failed.
    pub fn step(&self) -> BootStep {
        self.error.step()
    }
}

/// A card whose GSP-RM answers: what the boot found, what must stay alive
/// while it runs (the staged mappings), and the RPC conversation.
pub struct BootedGsp {
    pub identity: ChipIdentity,
    pub chip: FirmwareChip,
    pub vram_bytes: u64,
    /// The region the firmware holds, read back after GSP_INIT_DONE.
    pub wpr2: Range<u64>,
    /// The top of the VRAM we may hand out (below the family's hold-back),
    /// and the lowest byte the firmware took, which it was checked under.
    pub vram_ceiling: u64,
    pub firmware_floor: u64,
    /// What GSP-RM reported of the card (GET_GSP_STATIC_INFO).
    pub static_info: GspStaticInfo,
    /// The region an earlier boot left, when a reset came first.
    pub was_resident: Option<Range<u64>>,
    pub staged: Staged,
    pub rpc: GspRpc,
    /// How long each step took, in order.
    pub timings: Vec<(BootStep, Duration)>,
}

/// Boot the card behind `bus` with `fw` and leave GSP-RM running with
/// BAR1 in physical mode. On any failure bus mastering is turned off
/// before the error returns.
///
/// # Errors
/// [`BootFailed`]: the [`BootError`] naming the step, and what was said.
pub fn boot_through_fsp(
    bus: &mut dyn CardBus,
    fw: &FirmwareSet,
    patience: &BootPatience,
) -> Result<BootedGsp, Box<BootFailed>> {
    let mut steps = Steps {
        at: Instant::now(),
        timings: Vec::new(),
    };
    let mut conversation = None;
    match boot_steps(bus, fw, patience, &mut steps, &mut conversation) {
        Ok(booted) => Ok(booted),
        Err(error) => {
            if let Err(clear) = bus.clear_bus_master() {
                tracing::error!(%clear, "clearing bus mastering after a failed boot");
            }
            tracing::error!(%error, "the boot through the FSP failed; bus mastering is off");
            let (transcript, notices) = conversation.map_or_else(Default::default, |rpc| {
                (
                    rpc.transcript().entries().cloned().collect(),
                    rpc.notices().cloned().collect(),
                )
            });
            Err(Box::new(BootFailed {
                error,
                timings: steps.timings,
                transcript,
                notices,
            }))
        }
    }
}

/// Times each step and names it in its failure.
struct Steps {
    at: Instant,
    timings: Vec<(BootStep, Duration)>,
}

impl Steps {
    fn done(&mut self, step: BootStep) {
        let now = Instant::now();
        self.timings.push((step, now - self.at));
        tracing::debug!(?step, took = ?(now - self.at), "boot step done");
        self.at = now;
    }
}

fn early_err(step: BootStep) -> impl FnOnce(EarlyError) -> BootError {
    move |source| BootError::Early { step, source }
}

fn rpc_err(step: BootStep) -> impl FnOnce(RpcError) -> BootError {
    move |source| BootError::Rpc { step, source }
}

fn poll_err(step: BootStep) -> impl FnOnce(PollError) -> BootError {
    move |source| BootError::Poll { step, source }
}

fn bus_err(step: BootStep, what: &'static str) -> impl FnOnce(PciError) -> BootError {
    move |source| BootError::Bus { step, what, source }
}

fn boot_steps(
    bus: &mut dyn CardBus,
    fw: &FirmwareSet,
    patience: &BootPatience,
    steps: &mut Steps,
    conversation: &mut Option<GspRpc>,
) -> Result<BootedGsp, BootError> {
    use BootStep::*;

    // The chip, and images made for it.
    let (identity, chip) = early::identify(bus).map_err(early_err(Identify))?;
    if chip != fw.chip {
        return Err(BootError::WrongFirmware {
            card: chip,
            images: fw.chip,
        });
    }
    for (what, bytes, accounted) in [
        (
            "the GSP-RM image",
            fw.gsp.image().len(),
            hold_back::GSP_RM_IMAGE_BYTES,
        ),
        (
            "the GSP-RM bootloader",
            fw.bootloader.image().len(),
            hold_back::BOOTLOADER_BYTES,
        ),
    ] {
        // CAST: a slice's length fits u64.
        let bytes = bytes as u64;
        if bytes > accounted {
            return Err(BootError::ImageLargerThanAccounted {
                what,
                bytes,
                accounted,
            });
        }
    }
    steps.done(Identify);

    // No firmware of an earlier boot left; the card's own boot finished.
    let was_resident =
        early::ensure_fresh(bus, chip, patience.card_boot).map_err(early_err(ResidentFirmware))?;
    steps.done(ResidentFirmware);

    let vram_bytes = early::usable_vram(bus).map_err(early_err(Vram))?;
    steps.done(Vram);

    // Everything the FSP, the FMC and GSP-RM's bootloader read.
    let mut staged = stage_for_fsp(bus, fw, vram_bytes).map_err(|source| BootError::Staging {
        step: Stage,
        source,
    })?;
    steps.done(Stage);

    // The queues, named in the libos page as RMARGS.
    let block = SharedBlock::stage(bus).map_err(rpc_err(QueueBlock))?;
    staged
        .set_libos_region(
            bus,
            LibosRegion {
                name: "RMARGS",
                bus: block.rmargs_bus_addr(),
                bytes: RMARGS_BYTES,
            },
        )
        .map_err(|source| BootError::Staging {
            step: QueueBlock,
            source,
        })?;
    let mut rpc = GspRpc::new(RpcQueue::new(block));
    steps.done(QueueBlock);

    // From here on a failure hands the conversation back, so the report
    // can say what was said.
    match start_gsp_rm(bus, fw, patience, steps, &mut rpc, &staged, vram_bytes) {
        Ok((wpr2, static_info, firmware_floor)) => Ok(BootedGsp {
            identity,
            chip,
            vram_bytes,
            wpr2,
            vram_ceiling: hold_back::vram_ceiling(chip, vram_bytes),
            firmware_floor,
            static_info,
            was_resident,
            staged,
            rpc,
            timings: std::mem::take(&mut steps.timings),
        }),
        Err(e) => {
            *conversation = Some(rpc);
            Err(e)
        }
    }
}

/// The second half of the boot: the init messages queued, the FSP asked,
/// the GSP's core released, GSP-RM linked and through GSP_INIT_DONE, what
/// it reports checked against WPR2, BAR1 physical.
fn start_gsp_rm(
    bus: &mut dyn CardBus,
    fw: &FirmwareSet,
    patience: &BootPatience,
    steps: &mut Steps,
    rpc: &mut GspRpc,
    staged: &Staged,
    vram_bytes: u64,
) -> Result<(Range<u64>, GspStaticInfo, u64), BootError> {
    use BootStep::*;

    // What GSP-RM reads before it builds its GPU object: queued now, no
    // reply awaited.
    let info = system_info(bus)?;
    let registry = packed_registry(DRIVER_REGISTRY).map_err(|source| BootError::InitMessage {
        step: InitMessages,
        source,
    })?;
    rpc.post(bus, function::GSP_SET_SYSTEM_INFO, &info)
        .map_err(rpc_err(InitMessages))?;
    rpc.post(bus, function::SET_REGISTRY, &registry)
        .map_err(rpc_err(InitMessages))?;
    steps.done(InitMessages);

    // The FSP checks the FMC and starts it.
    let fsp = FspChannel {
        timeout: patience.fsp_answer,
        ..FspChannel::default()
    };
    send_cot_with(bus, staged, &fsp).map_err(|source| BootError::Staging {
        step: ChainOfTrust,
        source,
    })?;
    steps.done(ChainOfTrust);

    // The GSP's registers answer once the priv target mask opens; a PRI
    // error's pattern has the lockdown bit clear, so this comes first.
    poll_register(
        bus,
        "the GSP's priv target mask",
        NV_PGSP_FALCON_HWCFG2::ADDR,
        patience.gsp_start,
        |v| v != 0 && v & PRI_ERROR_MASK != PRI_ERROR_FENCED,
    )
    .map_err(poll_err(TargetMask))?;
    steps.done(TargetMask);

    // The boot ROM releases its lockdown; mailbox 0 then says how the
    // FMC's boot of GSP-RM went.
    poll_register(
        bus,
        "the RISC-V boot ROM's lockdown",
        NV_PGSP_FALCON_HWCFG2::ADDR,
        patience.gsp_start,
        |v| NV_PGSP_FALCON_HWCFG2(v).riscv_br_priv_lockdown() == 0,
    )
    .map_err(poll_err(Lockdown))?;
    let mailbox0 = bus
        .read32(NV_PGSP_FALCON_MAILBOX0::ADDR)
        .map_err(bus_err(Lockdown, "reading the GSP's mailbox 0"))?;
    if mailbox0 != 0 {
        let mailbox1 = bus
            .read32(NV_PGSP_FALCON_MAILBOX1::ADDR)
            .map_err(bus_err(Lockdown, "reading the GSP's mailbox 1"))?;
        return Err(BootError::FmcFailed { mailbox0, mailbox1 });
    }
    steps.done(Lockdown);

    // As RM: tell the core its OS version, and require it running.
    bus.write32(NV_PGSP_FALCON_OS::ADDR, fw.bootloader.desc.app_version)
        .map_err(bus_err(RiscvStart, "writing NV_PFALCON_FALCON_OS"))?;
    let cpuctl = bus
        .read32(NV_PGSP_RISCV_CPUCTL::ADDR)
        .map_err(bus_err(RiscvStart, "reading the RISC-V CPUCTL"))?;
    if NV_PGSP_RISCV_CPUCTL(cpuctl).active_stat() == 0 {
        return Err(BootError::RiscvInactive { cpuctl });
    }
    steps.done(RiscvStart);

    rpc.queue()
        .wait_linked(bus, patience.queue_link)
        .map_err(rpc_err(QueueLink))?;
    steps.done(QueueLink);

    // The sequencer scripts and notices that come first are handled here.
    rpc.wait_for(bus, event::GSP_INIT_DONE, patience.init_done)
        .map_err(rpc_err(InitDone))?;
    steps.done(InitDone);

    // What GSP-RM says of the card, asked as RM asks it.
    let static_info = GspStaticInfo::ask(rpc, bus).map_err(|source| BootError::StaticInfo {
        step: StaticInfo,
        source,
    })?;
    steps.done(StaticInfo);

    // Where the firmware placed itself, read back, never assumed.
    let wpr2 = early::Wpr2Registers::read(bus)
        .map_err(early_err(Wpr2))?
        .region()
        .ok_or(BootError::Wpr2Down)?;
    if wpr2.end > vram_bytes {
        return Err(BootError::Wpr2Outside {
            region: wpr2,
            vram_bytes,
        });
    }
    // What is left to the driver stays out of the firmware's region.
    if let Some(region) = static_info
        .fb_regions
        .iter()
        .find(|r| r.start < wpr2.end && wpr2.start < r.end)
    {
        return Err(BootError::RegionInWpr2 {
            region: region.clone(),
            wpr2,
        });
    }
    // Our ceiling below the lowest byte the firmware took.
    let ceiling = hold_back::vram_ceiling(fw.chip, vram_bytes);
    let (_, sizes) = hold_back::hold_back(fw.chip);
    let floor =
        hold_back::firmware_floor(&wpr2, sizes.non_wpr_heap, &static_info.fb_regions, ceiling);
    if ceiling > floor {
        return Err(BootError::CeilingAboveFloor { ceiling, floor });
    }
    steps.done(Wpr2);

    bar1_physical(bus, patience.bar1_bind)?;
    steps.done(Bar1Physical);

    tracing::info!(
        chip = ?fw.chip,
        vram_mib = vram_bytes >> 20,
        wpr2 = ?wpr2,
        took = ?steps.timings.iter().map(|(_, d)| *d).sum::<Duration>(),
        "GSP-RM booted through the FSP"
    );
    Ok((wpr2, static_info, floor))
}

/// GspSystemInfo from the card's configuration space. The BARs' bus
/// addresses and the function's address are not what a remote transport
/// can tell; GSP-RM takes 0 for them.
fn system_info(bus: &mut dyn CardBus) -> Result<Vec<u8>, BootError> {
    use BootStep::InitMessages;
    let mut dword = |at: u16| {
        bus.config_read32(at)
            .map_err(bus_err(InitMessages, "reading configuration space"))
    };
    let pci_ids = dword(offset::VENDOR_ID)?;
    let pci_subsystem_ids = dword(offset::SUBSYSTEM_VENDOR_ID)?;
    let revision = dword(offset::REVISION_AND_CLASS)?.to_le_bytes()[0];
    SystemInfo {
        bar0: 0,
        bar1: 0,
        instance_bar: 0,
        address: None,
        pci_ids,
        pci_subsystem_ids,
        revision,
        config_mirror_base: CONFIG_MIRROR_BASE_FSP,
    }
    .encode()
    .map_err(|source| BootError::InitMessage {
        step: InitMessages,
        source,
    })
}

/// Undo GSP-RM's virtual BAR1: physical mode in the legacy register and in
/// the function's bind register (LOW, then HIGH, which starts the bind, as
/// RM does), then wait until no bind is pending or outstanding.
fn bar1_physical(bus: &mut dyn CardBus, patience: Duration) -> Result<(), BootError> {
    use BootStep::Bar1Physical;
    for (reg, what) in [
        (NV_PBUS_BAR1_BLOCK::ADDR, "writing NV_PBUS_BAR1_BLOCK"),
        (
            NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_LOW_ADDR::ADDR,
            "writing FUNC_BAR1_BLOCK_LOW_ADDR",
        ),
        (
            NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_HIGH_ADDR::ADDR,
            "writing FUNC_BAR1_BLOCK_HIGH_ADDR",
        ),
    ] {
        bus.write32(reg, 0).map_err(bus_err(Bar1Physical, what))?;
    }
    poll_register(
        bus,
        "BAR1's bind to physical mode",
        NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_LOW_ADDR::ADDR,
        patience,
        |v| {
            let r = NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_LOW_ADDR(v);
            r.bar1_pending() == 0 && r.bar1_outstanding() == 0
        },
    )
    .map_err(poll_err(Bar1Physical))?;
    Ok(())
}
