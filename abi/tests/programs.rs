//! The C and CUDA programs under tests/cuda/abi, compiled by NVIDIA's nvcc
//! (from PyPI, by tests/cuda/abi/build.sh) with `-cudart none` and linked
//! against our libcudart.a, run on the null device. Each program checks
//! every API result itself (and exits non-zero on a wrong one); this test
//! then reads the launch log (`MACUDA_LAUNCH_LOG`) and checks that each
//! launch reached the device with the kernel, grid, block, shared memory
//! and parameter bytes the program's source says.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

use macuda_tests::runtime_libs::{abi_programs, libraries, scratch};

/// The programs, linked against our libcudart.a.
fn programs() -> &'static Path {
    abi_programs()
}

struct Run {
    stdout: String,
    launches: Vec<Value>,
}

fn run(name: &str) -> Run {
    run_with(name, &[])
}

fn run_with(name: &str, env: &[(&str, &str)]) -> Run {
    let dir = programs();
    let scratch = tempfile::tempdir().unwrap();
    let log = scratch.path().join("launches.jsonl");
    let out = Command::new(dir.join(name))
        .envs(env.iter().copied())
        .env("MACUDA_DEVICE", "null")
        .env("MACUDA_LAUNCH_LOG", &log)
        .env("MACUDA_REPORT_DIR", scratch.path())
        .output()
        .expect("the program runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.ends_with("all checks passed\n"),
        "{name} failed ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
    let launches = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: bad log line {l}: {e}"))
        })
        .collect();
    Run { stdout, launches }
}

fn params(l: &Value) -> Vec<u8> {
    let hex = l["params"].as_str().unwrap();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn at<const N: usize>(p: &[u8], offset: usize) -> [u8; N] {
    p[offset..offset + N].try_into().unwrap()
}

fn u64_at(p: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(at(p, offset))
}

fn dims(l: &Value, key: &str) -> [u64; 3] {
    let a = l[key].as_array().unwrap();
    [0, 1, 2].map(|i| a[i].as_u64().unwrap())
}

fn named<'a>(r: &'a Run, kernel: &str) -> Vec<&'a Value> {
    r.launches
        .iter()
        .filter(|l| l["kernel"] == kernel)
        .collect()
}

/// A device pointer our runtime handed out: non-null and 256-byte aligned.
fn device_pointer(p: u64) {
    assert!(
        p != 0 && p.is_multiple_of(256),
        "{p:#x} is no device pointer"
    );
}

