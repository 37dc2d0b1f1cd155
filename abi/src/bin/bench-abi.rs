//! The host cost of a kernel launch through our C ABI on the null device,
//! beside the submit benchmark's figure for a launch pushed on the lane
//! directly (`macuda bench launch`), both measured in this process.
//!
//! `cargo run --release -p macuda-abi --bin bench-abi [LAUNCHES]`
//!
//! The ABI loop is what nvcc's stubs do per `<<<...>>>`: push and pop the
//! call configuration, then `__cudaLaunchKernel` with the argument array,
//! here for vector_add (four parameters) from a real fat binary. Tokens of
//! 1,600 launches end in a stream synchronisation, as decode steps do;
//! only the launch calls are timed.

use cudart::api::launch::{
    __cudaLaunchKernel, __cudaPopCallConfiguration, __cudaPushCallConfiguration,
};
use cudart::api::memory::cudaMalloc;
use cudart::api::streams::{cudaStreamCreateWithFlags, cudaStreamSynchronize};
use cudart::types::{Dim3, Handle};
use cudart::CudaError;
use macuda_pci::DeviceSpec;
use macuda_supervisor::Host;
use std::ffi::c_void;
use std::time::{Duration, Instant};

const FATBIN: &[u8] = include_bytes!("../../../tests/cuda/fixtures/vector_add.size.fatbin");
const TOKEN_LAUNCHES: u64 = 1_600;
/// Lane records callers may run ahead by, as in the submit benchmark.
const LANE_CAPACITY: usize = 1 << 15;
/// Launches run before timing starts (module load, first descriptors).
const WARM_LAUNCHES: u64 = 3_200;

extern "C" fn stub() {}

fn check(e: CudaError, what: &str) {
    if e != CudaError::SUCCESS {
        eprintln!("bench-abi: {what}: {e}");
        std::process::exit(1);
    }
}

fn main() {
    let launches: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);

    // The reference, in this run: a launch pushed on the lane directly.
    let lane = match macuda_supervisor::bench::launch_bench(launches) {
        Ok(b) => b,
        Err(e) => {
            eprintln!(
                "bench-abi: the submit benchmark failed: {}",
                macuda_core::error_chain(&e).join(": ")
            );
            std::process::exit(1);
        }
    };

    let mut config =
        cudart::runtime::host_config(DeviceSpec::Null, &cudart::knobs::Knobs::default());
    config.submit.lane_capacity = LANE_CAPACITY;
    config.report_dir = std::env::temp_dir().join("macuda-bench-reports");
    let host = Host::start(config).unwrap_or_else(|e| {
        eprintln!("bench-abi: {}", macuda_core::error_chain(&e).join(": "));
        std::process::exit(1);
    });
    if let Err(e) = cudart::runtime::install(host) {
        eprintln!("bench-abi: the runtime did not start: {e}");
        std::process::exit(1);
    }
    let abi_ns = abi_launches(launches);
    println!(
        "launch through the submit lane (the submit benchmark): {:.0} ns per launch (actor side {:.0} ns)",
        lane.caller_ns, lane.build_ns
    );
    println!(
        "launch through our C ABI (push/pop configuration + __cudaLaunchKernel, vector_add): {abi_ns:.0} ns per launch, {launches} launches"
    );
    println!(
        "the ABI's own share: {:.0} ns; ABI / lane = {:.2}x (goal: <= 150 ns including the ABI)",
        abi_ns - lane.caller_ns,
        abi_ns / lane.caller_ns.max(1.0)
    );
    println!("abi: launch_ns={abi_ns:.0}");
}

/// ns per launch through the ABI.
fn abi_launches(launches: u64) -> f64 {
    // SAFETY: every pointer handed to the runtime below is valid for what
    // the call reads or writes, and the fat binary is static.
    unsafe {
        cudart::embed::register(FATBIN, &[(stub as *const c_void, c"vector_add")]);
        let mut stream: Handle = std::ptr::null_mut();
        check(cudaStreamCreateWithFlags(&mut stream, 1), "stream");
        let mut buffers = [std::ptr::null_mut::<c_void>(); 3];
        for b in &mut buffers {
            check(cudaMalloc(b, 1 << 20), "cudaMalloc");
        }
        let [mut a, mut b, mut c] = buffers;
        let mut n = 1 << 18;
        let mut args: [*mut c_void; 4] = [
            (&mut a as *mut *mut c_void).cast(),
            (&mut b as *mut *mut c_void).cast(),
            (&mut c as *mut *mut c_void).cast(),
            (&mut n as *mut i32).cast(),
        ];
        let kernel = stub as *mut c_void;
        let block = Dim3 { x: 256, y: 1, z: 1 };
        let one_launch = |i: u64, args: &mut [*mut c_void; 4]| {
            let grid = Dim3 {
                x: (i % 64) as u32 + 1,
                y: 1,
                z: 1,
            };
            let _ = __cudaPushCallConfiguration(grid, block, 0, stream);
            let (mut g, mut bl, mut sh, mut st) = (
                Dim3::default(),
                Dim3::default(),
                0usize,
                std::ptr::null_mut(),
            );
            let _ = __cudaPopCallConfiguration(&mut g, &mut bl, &mut sh, &mut st);
            __cudaLaunchKernel(kernel, g, bl, args.as_mut_ptr(), sh, st)
        };
        for i in 0..WARM_LAUNCHES {
            check(one_launch(i, &mut args), "warm-up launch");
            if (i + 1) % TOKEN_LAUNCHES == 0 {
                // The null device runs nothing; the sync lines the token up.
                let _ = cudaStreamSynchronize(stream);
            }
        }
        let mut timed = Duration::ZERO;
        let mut done = 0;
        while done < launches {
            let count = TOKEN_LAUNCHES.min(launches - done);
            let started = Instant::now();
            for i in 0..count {
                let _ = one_launch(i, &mut args);
            }
            timed += started.elapsed();
            let _ = cudaStreamSynchronize(stream);
            done += count;
        }
        timed.as_nanos() as f64 / launches as f64
    }
}
