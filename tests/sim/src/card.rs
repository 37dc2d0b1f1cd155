//! The simulated card as the bus sees it: configuration space, BAR0's
//! registers, BAR1 onto video memory, the host memory it reaches by DMA
//! (only while bus mastering is on), and a function-level reset after
//! which the card boots again by itself. It is the [`Device`] the TinyGPU
//! server answers from.

use crate::channel::{Channel, ChannelFault};
mod engines;

use crate::boot_record::BootRecord;
use crate::chip::SimChip;
use crate::config::ConfigSpace;
use crate::dma::{CardDma, DmaError};
use crate::faults::{DeviceFault, FaultPlan};
use crate::fmc::FmcBoot;
use crate::fsp::{Fsp, FspFailure};
use crate::gsp_falcon::{GspFalcon, GspStage};
use crate::gsp_rm::{BootScript, GspRm};
use crate::host_memory::HostMemory;
use crate::kernel_models::KernelModels;
use crate::mmu::Tlb;
use crate::server::{Device, SharedMapping};
use crate::vram::Vram;
use macuda_hw::regs::{
    FSP_BOOT_COMPLETE, NV_HUBMMU_PRI_MMU_WPR2_ADDR_HI, NV_HUBMMU_PRI_MMU_WPR2_ADDR_LO,
    NV_PBUS_BAR1_BLOCK, NV_PFB_PRI_MMU_WPR2_ADDR_HI, NV_PFB_PRI_MMU_WPR2_ADDR_LO,
    NV_PGC6_AON_SECURE_SCRATCH_GROUP_42, NV_PMC_BOOT_0, NV_PMC_BOOT_42,
    NV_VIRTUAL_FUNCTION_DOORBELL, NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_HIGH_ADDR,
    NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_LOW_ADDR, NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE,
};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

/// BAR indices the card decodes.
const BAR0: u32 = 0;
const BAR1: u32 = 1;
/// BAR0 registers are 32 bits wide.
const REGISTER_BYTES: u64 = 4;
/// The longest one BAR0 access may be. Each register is modelled one at
/// a time, so a read of the whole BAR (64 MiB, what one TinyGPU transfer
/// may carry) held the server for seconds; drivers touch registers a few
/// at a time, and the recorder already refuses longer accesses.
const MAX_BAR0_ACCESS_BYTES: usize = macuda_pci::MAX_RECORDED_MMIO_BYTES;
/// Shared mappings are scattered in segments of this size by default:
/// with the 32-segment limit, 128 MiB a mapping.
pub const DEFAULT_SEGMENT_BYTES: u64 = 4 << 20;
/// Posted-write failures kept for a test to read.
const POSTED_ERRORS_KEPT: usize = 64;

pub struct Card {
    chip: SimChip,
    config: ConfigSpace,
    fsp: Fsp,
    gsp: GspFalcon,
    rm: GspRm,
    /// BAR0's plain registers: what was written, by address.
    registers: HashMap<u32, u32>,
    vram: Vram,
    host: HostMemory,
    /// Power-on or the last reset; the card's own boot ends `boot_time`
    /// after it.
    booted_at: Instant,
    resets: u32,
    /// Registers read that nothing wrote and the sim does not model: each
    /// read 0. Kept so a driver's expectations can be found.
    unmodelled: BTreeSet<u32>,
    /// Posted writes the card could not take, with why (no reply carries
    /// them).
    posted_errors: Vec<String>,
    /// The MMU's TLB: translations kept until a driver invalidates them.
    tlb: Tlb,
    /// Channels rung at least once, by channel id, and the fault that
    /// stopped each that stopped.
    channels: HashMap<u32, Channel>,
    channel_faults: HashMap<u32, ChannelFault>,
    /// Faults injected (`Card::inject`).
    faults: FaultPlan,
    /// GSP-RM sends a CPU-sequencer script at boot (`send_boot_sequencer`).
    boot_sequencer: Option<BootScript>,
    /// What the last COT request handed the card, and how many were
    /// recorded (kept across resets: a record is of what was handed, and a
    /// driver that resets and boots again replaces it).
    boot_record: Option<BootRecord>,
    boot_records: u64,
    /// Host-side models of our own test kernels, which compute the effect
    /// of a launch of one of them (`crate::kernel_models`).
    kernel_models: Arc<KernelModels>,
}

