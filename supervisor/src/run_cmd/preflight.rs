//! What the runner looks at on the card before and after a step: before,
//! only reads (the lock's holder, identity, firmware state, bus mastering);
//! after, the one write the recovery contract allows, clearing bus
//! mastering a step left on.

use super::card_users::{self, CardFiles};
use macuda_pci::tinygpu::Endpoint;
use macuda_pci::{
    clear_bus_master, command_register, open_transport, open_transport_held, read_identity,
    CardLock, DeviceSpec, Opener, PciError, Transport, SYSFS_PCI_DEVICES,
};
use std::path::Path;
use std::sync::Arc;

/// A simulated card served for the step's life; the step reaches it as a
/// TinyGPU card.
pub struct StepSim(crate::sim_device::ServedSim);

impl StepSim {
    /// # Errors
    /// A chip the sim does not play, or no socket to serve on.
    pub fn start(chip: Option<&str>) -> Result<StepSim, PciError> {
        crate::sim_device::ServedSim::start(chip).map(StepSim)
    }

    /// The card as the step names it.
    pub fn spec(&self) -> DeviceSpec {
        match self.0.server.endpoint() {
            Endpoint::Unix(path) => DeviceSpec::TinyGpu { socket: Some(path) },
            Endpoint::Tcp { host, port } => DeviceSpec::Remote { host, port },
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "a simulated {} served by the runner for the step, as {}",
            self.0.chip.name.to_uppercase(),
            self.spec()
        )
    }
}

/// The read-only preflight, a line per fact.
///
/// # Errors
/// `CardBusy` with the holder's pid, or a card that cannot be reached.
pub fn look(spec: &DeviceSpec) -> Result<Vec<String>, Box<dyn std::error::Error + Send + Sync>> {
    match spec {
        DeviceSpec::Null => Ok(vec![
            "card: the null card (no GPU): the step runs the host path only".to_string(),
        ]),
        DeviceSpec::Kernel { index } => {
            let (id, _) = macuda_gsp::identify_module(Arc::new(macuda_gsp::DeviceFiles), *index)?;
            Ok(vec![
                format!(
                    "card: kernel:{} {} ({}), {} MiB VRAM, through NVIDIA's kernel module {}",
                    id.index,
                    id.name,
                    id.chip.unwrap_or("unknown chip"),
                    id.vram_bytes >> 20,
                    id.driver_version
                ),
                "firmware: the module's (it boots GSP-RM and keeps it resident)".to_string(),
            ])
        }
        _ => {
            // Taking the card's lock for the look is the read of who holds it.
            let opener = open_transport(spec)?;
            let lines = look_at(opener.as_ref());
            let session = opener.end_session();
            let mut lines = lines?;
            lines.insert(
                0,
                format!("lock: free; card reached via {}", opener.describe()),
            );
            if let Some(line) = session? {
                lines.push(format!("session: {line}"));
            }
            Ok(lines)
        }
    }
}

fn look_at(opener: &dyn Opener) -> Result<Vec<String>, PciError> {
    let mut t = opener.open()?;
    let command = command_register(t.as_mut())?;
    let mut lines = Vec::new();
    if command.0 & macuda_hw::pci::Command::MEMORY_SPACE == 0 {
        // Turning decoding on would be a write: say what config space says.
        let id = config_ids(t.as_mut())?;
        lines.push(format!(
            "card: {:04x}:{:04x}; memory decoding off, so registers and firmware state unread",
            id.0, id.1
        ));
    } else {
        let id = read_identity(t.as_mut())?;
        lines.push(format!(
            "card: {:04x}:{:04x} {} (BOOT_0 {:#010x}), BAR1 {} MiB{}",
            id.vendor,
            id.device,
            id.chip.chip,
            id.chip.boot_0,
            id.bars
                .iter()
                .find(|b| b.index == 1)
                .map_or(0, |b| b.bytes >> 20),
            if id.small_bar() { " (small BAR)" } else { "" }
        ));
        lines.push(format!(
            "firmware: {}",
            if id.firmware_resident {
                "GSP-RM resident (WPR2 up), warm from an earlier step"
            } else {
                "not resident (WPR2 down): the step's driver boots it"
            }
        ));
    }
    lines.push(format!(
        "bus mastering: {}",
        if command.bus_master() {
            "ON: a driver is using the card, or one ended without clearing it"
        } else {
            "off"
        }
    ));
    Ok(lines)
}

