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

/// The request names a fault plan may name for `actor` (its protocol's
/// requests, and the submit actor's sync points), or `None` for an actor
/// that is not one of [`ACTORS`].
pub fn request_kinds(actor: &str) -> Option<Vec<&'static str>> {
    let kinds: Vec<&'static str> = match actor {
        "pci" => macuda_pci::PciRequest::KINDS.to_vec(),
        "gsp" => macuda_gsp::GspRequest::KINDS.to_vec(),
        "memory" => macuda_memory::MemoryRequest::KINDS.to_vec(),
        "submit" => {
            let mut k = macuda_submit::SubmitRequest::KINDS.to_vec();
            k.push(macuda_submit::SYNC_POINT);
            k
        }
        "loader" => macuda_loader::LoaderRequest::KINDS.to_vec(),
        _ => return None,
    };
    Some(kinds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_actor_names_its_requests() {
        for actor in ACTORS {
            let kinds = request_kinds(actor).unwrap();
            assert!(!kinds.is_empty(), "{actor}");
        }
        assert!(request_kinds("pci").unwrap().contains(&"identify"));
        assert!(request_kinds("submit").unwrap().contains(&"sync_point"));
        assert_eq!(request_kinds("nosuch"), None);
    }
}