impl Card {
    pub fn new(chip: SimChip) -> Card {
        Card::with_segments(chip, DEFAULT_SEGMENT_BYTES)
    }

    /// A card whose host memory scatters shared mappings in segments of
    /// `segment_bytes`.
    pub fn with_segments(chip: SimChip, segment_bytes: u64) -> Card {
        Card {
            config: ConfigSpace::power_on(&chip),
            fsp: Fsp::new(chip.trust.clone()),
            gsp: GspFalcon::default(),
            rm: GspRm::new(&chip),
            registers: HashMap::new(),
            vram: Vram::new(chip.vram_bytes()),
            host: HostMemory::new(segment_bytes),
            booted_at: Instant::now(),
            resets: 0,
            unmodelled: BTreeSet::new(),
            posted_errors: Vec::new(),
            tlb: Tlb::default(),
            channels: HashMap::new(),
            channel_faults: HashMap::new(),
            faults: FaultPlan::default(),
            boot_sequencer: None,
            boot_record: None,
            boot_records: 0,
            kernel_models: Arc::new(KernelModels::ours()),
            chip,
        }
    }

    pub fn chip(&self) -> &SimChip {
        &self.chip
    }

    /// The kernels whose launches the card computes with a host-side
    /// model; every other launch is only recorded.
    pub fn kernel_models(&self) -> &KernelModels {
        &self.kernel_models
    }

    pub fn resets(&self) -> u32 {
        self.resets
    }

    pub fn bus_master(&self) -> bool {
        self.config.bus_master()
    }

    pub fn vram(&self) -> &Vram {
        &self.vram
    }

    pub fn vram_mut(&mut self) -> &mut Vram {
        &mut self.vram
    }

    pub fn host(&self) -> &HostMemory {
        &self.host
    }

    pub fn host_mut(&mut self) -> &mut HostMemory {
        &mut self.host
    }

    pub fn unmodelled_registers(&self) -> &BTreeSet<u32> {
        &self.unmodelled
    }

    pub fn posted_errors(&self) -> &[String] {
        &self.posted_errors
    }

    /// What the FSP made of each request since the last reset.
    pub fn fsp_outcomes(&self) -> &[Result<(), FspFailure>] {
        self.fsp.outcomes()
    }

    /// What the last COT request handed the card, as the card saw it
    /// (`crate::boot_record`), with refused set if the boot failed.
    pub fn boot_record(&self) -> Option<&BootRecord> {
        self.boot_record.as_ref()
    }

    /// How many COT requests were recorded since power-on: a watcher
    /// (`macuda sim serve --boot-record`) knows a new one by this.
    pub fn boot_records(&self) -> u64 {
        self.boot_records
    }

    /// Where the GSP is in its boot, and the FMC's boot once it ran.
    pub fn gsp(&self) -> (GspStage, Option<FmcBoot>) {
        (self.gsp.stage(), self.gsp.boot())
    }

    /// GSP-RM as played: its init, the registry it was given, the
    /// commands it took, the fault that stopped it.
    pub fn gsp_rm(&self) -> &GspRm {
        &self.rm
    }

    /// GSP-RM, for a test to have it post an event.
    pub fn gsp_rm_mut(&mut self) -> &mut GspRm {
        &mut self.rm
    }

    /// Inject a fault, to strike as [`DeviceFault`] says.
    pub fn inject(&mut self, f: DeviceFault) {
        match f {
            DeviceFault::FaultAddress { va } => self.tlb.poison(va),
            DeviceFault::CorruptReply { nth } => self.rm.corrupt_message(nth),
            _ => {}
        }
        self.faults.arm(f);
    }

