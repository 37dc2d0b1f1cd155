//! `macuda boot` as a user runs it: devices with no firmware of ours are
//! refused; a simulated GB202 without the images names what is missing and
//! leaves bus mastering off; with NVIDIA's images (`MACUDA_FIRMWARE`) the
//! simulated card boots to GSP_INIT_DONE, every step printed.

mod common;

use common::{macuda, run};

#[test]
fn the_null_device_and_the_kernel_module_have_nothing_for_us_to_boot() {
    for device in ["null", "kernel"] {
        let (code, out, err) = run(macuda().args(["--device", device, "boot"]));
        assert_eq!(code, 2, "{device}: stdout:\n{out}\nstderr:\n{err}");
        assert!(err.contains("boots no firmware of ours"), "{err}");
    }
}

#[test]
fn a_simulated_card_without_the_images_names_the_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run(macuda()
        .args(["--device", "sim", "boot", "--firmware"])
        .arg(dir.path()));
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("nvidia/gb202/gsp/fmc-570.144.bin"), "{err}");
    assert!(err.contains("tests/sim/firmware.sh"), "{err}");
    assert!(out.contains("exit:      bus mastering off"), "{out}");
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn a_simulated_gb202_boots_to_init_done_with_nvidias_images() {
    let dir = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let (code, out, err) = run(macuda()
        .args(["--device", "sim", "boot", "--firmware"])
        .arg(dir));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    for line in [
        "firmware:  570.144",
        "ChainOfTrust",
        "InitDone",
        "Bar1Physical",
        "booted:    GSP_INIT_DONE",
        "gsp-rm:    \"NVIDIA GeForce RTX 5090\"",
        "fb region: 0x0..",
        "rm:        GSP-RM allocated and freed client",
        "GSP-RM stays resident",
    ] {
        assert!(out.contains(line), "`{line}` missing from:\n{out}");
    }
}

/// `macuda sim serve` on a free port with `args`; the child and the
/// `--device` word that reaches it.
fn serve(args: &[&str]) -> (std::process::Child, String) {
    use std::io::{BufRead, BufReader};
    let mut child = macuda()
        .args(["sim", "serve", "tcp:0", "--boot-ms", "0"])
        .args(args)
        .env("MACUDA_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the sim starts");
    let stdout = child.stdout.take().unwrap();
    let device = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| {
            l.split_whitespace()
                .skip_while(|w| *w != "--device")
                .nth(1)
                .map(str::to_string)
        })
        .expect("sim serve names its --device word");
    (child, device)
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn a_boot_that_fails_writes_a_report_with_its_step_and_last_messages() {
    let dir = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let reports = tempfile::tempdir().unwrap();
    let (mut sim, device) = serve(&["--fault", "corrupt-reply:1"]);
    let (code, out, err) = run(macuda()
        .args(["--device", &device, "boot", "--firmware"])
        .arg(&dir)
        .env("MACUDA_REPORT_DIR", reports.path()));
    let _ = sim.kill();
    let _ = sim.wait();
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("boot:      failed at step InitDone"), "{out}");
    assert!(err.contains("checksum"), "{err}");
    assert!(out.contains("exit:      bus mastering off"), "{out}");
    let report = out
        .lines()
        .find_map(|l| l.strip_prefix("crash report: "))
        .expect("a report path");
    let (code, shown, err) = run(macuda().args(["report", report]));
    assert_eq!(code, 0, "{err}");
    for line in [
        "cause:      our boot of GSP-RM stopped at step InitDone",
        "ChainOfTrust",
        "-> GSP_SET_SYSTEM_INFO seq 0",
        "-> SET_REGISTRY seq 1",
    ] {
        assert!(shown.contains(line), "`{line}` missing from:\n{shown}");
    }
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn a_recorded_boot_replays_strictly_with_no_gaps() {
    let dir = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let scratch = tempfile::tempdir().unwrap();
    let trace = scratch.path().join("boot.trace");
    let (code, out, err) = run(macuda()
        .args(["--device", "sim", "--record"])
        .arg(&trace)
        .args(["boot", "--firmware"])
        .arg(&dir));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let replay = format!("replay:{}", trace.display());
    let (code, out, err) = run(macuda()
        .args(["--device", &replay, "boot", "--firmware"])
        .arg(&dir));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("booted:    GSP_INIT_DONE"), "{out}");
    assert!(
        out.contains("0 stepped over, 0 in gaps, 0 re-reads"),
        "{out}"
    );
}
