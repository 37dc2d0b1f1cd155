//! The `macuda` binary as a user runs it: the demo, injected faults, info,
//! unbuilt devices, MACUDA_LOG, and a real SIGINT.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn macuda(reports: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_macuda"));
    c.env("MACUDA_REPORT_DIR", reports)
        .env("MACUDA_LOG", "off")
        .env_remove("MACUDA_DEVICE");
    c
}

fn run(c: &mut Command) -> (i32, String, String) {
    let out = c.output().expect("macuda runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn line_value(text: &str, prefix: &str) -> Option<PathBuf> {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .map(|p| PathBuf::from(p.trim()))
}

#[test]
fn demo_on_null_runs_every_actor_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run(macuda(dir.path()).args(["--device", "null", "demo"]));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let first = out.lines().next().unwrap();
    assert!(
        first.contains("device null")
            && first.contains("GB202")
            && first.contains("32768 MiB VRAM"),
        "{first}"
    );
    for actor in ["pci", "gsp", "memory", "submit", "loader"] {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(actor) && l.contains("requests"))
            .unwrap_or_else(|| panic!("no summary line for {actor}:\n{out}"));
        let n: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(n > 0, "{line}");
    }
    assert!(
        out.contains("refused by the device (expected on null)"),
        "{out}"
    );
    assert!(
        out.contains("clear bus mastering through a fresh transport: command 0x0006 -> 0x0002"),
        "{out}"
    );
    let report = line_value(&out, "exit report: ").expect("exit report path printed");
    assert!(report.starts_with(dir.path()) && report.exists());
}

#[test]
fn demo_with_an_injected_fault_exits_nonzero_and_names_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run(macuda(dir.path()).args([
        "--device",
        "null",
        "demo",
        "--inject",
        "memory:hang:20",
        "--deadline-ms",
        "300",
    ]));
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("actor `memory` failed"), "{err}");
    let report = line_value(&out, "crash report: ").expect("crash report path printed");
    assert!(report.exists());
    let (code, text, _) = run(macuda(dir.path()).args(["report", report.to_str().unwrap()]));
    assert_eq!(code, 0);
    assert!(text.contains("failure of actor `memory`"), "{text}");
    assert!(
        text.contains("UNFINISHED"),
        "the hung request is shown: {text}"
    );
    // A report whose text carries a terminal escape prints it escaped.
    let escaped = dir.path().join("escaped.msgpack");
    let raw = std::fs::read(&report).unwrap();
    let mut patched = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i..].starts_with(b"memory") {
            patched.extend_from_slice(b"\x1b[2Jmy");
            i += 6;
        } else {
            patched.push(raw[i]);
            i += 1;
        }
    }
    std::fs::write(&escaped, patched).unwrap();
    let (code, text, err) = run(macuda(dir.path()).args(["report", escaped.to_str().unwrap()]));
    assert_eq!(code, 0, "{err}");
    assert!(!text.contains('\x1b'), "a raw ESC reached the terminal");
    assert!(text.contains("\\u{1b}[2Jmy"), "{text}");
    // The same report with bytes after it is refused, not read.
    let longer = dir.path().join("longer.msgpack");
    let mut bytes = std::fs::read(&report).unwrap();
    bytes.extend_from_slice(b"trailing");
    std::fs::write(&longer, bytes).unwrap();
    let (code, _, err) = run(macuda(dir.path()).args(["report", longer.to_str().unwrap()]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("8 bytes after its report"), "{err}");
}

#[test]
fn inspect_and_report_read_regular_files_only_and_never_block() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for cmd in ["inspect", "report"] {
        for input in [
            Path::new("/dev/zero"),
            Path::new("/dev/urandom"),
            fifo.as_path(),
            dir.path(),
        ] {
            let started = Instant::now();
            let (code, _, err) = run(macuda(dir.path()).args([cmd, input.to_str().unwrap()]));
            assert_ne!(code, 0, "{cmd} {input:?}");
            assert!(err.contains("not a regular file"), "{cmd} {input:?}: {err}");
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{cmd} {input:?} took long"
            );
        }
    }
}

