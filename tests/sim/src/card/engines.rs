//! The card's engines as the rest of the card reaches them: its memory
//! port for the MMU and the engines, translation through the TLB and its
//! invalidate register, the doorbell and the channels it runs, and how a
//! stopped channel is reported through RM (the error notifier,
//! RC_TRIGGERED, the debugger's fault info).

use super::Card;
use crate::channel::{CardMemory, Channel, ChannelFault, Progress};
use crate::dma::DmaError;
use crate::gsp_rm::logs::LogLine;
use crate::host_memory::HostMemory;
use crate::mmu::{Access, MmuFault, PageDirectory, PhysicalMemory, Target, Tlb, Walked};
use crate::vram::Vram;
use macuda_hw::gsp_rpc::event;
use macuda_hw::regs::{
    NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE, NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB,
    NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_UPPER_PDB,
};

/// The invalidate PDB registers hold the root's address bits 39:12 (from
/// bit 4) and 59:40.
pub(super) const INVALIDATE_PDB_SHIFT: u32 = 12;
const INVALIDATE_UPPER_SHIFT: u32 = 40;
/// SMs a TPC pairs, on GH100 and GB20x alike.
const SMS_PER_TPC: u64 = 2;

/// Threads one TPC of an `sm` chip runs at once: what a QMD's local
/// memory per thread is multiplied by.
fn threads_per_tpc(sm: u32) -> u64 {
    let arch = macuda_hw::sm::arch_limits(sm);
    u64::from(macuda_hw::sm::WARP_SIZE) * u64::from(arch.max_warps_per_sm()) * SMS_PER_TPC
}

/// RC_TRIGGERED's payload for a channel stopped by `fault`: the engine,
/// the channel, the Xid, and for an MMU fault its address and type.
fn rc_triggered(chid: u32, fault: &ChannelFault) -> Vec<u8> {
    use macuda_hw::gsp_rpc::rc_triggered as rc;
    use macuda_hw::le::put_u32;
    let mut p = vec![0u8; rc::BYTES];
    let (xid, mmu) = fault.xid();
    put_u32(&mut p, rc::ENGINE_TYPE, macuda_hw::rm::ENGINE_TYPE_GR0);
    put_u32(&mut p, rc::CHID, chid);
    put_u32(&mut p, rc::EXCEPT_TYPE, xid);
    if let Some((va, kind)) = mmu {
        // CAST: the two halves of the address.
        put_u32(&mut p, rc::MMU_FAULT_ADDR_LO, va as u32);
        put_u32(&mut p, rc::MMU_FAULT_ADDR_HI, (va >> 32) as u32);
        put_u32(&mut p, rc::MMU_FAULT_TYPE, kind);
    }
    p
}

/// OS_ERROR_LOG's payload for a channel stopped by `fault`: the Xid, the
/// channel, and a line of text saying what happened (the sim's words; a
/// driver prints it as it prints GSP-RM's Xid lines).
fn os_error_log(chid: u32, fault: &ChannelFault) -> Vec<u8> {
    use macuda_hw::gsp_rpc::os_error_log as log;
    use macuda_hw::le::put_u32;
    let mut p = vec![0u8; log::BYTES];
    let (xid, _) = fault.xid();
    put_u32(&mut p, log::EXCEPT_TYPE, xid);
    put_u32(&mut p, log::CHID, chid);
    let text = format!("Xid {xid}, channel {chid}: {fault}");
    // NUL-terminated within the field.
    let n = text.len().min(log::ERR_STRING_BYTES - 1);
    p[log::ERR_STRING..log::ERR_STRING + n].copy_from_slice(&text.as_bytes()[..n]);
    p
}

/// The error notifier's slot for `fault` (`NvNotification`), in two
/// parts: the time stamp, then the Xid, engine type and status, which RM
/// writes last.
fn notification(clock_ns: u64, fault: &ChannelFault) -> (Vec<u8>, Vec<u8>) {
    use macuda_hw::rm::{Notification, NOTIFICATION_STATUS_ERROR};
    use std::mem::offset_of;
    let (xid, _) = fault.xid();
    let time = clock_ns.to_le_bytes().to_vec();
    let mut rest =
        vec![0u8; std::mem::size_of::<Notification>() - offset_of!(Notification, info32)];
    let at = |f: usize| f - offset_of!(Notification, info32);
    rest[at(offset_of!(Notification, info32))..][..4].copy_from_slice(&xid.to_le_bytes());
    // CAST: NV2080 engine types fit 16 bits.
    rest[at(offset_of!(Notification, info16))..][..2]
        .copy_from_slice(&(macuda_hw::rm::ENGINE_TYPE_GR0 as u16).to_le_bytes());
    rest[at(offset_of!(Notification, status))..][..2]
        .copy_from_slice(&NOTIFICATION_STATUS_ERROR.to_le_bytes());
    (time, rest)
}

