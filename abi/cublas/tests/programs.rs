//! Our cuBLAS as a program links it, on the null device (which keeps
//! memory and logs launches but runs no kernel): the bad-argument program
//! must print exactly what NVIDIA's cuBLAS printed on the H200
//! (tests/cuda/cublas/statuses.nvidia.txt, recorded by
//! tests/device/cublas.sh), linked against NVIDIA's sonames and run on our
//! shared libraries, and linked statically against our libcublas.a and
//! libcudart.a; its launches reach the runtime with the kernels, grids and
//! parameter blocks the calls imply; and the library exports every cuBLAS
//! symbol ggml-cuda's objects need.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use macuda_tests::runtime_libs::{libraries, scratch, workspace};

fn programs() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = scratch().join("cublas-bin");
        let build = Command::new("bash")
            .arg(workspace().join("tests/cuda/cublas/build.sh"))
            .arg(&out)
            .arg(libraries())
            .output()
            .expect("bash runs");
        assert!(
            build.status.success(),
            "tests/cuda/cublas/build.sh failed (it needs python3 with pip for NVIDIA's headers, and g++):\n{}{}",
            String::from_utf8_lossy(&build.stdout),
            String::from_utf8_lossy(&build.stderr)
        );
        out
    })
}

struct Run {
    stdout: String,
    launches: Vec<Value>,
}

fn run(binary: &str) -> Run {
    run_with(binary, &[])
}

fn run_with(binary: &str, args: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("launches.jsonl");
    let out = Command::new(programs().join(binary))
        .args(args)
        .env("LD_LIBRARY_PATH", libraries())
        .env("MACUDA_DEVICE", "null")
        .env("MACUDA_LAUNCH_LOG", &log)
        .env("MACUDA_REPORT_DIR", dir.path())
        .output()
        .expect("the program runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{binary} failed ({:?}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let launches = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    Run { stdout, launches }
}

/// tests/cuda/cublas/sum_order.cpp reads a GEMM's summation order from its
/// results; on host sums of known shape it must read that shape back, or
/// what it says of NVIDIA's cuBLAS on the H200 means nothing.
#[test]
fn the_summation_order_probe_reads_back_sums_of_known_shape() {
    let sequential = run_with("sum_order", &["8", "3", "16", "cpu-sequential", "0", "5"]).stdout;
    let from0: String = (1..16).map(|q| format!(" {q}:{}", q + 1)).collect();
    assert!(
        sequential.contains(&format!("from 0 (15 runs):{from0}\n")),
        "{sequential}"
    );
    assert!(
        sequential.contains("from 5 (11 runs): 0-4:6 6:7"),
        "{sequential}"
    );
    let pairwise = run_with("sum_order", &["8", "10", "2048", "cpu-pairwise", "0"]).stdout;
    let doubling: String = (0..11)
        .map(|e| match e {
            0 => " 1:2".to_string(),
            e => format!(" {}-{}:{}", 1 << e, (2 << e) - 1, 2 << e),
        })
        .collect();
    assert!(
        pairwise.contains(&format!("from 0 (11 runs):{doubling}\n")),
        "{pairwise}"
    );
    assert!(
        pairwise.contains("inputs at 0: fp32 (inputs kept)"),
        "{pairwise}"
    );
}

fn nvidia_statuses() -> String {
    std::fs::read_to_string(workspace().join("tests/cuda/cublas/statuses.nvidia.txt")).unwrap()
}

#[test]
fn bad_arguments_answer_as_nvidias_cublas_did_on_the_h200() {
    let ours = run("statuses").stdout;
    let theirs = nvidia_statuses();
    if ours != theirs {
        let first = ours.lines().zip(theirs.lines()).position(|(a, b)| a != b);
        panic!("differs from NVIDIA's at line {first:?}:\n{ours}");
    }
}

#[test]
fn statically_linked_the_answers_are_the_same() {
    assert_eq!(run("statuses.static").stdout, nvidia_statuses());
}

fn params(l: &Value) -> Vec<u8> {
    let hex = l["params"].as_str().unwrap();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn i32_at(p: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(p[at..at + 4].try_into().unwrap())
}

fn i64_at(p: &[u8], at: usize) -> i64 {
    i64::from_le_bytes(p[at..at + 8].try_into().unwrap())
}

#[test]
fn launches_carry_the_kernel_grid_and_parameters_the_calls_imply() {
    let r = run("statuses");
    let names: Vec<&str> = r
        .launches
        .iter()
        .map(|l| l["kernel"].as_str().unwrap())
        .collect();
    // The null device is sm_120: no wgmma; floats under TF32 math take
    // tensor cores only when K-major (T, N).
    let first = [
        "macuda_gemm_mma_tf32_tn", // Sgemm T N 4x4x5, TF32 math
        "macuda_gemm_simt_f32",    // Sgemm N N 4x4x0: C = beta C
        "macuda_gemm_simt_f64",    // Dgemm
        "macuda_gemm_mma_f16_tn",  // Hgemm
    ];
    assert!(names.len() >= 17, "{names:?}");
    assert_eq!(&names[1..5], &first, "{names:?}");
    assert_eq!(names[0], "macuda_gemm_simt_f32", "Sgemm N N 4x4x4");
    assert!(
        names.ends_with(&["macuda_trsm_f32", "macuda_trsm_f32"]),
        "{names:?}"
    );
    // The first GEMM: m = n = k = 4, lda = ldb = ldc = 4, no transposes,
    // one member, f32 C, alpha 1 and beta 0 read on the host.
    let p = params(&r.launches[0]);
    assert_eq!(p.len(), 144);
    assert_eq!((i32_at(&p, 132), i64_at(&p, 136)), (0, 0), "not split");
    assert_eq!(
        (
            i32_at(&p, 104),
            i32_at(&p, 108),
            i32_at(&p, 112),
            i32_at(&p, 116)
        ),
        (4, 4, 4, 1)
    );
    assert_eq!((i64_at(&p, 40), i64_at(&p, 48), i64_at(&p, 56)), (4, 4, 4));
    assert_eq!(f64::from_le_bytes(p[88..96].try_into().unwrap()), 1.0);
    assert_eq!(f64::from_le_bytes(p[96..104].try_into().unwrap()), 0.0);
    assert_eq!(i32_at(&p, 120), 0, "flags");
    for l in &r.launches {
        let block = l["block"].as_array().unwrap()[0].as_u64().unwrap();
        let trsm = l["kernel"].as_str().unwrap().starts_with("macuda_trsm");
        assert_eq!(block, if trsm { 128 } else { 256 }, "{l}");
    }
    // The strided batch of 3: grid z 3.
    let strided = r
        .launches
        .iter()
        .find(|l| l["grid"].as_array().unwrap()[2].as_u64() == Some(3))
        .expect("a launch over a batch of 3");
    assert_eq!(strided["kernel"], "macuda_gemm_mma_f16_tn");
}

#[test]
fn every_cublas_symbol_ggml_cuda_needs_is_exported() {
    let wanted = std::fs::read_to_string(
        workspace().join("abi/cublas/tests/data/ggml-cuda-cublas-symbols.txt"),
    )
    .unwrap();
    let exported = std::fs::read_to_string(libraries().join("cublas-exports.txt")).unwrap();
    let exported: std::collections::HashSet<&str> = exported.lines().collect();
    let missing: Vec<&str> = wanted.lines().filter(|w| !exported.contains(w)).collect();
    assert!(wanted.lines().count() >= 13, "the list holds ggml's calls");
    assert!(missing.is_empty(), "not exported: {missing:?}");
}
