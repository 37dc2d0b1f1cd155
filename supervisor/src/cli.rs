//! The `macuda` command line: `demo`, `info`, `boot`, `run`, `report`,
//! `inspect`, `bench`, `sim serve` and `firmware`.

use crate::host::{FaultBoard, Host, HostConfig, HostError, ACTORS};
use crate::report::CrashReport;
use crate::workload;
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use macuda_core::{error_chain, FaultAction, FaultPlan};
use macuda_pci::{clear_bus_master, enable_memory_space, read_identity, record_to, DeviceSpec};
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Exit statuses.
pub use crate::exit_status as status;

/// The most launches a benchmark may be asked for: minutes of work, not
/// days.
const MAX_LAUNCHES: u64 = 100_000_000;
/// The longest pause between the demo's phases.
const MAX_PACE_MS: u64 = 60_000;
/// The longest per-request deadline.
const MAX_DEADLINE_MS: u64 = 3_600_000;

#[derive(Parser, Debug)]
#[command(name = "macuda", version = crate::BUILD_ID, about = "A userspace NVIDIA driver and CUDA runtime")]
struct Cli {
    /// null, auto, tinygpu[:SOCKET], remote:HOST:PORT, sysfs:BDF, kernel[:N], replay:TRACE
    #[arg(long, global = true, env = "MACUDA_DEVICE", default_value = "auto")]
    device: DeviceSpec,
    /// Record every access to the card into this trace (replay it with
    /// `--device replay:FILE`).
    #[arg(long, global = true, value_name = "FILE")]
    record: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start the stack, run a scripted workload through every actor, stop.
    Demo {
        /// Inject a fault: ACTOR[.REQUEST]:panic|error|hang:N (at the actor's
        /// Nth request, or its Nth request of that kind).
        #[arg(long)]
        inject: Option<InjectSpec>,
        /// Milliseconds to pause between workload phases (at most a minute).
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=MAX_PACE_MS))]
        pace_ms: u64,
        /// Per-request deadline in milliseconds (1 ms to an hour).
        #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=MAX_DEADLINE_MS))]
        deadline_ms: u64,
        /// For a card we boot ourselves (sim): a directory laid out as
        /// linux-firmware's nvidia/<chip>/gsp/ (default: MACUDA_FIRMWARE,
        /// else /lib/firmware and /usr/lib/firmware).
        #[arg(long = "firmware", value_name = "DIR")]
        firmware: Option<PathBuf>,
    },
    /// Identify the card without booting it; leaves bus mastering off.
    /// With --boot, start the stack on a card we boot ourselves (sim) and
    /// print what it learned: GSP-RM's name for the card, its memory, our
    /// client's objects in GSP-RM's tree.
    Info {
        /// Boot the card's GSP-RM and build our object tree first.
        #[arg(long)]
        boot: bool,
        /// With --boot: a directory laid out as linux-firmware's
        /// nvidia/<chip>/gsp/ (default: MACUDA_FIRMWARE, else
        /// /lib/firmware and /usr/lib/firmware).
        #[arg(long = "firmware", value_name = "DIR", requires = "boot")]
        firmware: Option<PathBuf>,
    },
    /// Boot the card's GSP-RM ourselves, through its FSP, to GSP_INIT_DONE
    /// (tinygpu, remote, sysfs, sim, or a replayed trace of such a boot);
    /// prints each step and its time; leaves bus mastering off and the
    /// firmware resident.
    Boot {
        /// A directory laid out as linux-firmware's nvidia/<chip>/gsp/
        /// (default: MACUDA_FIRMWARE, else /lib/firmware and
        /// /usr/lib/firmware).
        #[arg(long = "firmware", value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Show what a fat binary, a cubin, or a host object embedding fat
    /// binaries holds: kernels, parameter layouts, registers, shared memory,
    /// constant banks, relocations.
    Inspect {
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run one step on the card as its own process: a read-only
    /// preflight, the card's lock (handed down to the step), the step, its
    /// driver's startup line echoed, a step that died by signal or shared
    /// the card flagged, the card left idle with firmware resident, the
    /// lock released. Exits with the step's status.
    Run {
        /// A directory laid out as linux-firmware's nvidia/<chip>/gsp/,
        /// passed to the step as MACUDA_FIRMWARE.
        #[arg(long = "firmware", value_name = "DIR")]
        firmware: Option<PathBuf>,
        /// For tinygpu cards: the server to start when nothing answers on
        /// the socket (`{socket}` is replaced by its path); a live one is
        /// never replaced. Default: TinyGPU's app on a Mac, none elsewhere.
        #[arg(long, value_name = "CMD")]
        server: Option<String>,
        /// The step: a command and its arguments (after `--`).
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        command: Vec<OsString>,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
    /// Print a crash report.
    Report {
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The simulated GPU.
    Sim {
        #[command(subcommand)]
        what: SimWhat,
    },
    /// Find NVIDIA's 570.144 GSP firmware images, check their SHA-256 pins
    /// and containers, and say what was found.
    Firmware {
        /// A directory laid out as linux-firmware's nvidia/<chip>/gsp/
        /// (default: MACUDA_FIRMWARE, else /lib/firmware and
        /// /usr/lib/firmware).
        #[arg(long = "firmware", value_name = "DIR")]
        dir: Option<PathBuf>,
        /// gb202 (RTX 5090) or gh100 (H100).
        #[arg(long, default_value = "gb202")]
        chip: String,
    },
}

#[derive(Subcommand, Debug)]
enum SimWhat {
    /// Serve a simulated card over the TinyGPU protocol (TCP on 127.0.0.1
    /// only) until Ctrl-C, for any driver that speaks it.
    Serve {
        /// unix:PATH or tcp:PORT
        listen: macuda_sim::Listen,
        /// gb202 (an RTX 5090) or gh100 (an H100 PCIe).
        #[arg(long, default_value = "gb202")]
        chip: String,
        /// How long the card's own boot takes after power-on or a reset
        /// (about 1,500 ms on a 5090).
        #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u64).range(0..=60_000))]
        boot_ms: u64,
        /// Shared mappings are scattered in segments of this many KiB (at
        /// most 32 segments a mapping, as the macOS extension lists).
        #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(4..=1_048_576))]
        segment_kib: u64,
        /// A fault to inject at start (repeatable): drop-doorbell:N,
        /// corrupt-reply:N, hang-engines, fault-address:VA, off-the-bus.
        #[arg(long = "fault")]
        faults: Vec<macuda_sim::faults::DeviceFault>,
        /// GSP-RM sends a CPU-sequencer script before GSP_INIT_DONE and
        /// waits for the host to have run it.
        #[arg(long)]
        boot_sequencer: bool,
        /// Write what each boot was handed (the COT request, the boot
        /// parameters, the WPR meta, the radix3 image, the libos page), as
        /// the card saw it, to FILE as JSON once the FSP has taken it.
        #[arg(long, value_name = "FILE")]
        boot_record: Option<std::path::PathBuf>,
        /// Write the context promotions GSP-RM took (each buffer's id, size
        /// and which addresses it was given) to FILE as JSON, each time
        /// another is taken.
        #[arg(long, value_name = "FILE")]
        rm_record: Option<std::path::PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
enum BenchWhat {
    /// Launch cost through the lane and descriptor bytes per flush (null device).
    Launch {
        /// How many launches (1 to 100 million).
        #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=MAX_LAUNCHES))]
        launches: u64,
    },
    /// Empty-kernel launches on a real GPU (`--device kernel`), ours beside
    /// NVIDIA's runtime (tests/device/launch_bench.cu, built with nvcc).
    Gpu {
        /// How many launches (1 to 100 million).
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=MAX_LAUNCHES))]
        launches: u64,
        /// The reference program built from tests/device/launch_bench.cu.
        #[arg(long, value_name = "PATH")]
        reference: Option<PathBuf>,
        /// Also time each chain tuning, each checked on a dependent chain.
        #[arg(long)]
        variants: bool,
    },
    /// On a card we boot ourselves (`--device sim|tinygpu|remote|sysfs`):
    /// allocations of 1 GiB until refused, then halving pieces, both ends
    /// of each written and read back through the copy engine; the share
    /// of VRAM handed out.
    Fill {
        /// A directory laid out as linux-firmware's nvidia/<chip>/gsp/
        /// (default: MACUDA_FIRMWARE, else /lib/firmware and
        /// /usr/lib/firmware).
        #[arg(long = "firmware", value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

impl Command {
    /// The command's name when it opens no card (so `--device` means
    /// nothing to it).
    fn opens_no_device(&self) -> Option<&'static str> {
        match self {
            Command::Inspect { .. } => Some("inspect"),
            Command::Report { .. } => Some("report"),
            Command::Firmware { .. } => Some("firmware"),
            Command::Sim { .. } => Some("sim"),
            Command::Bench {
                what: BenchWhat::Launch { .. },
            } => Some("bench launch"),
            _ => None,
        }
    }
}

/// `ACTOR[.REQUEST]:ACTION:N`
#[derive(Debug, Clone)]
pub struct InjectSpec {
    pub actor: String,
    pub kind: Option<String>,
    pub action: FaultAction,
    pub nth: u64,
}

impl std::str::FromStr for InjectSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.split(':').collect();
        let [target, action, nth] = parts[..] else {
            return Err(format!(
                "`{s}`: expected ACTOR[.REQUEST]:panic|error|hang:N"
            ));
        };
        let (actor, kind) = match target.split_once('.') {
            Some((a, k)) => (a, Some(k.to_string())),
            None => (target, None),
        };
        if !ACTORS.contains(&actor) {
            return Err(format!(
                "`{actor}` is not an actor (expected one of {})",
                ACTORS.join(", ")
            ));
        }
        if let Some(k) = &kind {
            let known = crate::layers::request_kinds(actor).unwrap_or_default();
            if !known.contains(&k.as_str()) {
                return Err(format!(
                    "`{}` is not a request of {actor} (expected one of {})",
                    k.escape_debug(),
                    known.join(", ")
                ));
            }
        }
        let action = action.parse::<FaultAction>().map_err(|e| e.to_string())?;
        let nth: u64 = nth
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("`{nth}`: N must be a positive number"))?;
        Ok(InjectSpec {
            actor: actor.to_string(),
            kind,
            action,
            nth,
        })
    }
}