#[test]
fn basics_launches_every_kind_of_kernel_with_its_arguments() {
    let r = run("basics");
    let order: Vec<&str> = r
        .launches
        .iter()
        .map(|l| l["kernel"].as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        [
            "vector_add",
            "_Z5mixed5MixedcsxfdPl",
            "_Z5scaleILi64EEvPff",
            "_Z4bumpv",
            "_Z9use_tablePf",
            "_Z11with_sharedPf",
            "_Z5scaleILi256EEvPff",
            "_Z5scaleILi256EEvPff",
        ]
    );
    let add = &r.launches[0];
    assert_eq!(dims(add, "grid"), [4096, 1, 1]);
    assert_eq!(dims(add, "block"), [256, 1, 1]);
    let p = params(add);
    assert_eq!(p.len(), 28);
    let ptrs = [u64_at(&p, 0), u64_at(&p, 8), u64_at(&p, 16)];
    ptrs.iter().copied().for_each(device_pointer);
    assert!(ptrs[0] != ptrs[1] && ptrs[1] != ptrs[2]);
    assert_eq!(i32::from_le_bytes(at(&p, 24)), 1 << 20);

    // mixed(Mixed{'m', 2.5, {1,2,3}}, 'c', -7, 1<<40, 1.25f, -0.5, out):
    // the struct by value (its padding is whatever the caller's stack
    // held), then each scalar at its natural alignment.
    let m = params(&r.launches[1]);
    assert_eq!(m.len(), 72);
    assert_eq!(m[0], b'm');
    assert_eq!(f64::from_le_bytes(at(&m, 8)), 2.5);
    assert_eq!(
        [16, 20, 24].map(|o| i32::from_le_bytes(at(&m, o))),
        [1, 2, 3]
    );
    assert_eq!(m[32], b'c');
    assert_eq!(i16::from_le_bytes(at(&m, 34)), -7);
    assert_eq!(i64::from_le_bytes(at(&m, 40)), 1 << 40);
    assert_eq!(f32::from_le_bytes(at(&m, 48)), 1.25);
    assert_eq!(f64::from_le_bytes(at(&m, 56)), -0.5);
    device_pointer(u64_at(&m, 64));
    assert_eq!(
        r.launches[1]["name"],
        "mixed(Mixed, char, short, long long, float, double, long*)"
    );

    let scale = &r.launches[2];
    assert_eq!(
        (dims(scale, "grid"), dims(scale, "block")),
        ([2, 1, 1], [32, 1, 1])
    );
    assert_eq!(f32::from_le_bytes(at(&params(scale), 8)), 3.0);
    assert_eq!(scale["name"], "void scale<64>(float*, float)");
    let bump = &r.launches[3];
    assert_eq!((dims(bump, "grid"), params(bump).len()), ([4, 1, 1], 0));
    assert_eq!(
        r.launches[5]["shared"],
        64 * 1024,
        "with_shared's dynamic shared memory"
    );
    // The two scale<256> launches went to two different streams.
    let streams: Vec<&str> = named(&r, "_Z5scaleILi256EEvPff")
        .iter()
        .map(|l| l["stream"].as_str().unwrap())
        .collect();
    assert_ne!(streams[0], streams[1]);
    assert!(r.launches.iter().all(|l| l["graph"] == false));
    // Copies and device variables work on the null device: it keeps memory.
    for line in [
        "memcmp(c, a, bytes) = 0",
        "fill_ok = 1",
        "rows_ok = 1",
        "memcmp(t, t2, sizeof t) = 0",
    ] {
        assert!(r.stdout.contains(line), "{line}");
    }
}

#[test]
fn errors_answer_with_the_right_codes_and_failed_launches_never_run() {
    let r = run("errors");
    // Only the one good launch reached the device; the refused ones and
    // the one inside the broken capture did not.
    assert_eq!(r.launches.len(), 1, "{:?}", r.launches);
    assert_eq!(r.launches[0]["kernel"], "_Z7boundedPi");
    assert_eq!(dims(&r.launches[0], "block"), [128, 1, 1]);
    for line in [
        "cudaSetDevice(7) -> cudaErrorInvalidDevice",
        "cudaFree((void *)0x1234) -> cudaErrorInvalidValue",
        "cudaErrorInvalidMemcpyDirection",
        "cudaGetLastError() -> cudaErrorInvalidValue",
        "cudaLaunchKernel((const void *)main, dim3(1), dim3(1), args, 0, 0) -> cudaErrorInvalidResourceHandle",
        "cudaMemcpyToSymbol(not_a_symbol, &zero, sizeof zero) -> cudaErrorInvalidSymbol",
        "cudaStreamEndCapture(s, &g) -> cudaErrorStreamCaptureInvalidated",
    ] {
        assert!(
            r.stdout.contains(line),
            "missing `{line}` in:\n{}",
            r.stdout
        );
    }
}