    /// GSP-RM sends a CPU-sequencer script before GSP_INIT_DONE and waits
    /// for the host to have run it (survives resets).
    pub fn send_boot_sequencer(&mut self) {
        self.send_boot_script(BootScript::Completes);
    }

    /// As [`Card::send_boot_sequencer`], with the script of `kind` (one
    /// whose poll never completes tests a host's executor timeout).
    pub fn send_boot_script(&mut self, kind: BootScript) {
        self.boot_sequencer = Some(kind);
        self.rm.send_boot_sequencer(kind);
    }

    /// What was injected, and what of it struck.
    pub fn faults(&self) -> &FaultPlan {
        &self.faults
    }

    /// Whether the card's own boot firmware is done since the last reset.
    pub fn booted(&self) -> bool {
        self.booted_at.elapsed() >= self.chip.boot_time
    }

    /// Read a BAR0 register.
    pub fn read_register(&mut self, address: u32) -> u32 {
        let modelled = match address {
            NV_PMC_BOOT_0::ADDR => Some(self.chip.boot_0),
            NV_PMC_BOOT_42::ADDR => Some(self.chip.boot_42),
            NV_PGC6_AON_SECURE_SCRATCH_GROUP_42::ADDR => Some(self.chip.vram_mib),
            a if a == self.chip.boot_status => {
                Some(if self.booted() { FSP_BOOT_COMPLETE } else { 0 })
            }
            _ => None,
        };
        if let Some(v) = modelled
            .or_else(|| self.fsp.read(address))
            .or_else(|| self.gsp.read(address))
        {
            return v;
        }
        match self.registers.get(&address) {
            Some(&v) => v,
            None => {
                if !is_register_held(address) {
                    self.unmodelled.insert(address);
                }
                0
            }
        }
    }

    /// Write a BAR0 register.
    pub fn write_register(&mut self, address: u32, value: u32) {
        let fb = self.chip.vram_bytes();
        let mut dma = CardDma::new(&self.config, &mut self.host, &mut self.vram, &self.chip);
        let (taken, boot) = self.fsp.write(address, value, &mut dma, fb);
        if let Some(r) = self.fsp.take_record() {
            self.boot_record = Some(r);
            self.boot_records += 1;
        }
        if let Some(boot) = boot {
            self.start_gsp(boot);
        }
        if taken || self.gsp.write(address, value) {
            return;
        }
        match address {
            NV_PMC_BOOT_0::ADDR
            | NV_PMC_BOOT_42::ADDR
            | NV_PGC6_AON_SECURE_SCRATCH_GROUP_42::ADDR => {}
            NV_VIRTUAL_FUNCTION_DOORBELL::ADDR => self.ring_doorbell(value),
            NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE::ADDR => {
                self.invalidate(value);
                // Done at once: TRIGGER reads back clear.
                let done = NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE::FIELDS
                    .iter()
                    .find(|f| f.name == "trigger")
                    .map_or(value, |f| f.set(value, 0));
                self.registers.insert(address, done);
            }
            a if a == self.chip.boot_status => {}
            _ => {
                self.registers.insert(address, value);
            }
        }
    }

    /// The FMC booted: WPR2 is up (both copies of its registers), and the
    /// GSP comes out of its fence.
    fn start_gsp(&mut self, boot: FmcBoot) {
        let (lo, hi) = (boot.layout.wpr2_lo(), boot.layout.wpr2_hi());
        for (address, value) in [
            (NV_PFB_PRI_MMU_WPR2_ADDR_LO::ADDR, lo),
            (NV_HUBMMU_PRI_MMU_WPR2_ADDR_LO, lo),
            (NV_PFB_PRI_MMU_WPR2_ADDR_HI::ADDR, hi),
            (NV_HUBMMU_PRI_MMU_WPR2_ADDR_HI, hi),
        ] {
            self.registers.insert(address, value);
        }
        self.gsp.start(boot);
    }