/// The card's memory as its MMU and engines reach it: video memory, and
/// host memory by bus address while bus mastering is on.
struct CardPort<'a> {
    vram: &'a mut Vram,
    host: &'a mut HostMemory,
    bus_master: bool,
}

impl CardMemory for CardPort<'_> {
    fn write_physical(&mut self, target: Target, address: u64, data: &[u8]) -> Result<(), String> {
        match target {
            Target::Video => self.vram.write(address, data).map_err(|e| e.to_string()),
            Target::SystemCoherent | Target::SystemNonCoherent if self.bus_master => self
                .host
                .dma_write(address, data)
                .map_err(|e| e.to_string()),
            Target::SystemCoherent | Target::SystemNonCoherent => {
                Err(DmaError::BusMasterOff.to_string())
            }
            Target::Peer(id) => Err(format!("peer {id}: the card has no peers")),
        }
    }
}

impl PhysicalMemory for CardPort<'_> {
    fn read_physical(&self, target: Target, address: u64, out: &mut [u8]) -> Result<(), String> {
        match target {
            Target::Video => self.vram.read(address, out).map_err(|e| e.to_string()),
            Target::SystemCoherent | Target::SystemNonCoherent if self.bus_master => {
                self.host.dma_read(address, out).map_err(|e| e.to_string())
            }
            Target::SystemCoherent | Target::SystemNonCoherent => {
                Err(DmaError::BusMasterOff.to_string())
            }
            Target::Peer(id) => Err(format!("peer {id}: the card has no peers")),
        }
    }
}

impl Card {
    /// Translate `va` in the VA space rooted at `root` as the card's
    /// engines do: through the TLB, then its page tables.
    ///
    /// # Errors
    /// The fault the MMU reports.
    pub fn translate(
        &mut self,
        root: PageDirectory,
        va: u64,
        access: Access,
    ) -> Result<Walked, MmuFault> {
        let mem = CardPort {
            vram: &mut self.vram,
            host: &mut self.host,
            bus_master: self.config.bus_master(),
        };
        self.tlb.translate(&mem, root, va, access)
    }

    /// A channel the doorbell rang, as the engines left it.
    pub fn channel(&self, chid: u32) -> Option<&Channel> {
        self.channels.get(&chid)
    }

    /// The fault that stopped a channel, if one did.
    pub fn channel_fault(&self, chid: u32) -> Option<&ChannelFault> {
        self.channel_faults.get(&chid)
    }

    /// The doorbell: the channel whose token was written fetches its
    /// GPFIFO (the sim's token is the channel id). A token RM never handed
    /// out is ignored, as the card ignores one.
    pub(super) fn ring_doorbell(&mut self, token: u32) {
        if self.faults.drops_doorbell() {
            return;
        }
        let Some(p) = self.rm.calls().channel_params.get(&token).copied() else {
            return;
        };
        // The id names a fresh channel since this one ran: it starts anew.
        if self
            .channels
            .get(&token)
            .is_some_and(|ch| ch.rm_serial != p.serial)
        {
            self.channels.remove(&token);
            self.channel_faults.remove(&token);
        }
        if !self.channels.contains_key(&token) {
            let root = self.rm.calls().root_of(p.client, p.va_space);
            let (Some(userd), Some(root)) = (p.userd, root) else {
                self.channel_faults.insert(
                    token,
                    ChannelFault::Userd {
                        address: 0,
                        why: "the channel has no USERD in its allocation, or its VA space no page directory".into(),
                    },
                );
                return;
            };
            let mut ch = Channel::new(p.ring, p.entries, userd, root);
            ch.threads_per_tpc = threads_per_tpc(self.chip.sm);
            ch.models = macuda_hw::cbank0::for_sm(self.chip.sm)
                .map(|area| (self.kernel_models.clone(), area));
            ch.rm_serial = p.serial;
            // A fresh channel has stopped for nothing yet.
            self.channel_faults.remove(&token);
            self.channels.insert(token, ch);
        }
        if let Some(ch) = self.channels.get_mut(&token) {
            ch.ring();
        }
        self.run_channels();
    }