fn config_ids(t: &mut dyn Transport) -> Result<(u16, u16), PciError> {
    use macuda_hw::pci::{offset, Width};
    // CAST: 16-bit config reads fit in u16.
    let vendor = (t.config_read(offset::VENDOR_ID, Width::U16)? & 0xFFFF) as u16;
    let device = (t.config_read(offset::DEVICE_ID, Width::U16)? & 0xFFFF) as u16;
    Ok((vendor, device))
}

/// The files whose holders count as "on the card" (none for cards reached
/// over a socket, or the null card).
pub fn card_files(spec: &DeviceSpec) -> CardFiles {
    match spec {
        DeviceSpec::Kernel { index } => card_users::kernel_module_files(*index),
        DeviceSpec::Sysfs { bdf } => card_users::sysfs_files(Path::new(SYSFS_PCI_DEVICES), bdf),
        _ => CardFiles::new(Vec::new()),
    }
}

/// What the card was left as.
pub struct AfterStep {
    pub lines: Vec<String>,
    pub bus_master_was_on: bool,
}

/// Leave the card idle after the step: bus mastering cleared if the step
/// left it on; firmware state reported (resident is what the next step
/// wants: never unloaded). Through the lock the runner holds.
///
/// # Errors
/// A card that cannot be reached.
pub fn leave_idle(
    spec: &DeviceSpec,
    lock: &CardLock,
) -> Result<AfterStep, Box<dyn std::error::Error + Send + Sync>> {
    match spec {
        DeviceSpec::Null => Ok(AfterStep {
            lines: vec!["the null card holds nothing between steps".to_string()],
            bus_master_was_on: false,
        }),
        DeviceSpec::Kernel { .. } => {
            let files = card_files(spec);
            let root = Path::new("/proc");
            let mut lines = Vec::new();
            if card_users::can_look(root) {
                // The step has ended: anything still holding the card is
                // someone else's or the step's leftover.
                let left = card_users::other_users(root, &files, std::process::id(), NO_STEP);
                if left.is_empty() {
                    lines.push("no process holds the card; the module keeps it warm".to_string());
                }
                for u in left {
                    lines.push(format!("pid {} ({}) still holds {}", u.pid, u.name, u.file));
                }
            }
            Ok(AfterStep {
                lines,
                bus_master_was_on: false,
            })
        }
        _ => {
            let opener = open_transport_held(spec, lock)?;
            let after = idle(opener.as_ref());
            let session = opener.end_session();
            let mut after = after?;
            if let Some(line) = session? {
                after.lines.push(format!("session: {line}"));
            }
            Ok(after)
        }
    }
}

/// A pid no process has: "no step to leave out".
const NO_STEP: u32 = u32::MAX;

fn idle(opener: &dyn Opener) -> Result<AfterStep, PciError> {
    let mut t = opener.open()?;
    let command = command_register(t.as_mut())?;
    let mut lines = Vec::new();
    let was_on = command.bus_master();
    if was_on {
        let c = clear_bus_master(t.as_mut())?;
        lines.push(format!(
            "bus mastering was on; cleared (command {:#06x} -> {:#06x})",
            c.before.0, c.after.0
        ));
    } else {
        lines.push("bus mastering off: the card fetches nothing".to_string());
    }
    if command.0 & macuda_hw::pci::Command::MEMORY_SPACE != 0 {
        let id = read_identity(t.as_mut())?;
        lines.push(
            if id.firmware_resident {
                "firmware resident (WPR2 up), left warm for the next step"
            } else {
                "firmware not resident"
            }
            .to_string(),
        );
    }
    Ok(AfterStep {
        lines,
        bus_master_was_on: was_on,
    })
}