#[test]
fn info_identifies_the_null_card_and_leaves_bus_mastering_off() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run(macuda(dir.path()).args(["info", "--device", "null"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("10de:2b85"), "{out}");
    assert!(out.contains("BAR1:      256 MiB (small BAR)"), "{out}");
    assert!(out.contains("chip:      GB202"), "{out}");
    assert!(out.contains("not resident"), "{out}");
    assert!(out.contains("bus mastering off"), "{out}");
}

#[test]
fn unbuilt_devices_say_so() {
    let dir = tempfile::tempdir().unwrap();
    for dev in ["sysfs:0000:01:00.0", "replay:x.trace"] {
        let (code, _, err) = run(macuda(dir.path()).args(["--device", dev, "demo"]));
        assert_eq!(code, 2, "{dev}: {err}");
        assert!(err.contains("not built yet"), "{dev}: {err}");
    }
    // Over the TinyGPU protocol the stack boots the card itself: a socket
    // or server that is not there is a device that cannot be opened.
    for (dev, says) in [
        (
            "tinygpu:/nonexistent/tinygpu.sock",
            "cannot reach TinyGPU socket",
        ),
        ("remote:127.0.0.1:9", "cannot reach TinyGPU server"),
    ] {
        let (code, _, err) = run(macuda(dir.path()).args(["--device", dev, "demo"]));
        assert_eq!(code, 2, "{dev}: {err}");
        assert!(err.contains(says), "{dev}: {err}");
    }
    let (code, _, err) = run(macuda(dir.path()).args(["--device", "gpu0", "demo"]));
    assert_eq!(code, 2);
    assert!(err.contains("bad device"), "{err}");
}

/// `--device kernel` runs the demo on the GPU where NVIDIA's module is,
/// and where it is not, says which node it could not open.
#[test]
fn the_kernel_device_runs_the_demo_or_names_the_node_it_cannot_open() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run(macuda(dir.path()).args(["--device", "kernel", "demo"]));
    if std::path::Path::new("/dev/nvidiactl").exists() {
        assert_eq!(code, 0, "{out}{err}");
    } else {
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("cannot open /dev/nvidiactl"), "{err}");
    }
}

#[test]
fn macuda_device_variable_selects_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = run(macuda(dir.path())
        .env("MACUDA_DEVICE", "tinygpu")
        .args(["demo"]));
    assert_eq!(code, 2);
    assert!(err.contains("tinygpu"), "{err}");
}

#[test]
fn macuda_log_controls_tracing() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = run(macuda(dir.path())
        .env("MACUDA_LOG", "info")
        .args(["--device", "null", "demo"]));
    assert_eq!(code, 0);
    assert!(err.contains("device open"), "info logging missing:\n{err}");
    let (_, _, quiet) = run(macuda(dir.path()).args(["--device", "null", "demo"]));
    assert!(
        !quiet.contains("device open"),
        "MACUDA_LOG=off still logged:\n{quiet}"
    );
}

#[test]
fn report_refuses_a_file_that_is_not_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.msgpack");
    std::fs::write(&junk, b"hello").unwrap();
    let (code, _, err) = run(macuda(dir.path()).args(["report", junk.to_str().unwrap()]));
    assert_eq!(code, 1);
    assert!(err.contains("not a macuda crash report"), "{err}");
}

