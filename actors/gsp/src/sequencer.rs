//! The CPU sequencer: a script GSP-RM sends (GSP_RUN_CPU_SEQUENCER) for
//! the host's CPU to run on the card's registers, as RM's
//! `kgspExecuteSequencerBuffer` runs it (reference/gsp.md 6.3): register
//! writes, read-modify-writes (`{addr, mask, val}`), polls with a timeout,
//! delays and register stores into the script's save area. The core
//! operations belong to the SEC2 boot path, which GB202 does not take;
//! a script that asks for one is refused by name. GSP-RM gets no reply.

use macuda_hw::gsp_rpc::cpu_sequencer::{self as seq, opcode};
use macuda_hw::le::u32_at;
use std::time::{Duration, Instant};

/// What a script runs on: BAR0's registers.
pub trait RegisterBus {
    /// # Errors
    /// The transport's, as text.
    fn read(&mut self, addr: u32) -> Result<u32, String>;
    /// # Errors
    /// The transport's, as text.
    fn write(&mut self, addr: u32, value: u32) -> Result<(), String>;
}

impl<T: macuda_pci::Transport + ?Sized> RegisterBus for T {
    fn read(&mut self, addr: u32) -> Result<u32, String> {
        self.mmio_read32(u64::from(addr)).map_err(|e| e.to_string())
    }

    fn write(&mut self, addr: u32, value: u32) -> Result<(), String> {
        self.mmio_write32(u64::from(addr), value)
            .map_err(|e| e.to_string())
    }
}

/// Why a script did not run to its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SequencerError {
    #[error(
        "a CPU-sequencer message of {len} bytes is shorter than its {} header",
        seq::HEADER_BYTES
    )]
    Short { len: usize },
    #[error("the script uses {cmd_index} dwords of a {buffer}-dword buffer, or more than the message holds ({held})")]
    BadLength {
        cmd_index: usize,
        buffer: usize,
        held: usize,
    },
    #[error("opcode {opcode} at dword {at} is none RM defines")]
    UnknownOpcode { at: usize, opcode: u32 },
    #[error("opcode {opcode} at dword {at} has its operands past the script's end")]
    Truncated { at: usize, opcode: u32 },
    #[error(
        "REG_STORE into save slot {index}: there are {}",
        seq::REG_SAVE_ENTRIES
    )]
    SaveSlot { index: u32 },
    #[error("REG_POLL of {addr:#x} for (value & {mask:#x}) == {value:#x} ran out after {after_us} us (it read {last:#x}); the script's error code is {error:#x}")]
    PollTimeout {
        addr: u32,
        mask: u32,
        value: u32,
        last: u32,
        after_us: u64,
        error: u32,
    },
    #[error("a {what} of {us} us is longer than the {} s a script may make the driver wait", LONGEST_WAIT.as_secs())]
    TooLong { what: &'static str, us: u32 },
    #[error("a {what} of {us} us at dword {at} is more than the {left_us} us left of the script's {budget_us} us of waiting")]
    OverBudget {
        what: &'static str,
        us: u32,
        at: usize,
        left_us: u64,
        budget_us: u64,
    },
    #[error(
        "core operation {opcode} belongs to the SEC2 boot path, which this card does not take"
    )]
    CoreOperation { opcode: u32 },
    #[error("register {addr:#x}: {why}")]
    Register { addr: u32, why: String },
}

/// What a finished script left: its save area, and how many commands ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ran {
    pub saved: [u32; seq::REG_SAVE_ENTRIES],
    pub commands: usize,
}

/// A REG_POLL with a timeout of 0 waits this long (RM's default GPU
/// timeout is seconds; nouveau takes 4 s).
pub const DEFAULT_POLL: Duration = Duration::from_secs(4);
/// The longest a poll or a delay may ask for: the fields hold up to 71
/// minutes, and a script that asks for that would hang the driver.
pub const LONGEST_WAIT: Duration = Duration::from_secs(10);

/// Run the script in `message` (the RPC's payload) on `bus`, all its
/// waits together within [`LONGEST_WAIT`].
///
/// # Errors
/// A malformed script, a poll that ran out, a core operation, or the bus.
pub fn run(bus: &mut dyn RegisterBus, message: &[u8]) -> Result<Ran, SequencerError> {
    run_within(bus, message, LONGEST_WAIT)
}

