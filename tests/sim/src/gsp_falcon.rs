//! The GSP's falcon registers as the host sees them through a boot: fenced
//! (a PRI error) until the FSP starts the FMC, then locked down by the
//! RISC-V boot ROM for a moment, then running with mailbox 0 at 0. A
//! driver that polls only the lockdown bit passes the fenced state too
//! early (0xBADF4100 has that bit clear); the sim keeps the three apart so
//! that shows.

use crate::fmc::FmcBoot;
use macuda_hw::regs::{
    NV_PGSP_FALCON_HWCFG2, NV_PGSP_FALCON_MAILBOX0, NV_PGSP_FALCON_MAILBOX1, NV_PGSP_FALCON_OS,
    NV_PGSP_RISCV_CPUCTL, PRI_ERROR_FENCED,
};
use std::time::{Duration, Instant};

/// How long the target mask stays closed after the FSP's answer, and how
/// long the boot ROM then keeps the core locked down.
pub const FENCE_AFTER_COT: Duration = Duration::from_millis(5);
pub const LOCKDOWN: Duration = Duration::from_millis(5);
/// HWCFG2's bits: a RISC-V core, and the boot ROM's lockdown.
const HWCFG2_RISCV: u32 = 1 << 10;
const HWCFG2_LOCKDOWN: u32 = 1 << 13;
/// CPUCTL's active bit.
const CPUCTL_ACTIVE: u32 = 1 << 7;

/// Where the GSP is in its boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GspStage {
    Fenced,
    Locked,
    Running,
}

#[derive(Default)]
pub struct GspFalcon {
    /// The FMC's boot, and when the FSP answered.
    started: Option<(FmcBoot, Instant)>,
    mailbox: [u32; 2],
    os: u32,
}

impl GspFalcon {
    pub fn start(&mut self, boot: FmcBoot) {
        self.started = Some((boot, Instant::now()));
    }

    pub fn boot(&self) -> Option<FmcBoot> {
        self.started.map(|(b, _)| b)
    }

    pub fn stage(&self) -> GspStage {
        match self.started {
            None => GspStage::Fenced,
            Some((_, at)) => {
                let t = at.elapsed();
                if t < FENCE_AFTER_COT {
                    GspStage::Fenced
                } else if t < FENCE_AFTER_COT + LOCKDOWN {
                    GspStage::Locked
                } else {
                    GspStage::Running
                }
            }
        }
    }

    /// A GSP falcon register's value; `None` for any other address.
    pub fn read(&self, address: u32) -> Option<u32> {
        let stage = self.stage();
        if stage == GspStage::Fenced && is_gsp_register(address) {
            return Some(PRI_ERROR_FENCED);
        }
        Some(match address {
            NV_PGSP_FALCON_MAILBOX0::ADDR => self.mailbox[0],
            NV_PGSP_FALCON_MAILBOX1::ADDR => self.mailbox[1],
            NV_PGSP_FALCON_HWCFG2::ADDR => {
                HWCFG2_RISCV
                    | if stage == GspStage::Locked {
                        HWCFG2_LOCKDOWN
                    } else {
                        0
                    }
            }
            NV_PGSP_FALCON_OS::ADDR => self.os,
            NV_PGSP_RISCV_CPUCTL::ADDR => {
                if stage == GspStage::Running {
                    CPUCTL_ACTIVE
                } else {
                    0
                }
            }
            _ => return None,
        })
    }

    /// Write a GSP falcon register (`false`: not one of them). Writes to a
    /// fenced GSP are dropped, as the target mask drops them.
    pub fn write(&mut self, address: u32, value: u32) -> bool {
        if !is_gsp_register(address) {
            return false;
        }
        if self.stage() == GspStage::Fenced {
            return true;
        }
        match address {
            NV_PGSP_FALCON_MAILBOX0::ADDR => self.mailbox[0] = value,
            NV_PGSP_FALCON_MAILBOX1::ADDR => self.mailbox[1] = value,
            NV_PGSP_FALCON_OS::ADDR => self.os = value,
            _ => {}
        }
        true
    }
}

fn is_gsp_register(address: u32) -> bool {
    matches!(
        address,
        NV_PGSP_FALCON_MAILBOX0::ADDR
            | NV_PGSP_FALCON_MAILBOX1::ADDR
            | NV_PGSP_FALCON_HWCFG2::ADDR
            | NV_PGSP_FALCON_OS::ADDR
            | NV_PGSP_RISCV_CPUCTL::ADDR
    )
}