    /// The card reads host memory (the FSP fetching a boot image, GSP
    /// reading its queues, a copy engine).
    pub fn dma_read(&self, address: u64, out: &mut [u8]) -> Result<(), DmaError> {
        if !self.config.bus_master() {
            return Err(DmaError::BusMasterOff);
        }
        Ok(self.host.dma_read(address, out)?)
    }

    /// The card writes host memory.
    pub fn dma_write(&mut self, address: u64, data: &[u8]) -> Result<(), DmaError> {
        if !self.config.bus_master() {
            return Err(DmaError::BusMasterOff);
        }
        Ok(self.host.dma_write(address, data)?)
    }

    /// Time passes: a finished boot releases the BAR firewall, and a
    /// running GSP takes what the host queued.
    fn settle(&mut self) {
        // A card off the bus does nothing at all.
        if self.faults.off_bus {
            return;
        }
        if self.booted() {
            self.config.set_firewall(false);
        }
        // The host ran GSP-RM's CPU-sequencer script: what it leaves says so.
        if let Some((reg, want)) = self.rm.awaiting_sequencer() {
            if self.registers.get(&reg) == Some(&want) {
                self.rm.sequencer_ran();
            }
        }
        let running = (self.gsp.stage() == GspStage::Running)
            .then(|| self.gsp.boot())
            .flatten();
        if running.is_some() {
            let mut dma = CardDma::new(&self.config, &mut self.host, &mut self.vram, &self.chip);
            self.rm.step(running, &mut dma);
        }
        // Blocked channels look at their semaphores again.
        if !self.channels.is_empty() {
            self.run_channels();
        }
    }

    /// Each register is read once, however many of its bytes are asked
    /// for: reads have side effects (the FSP's EMEM port advances).
    fn bar0_read(&mut self, offset: u64, out: &mut [u8]) {
        let mut i = 0;
        while i < out.len() {
            let at = offset + i as u64;
            let lane = (at % REGISTER_BYTES) as usize;
            let n = (REGISTER_BYTES as usize - lane).min(out.len() - i);
            let word = self.read_register(register_of(at)).to_le_bytes();
            out[i..i + n].copy_from_slice(&word[lane..lane + n]);
            i += n;
        }
    }

    fn bar0_write(&mut self, offset: u64, data: &[u8]) {
        let mut i = 0;
        while i < data.len() {
            let at = offset + i as u64;
            let reg = register_of(at);
            let lane = (at % REGISTER_BYTES) as usize;
            let n = (REGISTER_BYTES as usize - lane).min(data.len() - i);
            let mut word = if n == REGISTER_BYTES as usize {
                [0u8; 4]
            } else {
                self.registers.get(&reg).copied().unwrap_or(0).to_le_bytes()
            };
            word[lane..lane + n].copy_from_slice(&data[i..i + n]);
            self.write_register(reg, u32::from_le_bytes(word));
            i += n;
        }
    }

    /// BAR1 in physical mode: the aperture is video memory from address 0.
    fn bar1_check(&self, offset: u64, len: usize) -> Result<(), String> {
        let block = NV_PBUS_BAR1_BLOCK(
            self.registers
                .get(&NV_PBUS_BAR1_BLOCK::ADDR)
                .copied()
                .unwrap_or(0),
        );
        let bind = NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_LOW_ADDR(
            self.registers
                .get(&NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_LOW_ADDR::ADDR)
                .copied()
                .unwrap_or(0),
        );
        if block.mode() != 0 || bind.mode() != 0 {
            return Err("BAR1 through page tables (mode 1 in NV_PBUS_BAR1_BLOCK or \
                 FUNC_BAR1_BLOCK_LOW_ADDR) is not modelled yet"
                .into());
        }
        let size = self.bar_size(BAR1);
        if offset.checked_add(len as u64).is_none_or(|end| end > size) {
            return Err(format!(
                "BAR1 access at {offset:#x} (+{len}) is past its {size} bytes"
            ));
        }
        Ok(())
    }

