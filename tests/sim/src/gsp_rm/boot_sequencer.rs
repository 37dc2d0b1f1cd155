//! A CPU-sequencer script GSP-RM may send before GSP_INIT_DONE (it does
//! on the GA102/AD102 booter path; whether it does on the GB202 FMC path
//! is not known, so the sim sends one only when asked). GSP-RM then waits
//! for what the script leaves in the registers before it posts
//! GSP_INIT_DONE, as a real GSP-RM waits for the host's CPU to have run
//! it: a driver that ignores the event never sees its card come up.

use macuda_hw::gsp_rpc::cpu_sequencer::{self as seq, opcode};
use macuda_hw::le::put_u32;
use macuda_hw::regs::{NV_PGC6_BSI_SECURE_SCRATCH_14, NV_PMC_BOOT_42};

/// What the script writes, then modifies (`{addr, mask, val}`: the
/// masked bits cleared, `val` ORed in), and what that leaves.
const FIRST: u32 = 0x5EC0_00AB;
const MODIFY_MASK: u32 = 0x0000_FF00;
const MODIFY_VALUE: u32 = 0x0000_1200;
const LEFT: u32 = (FIRST & !MODIFY_MASK) | MODIFY_VALUE;
/// A poll's timeout (us) and the error code the script names for it.
const POLL_US: u32 = 100_000;
const POLL_ERROR: u32 = 0x5E01;
const DELAY_US: u32 = 10;
/// The buffer's capacity, in dwords.
const BUFFER_DWORDS: u32 = 64;

/// Which script GSP-RM sends before GSP_INIT_DONE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootScript {
    /// One a correct host runs to its end.
    Completes,
    /// One whose poll waits for a value BOOT_42 never reads: the host's
    /// executor must give up at the poll's timeout and say so, and
    /// GSP-RM never posts GSP_INIT_DONE.
    PollNeverCompletes,
}

/// The script's message and the register value that says it ran:
/// write and modify a scratch register, poll BOOT_42 for the chip's
/// identity (or, for [`BootScript::PollNeverCompletes`], for its
/// complement), delay, and store BOOT_42 in save slot 0.
pub fn script(boot_42: u32, kind: BootScript) -> (Vec<u8>, (u32, u32)) {
    let polled_for = match kind {
        BootScript::Completes => boot_42,
        BootScript::PollNeverCompletes => !boot_42,
    };
    let scratch = NV_PGC6_BSI_SECURE_SCRATCH_14::ADDR;
    let write = [
        opcode::REG_WRITE,
        scratch,
        FIRST,
        opcode::REG_MODIFY,
        scratch,
        MODIFY_MASK,
        MODIFY_VALUE,
    ];
    let poll = [
        opcode::REG_POLL,
        NV_PMC_BOOT_42::ADDR,
        u32::MAX,
        polled_for,
        POLL_US,
        POLL_ERROR,
    ];
    let rest = [
        opcode::DELAY_US,
        DELAY_US,
        opcode::REG_STORE,
        NV_PMC_BOOT_42::ADDR,
        0,
    ];
    // A script that cannot complete polls first, so the register that
    // says it ran is never written by a host that stops at the poll.
    let words: Vec<u32> = match kind {
        BootScript::Completes => [&write[..], &poll, &rest].concat(),
        BootScript::PollNeverCompletes => [&poll[..], &write, &rest].concat(),
    };
    let mut m = vec![0u8; seq::HEADER_BYTES];
    put_u32(&mut m, seq::BUFFER_SIZE_DWORD, BUFFER_DWORDS);
    // CAST: a handful of dwords.
    put_u32(&mut m, seq::CMD_INDEX, words.len() as u32);
    for w in words {
        m.extend(w.to_le_bytes());
    }
    (m, (scratch, LEFT))
}
