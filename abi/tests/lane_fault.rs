//! The launch path when the submit actor dies under a program: every
//! `cudaLaunchKernel` after that comes back with an error, none waits on a
//! lane nobody drains (once, the launch after the lane filled spun for
//! ever), and the crash report is written. Over the fake kernel module, in
//! its own process (the runtime is one per process).

use cudart::api::launch::cudaLaunchKernel;
use cudart::api::streams::cudaStreamSynchronize;
use cudart::types::Dim3;
use cudart::CudaError;
use macuda_core::{FaultAction, FaultPlan};
use macuda_tests::KernelWorld;
use std::ffi::c_void;
use std::time::{Duration, Instant};

const FATBIN: &[u8] = include_bytes!("../../tests/cuda/fixtures/vector_add.size.fatbin");
/// A small lane, so that a few launches more than it holds are quick.
const LANE: usize = 64;

extern "C" fn stub() {}

#[test]
fn launches_after_the_submit_actor_died_are_refused_not_stuck() {
    let mut world = KernelWorld::new(Duration::from_secs(5));
    world.config.submit.lane_capacity = LANE;
    let world: &'static KernelWorld = Box::leak(Box::new(world));
    cudart::runtime::install(world.start()).unwrap();
    cudart::embed::register(FATBIN, &[(stub as *const c_void, c"vector_add")]);
    let (mut a, mut n) = (0u64, 0i32);
    let mut args: [*mut c_void; 4] = [
        (&mut a as *mut u64).cast(),
        (&mut a as *mut u64).cast(),
        (&mut a as *mut u64).cast(),
        (&mut n as *mut i32).cast(),
    ];
    let one = Dim3 { x: 1, y: 1, z: 1 };
    let launch = |args: &mut [*mut c_void; 4]| {
        // SAFETY: four arguments of the kernel's sizes; the stream is the
        // legacy default.
        unsafe {
            cudaLaunchKernel(
                stub as *const c_void,
                one,
                one,
                args.as_mut_ptr(),
                0,
                std::ptr::null_mut(),
            )
        }
    };
    // Healthy first: a launch and its sync.
    assert_eq!(launch(&mut args), CudaError::SUCCESS);
    assert_eq!(
        cudaStreamSynchronize(std::ptr::null_mut()),
        CudaError::SUCCESS
    );

    // The actor panics at its next request: the sync below, which asks
    // it because a launch reached the lane since the last sync (a sync
    // with nothing queued since is answered without the actor).
    world
        .config
        .faults
        .install("submit", FaultPlan::new(FaultAction::Panic, 1))
        .unwrap();
    assert_eq!(launch(&mut args), CudaError::SUCCESS);
    let sync = cudaStreamSynchronize(std::ptr::null_mut());
    assert_ne!(sync, CudaError::SUCCESS, "the sync that killed the actor");

    // Four lanes' worth of launches: each refused, none stuck.
    let started = Instant::now();
    let refused: Vec<CudaError> = (0..4 * LANE).map(|_| launch(&mut args)).collect();
    let took = started.elapsed();
    assert!(
        refused.iter().all(|e| *e != CudaError::SUCCESS),
        "a launch was taken after the actor died: {:?}",
        refused.iter().position(|e| *e == CudaError::SUCCESS)
    );
    assert!(
        took < Duration::from_secs(10),
        "{} launches took {took:?}",
        refused.len()
    );
    let reports = world.report_files();
    assert!(
        reports
            .iter()
            .any(|p| p.to_string_lossy().ends_with("-failure.msgpack")),
        "no crash report in {reports:?}"
    );
}