    fn bar_size(&self, index: u32) -> u64 {
        self.chip
            .bars
            .get(index as usize)
            .copied()
            .flatten()
            .map_or(0, |b| b.size)
    }

    fn bar0_check(&self, offset: u64, len: usize) -> Result<(), String> {
        if len > MAX_BAR0_ACCESS_BYTES {
            return Err(format!(
                "a BAR0 access of {len} bytes at {offset:#x} is longer than the {MAX_BAR0_ACCESS_BYTES} one access may be"
            ));
        }
        let size = self.bar_size(BAR0);
        if offset.checked_add(len as u64).is_none_or(|end| end > size) {
            return Err(format!(
                "BAR0 access at {offset:#x} (+{len}) is past its {size} bytes"
            ));
        }
        Ok(())
    }

    fn posted_error(&mut self, what: String) {
        tracing::warn!("simulated card: a posted write was dropped: {what}");
        if self.posted_errors.len() < POSTED_ERRORS_KEPT {
            self.posted_errors.push(what);
        }
    }
}

/// The register a byte of BAR0 belongs to.
fn register_of(offset: u64) -> u32 {
    // CAST: BAR0 offsets were checked against its size (at most 64 MiB).
    (offset - offset % REGISTER_BYTES) as u32
}

/// Registers a driver reads before anything writes them, whose power-on
/// value of 0 is the modelled one.
fn is_register_held(address: u32) -> bool {
    matches!(
        address,
        NV_PFB_PRI_MMU_WPR2_ADDR_LO::ADDR
            | NV_PFB_PRI_MMU_WPR2_ADDR_HI::ADDR
            | NV_HUBMMU_PRI_MMU_WPR2_ADDR_LO
            | NV_HUBMMU_PRI_MMU_WPR2_ADDR_HI
            | NV_PBUS_BAR1_BLOCK::ADDR
            | NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_LOW_ADDR::ADDR
            | NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_HIGH_ADDR::ADDR
    )
}

impl Device for Card {
    fn observe(&mut self, _request: &macuda_pci::tinygpu::wire::Request) {
        self.settle();
    }

    fn tick(&mut self) {
        self.settle();
    }

    fn probe(&mut self) -> String {
        format!("sim-{}:0", self.chip.name)
    }

    fn bar(&mut self, index: u32) -> Result<(u64, u64), String> {
        match self.chip.bars.get(index as usize).copied().flatten() {
            Some(b) => Ok((b.address, b.size)),
            None => Err(format!(
                "the simulated {} has no BAR {index}",
                self.chip.name
            )),
        }
    }

    fn config_read(&mut self, offset: u64, width: u64) -> Result<u64, String> {
        if self.faults.off_bus {
            // Every bit set, in the width asked for.
            return Ok(u64::MAX >> (64 - 8 * width.clamp(1, 8)));
        }
        self.config.read(offset, width)
    }

    fn config_write(&mut self, offset: u64, width: u64, value: u64) -> Result<(), String> {
        if self.faults.off_bus {
            return Ok(());
        }
        self.config.write(offset, width, value)
    }

    fn reset(&mut self) -> Result<(), String> {
        self.config.reset();
        self.registers.clear();
        self.fsp = Fsp::new(self.chip.trust.clone());
        self.gsp = GspFalcon::default();
        self.rm = GspRm::new(&self.chip);
        if let Some(kind) = self.boot_sequencer {
            self.rm.send_boot_sequencer(kind);
        }
        self.tlb = Tlb::default();
        self.channels.clear();
        self.channel_faults.clear();
        self.faults.reset();
        self.booted_at = Instant::now();
        self.resets += 1;
        Ok(())
    }

    fn mmio_read(&mut self, bar: u32, offset: u64, out: &mut [u8]) -> Result<(), String> {
        if self.faults.off_bus {
            out.fill(0xFF);
            return Ok(());
        }
        match bar {
            BAR0 => {
                self.bar0_check(offset, out.len())?;
                self.bar0_read(offset, out);
                Ok(())
            }
            BAR1 => {
                self.bar1_check(offset, out.len())?;
                self.vram.read(offset, out).map_err(|e| e.to_string())
            }
            _ => Err(format!(
                "the simulated {} decodes no reads on BAR {bar}",
                self.chip.name
            )),
        }
    }