/// [`run`], with the script's waits (delays and polls) together bounded
/// by `budget`: each wait is bounded, but a script of many of them would
/// otherwise hold the driver for their sum. A delay longer than what is
/// left is refused before it starts; a poll waits at most what is left.
///
/// # Errors
/// As [`run`], and [`SequencerError::OverBudget`].
pub fn run_within(
    bus: &mut dyn RegisterBus,
    message: &[u8],
    budget: Duration,
) -> Result<Ran, SequencerError> {
    let started = Instant::now();
    let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    if message.len() < seq::HEADER_BYTES {
        return Err(SequencerError::Short { len: message.len() });
    }
    let buffer = u32_at(message, seq::BUFFER_SIZE_DWORD) as usize;
    let cmd_index = u32_at(message, seq::CMD_INDEX) as usize;
    let held = (message.len() - seq::HEADER_BYTES) / 4;
    if buffer == 0 || cmd_index >= buffer || cmd_index > held {
        return Err(SequencerError::BadLength {
            cmd_index,
            buffer,
            held,
        });
    }
    let word = |i: usize| u32_at(message, seq::COMMAND_BUFFER + 4 * i);
    let mut saved = [0u32; seq::REG_SAVE_ENTRIES];
    for (i, slot) in saved.iter_mut().enumerate() {
        *slot = u32_at(message, seq::REG_SAVE_AREA + 4 * i);
    }
    let reg = |bus: &mut dyn RegisterBus, addr: u32| {
        bus.read(addr)
            .map_err(|why| SequencerError::Register { addr, why })
    };
    let mut at = 0;
    let mut commands = 0;
    while at < cmd_index {
        let op = word(at);
        let n = seq::operands(op).ok_or(SequencerError::UnknownOpcode { at, opcode: op })?;
        if at + 1 + n > cmd_index {
            return Err(SequencerError::Truncated { at, opcode: op });
        }
        let arg = |k: usize| word(at + 1 + k);
        match op {
            opcode::REG_WRITE => {
                let addr = arg(0);
                bus.write(addr, arg(1))
                    .map_err(|why| SequencerError::Register { addr, why })?;
            }
            opcode::REG_MODIFY => {
                let (addr, mask, value) = (arg(0), arg(1), arg(2));
                let old = reg(bus, addr)?;
                bus.write(addr, (old & !mask) | value)
                    .map_err(|why| SequencerError::Register { addr, why })?;
            }
            opcode::REG_POLL => {
                let (addr, mask, value, timeout_us, error) =
                    (arg(0), arg(1), arg(2), arg(3), arg(4));
                let patience = if timeout_us == 0 {
                    DEFAULT_POLL
                } else {
                    Duration::from_micros(u64::from(timeout_us))
                };
                if patience > LONGEST_WAIT {
                    return Err(SequencerError::TooLong {
                        what: "REG_POLL timeout",
                        us: timeout_us,
                    });
                }
                let patience = patience.min(budget.saturating_sub(started.elapsed()));
                let start = Instant::now();
                loop {
                    let last = reg(bus, addr)?;
                    if last & mask == value {
                        break;
                    }
                    if start.elapsed() >= patience {
                        return Err(SequencerError::PollTimeout {
                            addr,
                            mask,
                            value,
                            last,
                            after_us: u64::try_from(patience.as_micros()).unwrap_or(u64::MAX),
                            error,
                        });
                    }
                    std::thread::sleep(Duration::from_micros(10));
                }
            }
            opcode::DELAY_US => {
                let delay = Duration::from_micros(u64::from(arg(0)));
                if delay > LONGEST_WAIT {
                    return Err(SequencerError::TooLong {
                        what: "DELAY_US",
                        us: arg(0),
                    });
                }
                let left = budget.saturating_sub(started.elapsed());
                if delay > left {
                    return Err(SequencerError::OverBudget {
                        what: "DELAY_US",
                        us: arg(0),
                        at,
                        left_us: micros(left),
                        budget_us: micros(budget),
                    });
                }
                std::thread::sleep(delay);
            }
            opcode::REG_STORE => {
                let (addr, index) = (arg(0), arg(1));
                let slot = saved
                    .get_mut(index as usize)
                    .ok_or(SequencerError::SaveSlot { index })?;
                *slot = reg(bus, addr)?;
            }
            _ => return Err(SequencerError::CoreOperation { opcode: op }),
        }
        at += 1 + n;
        commands += 1;
    }
    Ok(Ran { saved, commands })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[derive(Default)]
    struct Regs(HashMap<u32, u32>);

    impl RegisterBus for Regs {
        fn read(&mut self, addr: u32) -> Result<u32, String> {
            Ok(self.0.get(&addr).copied().unwrap_or(0))
        }
        fn write(&mut self, addr: u32, value: u32) -> Result<(), String> {
            self.0.insert(addr, value);
            Ok(())
        }
    }

    fn message(commands: &[u32], buffer: u32) -> Vec<u8> {
        let mut m = vec![0u8; seq::HEADER_BYTES];
        m[..4].copy_from_slice(&buffer.to_le_bytes());
        m[4..8].copy_from_slice(&(commands.len() as u32).to_le_bytes());
        for w in commands {
            m.extend(w.to_le_bytes());
        }
        m
    }

    #[test]
    fn a_script_writes_modifies_polls_delays_and_stores_as_rm_runs_it() {
        let mut regs = Regs::default();
        regs.0.insert(0xA00, 0x1B2A_1000);
        #[rustfmt::skip]
        let script = [
            opcode::REG_WRITE, 0x1180F8, 0x5EC0_00AB,
            // {addr, mask, val}: the masked bits cleared, then val ORed in.
            opcode::REG_MODIFY, 0x1180F8, 0x0000_FF00, 0x0000_1200,
            opcode::REG_POLL, 0xA00, 0xFFFF_0000, 0x1B2A_0000, 1000, 0xE1,
            opcode::DELAY_US, 5,
            opcode::REG_STORE, 0xA00, 3,
        ];
        let ran = run(&mut regs, &message(&script, 64)).unwrap();
        assert_eq!(regs.0[&0x1180F8], 0x5EC0_12AB);
        assert_eq!(ran.saved[3], 0x1B2A_1000);
        assert_eq!(ran.commands, 5);
    }

    #[test]
    fn bad_scripts_are_refused_by_what_is_wrong() {
        let mut regs = Regs::default();
        assert_eq!(
            run(&mut regs, &[0; 10]),
            Err(SequencerError::Short { len: 10 })
        );
        let full = message(&[opcode::DELAY_US, 1], 2);
        assert!(
            matches!(run(&mut regs, &full), Err(SequencerError::BadLength { .. })),
            "cmdIndex must be below the buffer"
        );
        assert_eq!(
            run(&mut regs, &message(&[42], 8)),
            Err(SequencerError::UnknownOpcode { at: 0, opcode: 42 })
        );
        assert_eq!(
            run(&mut regs, &message(&[opcode::REG_WRITE, 0x10], 8)),
            Err(SequencerError::Truncated {
                at: 0,
                opcode: opcode::REG_WRITE
            })
        );
        assert_eq!(
            run(&mut regs, &message(&[opcode::REG_STORE, 0x10, 8], 8)),
            Err(SequencerError::SaveSlot { index: 8 })
        );
        assert_eq!(
            run(&mut regs, &message(&[opcode::CORE_RESUME], 8)),
            Err(SequencerError::CoreOperation {
                opcode: opcode::CORE_RESUME
            })
        );
        assert_eq!(
            run(&mut regs, &message(&[opcode::DELAY_US, u32::MAX], 8)),
            Err(SequencerError::TooLong {
                what: "DELAY_US",
                us: u32::MAX
            })
        );
        assert!(matches!(
            run(
                &mut regs,
                &message(&[opcode::REG_POLL, 0x20, 1, 1, u32::MAX, 0], 8)
            ),
            Err(SequencerError::TooLong { .. })
        ));
        let e = run(
            &mut regs,
            &message(&[opcode::REG_POLL, 0x20, 1, 1, 200, 0xE2], 8),
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                SequencerError::PollTimeout {
                    error: 0xE2,
                    last: 0,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_scripts_waits_together_stay_within_its_budget() {
        // Each delay is allowed, their sum is not: before the budget, a
        // script of such delays held the driver for as long as it liked.
        const STEP_US: u32 = 20_000;
        let budget = Duration::from_millis(50);
        let mut regs = Regs::default();
        let script: Vec<u32> = [opcode::DELAY_US, STEP_US].repeat(100);
        let start = Instant::now();
        let e = run_within(&mut regs, &message(&script, 256), budget).unwrap_err();
        assert!(
            matches!(
                e,
                SequencerError::OverBudget {
                    what: "DELAY_US",
                    at: 4,
                    ..
                }
            ),
            "{e}"
        );
        assert!(start.elapsed() < budget, "{:?}", start.elapsed());
        // A poll that never succeeds ends with the budget, not its own
        // (longer) timeout.
        let poll = [opcode::REG_POLL, 0x20, 1, 1, 2_000_000, 0xE3];
        let start = Instant::now();
        let e = run_within(&mut regs, &message(&poll, 8), budget).unwrap_err();
        assert!(
            matches!(e, SequencerError::PollTimeout { error: 0xE3, .. }),
            "{e}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
    }
}