#[cfg(unix)]
#[test]
fn ctrl_c_clears_bus_mastering_writes_a_report_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = macuda(dir.path())
        .args(["--device", "null", "demo", "--pace-ms", "3000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the startup line: the Host (and its Ctrl-C handler) is up.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("device null"), "{first}");
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "macuda did not end after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("bus mastering cleared"), "{err}");
    let report = err
        .lines()
        .find_map(|l| l.split("crash report: ").nth(1))
        .map(PathBuf::from)
        .expect("report path on stderr");
    let (code, text, _) = run(macuda(dir.path()).args(["report", report.to_str().unwrap()]));
    assert_eq!(code, 0);
    assert!(text.contains("interrupted (Ctrl-C)"), "{text}");
    assert!(text.contains("[ok] clear bus mastering"), "{text}");
    assert!(
        !text.contains("function-level reset"),
        "an interrupt must not reset: {text}"
    );
}

fn fixture(name: &str) -> String {
    format!(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/cuda/fixtures/{}"),
        name
    )
}

#[test]
fn inspect_prints_kernels_params_banks_and_relocations() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) =
        run(macuda(dir.path()).args(["inspect", &fixture("banks.speed.fatbin")]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("input: fat binary"), "{out}");
    assert!(
        out.contains("sm_90 ELF") && out.contains("sm_120 ELF") && out.contains("lz4"),
        "{out}"
    );
    assert!(out.contains("kernel scale_by_table"), "{out}");
    assert!(out.contains("param  2: offset 0x0010, 4 bytes"), "{out}");
    assert!(out.contains("bank 4 `.nv.constant4`"), "{out}");
    assert!(
        out.contains("relocation R_CUDA_64 at `.nv.constant4`+0x8 -> calls"),
        "{out}"
    );
    let (code, out, _) = run(macuda(dir.path()).args(["inspect", &fixture("params.sm_90.cubin")]));
    assert_eq!(code, 0);
    assert!(
        out.contains("input: cubin") && out.contains("kernel big_param"),
        "{out}"
    );
    assert!(out.contains("offset 0x0008, 4800 bytes"), "{out}");
}

#[test]
fn inspect_json_is_machine_readable() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) =
        run(macuda(dir.path()).args(["inspect", "--json", &fixture("kinds.size.fatbin")]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let cubins = v["cubins"].as_array().unwrap();
    assert_eq!(cubins.len(), 2);
    let kernels = cubins[0]["cubin"]["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 6);
    assert!(kernels
        .iter()
        .any(|k| k["name"] == "_Z11static_fillPii" && k["local"] == true));
    assert_eq!(v["fatbins"][0][0]["compression"], "zstd");
}

#[test]
fn inspect_refuses_what_is_not_cuda_code() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.bin");
    std::fs::write(&junk, b"\x7fELF but not really").unwrap();
    let (code, _, err) = run(macuda(dir.path()).args(["inspect", junk.to_str().unwrap()]));
    assert_ne!(code, 0);
    assert!(err.contains("macuda: error"), "{err}");
}

#[test]
fn info_through_the_kernel_module_identifies_the_gpu_or_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run(macuda(dir.path()).args(["--device", "kernel", "info"]));
    if std::path::Path::new("/dev/nvidiactl").exists() {
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("NVIDIA kernel module 580."), "{out}");
        assert!(out.contains("chip:") && out.contains("vram:"), "{out}");
    } else {
        assert_eq!(code, 1, "{out}");
        assert!(err.contains("cannot open /dev/nvidiactl"), "{err}");
    }
    let trace = dir.path().join("k.trace");
    let (code, _, err) = run(macuda(dir.path()).args([
        "--device",
        "kernel",
        "--record",
        trace.to_str().unwrap(),
        "info",
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("nothing to trace") || err.contains("none to trace"),
        "{err}"
    );
}

#[test]
fn counts_and_times_out_of_range_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["bench", "launch", "--launches", "0"][..],
        &["bench", "launch", "--launches", "18446744073709551615"],
        &["bench", "gpu", "--launches", "0"],
        &["--device", "null", "demo", "--deadline-ms", "0"],
        &["--device", "null", "demo", "--deadline-ms", "99999999999"],
        &["--device", "null", "demo", "--pace-ms", "86400000"],
        &[
            "--device",
            "null",
            "demo",
            "--inject",
            "pci.nosuchreq:panic:1",
        ],
    ] {
        let (code, out, err) = run(macuda(dir.path()).args(args));
        assert_eq!(code, 2, "{args:?}: stdout {out} stderr {err}");
        assert!(!out.contains("NaN"), "{args:?}: {out}");
        assert!(err.contains("error"), "{args:?}: {err}");
    }
    let (_, _, err) = run(macuda(dir.path()).args([
        "--device",
        "null",
        "demo",
        "--inject",
        "pci.nosuchreq:panic:1",
    ]));
    assert!(
        err.contains("not a request of pci") && err.contains("identify"),
        "{err}"
    );
}

