//! `macuda run -- CMD...`: one step on the card, the way the seed's runner
//! ran every step on its Thunderbolt card (notes §13), because two drivers
//! on one card wedge it and a step that dies can leave it mastering the
//! bus:
//!
//! 1. the card the step gets (`auto` resolved; `sim` served here for the
//!    step's life), and its TinyGPU server found answering or started,
//!    never replaced;
//! 2. a read-only preflight: who holds the card's lock, the card itself,
//!    its firmware state, bus mastering;
//! 3. the card's lock, taken with the runner's pid and handed down to the
//!    step (a second runner is refused with the holder's pid);
//! 4. the step as its own process, its driver's startup line echoed (that
//!    line, not what was exported, says what it opened), other processes
//!    on the card watched for;
//! 5. judgement: a step that died by signal, or did not have the card to
//!    itself, is flagged;
//! 6. the card left idle: bus mastering off (cleared and flagged if the
//!    step left it on), firmware resident for the next step;
//! 7. the lock released.

mod card_users;
mod preflight;
mod server;

use crate::exit_status as status;
use crate::run_log::RUN_LOG_VAR;
use card_users::{CardFiles, CardUser};
use macuda_pci::{default_lock_dir, default_tinygpu_socket, CardLock, DeviceSpec, PciError};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// How often the runner looks for the driver's lines and the step's end.
const POLL: Duration = Duration::from_millis(20);
/// How often it looks for other processes on the card.
const USERS_SCAN: Duration = Duration::from_millis(500);

/// What `macuda run` was asked.
pub struct RunArgs {
    pub device: DeviceSpec,
    /// Passed to the step as MACUDA_FIRMWARE.
    pub firmware: Option<PathBuf>,
    /// The TinyGPU server to start when none answers.
    pub server: Option<String>,
    pub command: Vec<OsString>,
}