    fn mmio_write(&mut self, bar: u32, offset: u64, data: &[u8]) {
        if self.faults.off_bus {
            return;
        }
        let done = match bar {
            BAR0 => self
                .bar0_check(offset, data.len())
                .map(|()| self.bar0_write(offset, data)),
            BAR1 => self
                .bar1_check(offset, data.len())
                .and_then(|()| self.vram.write(offset, data).map_err(|e| e.to_string())),
            _ => Err(format!(
                "the simulated {} decodes no writes on BAR {bar}",
                self.chip.name
            )),
        };
        if let Err(e) = done {
            self.posted_error(e);
        }
    }

    fn map_sysmem_fd(&mut self, size: u64) -> Result<SharedMapping, String> {
        let (fd, size, index) = self.host.map_shared(size).map_err(|e| e.to_string())?;
        Ok(SharedMapping { fd, size, index })
    }

    fn map_sysmem(&mut self, size: u64, contiguous: bool) -> Result<(Vec<u64>, u64), String> {
        self.host
            .map_remote(size, contiguous)
            .map_err(|e| e.to_string())
    }

    fn sysmem_read(&mut self, handle: u32, offset: u64, out: &mut [u8]) -> Result<(), String> {
        self.host
            .read_remote(handle, offset, out)
            .map_err(|e| e.to_string())
    }