impl InjectSpec {
    /// Arm the fault on a Host's board (before the Host starts).
    pub fn install(&self, faults: &FaultBoard) {
        let mut plan = FaultPlan::new(self.action, self.nth);
        if let Some(k) = &self.kind {
            plan = plan.on_kind(k.clone());
        }
        // The actor is checked by the parser, so this cannot fail.
        let _ = faults.install(&self.actor, plan);
    }
}

fn print_error(err: &mut dyn Write, e: &(dyn std::error::Error + 'static)) {
    let chain = error_chain(e);
    let _ = writeln!(err, "macuda: error: {}", chain[0]);
    for c in &chain[1..] {
        let _ = writeln!(err, "  caused by: {c}");
    }
}

/// Run the CLI with `args` (program name first); returns the exit status.
pub fn run(
    args: impl IntoIterator<Item = OsString>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let parsed = Cli::command()
        .try_get_matches_from(args)
        .and_then(|m| Ok((Cli::from_arg_matches(&m)?, m)));
    let (cli, matches) = match parsed {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                status::USAGE
            } else {
                status::OK
            };
            let _ = if e.use_stderr() {
                write!(err, "{e}")
            } else {
                write!(out, "{e}")
            };
            return code;
        }
    };
    // A `--device` given to a command that opens no card would be silently
    // ignored: say so instead (MACUDA_DEVICE, the environment's standing
    // choice, is not an error).
    let device_given = matches.value_source("device") == Some(ValueSource::CommandLine);
    if let Some(name) = cli.command.opens_no_device() {
        if device_given {
            let _ = writeln!(
                err,
                "error: --device means nothing to `{name}`: it opens no card"
            );
            return status::USAGE;
        }
    }
    match cli.command {
        Command::Demo {
            inject,
            pace_ms,
            deadline_ms,
            firmware,
        } => demo(
            DemoArgs {
                device: cli.device,
                record: cli.record,
                firmware,
                inject,
                pace: Duration::from_millis(pace_ms),
                deadline: Duration::from_millis(deadline_ms),
            },
            out,
            err,
        ),
        Command::Info { boot: false, .. } => info(cli.device, cli.record, out, err),
        Command::Info {
            boot: true,
            firmware,
        } => {
            let mut config = HostConfig::new(cli.device);
            config.record = cli.record;
            config.firmware = firmware;
            run_then_exit(config, out, err, |host, out| {
                crate::booted_info::print(host, out)
            })
        }
        Command::Sim {
            what:
                SimWhat::Serve {
                    listen,
                    chip,
                    boot_ms,
                    segment_kib,
                    faults,
                    boot_sequencer,
                    boot_record,
                    rm_record,
                },
        } => {
            let s = crate::sim_serve::SimServe {
                listen,
                chip,
                boot: Duration::from_millis(boot_ms),
                segment_bytes: segment_kib << 10,
                faults,
                boot_sequencer,
                boot_record,
                rm_record,
            };
            match crate::sim_serve::serve(s, out) {
                Ok(()) => status::OK,
                Err(e) => {
                    let _ = writeln!(err, "macuda: {e}");
                    status::USAGE
                }
            }
        }
        Command::Boot { dir } => {
            use crate::boot_cmd::{boot, BootOutcome};
            match boot(&cli.device, cli.record, dir, out, err) {
                BootOutcome::Booted => status::OK,
                BootOutcome::Unusable | BootOutcome::NoFirmware => status::USAGE,
                BootOutcome::Failed => status::FAILED,
            }
        }
        Command::Firmware { dir, chip } => {
            use crate::firmware_cmd::{firmware, FirmwareFailure};
            match firmware(dir, &chip, out, err) {
                Ok(()) => status::OK,
                Err(FirmwareFailure::UnknownChip | FirmwareFailure::Missing) => status::USAGE,
                Err(FirmwareFailure::Wrong) => status::FAILED,
            }
        }
        Command::Report { file, json } => report(&file, json, out, err),
        Command::Run {
            firmware,
            server,
            command,
        } => {
            if cli.record.is_some() {
                let _ = writeln!(
                    err,
                    "error: --record traces this process's accesses; the step is another process (give it its own)"
                );
                return status::USAGE;
            }
            crate::run_cmd::run(
                crate::run_cmd::RunArgs {
                    device: cli.device,
                    firmware,
                    server,
                    command,
                },
                out,
                err,
            )
        }
        Command::Inspect { file, json } => inspect(&file, json, out, err),
        Command::Bench {
            what: BenchWhat::Launch { launches },
        } => match crate::bench::launch_bench(launches) {
            Ok(b) => {
                let _ = writeln!(out, "{}", b.render());
                status::OK
            }
            Err(e) => failed(e, out, err),
        },
        Command::Bench {
            what: BenchWhat::Fill { dir },
        } => {
            use crate::boot_cmd::BootOutcome;
            match crate::fill_cmd::fill(&cli.device, dir, out, err) {
                BootOutcome::Booted => status::OK,
                BootOutcome::Unusable | BootOutcome::NoFirmware => status::USAGE,
                BootOutcome::Failed => status::FAILED,
            }
        }
        Command::Bench {
            what:
                BenchWhat::Gpu {
                    launches,
                    reference,
                    variants,
                },
        } => {
            let (spec, _) = cli.device.resolve();
            let config = crate::gpu_bench::bench_config(spec);
            match crate::gpu_bench::gpu_bench(
                config,
                launches.max(1),
                reference.as_deref(),
                variants,
            ) {
                Ok(b) => {
                    let _ = writeln!(out, "{}", b.render());
                    status::OK
                }
                Err(e) => failed(e, out, err),
            }
        }
    }
}