#[test]
fn a_device_given_to_a_command_that_opens_none_is_refused_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let cubin = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/cuda/fixtures/vector_add.sm_90.cubin"
    );
    for args in [
        &["--device", "null", "inspect", cubin][..],
        &["inspect", cubin, "--device", "kernel"],
        &["--device", "null", "bench", "launch", "--launches", "10"],
        &["--device", "null", "report", "x.msgpack"],
    ] {
        let (code, _, err) = run(macuda(dir.path()).args(args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("--device means nothing to"), "{args:?}: {err}");
    }
    // The environment's standing choice is no error.
    let (code, out, err) = run(macuda(dir.path())
        .env("MACUDA_DEVICE", "null")
        .args(["inspect", cubin]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("vector_add"), "{out}");
}

#[test]
fn a_silent_tinygpu_server_costs_one_bounded_wait_and_one_message() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("silent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    // Accepts every connection and never answers.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming() {
            held.push(c);
        }
    });
    let started = Instant::now();
    let (code, _, err) = run(macuda(dir.path()).args([
        "--device",
        &format!("tinygpu:{}", socket.display()),
        "info",
    ]));
    let took = started.elapsed();
    assert_ne!(code, 0, "{err}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert_eq!(err.matches("within 10000 ms").count(), 1, "{err}");
}

#[test]
fn recording_does_not_change_what_the_demo_does() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("null.trace");
    let (plain, out_plain, err) = run(macuda(dir.path()).args(["--device", "null", "demo"]));
    assert_eq!(plain, 0, "{err}");
    let (recorded, out, err) = run(macuda(dir.path()).args([
        "--device",
        "null",
        "--record",
        trace.to_str().unwrap(),
        "demo",
    ]));
    assert_eq!(recorded, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(trace.exists());
    // The same workload ran: the same per-actor summary lines.
    let summary = |o: &str| -> Vec<String> {
        o.lines()
            .filter(|l| l.contains("requests"))
            .map(|l| l.to_string())
            .collect()
    };
    assert_eq!(summary(&out_plain).len(), summary(&out).len(), "{out}");
}

#[test]
fn an_exit_whose_read_back_still_shows_bus_mastering_fails_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("info.trace");
    let (code, _, err) = run(macuda(dir.path()).args([
        "--device",
        "null",
        "--record",
        trace.to_str().unwrap(),
        "info",
    ]));
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&trace).unwrap();
    // The read-back after the exit's clearing write, made to show bit 2.
    let at = text
        .rfind("cfg_read 0x004 u16 = 0x0002")
        .expect("the exit's read-back");
    let mutated = format!(
        "{}cfg_read 0x004 u16 = 0x0006{}",
        &text[..at],
        &text[at + "cfg_read 0x004 u16 = 0x0002".len()..]
    );
    let bad = dir.path().join("still-on.trace");
    std::fs::write(&bad, mutated).unwrap();
    let (code, out, err) =
        run(macuda(dir.path()).args(["--device", &format!("replay:{}", bad.display()), "info"]));
    assert_ne!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(!out.contains("exit:      bus mastering off"), "{out}");
    assert!(err.contains("bus mastering still on"), "{err}");
}
