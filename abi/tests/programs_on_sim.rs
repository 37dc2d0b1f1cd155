//! The ABI test programs (tests/cuda/abi, linked against our libcudart.a)
//! on a simulated card we boot ourselves: `MACUDA_DEVICE=sim`, so each
//! program's runtime starts the whole stack over our GSP-RM boot, our page
//! tables and our channels, unchanged. Every runtime call is checked by
//! the program itself; kernel results only where the sim computes them
//! (the kernels it models, named to the program in MACUDA_SIM_MODELS),
//! which the program's output says for the rest by printing no result.

use std::process::Command;

use macuda_tests::runtime_libs::abi_programs;

/// Run `name` on the simulated card; its stdout.
fn on_sim(name: &str) -> String {
    let firmware = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let scratch = tempfile::tempdir().unwrap();
    let models: Vec<&str> = macuda_sim::kernel_models::modelled_kernels().collect();
    let out = Command::new(abi_programs().join(name))
        .env("MACUDA_DEVICE", "sim")
        .env("MACUDA_FIRMWARE", firmware)
        .env("MACUDA_SIM_MODELS", models.join(","))
        .env("MACUDA_REPORT_DIR", scratch.path())
        .output()
        .expect("the program runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.ends_with("all checks passed\n"),
        "{name} failed on the sim ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them), and nvcc from PyPI"]
fn basics_runs_on_the_sim_and_vector_adds_results_are_checked() {
    let out = on_sim("basics");
    // vector_add's million results were compared (the sim models it).
    assert!(out.contains("bad = 0"), "{out}");
    // The device is the sim's card as GSP-RM named it, with what our
    // tables can hand out as its memory.
    assert!(out.contains("NVIDIA GeForce RTX 5090"), "{out}");
    assert!(!out.contains("out[0] = "), "mixed is not modelled: {out}");
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them), and nvcc from PyPI"]
fn errors_graphs_and_the_legacy_path_run_on_the_sim() {
    on_sim("errors");
    on_sim("graphs");
    let legacy = on_sim("legacy");
    // Its vector_add comes from the fixture cubin the sim models.
    assert!(legacy.contains("c[999] = 2997"), "{legacy}");
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them), and nvcc from PyPI"]
fn sticky_says_the_sim_does_not_model_its_faulting_kernel() {
    let out = on_sim("sticky");
    assert!(
        out.contains("the simulated card does not model wild: nothing to fault"),
        "{out}"
    );
}

#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them), and nvcc from PyPI"]
fn what_cuda_mem_get_info_calls_free_is_what_cuda_malloc_hands_out() {
    // fill checks it takes at least 99% of the reported free memory in
    // pieces and no more, and that totalGlobalMem is the same total.
    on_sim("fill");
}
