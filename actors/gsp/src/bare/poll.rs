//! Bounded register polls: every wait of the boot names what it waited
//! for, reads at a steady pace, and ends in a typed timeout carrying the
//! last value read, so a card that never answers cannot hang the stack.

use super::CardBus;
use macuda_pci::PciError;
use std::time::{Duration, Instant};

/// How often a poll reads: often enough that a wait ends within a
/// millisecond of the card, rarely enough not to flood a socket transport.
pub const POLL_INTERVAL: Duration = Duration::from_micros(500);

/// Why a poll ended without its condition.
#[derive(Debug, thiserror::Error)]
pub enum PollError {
    #[error("{what}: register {reg:#x} still read {last:#x} after {waited:?}")]
    Timeout {
        what: &'static str,
        reg: u32,
        last: u32,
        waited: Duration,
    },
    #[error("{what}: reading register {reg:#x}: {source}")]
    Bus {
        what: &'static str,
        reg: u32,
        #[source]
        source: PciError,
    },
}

/// Read `reg` until `done` holds for its value, at most `patience`.
///
/// # Errors
/// [`PollError::Timeout`] with the last value, or the transport's error.
pub fn poll_register(
    bus: &mut (impl CardBus + ?Sized),
    what: &'static str,
    reg: u32,
    patience: Duration,
    done: impl Fn(u32) -> bool,
) -> Result<u32, PollError> {
    let start = Instant::now();
    loop {
        let value = bus
            .read32(reg)
            .map_err(|source| PollError::Bus { what, reg, source })?;
        if done(value) {
            return Ok(value);
        }
        let waited = start.elapsed();
        if waited >= patience {
            return Err(PollError::Timeout {
                what,
                reg,
                last: value,
                waited,
            });
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}