/// Run one step; returns the runner's exit status: the step's own, 128 +
/// the signal that killed it, [`status::FLAGGED`] for a step that exited 0
/// but did not have the card to itself or left it mastering the bus, and
/// [`status::USAGE`] when the card could not be had.
pub fn run(args: RunArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let mut say = |text: &str| {
        let _ = writeln!(out, "macuda run: {text}");
    };
    let Some((program, program_args)) = args.command.split_first() else {
        let _ = writeln!(
            err,
            "error: no command to run (macuda run -- CMD [ARGS...])"
        );
        return status::USAGE;
    };

    // 1. The card the step gets.
    let (resolved, notes) = args.device.resolve();
    for n in &notes {
        say(&format!("note: {n}"));
    }
    let sim = match &resolved {
        DeviceSpec::Sim { chip } => match preflight::StepSim::start(chip.as_deref()) {
            Ok(sim) => Some(sim),
            Err(e) => return refuse(err, &e),
        },
        _ => None,
    };
    let spec = match &sim {
        Some(sim) => {
            say(&format!("sim: {}", sim.describe()));
            sim.spec()
        }
        None => resolved,
    };
    if let DeviceSpec::Replay { .. } | DeviceSpec::Auto = spec {
        let _ = writeln!(err, "error: {spec} is not a card a step can hold");
        return status::USAGE;
    }
    // The runner's own sim needs no server found or started.
    if let (DeviceSpec::TinyGpu { socket }, None) = (&spec, &sim) {
        let socket = socket.clone().unwrap_or_else(default_tinygpu_socket);
        let default = server::default_server(&socket);
        match server::ensure(
            &socket,
            args.server.as_deref(),
            default,
            server::SERVER_START_PATIENCE,
        ) {
            Ok(server::ServerState::Live) => {
                say(&format!("server: live on {}; left alone", socket.display()));
            }
            Ok(server::ServerState::Started { pid, command }) => say(&format!(
                "server: nothing answered on {}; started `{command}` (pid {pid}), which answers",
                socket.display()
            )),
            Err(e) => return refuse(err, &e),
        }
    }

    // 2. Read-only preflight.
    match preflight::look(&spec) {
        Ok(lines) => {
            for l in lines {
                say(&format!("preflight: {l}"));
            }
        }
        Err(e) => return refuse(err, e.as_ref()),
    }

    // 3. The card's lock, ours for the step.
    let lock = match CardLock::acquire(&default_lock_dir(), &spec.to_string()) {
        Ok(lock) => lock,
        Err(e) => return refuse(err, &e),
    };
    say(&format!(
        "lock: {} (pid {})",
        lock.path().display(),
        std::process::id()
    ));
    if let Some(pid) = lock.took_over_from() {
        say(&format!(
            "lock: taken over from pid {pid}, which ended without releasing the card"
        ));
    }

    // 4. The step.
    let mut log = match StepLog::create() {
        Ok(log) => log,
        Err(e) => return refuse(err, &e),
    };
    let handed = match lock.hand_down() {
        Ok(h) => h,
        Err(e) => return refuse(err, &e),
    };
    let (lock_var, lock_fd) = handed.env();
    let mut command = Command::new(program);
    command
        .args(program_args)
        .env("MACUDA_DEVICE", spec.to_string())
        .env(lock_var, lock_fd)
        .env(RUN_LOG_VAR, log.path());
    if let Some(dir) = &args.firmware {
        command.env("MACUDA_FIRMWARE", dir);
    }
    let shown = args
        .command
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let started = Instant::now();
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(err, "error: could not start the step `{shown}`: {e}");
            say(&format!("released {}", lock.path().display()));
            return status::NOT_STARTED;
        }
    };
    // The step holds its copy; the runner keeps its own lock.
    drop(handed);
    say(&format!("step: pid {}: {shown}", child.id()));
    let files = preflight::card_files(&spec);
    let watched = Watch::new(files);
    let (exit, users, drivers) = wait_step(&mut child, &mut log, watched, &mut say);
    let elapsed = started.elapsed();

    // 5. Judgement.
    let mut flagged = false;
    let code = match exit {
        Ok(st) => judge_exit(st, elapsed, &mut say, &mut flagged),
        Err(e) => {
            let _ = writeln!(err, "error: waiting for the step: {e}");
            flagged = true;
            status::FAILED
        }
    };
    if drivers == 0 {
        say("driver: the step never started the driver (no startup line)");
    }
    flagged |= judge_sharing(&spec, &users, &lock, &mut say);

    // 6. The card left idle.
    match preflight::leave_idle(&spec, &lock) {
        Ok(after) => {
            for l in &after.lines {
                say(&format!("after: {l}"));
            }
            if after.bus_master_was_on {
                say("FLAGGED: the step left bus mastering on (cleared now)");
                flagged = true;
            }
        }
        Err(e) => {
            let _ = writeln!(
                err,
                "error: checking the card after the step: {}",
                macuda_core::error_chain(e.as_ref()).join(": ")
            );
            flagged = true;
        }
    }

    // 7. Release.
    let path = lock.path().to_path_buf();
    drop(lock);
    say(&format!("released {}", path.display()));
    drop(sim);
    match code {
        status::OK if flagged => status::FLAGGED,
        c => c,
    }
}