/// What `macuda demo` was asked.
struct DemoArgs {
    device: DeviceSpec,
    record: Option<PathBuf>,
    firmware: Option<PathBuf>,
    inject: Option<InjectSpec>,
    pace: Duration,
    deadline: Duration,
}

fn demo(args: DemoArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let DemoArgs {
        device,
        record,
        firmware,
        inject,
        pace,
        deadline,
    } = args;
    let mut config = HostConfig::new(device);
    config.record = record;
    config.firmware = firmware;
    config.deadline = deadline.max(Duration::from_millis(1));
    config.ctrl_c = true;
    config.exit_on_interrupt = true;
    if let Some(spec) = &inject {
        spec.install(&config.faults);
    }
    let host = match Host::start(config) {
        Ok(h) => h,
        Err(e) => return failed(e, out, err),
    };
    let _ = writeln!(out, "{}", host.device_line());
    for n in host.notes() {
        let _ = writeln!(out, "note: {n}");
    }
    if let Some(spec) = &inject {
        let _ = writeln!(
            out,
            "injecting: {} at request #{}{} of actor `{}`",
            spec.action,
            spec.nth,
            spec.kind
                .as_deref()
                .map(|k| format!(" of kind `{k}`"))
                .unwrap_or_default(),
            spec.actor
        );
    }
    let result = workload::run(&host, pace);
    if let Ok(w) = &result {
        for s in &w.steps {
            let _ = writeln!(out, "{s}");
        }
        for r in &w.refusals {
            let _ = writeln!(out, "refused by the device (expected on null): {r}");
        }
    }
    let _ = writeln!(out, "per-actor summary:");
    for line in workload::summary(&host.snapshots()) {
        let _ = writeln!(out, "  {line}");
    }
    exit(host, result.map(|_| ()), out, err)
}