    fn sysmem_write(&mut self, handle: u32, offset: u64, data: &[u8]) {
        if let Err(e) = self.host.write_remote(handle, offset, data) {
            self.posted_error(e.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::engines::INVALIDATE_PDB_SHIFT;
    use super::*;
    use crate::mmu::{Access, MmuFault, PageDirectory, Target, Walked};
    use macuda_hw::regs::NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB;
    use std::time::Duration;

    #[test]
    fn the_mmu_walks_tables_in_video_memory_and_keeps_translations_until_invalidated() {
        let mut card = Card::new(quick());
        let root = PageDirectory {
            target: Target::Video,
            address: 0x1000,
        };
        // The worked example of reference/memory.md §1.9 (a); video memory
        // starts as junk, so PD0's big half is written 0 as drivers do.
        for (at, v) in [
            (0x203090, 0),
            (0x1000u64, 0x200012u64),
            (0x200018, 0x201012),
            (0x201028, 0x202012),
            (0x202038, 0x203012),
            (0x203098, 0x204012),
            (0x204088, 0x1_2345_6601),
        ] {
            card.vram_mut().write(at, &v.to_le_bytes()).unwrap();
        }
        let va = 0x1_8140_E121_1ABC;
        let Ok(Walked::Page(p)) = card.translate(root, va, Access::Read) else {
            panic!("not mapped");
        };
        assert_eq!(p.physical(va), 0x1_2345_6ABC);
        // Unmapped without an invalidate: still translated, and flagged.
        card.vram_mut()
            .write(0x204088, &0x600u64.to_le_bytes())
            .unwrap();
        assert!(card.translate(root, va, Access::Read).is_ok());
        assert_eq!(card.tlb().stale_uses().len(), 1);
        // An invalidate of another VA space leaves it; of this one (by its
        // PDB, TRIGGER set) drops it, and TRIGGER reads back clear.
        let pdb = |card: &mut Card, root: u64| {
            card.write_register(
                NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB::ADDR,
                ((root >> INVALIDATE_PDB_SHIFT) << 4) as u32,
            );
            card.write_register(NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE::ADDR, 1 << 31 | 1);
        };
        pdb(&mut card, 0x9000);
        assert!(card.translate(root, va, Access::Read).is_ok());
        pdb(&mut card, 0x1000);
        let inv = card.read_register(NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE::ADDR);
        assert_eq!(NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE(inv).trigger(), 0);
        let e = card.translate(root, va, Access::Read).unwrap_err();
        assert_eq!(e.fault_type(), 2, "PTE");
        assert_eq!(
            card.tlb().stale_uses().len(),
            2,
            "one more before the right invalidate"
        );
        // Host memory is read only while bus mastering is on.
        let sys_root = PageDirectory {
            target: Target::SystemCoherent,
            address: 0x100_0000_0000,
        };
        assert!(matches!(
            card.translate(sys_root, va, Access::Read),
            Err(MmuFault::Unreadable { .. })
        ));
    }

    fn quick() -> SimChip {
        SimChip {
            boot_time: Duration::from_millis(20),
            ..SimChip::gb202()
        }
    }

    #[test]
    fn identity_and_boot_status_read_as_the_chip_says() {
        let mut c = Card::new(quick());
        let mut w = [0u8; 4];
        c.mmio_read(0, u64::from(NV_PMC_BOOT_42::ADDR), &mut w)
            .unwrap();
        assert_eq!(u32::from_le_bytes(w), 0x1B2A_1000);
        c.mmio_read(
            0,
            u64::from(NV_PGC6_AON_SECURE_SCRATCH_GROUP_42::ADDR),
            &mut w,
        )
        .unwrap();
        assert_eq!(u32::from_le_bytes(w), 32 << 10);
        c.reset().unwrap();
        assert_eq!(c.read_register(c.chip.boot_status), 0, "still booting");
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(c.read_register(c.chip.boot_status), FSP_BOOT_COMPLETE);
    }

    #[test]
    fn dma_needs_bus_mastering() {
        let mut c = Card::new(quick());
        let (pages, _) = c.host_mut().map_remote(4096, false).unwrap();
        assert_eq!(c.dma_write(pages[0], b"x"), Err(DmaError::BusMasterOff));
        c.config_write(4, 2, 0x6).unwrap();
        c.dma_write(pages[0], b"x").unwrap();
        c.reset().unwrap();
        let mut b = [0u8; 1];
        assert_eq!(c.dma_read(pages[0], &mut b), Err(DmaError::BusMasterOff));
    }

    #[test]
    fn a_reset_drops_wpr2_and_sub_word_writes_keep_the_rest() {
        let mut c = Card::new(quick());
        c.mmio_write(
            0,
            u64::from(NV_PFB_PRI_MMU_WPR2_ADDR_HI::ADDR),
            &0x7F4_A000u32.to_le_bytes(),
        );
        c.mmio_write(0, u64::from(NV_PFB_PRI_MMU_WPR2_ADDR_HI::ADDR) + 1, &[0xEE]);
        assert_eq!(
            c.read_register(NV_PFB_PRI_MMU_WPR2_ADDR_HI::ADDR),
            0x7F4_EE00
        );
        c.reset().unwrap();
        assert_eq!(c.read_register(NV_PFB_PRI_MMU_WPR2_ADDR_HI::ADDR), 0);
        assert!(c.unmodelled_registers().is_empty());
        c.read_register(0x12_3450);
        assert!(c.unmodelled_registers().contains(&0x12_3450));
    }

    #[test]
    fn bar1_reaches_video_memory_and_refuses_what_it_does_not_model() {
        let mut c = Card::new(quick());
        c.mmio_write(1, 0x1000, b"vram");
        assert_eq!(
            &{
                let mut b = [0u8; 4];
                c.vram().read(0x1000, &mut b).unwrap();
                b
            },
            b"vram"
        );
        let mut b = [0u8; 4];
        assert!(c.mmio_read(1, 256 << 20, &mut b).is_err());
        c.write_register(NV_PBUS_BAR1_BLOCK::ADDR, 1 << 31);
        assert!(c
            .mmio_read(1, 0, &mut b)
            .unwrap_err()
            .contains("not modelled"));
        c.mmio_write(1, 0, b"lost");
        assert_eq!(c.posted_errors().len(), 1);
        assert!(c.mmio_read(2, 0, &mut b).is_err());
    }
}