fn refuse(err: &mut dyn Write, e: &(dyn std::error::Error + 'static)) -> i32 {
    let text = match e.downcast_ref::<PciError>() {
        Some(PciError::CardBusy { path, pid }) => {
            format!(
                "refused: the card is held by pid {pid} (lock {})",
                path.display()
            )
        }
        _ => macuda_core::error_chain(e).join(": "),
    };
    let _ = writeln!(err, "macuda run: {text}");
    status::USAGE
}

/// The step's exit, said; returns the runner's status for it.
fn judge_exit(
    st: ExitStatus,
    elapsed: Duration,
    say: &mut dyn FnMut(&str),
    flagged: &mut bool,
) -> i32 {
    if let Some(code) = st.code() {
        say(&format!(
            "step: exited {code} after {:.2} s",
            elapsed.as_secs_f64()
        ));
        return code;
    }
    let signal = st.signal().unwrap_or(0);
    let name = nix::sys::signal::Signal::try_from(signal)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {signal}"));
    say(&format!(
        "FLAGGED: the step died by signal {signal} ({name}) after {:.2} s{}",
        elapsed.as_secs_f64(),
        if st.core_dumped() {
            ", core dumped"
        } else {
            ""
        }
    ));
    *flagged = true;
    status::SIGNALLED_BASE + signal
}

/// Whether the step had the card to itself; says what was seen and how.
fn judge_sharing(
    spec: &DeviceSpec,
    users: &Option<BTreeSet<CardUser>>,
    lock: &CardLock,
    say: &mut dyn FnMut(&str),
) -> bool {
    let mut flagged = false;
    match users {
        Some(users) if !users.is_empty() => {
            for u in users {
                say(&format!(
                    "FLAGGED: the step did not have the card to itself: pid {} ({}) held {}",
                    u.pid, u.name, u.file
                ));
            }
            flagged = true;
        }
        Some(_) => say("sharing: no other process had the card open during the step"),
        None => say(&format!(
            "sharing: the card lock was held throughout; a driver that takes no lock is not visible on {}",
            match spec {
                DeviceSpec::Null => "the null card",
                _ => "a card reached over a socket",
            }
        )),
    }
    let mine = std::process::id().to_string();
    match std::fs::read_to_string(lock.path()) {
        Ok(text) if text.trim() == mine => {}
        Ok(text) => {
            say(&format!(
                "FLAGGED: the lock file no longer names this runner (it reads `{}`)",
                text.trim().escape_debug()
            ));
            flagged = true;
        }
        Err(e) => {
            say(&format!("FLAGGED: the lock file cannot be read: {e}"));
            flagged = true;
        }
    }
    flagged
}

/// The file the step's drivers write their startup lines to, and how far
/// the runner has echoed it.
struct StepLog {
    file: tempfile::NamedTempFile,
    echoed: u64,
    partial: String,
}

impl StepLog {
    fn create() -> Result<StepLog, std::io::Error> {
        Ok(StepLog {
            file: tempfile::Builder::new()
                .prefix("macuda-run")
                .suffix(".log")
                .tempfile()?,
            echoed: 0,
            partial: String::new(),
        })
    }

    fn path(&self) -> &Path {
        self.file.path()
    }

    /// The whole lines written since the last call.
    fn new_lines(&mut self) -> Vec<String> {
        let mut f = match std::fs::File::open(self.file.path()) {
            Ok(f) => f,
            Err(_) => return Vec::new(),
        };
        if f.seek(SeekFrom::Start(self.echoed)).is_err() {
            return Vec::new();
        }
        let mut bytes = Vec::new();
        // A step cannot stall the runner with a flood: at most this much a
        // look.
        let _ = Read::by_ref(&mut f).take(1 << 20).read_to_end(&mut bytes);
        self.echoed += bytes.len() as u64;
        self.partial.push_str(&String::from_utf8_lossy(&bytes));
        let mut lines = Vec::new();
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            lines.push(line.trim_end().to_string());
        }
        lines
    }
}

/// What the runner looks for while the step runs.
struct Watch {
    files: CardFiles,
    proc_root: PathBuf,
    can_look: bool,
}

impl Watch {
    fn new(files: CardFiles) -> Watch {
        let proc_root = PathBuf::from("/proc");
        let can_look = !files.is_empty() && card_users::can_look(&proc_root);
        Watch {
            files,
            proc_root,
            can_look,
        }
    }
}

/// Wait for the step, echoing its drivers' startup lines and collecting
/// other processes seen on the card (`None`: not looked for). Ctrl-C
/// reaches the step from the terminal; the runner waits it out.
fn wait_step(
    child: &mut Child,
    log: &mut StepLog,
    watch: Watch,
    say: &mut dyn FnMut(&str),
) -> (
    std::io::Result<ExitStatus>,
    Option<BTreeSet<CardUser>>,
    usize,
) {
    ignore_interrupts();
    let mut users = watch.can_look.then(BTreeSet::new);
    let mut drivers = 0;
    let runner = std::process::id();
    let step = child.id();
    let mut last_scan: Option<Instant> = None;
    let exit = loop {
        for line in log.new_lines() {
            drivers += 1;
            say(&format!("driver: {line}"));
        }
        match child.try_wait() {
            Ok(Some(st)) => break Ok(st),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
        if let Some(seen) = users.as_mut() {
            if last_scan.is_none_or(|t| t.elapsed() >= USERS_SCAN) {
                seen.extend(card_users::other_users(
                    &watch.proc_root,
                    &watch.files,
                    runner,
                    step,
                ));
                last_scan = Some(Instant::now());
            }
        }
        std::thread::sleep(POLL);
    };
    for line in log.new_lines() {
        drivers += 1;
        say(&format!("driver: {line}"));
    }
    (exit, users, drivers)
}

/// The runner must outlive its step to release the card: Ctrl-C goes to
/// the step (the terminal sends it to the whole group) and the runner only
/// notes it.
fn ignore_interrupts() {
    let _ = ctrlc::set_handler(|| {
        eprintln!("macuda run: interrupted; waiting for the step to end");
    });
}