/// Start the stack, run `then` on it, and stop it as a program's exit
/// does.
fn run_then_exit(
    config: HostConfig,
    out: &mut dyn Write,
    err: &mut dyn Write,
    then: impl FnOnce(&Host, &mut dyn Write) -> Result<(), HostError>,
) -> i32 {
    let host = match Host::start(config) {
        Ok(h) => h,
        Err(e) => return failed(e, out, err),
    };
    let _ = writeln!(out, "{}", host.device_line());
    for n in host.notes() {
        let _ = writeln!(out, "note: {n}");
    }
    let result = then(&host, out);
    exit(host, result, out, err)
}

/// Stop the stack after its work: the exit steps and report printed, the
/// status of the whole.
fn exit(
    host: Host,
    result: Result<(), HostError>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    match result {
        Ok(()) => {
            let outcome = host.shutdown();
            let _ = writeln!(out, "exit:");
            for s in &outcome.steps {
                let _ = writeln!(
                    out,
                    "  [{}] {}: {}",
                    if s.ok { "ok" } else { "FAILED" },
                    s.action,
                    s.detail
                );
            }
            match &outcome.report {
                Ok(p) => {
                    let _ = writeln!(out, "exit report: {}", p.display());
                }
                Err(e) => {
                    let _ = writeln!(err, "macuda: exit report not written: {e}");
                }
            }
            if outcome.steps.iter().all(|s| s.ok) {
                status::OK
            } else {
                status::FAILED
            }
        }
        Err(e) => {
            drop(host.shutdown());
            failed(e, out, err)
        }
    }
}