#[test]
fn graphs_replay_captured_work_and_take_updates() {
    let r = run("graphs");
    // 4 launches of a 3-kernel graph, 1 after the update, 1 of 5 kernels.
    assert_eq!(r.launches.len(), 4 * 3 + 3 + 5);
    assert!(r.launches.iter().all(|l| l["graph"] == true));
    let add_value = |l: &Value| f32::from_le_bytes(at(&params(l), 8));
    let firsts: Vec<f32> = r
        .launches
        .iter()
        .filter(|l| l["kernel"] == "_Z6add_toPffi")
        .map(add_value)
        .collect();
    // Captured with 3, re-captured with 5 and updated in place, then a
    // capture of another shape with 1 (and three extra adds of 1).
    assert_eq!(
        firsts,
        [3.0, 1.0, 3.0, 1.0, 3.0, 1.0, 3.0, 1.0, 5.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    );
    let times = named(&r, "_Z5timesPffi");
    assert_eq!(times.len(), 6);
    assert!(times
        .iter()
        .all(|l| f32::from_le_bytes(at(&params(l), 8)) == 2.0));
    // Every replay ran on the stream the graph was launched on, the side
    // stream's kernel included.
    let s = r.launches[0]["stream"].clone();
    assert!(r.launches.iter().all(|l| l["stream"] == s));
}

#[test]
fn the_legacy_path_and_clang_names_launch_the_cubins_kernels() {
    let r = run("legacy");
    let k64 = named(&r, "_Z3k64Pll");
    assert_eq!(
        k64.len(),
        1,
        "registered as _Z3k64Pxx, found as the cubin's"
    );
    let p = params(k64[0]);
    device_pointer(u64_at(&p, 0));
    assert_eq!(u64_at(&p, 8), 0x1122_3344_5566_7788);
    assert_eq!(named(&r, "_Z11static_kernPi").len(), 1);
    assert_eq!(
        r.launches
            .iter()
            .filter(|l| l["kernel"].as_str().unwrap().contains("_INTERNAL_"))
            .count(),
        1
    );
    let anon = r
        .launches
        .iter()
        .find(|l| l["kernel"].as_str().unwrap().contains("anon_kern"))
        .unwrap();
    assert_eq!(anon["name"], "(anonymous namespace)::anon_kern(int*)");
    let add = named(&r, "vector_add");
    assert_eq!(add.len(), 1);
    assert_eq!(
        (dims(add[0], "grid"), dims(add[0], "block")),
        ([8, 1, 1], [128, 1, 1])
    );
    assert_eq!(i32::from_le_bytes(at(&params(add[0]), 24)), 1000);
    assert_eq!(r.launches.len(), 5, "the refused launches never ran");
}

#[test]
fn sticky_says_there_is_nothing_to_fault_on_the_null_device() {
    let r = run("sticky");
    assert!(r.stdout.contains("kernels do not run here"));
    assert!(r.launches.is_empty());
}

/// cudaMemGetInfo's free memory is what cudaMalloc hands out (to 99%),
/// on the null device's allocator too.
#[test]
fn what_is_reported_free_is_handed_out() {
    let r = run("fill");
    assert!(r.launches.is_empty());
}

/// The debugging knobs change how launches are handed over and waited
/// for, not what reaches the device.
#[test]
fn the_synchronous_mode_and_a_short_chain_launch_the_same() {
    let plain = run("basics");
    for env in [
        &[("MACUDA_SYNC_LAUNCHES", "1")][..],
        &[("MACUDA_CHAIN_DEPTH", "1")][..],
        &[("MACUDA_CHAIN_DEPTH", "3"), ("MACUDA_SYNC_LAUNCHES", "1")][..],
    ] {
        let r = run_with("basics", env);
        assert_eq!(r.stdout, plain.stdout, "{env:?}");
        assert_eq!(r.launches, plain.launches, "{env:?}");
    }
}

/// `MACUDA_PROFILE` under a real program: its output and launches are as
/// without it, and at exit the timeline is written, a trace-event JSON
/// with a kernel record per launch the log saw and a summary beside it
/// (on the null device the records are the host's: nothing runs to report
/// a clock).
#[test]
fn a_profile_is_written_at_exit_without_changing_what_the_program_does() {
    let plain = run("basics");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("basics.json");
    let r = run_with("basics", &[("MACUDA_PROFILE", trace.to_str().unwrap())]);
    assert_eq!(r.stdout, plain.stdout);
    assert_eq!(r.launches, plain.launches);
    let t: Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let pushes = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "i" && e["name"].as_str().is_some_and(|n| n.starts_with("push ")))
        .count();
    assert_eq!(pushes, plain.launches.len(), "a push noted per launch");
    let summary = std::fs::read_to_string(dir.path().join("basics.json.txt")).unwrap();
    assert!(
        summary.contains("0 reports missing (the device executes nothing"),
        "{summary}"
    );
}

