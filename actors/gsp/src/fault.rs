//! What RM reports after a channel error, in the order the seed notes ask
//! for it: the error notifier names the Xid; the debugger object then says
//! whether it was an MMU fault at all (and where), or, when it was not,
//! which SMs recorded an error: an illegal instruction rather than an
//! unmapped address. Two different bugs, reported apart.

use macuda_hw::rm::{self, MmuFaultEntry, SmErrorState};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One SM's recorded error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmError {
    pub sm: u32,
    pub global_esr: u32,
    pub warp_esr: u32,
    /// The PC of the faulting warp.
    pub warp_pc: u64,
    /// The address the error register recorded, where it has one.
    pub esr_address: u64,
}

impl SmError {
    pub fn from_registers(sm: u32, r: &SmErrorState) -> SmError {
        SmError {
            sm,
            global_esr: r.hww_global_esr,
            warp_esr: r.hww_warp_esr,
            warp_pc: if r.hww_warp_esr_pc64 != 0 {
                r.hww_warp_esr_pc64
            } else {
                u64::from(r.hww_warp_esr_pc)
            },
            esr_address: r.hww_esr_addr,
        }
    }
}

/// One faulting access the MMU recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MmuFault {
    pub address: u64,
    pub fault_type: u32,
    pub access_type: u32,
}

impl MmuFault {
    pub fn from_entry(e: &MmuFaultEntry) -> MmuFault {
        MmuFault {
            address: e.fault_address,
            fault_type: e.fault_type,
            access_type: e.access_type,
        }
    }
}

impl fmt::Display for MmuFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} fault on a {} at {:#x}",
            rm::fault_type_name(self.fault_type),
            rm::access_type_name(self.access_type),
            self.address
        )
    }
}

/// What the debugger object says after a fault.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultState {
    /// (SM index, its error registers) for each SM that recorded one.
    pub sm_errors: Vec<(u32, rm::SmErrorState)>,
    /// RM saw an MMU fault on the channel.
    pub mmu_fault: bool,
    pub mmu_fault_info: u32,
    pub mmu_faults: Vec<rm::MmuFaultEntry>,
}

/// A channel error as RM reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelFault {
    /// The robust-channel error number (the Xid in the kernel log).
    pub xid: u32,
    pub xid_name: String,
    /// NV2080 engine type (1 = GR; copy engines from 9).
    pub engine: u16,
    /// How the debugger object answered ("read", or why it could not);
    /// `None` when there is none.
    pub debugger: Option<String>,
    pub sm_errors: Vec<SmError>,
    /// RM saw an MMU fault on the channel.
    pub mmu_fault: bool,
    pub mmu_faults: Vec<MmuFault>,
}

impl ChannelFault {
    /// The report from what RM said, the same on every path: the Xid and
    /// engine it notified (if it did), and what the debugger read, or why
    /// it could not (`None`: no debugger). Without a notified error only a
    /// fault the debugger saw counts; with neither there is no fault.
    pub fn from_reports(
        notified: Option<(u32, u16)>,
        debugger: Option<Result<FaultState, String>>,
    ) -> Option<ChannelFault> {
        let (xid, engine) = notified.unwrap_or((0, 0));
        let mut fault = ChannelFault {
            xid,
            xid_name: if notified.is_some() {
                rm::xid_name(xid).to_string()
            } else {
                "none in the error notifier".to_string()
            },
            engine,
            debugger: None,
            sm_errors: Vec::new(),
            mmu_fault: false,
            mmu_faults: Vec::new(),
        };
        match debugger {
            Some(Ok(state)) => {
                fault.debugger = Some("read".to_string());
                fault.sm_errors = state
                    .sm_errors
                    .iter()
                    .map(|(sm, e)| SmError::from_registers(*sm, e))
                    .collect();
                fault.mmu_fault = state.mmu_fault;
                fault.mmu_faults = state.mmu_faults.iter().map(MmuFault::from_entry).collect();
            }
            Some(Err(why)) => fault.debugger = Some(format!("refused: {why}")),
            None => {}
        }
        if notified.is_none() && !fault.mmu_fault && fault.sm_errors.is_empty() {
            return None;
        }
        Some(fault)
    }
}

impl fmt::Display for ChannelFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Xid {} ({}) on engine type {}",
            self.xid, self.xid_name, self.engine
        )?;
        match &self.debugger {
            None => write!(f, "; no debugger object to ask"),
            Some(d) if d != "read" => write!(f, "; the debugger {d}"),
            Some(_) if self.mmu_fault => {
                write!(f, "; MMU fault")?;
                for m in &self.mmu_faults {
                    write!(f, ": {m}")?;
                }
                Ok(())
            }
            Some(_) if !self.sm_errors.is_empty() => {
                write!(
                    f,
                    "; no MMU fault; {} SM(s) recorded an error",
                    self.sm_errors.len()
                )?;
                if let Some(e) = self.sm_errors.first() {
                    write!(
                        f,
                        " (SM {}: global ESR {:#x}, warp ESR {:#x}, PC {:#x})",
                        e.sm, e.global_esr, e.warp_esr, e.warp_pc
                    )?;
                }
                Ok(())
            }
            Some(_) => write!(f, "; no MMU fault and no SM error recorded"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault() -> ChannelFault {
        ChannelFault {
            xid: rm::XID_MMU_FAULT,
            xid_name: rm::xid_name(rm::XID_MMU_FAULT).into(),
            engine: 1,
            debugger: Some("read".into()),
            sm_errors: Vec::new(),
            mmu_fault: true,
            mmu_faults: vec![MmuFault {
                address: 0xDEAD_0000,
                fault_type: 2,
                access_type: 0,
            }],
        }
    }

    #[test]
    fn the_sentence_names_what_kind_of_fault_it_was() {
        let f = fault();
        assert_eq!(
            f.to_string(),
            "Xid 31 (ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT) on engine type 1; MMU fault: PTE fault on a READ at 0xdead0000"
        );
        let mut sm = fault();
        sm.xid = 13;
        sm.mmu_fault = false;
        sm.mmu_faults.clear();
        sm.sm_errors.push(SmError::from_registers(
            3,
            &SmErrorState {
                hww_global_esr: 0x10,
                hww_warp_esr: 0x2,
                hww_warp_esr_pc64: 0x1234,
                ..SmErrorState::default()
            },
        ));
        assert!(sm.to_string().contains("no MMU fault; 1 SM(s) recorded an error (SM 3: global ESR 0x10, warp ESR 0x2, PC 0x1234)"), "{sm}");
        let mut none = fault();
        none.debugger = None;
        assert!(none.to_string().ends_with("no debugger object to ask"));
    }
}
