pub use crate::layers::{layer_deadline, ACTORS};
use crate::monitor::{run_monitor, Supervision};
use crate::report::ReportCause;
use macuda_core::{
    error_chain, find_in_chain, ActorConfig, ActorError, ActorSnapshot, Failure, FaultPlan,
    FaultSwitch, SupervisorEvent,
};
use macuda_gsp::{DeviceInfo, GspError, GspHandle};
use macuda_loader::{LoaderError, LoaderHandle};
use macuda_memory::{MemoryError, MemoryHandle};
use macuda_pci::{DeviceSpec, Opener, PciError, PciHandle};
use macuda_submit::{SubmitError, SubmitHandle};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::thread::JoinHandle;
use std::time::Duration;

pub use crate::monitor::RecoveryOutcome;
pub use crate::report::ReportCause as Cause;

/// One fault switch per actor, kept across restarts so a plan can be set
/// before the stack starts and changed while it runs.
#[derive(Clone)]
pub struct FaultBoard {
    switches: Arc<[(&'static str, FaultSwitch); 5]>,
}

impl FaultBoard {
    pub fn new() -> FaultBoard {
        FaultBoard {
            switches: Arc::new(ACTORS.map(|a| (a, FaultSwitch::default()))),
        }
    }

    fn switch(&self, actor: &str) -> Result<&FaultSwitch, HostError> {
        self.switches
            .iter()
            .find(|(a, _)| *a == actor)
            .map(|(_, s)| s)
            .ok_or_else(|| HostError::UnknownActor(actor.to_string()))
    }

    /// # Errors
    /// `actor` is not one of [`ACTORS`].
    pub fn install(&self, actor: &str, plan: FaultPlan) -> Result<(), HostError> {
        self.switch(actor)?.store(Some(Arc::new(plan)));
        Ok(())
    }

    /// Whether a plan waits on `actor` (false for an unknown actor).
    pub fn armed(&self, actor: &str) -> bool {
        self.switch(actor).is_ok_and(|s| s.load().is_some())
    }

    /// # Errors
    /// `actor` is not one of [`ACTORS`].
    pub fn clear(&self, actor: &str) -> Result<(), HostError> {
        self.switch(actor)?.store(None);
        Ok(())
    }
}

impl Default for FaultBoard {
    fn default() -> Self {
        FaultBoard::new()
    }
}

/// How to start a Host.
#[derive(Clone)]
pub struct HostConfig {
    pub device: DeviceSpec,
    /// Use this opener instead of the one `device` names (tests hold a null
    /// card of their own this way).
    pub opener: Option<Arc<dyn Opener>>,
    /// How long a request to the bottom actor (pci) may take; see
    /// [`layer_deadline`] for the layers above.
    pub deadline: Duration,
    pub report_dir: PathBuf,
    pub keep_recent: usize,
    pub mailbox: usize,
    /// Install the Ctrl-C handler (once per process).
    pub ctrl_c: bool,
    /// After an interrupt's recovery, end the process with status 130.
    pub exit_on_interrupt: bool,
    pub faults: FaultBoard,
    /// Record every access to the card into this trace.
    pub record: Option<PathBuf>,
    /// Chain depth, descriptor diffing and the lane's size.
    pub submit: macuda_submit::SubmitConfig,
    /// On the kernel path, open RM nodes through this driver instead of
    /// the device files (tests hold a fake of the kernel module this way).
    pub rm_driver: Option<Arc<dyn macuda_gsp::RmDriver>>,
    /// Where the GSP images are, for a card we boot ourselves (else
    /// `MACUDA_FIRMWARE`, else the system's firmware directories).
    pub firmware: Option<PathBuf>,
    /// On the kernel path, video memory allocations from this many bytes
    /// take 2 MiB pages (`None`: the module's threshold). A diagnostic
    /// (`MACUDA_HUGE_PAGES_FROM`): what the GPU's TLB misses on small
    /// pages cost a chain that walks through descriptor memory.
    pub huge_pages_from: Option<u64>,
}

/// `MACUDA_REPORT_DIR`, else `macuda-reports` in the system temp directory.
pub fn default_report_dir() -> PathBuf {
    std::env::var_os("MACUDA_REPORT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("macuda-reports"))
}

impl HostConfig {
    pub fn new(device: DeviceSpec) -> HostConfig {
        HostConfig {
            device,
            opener: None,
            deadline: Duration::from_secs(10),
            report_dir: default_report_dir(),
            keep_recent: 32,
            mailbox: 256,
            ctrl_c: false,
            exit_on_interrupt: false,
            faults: FaultBoard::new(),
            record: None,
            submit: macuda_submit::SubmitConfig::default(),
            rm_driver: None,
            firmware: None,
            huge_pages_from: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("pci request failed")]
    Pci(#[from] PciError),
    #[error("gsp request failed")]
    Gsp(#[from] GspError),
    #[error("memory request failed")]
    Memory(#[from] MemoryError),
    #[error("submit request failed")]
    Submit(#[from] SubmitError),
    #[error("loader request failed")]
    Loader(#[from] LoaderError),
    #[error("actor `{actor}` failed ({headline}); recovery ran{}", report_suffix(.report))]
    ActorFailed {
        actor: String,
        headline: String,
        report: Option<PathBuf>,
        #[source]
        source: Box<HostError>,
    },
    #[error("interrupted; recovery ran{}", report_suffix(.report))]
    Interrupted { report: Option<PathBuf> },
    #[error("the host is down after an earlier {cause}{}", report_suffix(.report))]
    Down {
        cause: String,
        report: Option<PathBuf>,
    },
    #[error("boot failed in `{actor}`; recovery ran{}", report_suffix(.report))]
    Boot {
        actor: &'static str,
        report: Option<PathBuf>,
        #[source]
        source: Box<HostError>,
    },
    #[error("recovery did not finish within {after:?}")]
    RecoveryTimedOut {
        after: Duration,
        #[source]
        source: Box<HostError>,
    },
    #[error("`{device}` opens (try `macuda info`), but the RM it needs (GSP-RM boot, or the kernel module's) is not built yet")]
    RmNotBuilt { device: String },
    #[error("unknown actor `{0}` (expected pci, gsp, memory, submit or loader)")]
    UnknownActor(String),
    #[error("--record traces accesses to the card; through `{device}` (NVIDIA's kernel module) we make none")]
    NothingToRecord { device: String },
    #[error("could not start the monitor thread")]
    Spawn(#[source] std::io::Error),
}

fn report_suffix(report: &Option<PathBuf>) -> String {
    match report {
        Some(p) => format!("; crash report: {}", p.display()),
        None => String::new(),
    }
}

impl HostError {
    /// The device declined by design (the null device refusing DMA or
    /// submission); nothing failed.
    pub fn is_refusal(&self) -> bool {
        find_in_chain::<PciError>(self).is_some_and(PciError::is_refusal)
            || find_in_chain::<SubmitError>(self).is_some_and(SubmitError::is_refusal)
    }

    /// The crash report written for this error, if any.
    pub fn report(&self) -> Option<&PathBuf> {
        match self {
            HostError::ActorFailed { report, .. }
            | HostError::Interrupted { report }
            | HostError::Down { report, .. }
            | HostError::Boot { report, .. } => report.as_ref(),
            _ => None,
        }
    }

    /// The actor blamed for this error, if an actor failed.
    pub fn failed_actor(&self) -> Option<&str> {
        match self {
            HostError::ActorFailed { actor, .. } => Some(actor),
            HostError::Boot { actor, .. } => Some(actor),
            _ => None,
        }
    }

    fn from_outcome(outcome: &RecoveryOutcome, source: HostError) -> HostError {
        let report = outcome.report.as_ref().ok().cloned();
        match &outcome.cause {
            ReportCause::Failure { actor, failure } => HostError::ActorFailed {
                actor: actor.clone(),
                headline: failure.headline(),
                report,
                source: Box::new(source),
            },
            ReportCause::Interrupted => HostError::Interrupted { report },
            ReportCause::Exit | ReportCause::BootFailed { .. } | ReportCause::Incident { .. } => {
                HostError::Down {
                    cause: outcome.cause.summary(),
                    report,
                }
            }
        }
    }
}

/// Handles to every actor of one stack generation.
#[derive(Clone)]
pub struct Stack {
    pub pci: PciHandle,
    pub gsp: GspHandle,
    pub memory: MemoryHandle,
    pub submit: SubmitHandle,
    pub loader: LoaderHandle,
    pub device: DeviceInfo,
}

/// Devices whose resource manager the gsp actor can serve: the null
/// device's software RM, NVIDIA's kernel module, and GSP-RM we boot
/// ourselves over the TinyGPU protocol (its unix socket, TCP, or the
/// simulated card in this process). Over sysfs there is no DMA yet (no
/// VFIO), so no boot; a replayed trace answers only what was recorded.
fn rm_built(spec: &DeviceSpec) -> bool {
    matches!(
        spec,
        DeviceSpec::Null
            | DeviceSpec::Kernel { .. }
            | DeviceSpec::Sim { .. }
            | DeviceSpec::TinyGpu { .. }
            | DeviceSpec::Remote { .. }
    )
}

/// Where NVIDIA's images for the simulated card (a GB202) are, if all
/// three are found: with no GPU present, `auto` picks that card, so the
/// demo runs the whole bare-metal stack. Only found here; the boot checks
/// their pins. (The CUDA runtime never picks it by itself: a program's
/// kernels would not run.)
fn sim_images(config: &HostConfig) -> Option<PathBuf> {
    use macuda_gsp::firmware::{pin, FirmwareChip, ImageKind, SearchPath};
    let search = SearchPath::new(config.firmware.clone());
    let mut found = None;
    for kind in [ImageKind::Fmc, ImageKind::Bootloader, ImageKind::GspRm] {
        let located = search.locate(pin(FirmwareChip::Gb202, kind)).ok()?;
        found = located.path.parent().map(PathBuf::from);
    }
    found
}

/// How the gsp actor will reach its RM, decided before the pci actor
/// exists: a card we boot needs the pci actor's handle for its memory.
enum RmPlan {
    Ready(macuda_gsp::RmChoice),
    /// Boot GSP-RM with the images found along this path; its log
    /// records decoded with the metadata given, where there is any.
    Firmware(
        macuda_gsp::firmware::SearchPath,
        Option<macuda_gsp::bare::SharedLogMetadata>,
    ),
}

/// The RM the gsp actor talks to for a device.
fn rm_plan(spec: &DeviceSpec, config: &HostConfig) -> RmPlan {
    match spec {
        DeviceSpec::Kernel { index } => RmPlan::Ready(macuda_gsp::RmChoice::Kernel {
            driver: config
                .rm_driver
                .clone()
                .unwrap_or_else(|| Arc::new(macuda_gsp::DeviceFiles)),
            index: *index,
            huge_pages_from: config.huge_pages_from,
        }),
        DeviceSpec::Null => RmPlan::Ready(macuda_gsp::RmChoice::Null),
        // NVIDIA's logging metadata is not ours to have; the simulated
        // card's GSP-RM writes records its own table describes.
        _ => RmPlan::Firmware(
            macuda_gsp::firmware::SearchPath::new(config.firmware.clone()),
            matches!(spec, DeviceSpec::Sim { .. }).then(crate::sim_device::log_metadata),
        ),
    }
}

static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// Where Ctrl-C goes: the events channel of the Host that installed it.
static INTERRUPT_SINK: Mutex<Option<flume::Sender<SupervisorEvent>>> = Mutex::new(None);

fn install_ctrl_c(events: &flume::Sender<SupervisorEvent>) {
    static ONCE: Once = Once::new();
    *INTERRUPT_SINK.lock() = Some(events.clone());
    ONCE.call_once(|| {
        let installed = ctrlc::set_handler(|| {
            let sink = INTERRUPT_SINK.lock().clone();
            match sink {
                Some(tx) if tx.send(SupervisorEvent::Interrupted).is_ok() => {}
                // No Host is listening: nothing to recover, just end.
                _ => std::process::exit(130),
            }
        });
        if let Err(e) = installed {
            tracing::warn!(error = %e, "Ctrl-C handler not installed");
        }
    });
}

/// Whether a device's transport owns the PCI function (all but the
/// kernel-module path).
fn spec_owns_pci(spec: &DeviceSpec) -> bool {
    !matches!(spec, DeviceSpec::Kernel { .. })
}

/// The in-process driver: a running stack of actors under supervision.
pub struct Host {
    config: HostConfig,
    spec: DeviceSpec,
    notes: Vec<String>,
    sup: Arc<Supervision>,
    stack: Stack,
    events: flume::Sender<SupervisorEvent>,
    monitor: Option<JoinHandle<()>>,
}

impl Host {
    /// Resolve the device, start the monitor, then the actors bottom-up, and
    /// open the device. A failure at any step runs the recovery contract.
    ///
    /// # Errors
    /// Device selection errors (before anything is touched) and boot
    /// failures (after recovery ran; the error names the report).
    pub fn start(config: HostConfig) -> Result<Host, HostError> {
        let (mut spec, mut notes) = config.device.clone().resolve();
        if config.device == DeviceSpec::Auto && spec == DeviceSpec::Null {
            if let Some(dir) = sim_images(&config) {
                notes.push(format!(
                    "auto: no GPU here; using the simulated GB202, booted with NVIDIA's images from {}",
                    dir.display()
                ));
                spec = DeviceSpec::Sim { chip: None };
            }
        }
        if !rm_built(&spec) {
            if config.device != DeviceSpec::Auto {
                return Err(HostError::RmNotBuilt {
                    device: spec.to_string(),
                });
            }
            notes.push(format!(
                "auto: `{spec}` needs an RM that is not built yet; using null"
            ));
            spec = DeviceSpec::Null;
        }
        if let DeviceSpec::Sim { .. } = spec {
            notes.push(
                "the simulated card runs no GPU code: a launch of one of our test kernels has \
                 its effect computed by the card's model of it (tests/sim/src/kernel_models.rs), \
                 others are only recorded; copies move real bytes"
                    .to_string(),
            );
        }
        for n in &notes {
            tracing::info!("{n}");
        }
        if config.record.is_some() && !spec_owns_pci(&spec) {
            return Err(HostError::NothingToRecord {
                device: spec.to_string(),
            });
        }
        let opener = match &config.opener {
            Some(o) => Arc::clone(o),
            None => crate::opener::opener_for(&spec)?,
        };
        let opener = match &config.record {
            Some(path) => macuda_pci::record_to(opener, path)?,
            None => opener,
        };
        let generation = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed);
        let sup = Arc::new(Supervision::new(
            generation,
            config.deadline,
            config.report_dir.clone(),
            config.exit_on_interrupt,
            Arc::clone(&opener),
        ));
        let (events, events_rx) = flume::unbounded();
        let monitor = {
            let sup = Arc::clone(&sup);
            std::thread::Builder::new()
                .name("macuda-monitor".into())
                .spawn(move || run_monitor(sup, events_rx))
                .map_err(HostError::Spawn)?
        };
        if config.ctrl_c {
            install_ctrl_c(&events);
        }
        let actor_config = |name: &'static str| -> Result<ActorConfig, HostError> {
            Ok(ActorConfig {
                name,
                generation,
                mailbox: config.mailbox,
                deadline: layer_deadline(config.deadline, name),
                keep_recent: config.keep_recent,
                events: events.clone(),
                faults: config.faults.switch(name)?.clone(),
            })
        };
        let booted = boot(
            &sup,
            &opener,
            &actor_config,
            config.submit,
            rm_plan(&spec, &config),
        );
        let stack = match booted {
            Ok(stack) => stack,
            Err((actor, err)) => {
                let outcome = if find_in_chain::<ActorError>(&err).is_some() {
                    // The failing actor reported itself; the monitor recovers.
                    sup.wait_done(config.deadline * 8 + Duration::from_secs(30))
                } else {
                    None
                };
                let outcome = outcome.unwrap_or_else(|| {
                    sup.recover(ReportCause::Failure {
                        actor: actor.to_string(),
                        failure: Failure::Error {
                            op: "boot".to_string(),
                            chain: error_chain(&err),
                        },
                    })
                });
                let _ = events.send(SupervisorEvent::Shutdown);
                let _ = monitor.join();
                // Blame the actor that failed, not the boot step that noticed.
                let actor = match &outcome.cause {
                    ReportCause::Failure { actor: failed, .. } => ACTORS
                        .iter()
                        .copied()
                        .find(|a| a == failed)
                        .unwrap_or(actor),
                    _ => actor,
                };
                return Err(HostError::Boot {
                    actor,
                    report: outcome.report.as_ref().ok().cloned(),
                    source: Box::new(err),
                });
            }
        };
        let host = Host {
            config,
            spec,
            notes,
            sup,
            stack,
            events,
            monitor: Some(monitor),
        };
        *host.sup.device_line.lock() = host.describe_device();
        tracing::info!("{}", host.device_line());
        crate::run_log::announce(&host.device_line());
        Ok(host)
    }

    fn describe_device(&self) -> String {
        let d = &self.stack.device;
        if !self.owns_function() {
            // Another driver owns the function: RM names the card.
            let bar1 = d
                .identity
                .bars
                .iter()
                .find(|b| b.index == 1)
                .map(|b| format!(", BAR1 {} MiB", b.bytes >> 20))
                .unwrap_or_default();
            return format!(
                "macuda {}: device {} via {}: {} ({}, pci {:04x}:{:04x}), {} MiB VRAM{}, driver {}, RM: {}",
                crate::BUILD_ID,
                self.spec,
                self.sup.opener.describe(),
                d.name.as_deref().unwrap_or("unnamed GPU"),
                d.chip.chip,
                d.identity.vendor,
                d.identity.device,
                d.vram_bytes >> 20,
                bar1,
                d.driver_version.as_deref().unwrap_or("unknown"),
                d.rm.describe()
            );
        }
        let bar1 = d
            .identity
            .bars
            .iter()
            .find(|b| b.index == 1)
            .map(|b| {
                format!(
                    ", BAR1 {} MiB{}",
                    b.bytes >> 20,
                    if d.identity.small_bar() {
                        " (small BAR)"
                    } else {
                        ""
                    }
                )
            })
            .unwrap_or_default();
        format!(
            "macuda {}: device {} via {}: {} (pci {:04x}:{:04x}, BOOT_0 {:#010x}, BOOT_42 {:#010x}), {} MiB VRAM{}, firmware {}, RM: {}",
            crate::BUILD_ID,
            self.spec,
            self.sup.opener.describe(),
            d.chip.chip,
            d.identity.vendor,
            d.identity.device,
            d.chip.boot_0,
            d.chip.boot_42,
            d.vram_bytes >> 20,
            bar1,
            if d.identity.firmware_resident { "resident" } else { "not resident" },
            d.rm.describe()
        )
    }

    /// The startup line: what was actually opened. Trust it over the
    /// variable that asked for it.
    pub fn device_line(&self) -> String {
        self.sup.device_line.lock().clone()
    }

    /// Notes from resolving `auto` (backends passed over).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    pub fn generation(&self) -> u64 {
        self.sup.generation
    }

    pub fn device(&self) -> &DeviceInfo {
        &self.stack.device
    }

    /// Whether we own the PCI function (config space, BARs, reset), or
    /// another driver (NVIDIA's kernel module) does and we touch none of it.
    pub fn owns_function(&self) -> bool {
        self.sup.opener.owns_function()
    }

    /// The raw handles; calls made through them skip the failure mapping
    /// of [`Host::call`].
    pub fn stack(&self) -> &Stack {
        &self.stack
    }

    pub fn faults(&self) -> &FaultBoard {
        &self.config.faults
    }

    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// Every actor's recent requests and counts, bottom-up.
    pub fn snapshots(&self) -> Vec<ActorSnapshot> {
        self.sup
            .statuses
            .lock()
            .iter()
            .map(|s| s.snapshot())
            .collect()
    }

    /// The recovery that already ran, if the stack is down.
    pub fn outcome(&self) -> Option<Arc<RecoveryOutcome>> {
        self.sup.outcome()
    }

    /// Wait up to `timeout` for the stack to go down (a recovery the
    /// monitor runs on its own thread); the recovery's outcome, if it ran.
    pub fn wait_down(&self, timeout: Duration) -> Option<Arc<RecoveryOutcome>> {
        self.sup.wait_done(timeout)
    }

    /// The contained recoveries the monitor ran for incidents the actors
    /// came through (a channel fault, a lost doorbell), oldest first; the
    /// stack stayed up through each.
    pub fn incidents(&self) -> Vec<Arc<RecoveryOutcome>> {
        self.sup.incidents()
    }

    /// What Ctrl-C does, without a signal.
    pub fn interrupt(&self) {
        let _ = self.events.send(SupervisorEvent::Interrupted);
    }

    /// Run `f` against the stack. An error caused by an actor failing (its
    /// chain holds an `ActorError`) waits for the recovery to finish and
    /// comes back as `ActorFailed` naming the actor and the report.
    ///
    /// # Errors
    /// The actor's own typed error, `ActorFailed`, or `Down` once the stack
    /// has been recovered.
    pub fn call<T, E: Into<HostError>>(
        &self,
        f: impl FnOnce(&Stack) -> Result<T, E>,
    ) -> Result<T, HostError> {
        if let Some(o) = self.sup.outcome() {
            return Err(HostError::Down {
                cause: o.cause.summary(),
                report: o.report.as_ref().ok().cloned(),
            });
        }
        match f(&self.stack) {
            Ok(v) => Ok(v),
            Err(e) => {
                let e: HostError = e.into();
                if find_in_chain::<ActorError>(&e).is_none() {
                    return Err(e);
                }
                let wait = self.config.deadline * 8 + Duration::from_secs(30);
                match self.sup.wait_done(wait) {
                    Some(o) => Err(HostError::from_outcome(&o, e)),
                    None => Err(HostError::RecoveryTimedOut {
                        after: wait,
                        source: Box::new(e),
                    }),
                }
            }
        }
    }

    fn finish(&mut self) -> Arc<RecoveryOutcome> {
        let outcome = self.sup.recover(ReportCause::Exit);
        let _ = self.events.send(SupervisorEvent::Shutdown);
        if let Some(m) = self.monitor.take() {
            let _ = m.join();
        }
        let mut sink = INTERRUPT_SINK.lock();
        if sink.as_ref().is_some_and(|s| s.same_channel(&self.events)) {
            *sink = None;
        }
        outcome
    }

    /// Stop the stack (top-down), clear bus mastering and write the exit
    /// report; after a failure, returns that failure's recovery instead.
    pub fn shutdown(mut self) -> Arc<RecoveryOutcome> {
        self.finish()
    }

    /// Shut this stack down and boot a fresh one (the next generation) with
    /// the same configuration.
    ///
    /// # Errors
    /// As [`Host::start`].
    pub fn restart(self) -> Result<Host, HostError> {
        let config = self.config.clone();
        drop(self.shutdown());
        Host::start(config)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if self.monitor.is_some() {
            self.finish();
        }
    }
}

type ConfigFor<'a> = dyn Fn(&'static str) -> Result<ActorConfig, HostError> + 'a;

/// Start the actors bottom-up and open the device; on error, name the
/// actor whose step failed.
fn boot(
    sup: &Supervision,
    opener: &Arc<dyn Opener>,
    config: &ConfigFor<'_>,
    submit_config: macuda_submit::SubmitConfig,
    rm: RmPlan,
) -> Result<Stack, (&'static str, HostError)> {
    let at = |actor: &'static str| move |e: HostError| (actor, e);
    let (pci, join) = macuda_pci::spawn(config("pci").map_err(at("pci"))?, opener)
        .map_err(|e| ("pci", e.into()))?;
    sup.adopt(join);
    // On a card we boot, the gsp actor lays our memory out once GSP-RM
    // runs, and the memory actor takes the same memory from the slot.
    let (rm, card) = match rm {
        RmPlan::Ready(choice) => (choice, None),
        RmPlan::Firmware(firmware, log_metadata) => {
            let (tables, slot) = macuda_memory::card_tables(pci.clone());
            let journal = macuda_gsp::bare::SharedJournal::default();
            *sup.gsp_journal.lock() = Some(journal.clone());
            (
                macuda_gsp::RmChoice::Firmware {
                    firmware,
                    tables,
                    journal,
                    log_metadata,
                },
                Some(slot),
            )
        }
    };
    let (gsp, join) = macuda_gsp::spawn(config("gsp").map_err(at("gsp"))?, pci.clone(), rm)
        .map_err(|e| ("gsp", e.into()))?;
    sup.adopt(join);
    let device = gsp.open_device().map_err(|e| ("gsp", e.into()))?;
    *sup.firmware_note.lock() = device.firmware.clone();
    *sup.teardown.lock() = gsp.teardown().map_err(|e| ("gsp", e.into()))?;
    let (memory, join) = macuda_memory::spawn(
        config("memory").map_err(at("memory"))?,
        &gsp,
        pci.clone(),
        card.and_then(|slot| slot.get().cloned()),
    )
    .map_err(|e| ("memory", e.into()))?;
    sup.adopt(join);
    // A chip whose capability is not known gets Blackwell's formats: the
    // project's first target.
    let sm = device.chip.chip.sm();
    let (submit, join) = macuda_submit::spawn(
        config("submit").map_err(at("submit"))?,
        submit_config,
        sm,
        memory.clone(),
        gsp.clone(),
    )
    .map_err(|e| ("submit", e.into()))?;
    sup.adopt(join);
    *sup.submit.lock() = Some(submit.clone());
    let (loader, join) = macuda_loader::spawn(
        config("loader").map_err(at("loader"))?,
        memory.clone(),
        submit.clone(),
    )
    .map_err(|e| ("loader", e.into()))?;
    sup.adopt(join);
    Ok(Stack {
        pci,
        gsp,
        memory,
        submit,
        loader,
        device,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_grow_upward_through_the_layers() {
        let base = Duration::from_millis(400);
        let d: Vec<Duration> = ACTORS.iter().map(|a| layer_deadline(base, a)).collect();
        assert_eq!(d[0], base);
        assert!(d.windows(2).all(|w| w[1] == w[0] + base / 4), "{d:?}");
    }
}
