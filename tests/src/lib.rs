//! Shared pieces of the integration tests: a Host on a null card the test
//! holds, so what recovery did to the card can be read back from the card's
//! own record; and a Host on a fake of NVIDIA's kernel module, whose object
//! tree and GPU the test can read back the same way.

pub mod capture;
pub mod direct_rm;
pub mod engines;
pub mod fake_rm;
pub mod fake_tinygpu;
pub mod ioctl_hook;
pub mod runtime_libs;
pub mod sim_host;
pub mod vector_add;

/// One `#[test]` for each actor and each way an injected fault makes it
/// fail (panic, error, hang), each calling `$inject(actor, action)`: the
/// fault-injection matrix every path of the stack is held to.
#[macro_export]
macro_rules! every_actor_failure {
    ($inject:ident) => {
        $crate::every_actor_failure!(@cases $inject;
            pci_panic: "pci", Panic;
            pci_error: "pci", Error;
            pci_hang: "pci", Hang;
            gsp_panic: "gsp", Panic;
            gsp_error: "gsp", Error;
            gsp_hang: "gsp", Hang;
            memory_panic: "memory", Panic;
            memory_error: "memory", Error;
            memory_hang: "memory", Hang;
            submit_panic: "submit", Panic;
            submit_error: "submit", Error;
            submit_hang: "submit", Hang;
            loader_panic: "loader", Panic;
            loader_error: "loader", Error;
            loader_hang: "loader", Hang;
        );
    };
    (@cases $inject:ident; $($name:ident: $actor:literal, $action:ident;)+) => {
        $(
            #[test]
            fn $name() {
                $inject($actor, ::macuda_core::FaultAction::$action);
            }
        )+
    };
}

use macuda_pci::{CardEvent, NullCard, NullOpener, NullProfile, Opener};
use macuda_supervisor::{Host, HostConfig};
use std::sync::Arc;
use std::time::Duration;

/// A null card, the Host config that opens it, and a report directory that
/// lives as long as this value.
pub struct NullWorld {
    pub card: Arc<NullCard>,
    pub config: HostConfig,
    pub reports: tempfile::TempDir,
}

impl NullWorld {
    /// `deadline` bounds every actor request (short, so hangs end quickly).
    pub fn new(deadline: Duration) -> NullWorld {
        let card = NullCard::new(NullProfile::gb202());
        let opener: Arc<dyn Opener> = Arc::new(NullOpener::new(Arc::clone(&card)));
        let reports = tempfile::tempdir().expect("temp dir");
        let mut config = HostConfig::new(macuda_pci::DeviceSpec::Null);
        config.opener = Some(opener);
        config.deadline = deadline;
        config.report_dir = reports.path().to_path_buf();
        NullWorld {
            card,
            config,
            reports,
        }
    }

    /// A null card that records doorbells instead of refusing them, for
    /// tests that read back the command streams (nothing executes).
    pub fn swallowing_doorbells(deadline: Duration) -> NullWorld {
        let mut profile = NullProfile::gb202();
        profile.swallow_doorbells = true;
        NullWorld::with_profile(profile, deadline)
    }

    /// A null card that records doorbells and keeps its video memory, for
    /// tests where the test plays the GPU: it runs the captured streams
    /// (see [`engines`]) and writes what the GPU would write.
    pub fn playing_gpu(deadline: Duration) -> NullWorld {
        let mut profile = NullProfile::gb202();
        profile.swallow_doorbells = true;
        profile.keeps_vram = true;
        NullWorld::with_profile(profile, deadline)
    }

    fn with_profile(profile: NullProfile, deadline: Duration) -> NullWorld {
        let card = NullCard::new(profile);
        let mut world = NullWorld::new(deadline);
        world.config.opener = Some(Arc::new(NullOpener::new(Arc::clone(&card))));
        world.card = card;
        world
    }

    pub fn start(&self) -> Host {
        Host::start(self.config.clone()).expect("host starts on the null card")
    }

    /// Report files written so far.
    pub fn report_files(&self) -> Vec<std::path::PathBuf> {
        files_in(self.reports.path())
    }
}

/// A Host on the kernel-module path over the fake of the module, whose GPU
/// a thread plays (see [`fake_rm`]): what recovery did is read back from
/// the fake's own object tree.
pub struct KernelWorld {
    pub fake: fake_rm::FakeRm,
    /// The pci actor's opener, whose transports count every PCI-level
    /// operation asked of them.
    pub opener: Arc<macuda_pci::KernelModuleOpener>,
    pub config: HostConfig,
    pub reports: tempfile::TempDir,
}

