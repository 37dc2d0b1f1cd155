//! `macuda demo --device sim` as a user runs it: the whole stack over a
//! simulated card we boot ourselves. The gsp actor boots GSP-RM through
//! the FSP, builds the golden context and the user's client over our page
//! tables; the memory actor hands out memory from those tables (small-BAR
//! placement on GB202); the submit actor's channels run on the sim's
//! engines; the loader's modules travel inline in the push buffer; the
//! vector_add results are computed by the sim's model of that kernel, and
//! the copy round trip moves real bytes. Without the images the demo ends
//! in a typed error with bus mastering off.

mod common;

use common::{macuda, run};

#[test]
fn without_the_images_the_demo_names_what_is_missing_and_leaves_the_bus_quiet() {
    let empty = tempfile::tempdir().unwrap();
    let (code, out, err) = run(macuda()
        .args(["--device", "sim", "demo", "--firmware"])
        .arg(empty.path()));
    assert_ne!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("boot failed in `gsp`") && err.contains("the GSP firmware for the card"),
        "{err}"
    );
    assert!(
        err.contains("gsp-570.144.bin") || err.contains("570.144"),
        "the missing image is named: {err}"
    );
}

fn demo(device: &str) -> String {
    let (out, _) = demo_with(device);
    out
}

fn demo_with(device: &str) -> (String, String) {
    let dir = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let (code, out, err) = run(macuda()
        .args(["--device", device, "demo", "--firmware"])
        .arg(dir));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    for expected in [
        "RM: GSP-RM booted by us (RPC, our page tables)",
        "results: 2048 of 2048 vector_add outputs match the CPU's a + b",
        "pinned host -> device -> device -> pinned host came back byte-exact",
        "0 submissions handed to nothing",
        "[ok] clear bus mastering through a fresh transport: command 0x0006 -> 0x0002",
        "[ok] leave GSP firmware resident (never unloaded): GSP-RM 570.144 booted by us",
    ] {
        assert!(out.contains(expected), "`{expected}` missing from:\n{out}");
    }
    // Every actor answered every request but the CPU's tries at memory
    // above the BAR1 window (which the demo then stages): none failed.
    for actor in ["pci", "gsp", "submit", "loader"] {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(actor) && l.contains("requests"))
            .unwrap_or_else(|| panic!("no summary line for {actor}:\n{out}"));
        assert!(line.contains(" 0 not ok"), "{line}");
    }
    (out, err)
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn the_demo_runs_on_a_simulated_gb202_we_boot_ourselves() {
    let out = demo("sim");
    assert!(out.contains("BAR1 256 MiB (small BAR)"), "{out}");
    assert!(out.contains("the simulated card runs no GPU code"), "{out}");
    // The inputs and outputs lie above the window: the CPU's direct
    // tries are refused and the copy engine moves them.
    let memory = out
        .lines()
        .find(|l| l.trim_start().starts_with("memory") && l.contains("requests"))
        .unwrap();
    assert!(!memory.contains(" 0 not ok"), "{memory}");
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn the_demo_runs_on_a_simulated_gh100_we_boot_ourselves() {
    let out = demo("sim:gh100");
    assert!(out.contains("GH100"), "{out}");
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn info_with_boot_shows_what_gsp_rm_said_and_our_objects_in_its_tree() {
    let dir = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let (code, out, err) = run(macuda()
        .args(["--device", "sim", "info", "--boot", "--firmware"])
        .arg(dir));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    for expected in [
        "gsp-rm:",
        "booted by us through the FSP",
        "32768 MiB on the card",
        // The user's client and its first objects, then the channels'.
        "0xc1000000 class 0x0000 (a client)",
        "0xc1000003 class 0x90f1 under 0xc1000001",
        "0xc1000010 class 0xa06c under 0xc1000001",
        "[ok] clear bus mastering through a fresh transport",
    ] {
        assert!(out.contains(expected), "`{expected}` missing from:\n{out}");
    }
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn over_tcp_the_demo_runs_twice_the_second_time_on_resident_firmware() {
    // The sim's TCP form, as `macuda sim serve tcp:PORT` serves it: no
    // host memory is shared with this process, so pinned memory is
    // written through the transport.
    let chip = macuda_sim::SimChip::by_name("gb202").unwrap();
    let server =
        macuda_sim::Server::start(&macuda_sim::Listen::Tcp(0), macuda_sim::Card::new(chip))
            .unwrap();
    let word = server.device_word();
    assert!(word.starts_with("remote:127.0.0.1:"), "{word}");
    let (first, _) = demo_with(&word);
    assert!(first.contains("firmware not resident"), "{first}");
    let (second, _) = demo_with(&word);
    // The first run left GSP-RM resident; the second resets it away and
    // boots again.
    assert!(second.contains("firmware resident"), "{second}");
    assert!(!second.contains("firmware not resident"), "{second}");
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn a_failure_on_a_card_we_boot_reports_gsp_rms_last_messages_and_log_lines() {
    let dir = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let reports = tempfile::tempdir().unwrap();
    let (code, out, err) = run(macuda()
        .env("MACUDA_REPORT_DIR", reports.path())
        .args([
            "--device",
            "sim",
            "demo",
            "--inject",
            "submit.synchronize:error:1",
        ])
        .arg("--firmware")
        .arg(dir));
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    let report = std::fs::read_dir(reports.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("failure"))
        .expect("a failure report");
    let (code, text, err) = run(macuda().arg("report").arg(&report));
    assert_eq!(code, 0, "{err}");
    for expected in [
        "last messages (oldest first):",
        "-> SET_PAGE_DIRECTORY",
        "GSP-RM's last log lines:",
        // Decoded: the simulated GSP-RM's records are described by its
        // own metadata table.
        "LOGINIT: GSP_INIT_DONE",
        "LOGRM: took function",
    ] {
        assert!(
            text.contains(expected),
            "`{expected}` missing from:\n{text}"
        );
    }
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn auto_runs_the_demo_on_the_simulated_card_when_the_images_are_found_and_no_gpu_is() {
    let dir = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let (code, out, err) = run(macuda().env("MACUDA_FIRMWARE", dir).arg("demo"));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    if std::path::Path::new("/dev/nvidiactl").exists() {
        // A GPU is present: auto picks it, images or not.
        assert!(out.contains("device kernel"), "{out}");
        assert!(!out.contains("using the simulated GB202"), "{out}");
        return;
    }
    assert!(
        out.contains("note: auto: no GPU here; using the simulated GB202"),
        "{out}"
    );
    assert!(out.contains("device sim via a simulated GB202"), "{out}");
    assert!(out.contains("results: 2048 of 2048"), "{out}");
}