/// `info` through NVIDIA's kernel module: what RM says the GPU is.
fn kernel_info(index: u32, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let identity = macuda_gsp::identify_module(std::sync::Arc::new(macuda_gsp::DeviceFiles), index);
    match identity {
        Ok((id, gr)) => {
            let p = id.pci;
            let _ = writeln!(
                out,
                "device:    kernel:{} via {} (NVIDIA kernel module {})",
                id.index,
                id.node.display(),
                id.driver_version
            );
            let _ = writeln!(
                out,
                "pci:       {:04x}:{:02x}:{:02x}.{} id {:04x}:{:04x}",
                p.domain, p.bus, p.slot, p.function, p.vendor_id, p.device_id
            );
            let _ = writeln!(out, "name:      {}", id.name);
            let _ = writeln!(
                out,
                "chip:      {} (architecture {:#x}, implementation {:#x})",
                id.chip.unwrap_or("unknown"),
                id.architecture,
                id.implementation
            );
            let _ = writeln!(
                out,
                "vram:      {} MiB (heap {} KiB, usable {} KiB)",
                id.vram_bytes >> 20,
                id.heap_bytes >> 10,
                id.usable_bytes >> 10
            );
            let _ = writeln!(
                out,
                "memory:    L2 {} KiB, {}-bit bus",
                id.l2_bytes >> 10,
                id.memory_bus_bits
            );
            match gr {
                Ok(g) => {
                    let _ = writeln!(
                        out,
                        "engine:    SM version {:#x}, {} SMs ({} cores, {} per SM), warp {}, {} warps per SM, at most {} GPCs x {} TPCs x {} SMs",
                        g.sm_version,
                        g.sm_count(
                            macuda_hw::chip::Chip::from_architecture(
                                id.architecture >> macuda_hw::rm::ARCHITECTURE_SHIFT,
                                id.implementation
                            )
                            .compute_capability()
                            .unwrap_or(0)
                        ),
                        g.cores,
                        g.cores_per_sm,
                        g.warp_size,
                        g.max_warps_per_sm,
                        g.gpcs,
                        g.tpcs_per_gpc,
                        g.sms_per_tpc
                    );
                }
                Err(e) => {
                    let _ = writeln!(out, "engine:    GR_GET_INFO refused: {e}");
                }
            }
            status::OK
        }
        Err(e) => {
            print_error(err, &e);
            status::FAILED
        }
    }
}

