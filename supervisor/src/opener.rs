//! Which opener a resolved device uses: the pci crate's for every
//! transport it holds, and the simulated card, which lives in a crate
//! above it, started here.

use macuda_pci::{open_transport, DeviceSpec, Opener, PciError};
use std::sync::Arc;

/// The opener for `spec` (resolved: not `auto`).
///
/// # Errors
/// As [`open_transport`], or the sim's own start.
pub fn opener_for(spec: &DeviceSpec) -> Result<Arc<dyn Opener>, PciError> {
    match spec {
        DeviceSpec::Sim { chip } => crate::sim_device::SimOpener::start(chip.as_deref()),
        _ => open_transport(spec),
    }
}
