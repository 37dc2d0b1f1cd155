//! `macuda bench fill` as a user runs it: devices we do not boot are
//! refused; with NVIDIA's images (`MACUDA_FIRMWARE`) a simulated GB202
//! (32 GiB) and GH100 (80 GiB) are booted and filled, both ends of every
//! piece checked through the copy engine, and the last line gives the
//! share handed out.

mod common;

use common::{macuda, run};

#[test]
fn the_null_device_has_no_memory_of_ours_to_fill() {
    let (code, out, err) = run(macuda().args(["--device", "null", "bench", "fill"]));
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("boots no firmware of ours"), "{err}");
}

/// The numbers of the last line.
fn last_line(out: &str) -> (u64, u64, f64) {
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with("fill: "))
        .unwrap_or_else(|| panic!("no fill line in:\n{out}"));
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in `{line}`"))
            .to_string()
    };
    (
        field("handed_out_mib").parse().unwrap(),
        field("total_mib").parse().unwrap(),
        field("share").parse().unwrap(),
    )
}

fn fill(device: &str, total_mib: u64) -> String {
    let dir = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let (code, out, err) = run(macuda()
        .args(["--device", device, "bench", "fill", "--firmware"])
        .arg(dir));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let (handed_out, total, share) = last_line(&out);
    assert_eq!(total, total_mib, "{out}");
    assert!(handed_out < total, "{out}");
    // At least 99% handed out, every piece checked at both ends.
    assert!(share >= 0.99, "{out}");
    assert!(
        (share - handed_out as f64 / total as f64).abs() < 1e-3,
        "{out}"
    );
    assert!(
        out.contains("both ends of each written and read back"),
        "{out}"
    );
    assert!(out.contains("GSP-RM stays resident"), "{out}");
    out
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn a_simulated_gb202_hands_out_over_99_percent_of_its_32_gib() {
    let out = fill("sim", 32 << 10);
    // Small BAR: the CPU's part of VRAM ends with the 256 MiB window.
    assert!(out.contains("below 0x10000000 (BAR1)"), "{out}");
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn a_simulated_gh100_hands_out_over_99_percent_of_its_80_gib() {
    fill("sim:gh100", 80 << 10);
}