fn failed(e: HostError, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    print_error(err, &e);
    if let Some(p) = e.report() {
        let _ = writeln!(out, "crash report: {}", p.display());
    }
    // A kernel module whose device files are absent, or a TinyGPU socket
    // or server that is not there: the device cannot be opened, which is
    // a usage error, not a failure.
    let unopenable = matches!(
        macuda_core::find_in_chain::<macuda_gsp::KernelRmError>(&e),
        Some(macuda_gsp::KernelRmError::Open { .. })
    ) || matches!(
        macuda_core::find_in_chain::<macuda_pci::PciError>(&e),
        Some(macuda_pci::PciError::Connect { .. })
    );
    match e {
        HostError::Interrupted { .. } => status::INTERRUPTED,
        HostError::Boot { .. } if unopenable => status::USAGE,
        HostError::ActorFailed { .. }
        | HostError::Boot { .. }
        | HostError::Down { .. }
        | HostError::RecoveryTimedOut { .. } => status::FAILED,
        _ => status::USAGE,
    }
}

fn info(
    device: DeviceSpec,
    record: Option<PathBuf>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let (spec, notes) = device.resolve();
    for n in &notes {
        let _ = writeln!(out, "note: {n}");
    }
    if let DeviceSpec::Kernel { index } = spec {
        if record.is_some() {
            let _ = writeln!(
                err,
                "error: --record traces accesses to the card; through the kernel module there are none to trace"
            );
            return status::USAGE;
        }
        return kernel_info(index, out, err);
    }
    let opened = crate::opener::opener_for(&spec).and_then(|o| match &record {
        Some(path) => record_to(o, path),
        None => Ok(o),
    });
    let opener = match opened {
        Ok(o) => o,
        Err(e) => {
            print_error(err, &e);
            return status::USAGE;
        }
    };
    // Memory decoding only: registers answer, the card cannot master the bus.
    let identity = opener.open().and_then(|mut t| {
        enable_memory_space(t.as_mut())?;
        read_identity(t.as_mut())
    });
    // Whatever happened, leave bus mastering off, through a fresh connection.
    let cleared = opener.open().and_then(|mut t| clear_bus_master(t.as_mut()));
    let code = match identity {
        Ok(id) => {
            let _ = writeln!(out, "device:    {spec} via {}", opener.describe());
            let _ = writeln!(
                out,
                "pci id:    {:04x}:{:04x}, class/revision {:#010x}",
                id.vendor, id.device, id.revision_and_class
            );
            for b in &id.bars {
                let small = if b.index == 1 && id.small_bar() {
                    " (small BAR)"
                } else {
                    ""
                };
                let _ = writeln!(out, "BAR{}:      {} MiB{small}", b.index, b.bytes >> 20);
            }
            let _ = writeln!(
                out,
                "chip:      {} (NV_PMC_BOOT_0 {:#010x}, NV_PMC_BOOT_42 {:#010x})",
                id.chip.chip, id.chip.boot_0, id.chip.boot_42
            );
            let _ = writeln!(
                out,
                "firmware:  {}",
                if id.firmware_resident {
                    "GSP firmware resident (WPR2 up): a reset must come before the next boot"
                } else {
                    "not resident (WPR2 down)"
                }
            );
            status::OK
        }
        Err(e) => {
            print_error(err, &e);
            status::FAILED
        }
    };
    let code = match cleared {
        Ok(c) => {
            let _ = writeln!(
                out,
                "exit:      bus mastering off (command {:#06x} -> {:#06x})",
                c.before.0, c.after.0
            );
            code
        }
        // A server that never answered was said once already.
        Err(macuda_pci::PciError::PeerSilent { .. }) if code != status::OK => code,
        Err(e) => {
            print_error(err, &e);
            status::FAILED
        }
    };
    match opener.end_session() {
        Ok(Some(line)) => {
            let _ = writeln!(out, "session:   {line}");
            code
        }
        Ok(None) => code,
        Err(e) => {
            print_error(err, &e);
            status::FAILED
        }
    }
}

