//! `macuda run -- CMD`: one step on the card, as its own process, under
//! the card's lock. Against the null card and the simulated one (served
//! by `macuda sim serve`, or by the runner itself with `--device sim`).

mod common;

use common::{macuda, run};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MACUDA: &str = env!("CARGO_BIN_EXE_macuda");

/// `macuda` with a lock directory of the test's own.
fn macuda_in(locks: &Path) -> Command {
    let mut c = macuda();
    c.env("MACUDA_LOCK_DIR", locks);
    c
}

fn wait_for(path: &Path, what: &str) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what} never appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Written, not only created.
    std::thread::sleep(Duration::from_millis(50));
}

/// A `macuda sim serve` on a unix socket, killed when dropped.
struct SimServer {
    child: Child,
    socket: PathBuf,
}

impl SimServer {
    fn start(dir: &Path) -> SimServer {
        let socket = dir.join("card.sock");
        let child = macuda()
            .args(["sim", "serve", "--boot-ms", "0"])
            .arg(format!("unix:{}", socket.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for(&socket, "the sim's socket");
        SimServer { child, socket }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_step_on_the_null_card_has_its_driver_line_echoed_and_the_lock_released() {
    let locks = tempfile::tempdir().unwrap();
    let (code, out, err) =
        run(macuda_in(locks.path()).args(["--device", "null", "run", "--", MACUDA, "demo"]));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    for expected in [
        "macuda run: preflight: card: the null card (no GPU)",
        "macuda run: lock: ",
        "macuda run: step: pid ",
        // The step's own Host said what it opened: the null card.
        "macuda run: driver: pid ",
        ": device null via ",
        "macuda run: step: exited 0 after ",
        "macuda run: after: the null card holds nothing between steps",
        "macuda run: released ",
    ] {
        assert!(out.contains(expected), "`{expected}` missing from:\n{out}");
    }
    assert!(!out.contains("FLAGGED"), "{out}");
    // Released: the lock file is empty and free.
    let lock = locks.path().join("null.lock");
    assert_eq!(std::fs::read_to_string(lock).unwrap(), "");
}

#[test]
fn a_second_run_is_refused_with_the_holders_pid_and_a_killed_step_is_flagged() {
    let locks = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let marker = work.path().join("step-pid");
    let script = format!("echo $$ > {}; exec sleep 30", marker.display());
    let first = macuda_in(locks.path())
        .args(["--device", "null", "run", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&marker, "the first step");

    let (code, out, err) =
        run(macuda_in(locks.path()).args(["--device", "null", "run", "--", "true"]));
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains(&format!("refused: the card is held by pid {}", first.id())),
        "{err}"
    );
    assert!(!out.contains("macuda run: step:"), "nothing ran: {out}");

    // Kill the first runner's step: it is flagged, by its signal.
    let step_pid = std::fs::read_to_string(&marker).unwrap();
    let killed = Command::new("kill")
        .args(["-KILL", step_pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let done = first.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&done.stdout);
    assert_eq!(done.status.code(), Some(128 + 9), "{out}");
    assert!(
        out.contains("FLAGGED: the step died by signal 9 (SIGKILL)"),
        "{out}"
    );
    assert!(out.contains("macuda run: released "), "{out}");
    // Free again.
    let (code, out, err) =
        run(macuda_in(locks.path()).args(["--device", "null", "run", "--", "true"]));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("driver: the step never started the driver"),
        "{out}"
    );
}

#[test]
fn the_step_holds_the_card_through_the_runners_lock_and_a_stranger_is_refused() {
    let locks = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let sim = SimServer::start(work.path());
    let device = format!("tinygpu:{}", sim.socket.display());
    let marker = work.path().join("step-pid");
    let info = work.path().join("info.txt");
    let go = work.path().join("go");
    // The step opens the card itself (`macuda info` takes the card's lock:
    // it adopts the runner's), then waits to be told to end.
    let script = format!(
        "\"{MACUDA}\" info > {} 2>&1 || exit 9; echo $$ > {}; while [ ! -e {} ]; do sleep 0.05; done",
        info.display(),
        marker.display(),
        go.display()
    );
    let first = macuda_in(locks.path())
        .args(["--device", &device, "run", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&marker, "the step");
    let seen = std::fs::read_to_string(&info).unwrap();
    assert!(seen.contains("pci id:    10de:"), "{seen}");

    // Another process, not the step's, is refused the card.
    let (code, out, err) = run(macuda_in(locks.path()).args(["--device", &device, "info"]));
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains(&first.id().to_string()),
        "the holder's pid: {err}"
    );

    std::fs::write(&go, "").unwrap(); // The step ends.
    let done = first.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&done.stdout);
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(
        done.status.code(),
        Some(0),
        "stdout:\n{out}\nstderr:\n{err}"
    );
    for expected in [
        &format!(
            "macuda run: server: live on {}; left alone",
            sim.socket.display()
        ),
        "macuda run: preflight: lock: free; card reached via ",
        "macuda run: preflight: card: 10de:",
        "macuda run: preflight: bus mastering: off",
        "macuda run: sharing: the card lock was held throughout",
        "macuda run: after: bus mastering off: the card fetches nothing",
        "macuda run: released ",
    ] {
        assert!(out.contains(expected), "`{expected}` missing from:\n{out}");
    }
    assert!(!out.contains("FLAGGED"), "{out}");
}

#[test]
fn a_missing_server_is_started_once_and_a_live_one_left_alone() {
    let locks = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let socket = work.path().join("card.sock");
    let device = format!("tinygpu:{}", socket.display());
    let server = format!("{MACUDA} sim serve --boot-ms 0 unix:{{socket}}");
    let step = |c: &mut Command| {
        c.args([
            "--device", &device, "run", "--server", &server, "--", "true",
        ]);
    };
    let mut c = macuda_in(locks.path());
    step(&mut c);
    let (code, out, err) = run(&mut c);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let started = out
        .lines()
        .find(|l| l.contains("server: nothing answered on"))
        .unwrap_or_else(|| panic!("no server started:\n{out}"));
    let pid: u32 = started
        .split("(pid ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{started}"));
    let kill = scopeguard(pid);

    // It outlived the runner; the next step finds it live and keeps it.
    let mut c = macuda_in(locks.path());
    step(&mut c);
    let (code, out, err) = run(&mut c);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("; left alone"), "{out}");
    assert!(!out.contains("nothing answered"), "{out}");
    drop(kill);

    // No server and none to start: refused, naming the socket.
    let gone = work.path().join("gone.sock");
    let (code, _, err) = run(macuda_in(locks.path()).args([
        "--device",
        &format!("tinygpu:{}", gone.display()),
        "run",
        "--",
        "true",
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("gone.sock") && err.contains("--server"),
        "{err}"
    );
}

/// Kills `pid` when dropped.
fn scopeguard(pid: u32) -> impl Drop {
    struct Kill(u32);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = Command::new("kill").arg(self.0.to_string()).status();
        }
    }
    Kill(pid)
}

#[test]
fn a_step_that_cannot_start_and_bad_arguments_are_refused() {
    let locks = tempfile::tempdir().unwrap();
    let (code, out, err) =
        run(macuda_in(locks.path()).args(["--device", "null", "run", "--", "/no/such/program"]));
    assert_eq!(code, 127, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("could not start the step `/no/such/program`"),
        "{err}"
    );
    assert!(out.contains("released"), "{out}");
    // Nothing to run.
    let (code, _, err) = run(macuda_in(locks.path()).args(["--device", "null", "run"]));
    assert_eq!(code, 2, "{err}");
    // --record is this process's; the step is another.
    let (code, _, err) = run(macuda_in(locks.path()).args([
        "--device",
        "null",
        "--record",
        "/dev/null",
        "run",
        "--",
        "true",
    ]));
    assert_eq!(code, 2, "{err}");
    // The step's status is the runner's.
    let (code, out, _) =
        run(macuda_in(locks.path()).args(["--device", "null", "run", "--", "sh", "-c", "exit 5"]));
    assert_eq!(code, 5, "{out}");
    assert!(out.contains("step: exited 5"), "{out}");
}

#[test]
#[ignore = "needs NVIDIA's 570.144 GSP images: MACUDA_FIRMWARE=DIR (tests/sim/firmware.sh fetches them)"]
fn the_demo_as_a_step_on_a_simulated_card_boots_it_and_leaves_it_warm() {
    let dir = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let locks = tempfile::tempdir().unwrap();
    let (code, out, err) = run(macuda_in(locks.path())
        .args(["--device", "sim", "run", "--firmware"])
        .arg(&dir)
        .args(["--", MACUDA, "demo"]));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    for expected in [
        "macuda run: sim: a simulated GB202 served by the runner for the step",
        "macuda run: preflight: card: 10de:",
        // The step's driver booted the card itself and said so.
        "macuda run: driver: pid ",
        "RM: GSP-RM booted by us",
        "macuda run: step: exited 0",
        "macuda run: after: bus mastering off: the card fetches nothing",
        "macuda run: after: firmware resident (WPR2 up), left warm for the next step",
        "macuda run: released ",
    ] {
        assert!(out.contains(expected), "`{expected}` missing from:\n{out}");
    }
    assert!(!out.contains("FLAGGED"), "{out}");
}
