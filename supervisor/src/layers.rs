//! The actors in layer order, bottom first, and the deadline each layer's
//! callers wait: what the Host and its monitor both go by.

use std::time::Duration;

/// The actors, bottom-up: the order they start in (and stop in reverse).
pub const ACTORS: [&str; 5] = ["pci", "gsp", "memory", "submit", "loader"];

/// The deadline for requests to `actor`: each layer above pci waits a
/// quarter of the base deadline longer than the one below, so when a call
/// chain is stuck the innermost waiter times out first and names the actor
/// that is actually stuck, rather than the one the caller happened to call.
pub fn layer_deadline(base: Duration, actor: &str) -> Duration {
    let depth = ACTORS
        .iter()
        .position(|a| *a == actor)
        .unwrap_or(ACTORS.len() - 1);
    base + base / 4 * u32::try_from(depth).unwrap_or(0)
}