impl KernelWorld {
    pub fn new(deadline: Duration) -> KernelWorld {
        KernelWorld::with_module(fake_rm::FakeModule::h200(), deadline)
    }

    pub fn with_module(module: fake_rm::FakeModule, deadline: Duration) -> KernelWorld {
        let fake = fake_rm::FakeRm::with_gpu(module);
        let reports = tempfile::tempdir().expect("temp dir");
        let mut config = HostConfig::new(macuda_pci::DeviceSpec::Kernel { index: 0 });
        let opener = Arc::new(macuda_pci::KernelModuleOpener::new(0));
        config.opener = Some(Arc::clone(&opener) as Arc<dyn Opener>);
        config.rm_driver = Some(Arc::new(fake.clone()));
        config.deadline = deadline;
        config.report_dir = reports.path().to_path_buf();
        KernelWorld {
            fake,
            opener,
            config,
            reports,
        }
    }

    pub fn start(&self) -> Host {
        Host::start(self.config.clone()).expect("host starts on the fake kernel module")
    }

    /// Report files written so far.
    pub fn report_files(&self) -> Vec<std::path::PathBuf> {
        files_in(self.reports.path())
    }
}

/// The files in `dir`, sorted.
fn files_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// `macuda ARGS...` through the CLI itself, in this process: the exit
/// status, and what it wrote to standard output and error.
pub fn run_macuda(args: &[&str]) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let argv = std::iter::once("macuda")
        .chain(args.iter().copied())
        .map(Into::into);
    let code = macuda_supervisor::cli::run(argv, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).expect("the CLI prints text"),
        String::from_utf8(err).expect("the CLI prints text"),
    )
}

/// What `macuda report FILE [--json]` prints for a crash report, through
/// the CLI itself; fails the test if the CLI does.
pub fn macuda_report(path: &std::path::Path, json: bool) -> String {
    let mut args: Vec<std::ffi::OsString> = vec![
        "macuda".into(),
        "report".into(),
        path.as_os_str().to_owned(),
    ];
    if json {
        args.push("--json".into());
    }
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = macuda_supervisor::cli::run(args, &mut out, &mut err);
    assert_eq!(
        code,
        0,
        "macuda report failed: {}",
        String::from_utf8_lossy(&err)
    );
    String::from_utf8(out).expect("the report prints text")
}

/// Index of the first config write that clears bus mastering after the last
/// write that set it, as the card recorded it.
pub fn bus_master_cleared_at(events: &[CardEvent]) -> Option<usize> {
    use macuda_hw::pci::{offset, Command};
    let writes: Vec<(usize, u32)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            CardEvent::ConfigWrite {
                offset: o, value, ..
            } if *o == offset::COMMAND => Some((i, *value)),
            _ => None,
        })
        .collect();
    let last_on = writes
        .iter()
        .rposition(|(_, v)| Command((*v & 0xFFFF) as u16).bus_master())?;
    writes[last_on + 1..]
        .iter()
        .find(|(_, v)| !Command((*v & 0xFFFF) as u16).bus_master())
        .map(|(i, _)| *i)
}

/// Index of the first function reset at or after `from`.
pub fn reset_after(events: &[CardEvent], from: usize) -> Option<usize> {
    events
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, e)| matches!(e, CardEvent::FunctionReset { .. }))
        .map(|(i, _)| i)
}

/// The connection that performed event `i`.
pub fn connection_of(event: &CardEvent) -> u32 {
    match event {
        CardEvent::Opened { connection }
        | CardEvent::ConfigWrite { connection, .. }
        | CardEvent::MmioWrite { connection, .. }
        | CardEvent::FunctionReset { connection }
        | CardEvent::Doorbell { connection, .. } => *connection,
    }
}

/// Wait for the supervisor's contained recovery of an incident that `is`
/// picks (the monitor runs it on its own thread).
pub fn contained(
    host: &Host,
    is: impl Fn(&macuda_core::Incident) -> bool,
) -> std::sync::Arc<macuda_supervisor::RecoveryOutcome> {
    let waited = std::time::Instant::now();
    loop {
        let found = host
            .incidents()
            .into_iter()
            .find(|o| matches!(&o.cause, macuda_supervisor::Cause::Incident { incident, .. } if is(incident)));
        if let Some(o) = found {
            return o;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "no contained recovery: {:?}",
            host.incidents()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