fn inspect(file: &std::path::Path, json: bool, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let bytes = match crate::input_file::read_bounded(file, crate::input_file::MAX_INSPECT_BYTES) {
        Ok(b) => b,
        Err(e) => {
            let _ = writeln!(err, "macuda: error: {e}");
            return status::USAGE;
        }
    };
    match macuda_loader::inspect::inspect(&bytes) {
        Ok(i) if json => match serde_json::to_string_pretty(&i) {
            Ok(s) => {
                let _ = writeln!(out, "{s}");
                status::OK
            }
            Err(e) => {
                print_error(err, &e);
                status::FAILED
            }
        },
        Ok(i) => {
            let _ = write!(out, "{}", macuda_loader::inspect::render(&i));
            status::OK
        }
        Err(e) => {
            print_error(err, &e);
            status::FAILED
        }
    }
}

fn report(file: &std::path::Path, json: bool, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    match CrashReport::read(file) {
        Ok(r) => {
            if json {
                match serde_json::to_string_pretty(&r) {
                    Ok(s) => {
                        let _ = writeln!(out, "{s}");
                    }
                    Err(e) => {
                        print_error(err, &e);
                        return status::FAILED;
                    }
                }
            } else {
                let _ = write!(out, "{}", printable(&r.render(), usize::MAX));
            }
            status::OK
        }
        Err(e) => {
            // The file's own bytes may be in the message (a variant name
            // it made up): escaped, and cut.
            let _ = writeln!(
                err,
                "macuda: error: {}",
                printable(&macuda_core::error_chain(&e).join(": "), MAX_ERROR_CHARS)
            );
            status::FAILED
        }
    }
}

/// The longest error `macuda report` prints about a file it refused.
const MAX_ERROR_CHARS: usize = 400;

/// Text from a file made safe for a terminal: control characters other
/// than newline and tab escaped (an ESC from a report must not clear the
/// screen), and cut after `max` characters, saying so.
fn printable(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == max {
            out.push_str(&format!(
                "... ({} more characters)",
                text.chars().count() - max
            ));
            break;
        }
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_text_escapes_controls_and_cuts() {
        assert_eq!(printable("a\x1b[2Jb\nc\td", 100), "a\\u{1b}[2Jb\nc\td");
        let long = "x".repeat(10);
        assert_eq!(printable(&long, 4), "xxxx... (6 more characters)");
        assert_eq!(printable("\u{7}", usize::MAX), "\\u{7}");
    }

    #[test]
    fn parses_inject_specs() {
        let s: InjectSpec = "memory:panic:3".parse().unwrap();
        assert_eq!(
            (s.actor.as_str(), s.kind, s.action, s.nth),
            ("memory", None, FaultAction::Panic, 3)
        );
        let s: InjectSpec = "pci.alloc_dma:hang:1".parse().unwrap();
        assert_eq!(s.kind.as_deref(), Some("alloc_dma"));
        for bad in [
            "gpu:panic:1",
            "pci:boom:1",
            "pci:panic:0",
            "pci:panic",
            "pci:panic:x",
            // Requests the actor does not have: refused, not ignored.
            "pci.nosuchreq:panic:1",
            "pci.:panic:1",
            "pci..x:panic:1",
            "pci.identify.x:panic:1",
            "memory.identify:error:1",
        ] {
            assert!(bad.parse::<InjectSpec>().is_err(), "{bad}");
        }
        let e = "pci.nosuchreq:panic:1".parse::<InjectSpec>().unwrap_err();
        assert!(
            e.contains("not a request of pci") && e.contains("identify"),
            "{e}"
        );
        let s: InjectSpec = "submit.sync_point:error:2".parse().unwrap();
        assert_eq!(s.kind.as_deref(), Some("sync_point"));
    }
}
