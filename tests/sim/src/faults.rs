//! Faults injected into the simulated card, each as a real card shows it
//! to its driver: a doorbell the card never saw, a GSP-RM reply whose
//! checksum does not fold, engines that stop, an address the MMU faults
//! on, a card that fell off the bus (every read all ones, nothing written).
//! A test injects them through [`crate::Card::inject`], the command line
//! through `macuda sim serve --fault`.

use std::str::FromStr;

/// One injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceFault {
    /// The `nth` doorbell write from now (1 is the next) is lost.
    DropDoorbell { nth: u32 },
    /// GSP-RM's `nth` message from now goes out with a bad checksum.
    CorruptReply { nth: u32 },
    /// The engines stop: no channel moves again until a reset.
    HangEngines,
    /// Every engine access to the 4 KiB page holding `va` faults in the
    /// MMU (a PTE fault), whatever the page tables say, until a reset.
    FaultAddress { va: u64 },
    /// The card is gone from the bus: reads return all ones, writes and
    /// DMA go nowhere, and a reset does not bring it back.
    OffTheBus,
}

/// Why a fault's description did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is no fault: drop-doorbell:N, corrupt-reply:N, hang-engines, fault-address:VA or off-the-bus")]
pub struct BadFault(pub String);

impl FromStr for DeviceFault {
    type Err = BadFault;

    fn from_str(s: &str) -> Result<DeviceFault, BadFault> {
        let bad = || BadFault(s.to_string());
        let (kind, arg) = match s.trim().split_once(':') {
            Some((k, a)) => (k, Some(a.trim())),
            None => (s.trim(), None),
        };
        let nth = || -> Result<u32, BadFault> {
            arg.ok_or_else(bad)?
                .parse::<u32>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(bad)
        };
        Ok(match kind {
            "drop-doorbell" => DeviceFault::DropDoorbell { nth: nth()? },
            "corrupt-reply" => DeviceFault::CorruptReply { nth: nth()? },
            "hang-engines" if arg.is_none() => DeviceFault::HangEngines,
            "off-the-bus" if arg.is_none() => DeviceFault::OffTheBus,
            "fault-address" => {
                let a = arg.ok_or_else(bad)?;
                let va = match a.strip_prefix("0x") {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => a.parse::<u64>(),
                }
                .map_err(|_| bad())?;
                DeviceFault::FaultAddress { va }
            }
            _ => return Err(bad()),
        })
    }
}

/// What is armed on a card.
#[derive(Debug, Default, Clone)]
pub struct FaultPlan {
    doorbell: Option<u32>,
    pub hung: bool,
    pub off_bus: bool,
    /// What was injected, in order, and what of it has struck.
    pub injected: Vec<DeviceFault>,
    pub struck: Vec<DeviceFault>,
}

impl FaultPlan {
    pub fn arm(&mut self, f: DeviceFault) {
        match f {
            DeviceFault::DropDoorbell { nth } => self.doorbell = Some(nth),
            // GSP-RM counts its own messages (`GspRm::corrupt_message`).
            DeviceFault::CorruptReply { .. } => {}
            DeviceFault::HangEngines => self.hung = true,
            DeviceFault::OffTheBus => self.off_bus = true,
            // The MMU keeps those (`Tlb::poison`).
            DeviceFault::FaultAddress { .. } => {}
        }
        self.injected.push(f);
    }

    /// Counts down to the `nth` event: true at it, once.
    pub fn count(slot: &mut Option<u32>) -> bool {
        match slot {
            Some(1) => {
                *slot = None;
                true
            }
            Some(n) => {
                *n -= 1;
                false
            }
            None => false,
        }
    }

    /// Whether this doorbell write is the one to lose.
    pub fn drops_doorbell(&mut self) -> bool {
        let hit = Self::count(&mut self.doorbell);
        if hit {
            self.struck.push(DeviceFault::DropDoorbell { nth: 1 });
        }
        hit
    }

    /// A reset: what a function-level reset clears (not a card off the bus,
    /// which no reset brings back).
    pub fn reset(&mut self) {
        let off_bus = self.off_bus;
        *self = FaultPlan {
            off_bus,
            ..FaultPlan::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_and_a_bad_one_says_what_would_do() {
        assert_eq!(
            "drop-doorbell:2".parse(),
            Ok(DeviceFault::DropDoorbell { nth: 2 })
        );
        assert_eq!(
            "corrupt-reply:1".parse(),
            Ok(DeviceFault::CorruptReply { nth: 1 })
        );
        assert_eq!("hang-engines".parse(), Ok(DeviceFault::HangEngines));
        assert_eq!("off-the-bus".parse(), Ok(DeviceFault::OffTheBus));
        assert_eq!(
            "fault-address:0x2000_0000".replace('_', "").parse(),
            Ok(DeviceFault::FaultAddress { va: 0x2000_0000 })
        );
        for bad in [
            "drop-doorbell",
            "drop-doorbell:0",
            "hang-engines:3",
            "melt",
            "fault-address:zz",
        ] {
            let e = bad.parse::<DeviceFault>().unwrap_err();
            assert!(e.to_string().contains("off-the-bus"), "{e}");
        }
    }

    #[test]
    fn counted_faults_strike_once_at_their_turn_and_a_reset_keeps_only_the_bus() {
        let mut p = FaultPlan::default();
        p.arm(DeviceFault::DropDoorbell { nth: 2 });
        assert!(!p.drops_doorbell());
        assert!(p.drops_doorbell());
        assert!(!p.drops_doorbell(), "once");
        p.arm(DeviceFault::OffTheBus);
        p.arm(DeviceFault::HangEngines);
        p.reset();
        assert!(p.off_bus && !p.hung);
    }
}