#[test]
fn a_knob_that_does_not_parse_stops_the_runtime_and_says_which() {
    let out = Command::new(programs().join("basics"))
        .env("MACUDA_DEVICE", "null")
        .env("MACUDA_CHAIN_DEPTH", "deep")
        .env("MACUDA_REPORT_DIR", scratch())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("MACUDA_CHAIN_DEPTH=\"deep\""), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("cudaErrorInitializationError"), "{stdout}");
}

/// An actor failing under a program (`MACUDA_INJECT`, as `macuda
/// --inject`): the program is told by an error code and ends, nothing
/// hangs, the crash report is written, and the next process runs.
#[test]
fn a_fault_injected_under_a_program_ends_it_cleanly_with_a_report() {
    let reports = tempfile::tempdir().unwrap();
    let out = Command::new(programs().join("basics"))
        .env("MACUDA_DEVICE", "null")
        .env("MACUDA_INJECT", "submit:panic:5")
        .env("MACUDA_REPORT_DIR", reports.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "basics passed with submit failing:\n{stdout}"
    );
    assert!(
        out.status.code().is_some(),
        "ended by a signal: {:?}",
        out.status
    );
    assert!(!stdout.ends_with("all checks passed\n"));
    let written: Vec<_> = std::fs::read_dir(reports.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .ends_with("-failure.msgpack")
        })
        .collect();
    assert_eq!(written.len(), 1, "crash reports: {written:?}");
    // The next process runs normally.
    let again = run("basics");
    assert!(again.stdout.ends_with("all checks passed\n"));
}

/// `MACUDA_INJECT_GPU_FAULT=N` aims the Nth launch at an unmapped address
/// and says so (on the null device nothing runs, so nothing faults; the
/// llama.cpp gate does it on the GPU).
#[test]
fn the_gpu_fault_knob_names_the_launch_it_spoils() {
    let out = Command::new(programs().join("basics"))
        .env("MACUDA_DEVICE", "null")
        .env("MACUDA_INJECT_GPU_FAULT", "2")
        .env("MACUDA_REPORT_DIR", scratch())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("MACUDA_INJECT_GPU_FAULT"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("launch 2 ("), "{}", lines[0]);
}

/// `MACUDA_LOG` shows what the error codes cannot: why a cudaMalloc (the
/// errors program's 2^52 bytes) was refused.
#[test]
fn the_log_says_why_an_allocation_was_refused() {
    let out = Command::new(programs().join("errors"))
        .env("MACUDA_DEVICE", "null")
        .env("MACUDA_LOG", "warn")
        .env("MACUDA_REPORT_DIR", scratch())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("cudaMalloc refused"))
        .unwrap_or_else(|| panic!("no log line:\n{stderr}"));
    assert!(line.contains("bytes=4503599627370496"), "{line}");
    assert!(line.contains("cause="), "{line}");
    // Without it, nothing is logged.
    let quiet = Command::new(programs().join("errors"))
        .env("MACUDA_DEVICE", "null")
        .env_remove("MACUDA_LOG")
        .env("MACUDA_REPORT_DIR", scratch())
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&quiet.stderr).contains("cudaMalloc refused"));
}

#[test]
fn binaries_linked_against_nvidias_shared_runtime_load_ours() {
    for (binary, soname) in [
        ("basics.so13", "libcudart.so.13"),
        ("basics.so12", "libcudart.so.12"),
    ] {
        let path = programs().join(binary);
        let dynamic = Command::new("readelf")
            .arg("-d")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&dynamic.stdout).contains(&format!("[{soname}]")),
            "{binary} does not name {soname}"
        );
        let symbols = Command::new("nm").arg("-D").arg(&path).output().unwrap();
        assert!(
            String::from_utf8_lossy(&symbols.stdout).contains(&format!("cudaMalloc@{soname}")),
            "{binary}'s references are not versioned {soname}"
        );
        let out = Command::new(&path)
            .env("LD_LIBRARY_PATH", libraries())
            .env("MACUDA_DEVICE", "null")
            .env("MACUDA_REPORT_DIR", scratch())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{binary}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // NVIDIA's runtime would have found no driver; ours ran on the null device.
        assert!(stdout.contains("name: macuda null device"), "{stdout}");
        assert!(stdout.ends_with("all checks passed\n"));
    }
}