    /// Run every channel that is not stopped until it blocks or runs dry.
    pub(super) fn run_channels(&mut self) {
        if self.faults.hung {
            return;
        }
        let clock = u64::try_from(self.booted_at.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut port = CardPort {
            vram: &mut self.vram,
            host: &mut self.host,
            bus_master: self.config.bus_master(),
        };
        // A channel RM freed runs no more, and what stopped it goes with it.
        let live = &self.rm.calls().channel_params;
        self.channels.retain(|chid, _| live.contains_key(chid));
        self.channel_faults
            .retain(|chid, _| live.contains_key(chid));
        for (chid, ch) in &mut self.channels {
            if self.channel_faults.contains_key(chid) {
                continue;
            }
            match ch.run(&mut port, &mut self.tlb, clock) {
                Ok(Progress::Idle | Progress::Blocked) => {}
                Err(e) => {
                    // RM tells the driver, as GSP-RM does: the channel's
                    // error notifier, then RC_TRIGGERED.
                    let notifier = self
                        .rm
                        .calls()
                        .channel_params
                        .get(chid)
                        .and_then(|p| p.error_notifier);
                    if let Some((target, at)) = notifier {
                        let (time, rest) = notification(clock, &e);
                        // The status word last, as RM writes it.
                        let written = port.write_physical(target, at, &time).and_then(|()| {
                            port.write_physical(target, at + time.len() as u64, &rest)
                        });
                        if let Err(why) = written {
                            tracing::warn!(
                                "the sim could not write channel {chid}'s error notifier: {why}"
                            );
                        }
                    }
                    if let (ChannelFault::Mmu { fault, access, .. }, Some(client)) = (
                        &e,
                        self.rm.calls().channel_params.get(chid).map(|p| p.client),
                    ) {
                        let entry = macuda_hw::rm::MmuFaultEntry {
                            fault_address: fault.va(),
                            fault_type: fault.fault_type(),
                            access_type: access.nv_access_type(),
                        };
                        self.rm.record_mmu_fault(client, entry);
                    }
                    self.rm
                        .post_event(event::RC_TRIGGERED, rc_triggered(*chid, &e));
                    self.rm
                        .post_event(event::OS_ERROR_LOG, os_error_log(*chid, &e));
                    self.rm.note(
                        LogLine::ChannelStopped,
                        vec![u64::from(*chid), u64::from(e.xid().0)],
                    );
                    self.channel_faults.insert(*chid, e);
                }
            }
        }
    }

    /// The MMU's TLB: what it keeps, and the stale translations it used.
    pub fn tlb(&self) -> &Tlb {
        &self.tlb
    }

    /// An MMU invalidate: every VA space, or the one the PDB registers
    /// name; it completes at once (TRIGGER reads back 0).
    pub(super) fn invalidate(&mut self, value: u32) {
        let inv = NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE(value);
        if inv.trigger() == 0 {
            return;
        }
        if inv.all_pdb() == 1 {
            self.tlb.invalidate_all();
        } else {
            let reg = |a: u32| self.registers.get(&a).copied().unwrap_or(0);
            let pdb = NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB(reg(
                NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB::ADDR,
            ));
            let upper = NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_UPPER_PDB(reg(
                NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_UPPER_PDB::ADDR,
            ));
            let address = (u64::from(upper.addr()) << INVALIDATE_UPPER_SHIFT)
                | (u64::from(pdb.addr()) << INVALIDATE_PDB_SHIFT);
            let target = if pdb.aperture() == 0 {
                Target::Video
            } else {
                Target::SystemCoherent
            };
            self.tlb.invalidate(PageDirectory { target, address });
            // The sim keeps host-memory roots as coherent; a driver that
            // names one non-coherent means the same tables.
            self.tlb.invalidate(PageDirectory {
                target: Target::SystemNonCoherent,
                address,
            });
        }
    }
}