/// Left to choose, the runtime takes the best device there is: a GPU
/// through NVIDIA's kernel module where the module is, and where it is
/// not, none (the null device runs nothing, so a program asking for a GPU
/// must not be given it): `cudaErrorNoDevice`, as NVIDIA's runtime says.
#[test]
fn left_to_choose_a_program_gets_the_gpu_or_is_told_there_is_no_device() {
    let out = Command::new(programs().join("basics"))
        .env_remove("MACUDA_DEVICE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if Path::new("/dev/nvidiactl").exists() {
        assert!(out.status.success(), "{stdout}");
        assert!(!stdout.contains("macuda null device"), "{stdout}");
        assert!(stdout.ends_with("all checks passed\n"), "{stdout}");
    } else {
        assert!(!out.status.success());
        assert!(
            stdout.starts_with("cudaGetDeviceCount(&n) -> cudaErrorNoDevice\nn = 0\n"),
            "{stdout}"
        );
    }
}

#[test]
fn every_runtime_call_ggml_makes_is_exported() {
    // The reference's list of what ggml-cuda's objects leave undefined
    // (cuda-binary-and-runtime-abi.md 5.2), runtime and registration.
    let wanted = "__cudaRegisterFatBinary __cudaRegisterFatBinaryEnd __cudaUnregisterFatBinary \
        __cudaRegisterFunction __cudaRegisterVar __cudaRegisterManagedVar __cudaPushCallConfiguration \
        __cudaPopCallConfiguration __cudaGetKernel __cudaLaunchKernel cudaLaunchKernel \
        cudaConfigureCall cudaSetupArgument cudaLaunch \
        cudaDeviceCanAccessPeer cudaDeviceEnablePeerAccess cudaDeviceGetAttribute \
        cudaDeviceGetPCIBusId cudaDeviceSynchronize cudaEventCreateWithFlags cudaEventDestroy \
        cudaEventRecord cudaEventSynchronize cudaEventQuery cudaEventElapsedTime cudaFree \
        cudaFreeHost cudaFuncGetAttributes cudaFuncSetAttribute cudaGetDevice cudaGetDeviceCount \
        cudaGetDeviceProperties cudaGetDeviceProperties_v2 cudaGetErrorString cudaGetLastError \
        cudaGraphDestroy cudaGraphExecDestroy cudaGraphExecUpdate cudaGraphInstantiate \
        cudaGraphLaunch cudaHostAlloc cudaHostGetDevicePointer cudaHostRegister \
        cudaHostUnregister cudaLaunchCooperativeKernel cudaLaunchKernelExC cudaMalloc \
        cudaMallocHost cudaMallocManaged cudaMemGetInfo cudaMemcpy cudaMemcpy2D \
        cudaMemcpy2DAsync cudaMemcpyAsync cudaMemcpyPeerAsync cudaMemset cudaMemsetAsync \
        cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags cudaPeekAtLastError \
        cudaSetDevice cudaSetDeviceFlags cudaStreamBeginCapture cudaStreamCreateWithFlags \
        cudaStreamDestroy cudaStreamEndCapture cudaStreamIsCapturing cudaStreamSynchronize \
        cudaStreamWaitEvent";
    let exported = std::fs::read_to_string(libraries().join("exports.txt")).unwrap();
    let exported: std::collections::HashSet<&str> = exported.lines().collect();
    let missing: Vec<&str> = wanted
        .split_whitespace()
        .filter(|w| !exported.contains(w))
        .collect();
    assert!(missing.is_empty(), "not exported: {missing:?}");
}
