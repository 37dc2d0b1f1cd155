//! The runtime's GPU path in CI: the ABI over the fake of NVIDIA's kernel
//! module, whose GPU a thread plays (it runs copy-engine work and records
//! each kernel launch with the constant bank 0 the kernel would read).
//! Pageable copies go through the staging buffer a chunk at a time, fills
//! with ragged ends, pinned copies directly, timed events read the
//! engine's clock, and launches and graph replays reach the GPU with the
//! parameters the program passed. One test: the runtime is per process.

use cudart::api::{device::*, graph::*, launch::*, memory::*, streams::*};
use cudart::types::{memcpy_kind, DeviceProp12, DeviceProp13, Dim3, Handle};
use cudart::CudaError;
use macuda_tests::fake_rm::{GpuEvent, FAKE_L2_BYTES, FAKE_SMS};
use macuda_tests::KernelWorld;
use std::ffi::c_void;
use std::time::Duration;

const FATBIN: &[u8] = include_bytes!("../../tests/cuda/fixtures/vector_add.size.fatbin");
/// Where sm_90 kernels find their parameters in bank 0.
const PARAM_BASE: usize = 0x210;

extern "C" fn stub() {}

fn ok(e: CudaError) {
    assert_eq!(e, CudaError::SUCCESS, "{e}");
}

fn kernels(world: &KernelWorld) -> Vec<(Vec<u8>, [u32; 3])> {
    world
        .fake
        .0
        .lock()
        .gpu_log
        .iter()
        .filter_map(|e| match e {
            GpuEvent::Kernel { bank0, grid, .. } => Some((bank0.clone(), *grid)),
            _ => None,
        })
        .collect()
}

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) ^ seed) as u8)
        .collect()
}

#[test]
fn the_gpu_path_copies_fills_times_and_launches() {
    let world: &'static KernelWorld =
        Box::leak(Box::new(KernelWorld::new(Duration::from_secs(10))));
    cudart::runtime::install(world.start()).unwrap();
    // SAFETY (for the whole test): every pointer passed below is valid for
    // what the call reads or writes.
    unsafe {
        // The device's figures come from RM.
        let mut p: DeviceProp13 = std::mem::zeroed();
        ok(cudaGetDeviceProperties(&mut p, 0));
        assert_eq!((p.major, p.minor), (9, 0));
        assert_eq!(p.multiProcessorCount as u32, FAKE_SMS);
        assert_eq!(p.l2CacheSize as u32, FAKE_L2_BYTES);
        let name = std::ffi::CStr::from_ptr(p.name.as_ptr()).to_str().unwrap();
        assert_eq!(name, "NVIDIA H200");
        // CUDA 12's layout, through the name its headers use.
        let mut p12: DeviceProp12 = std::mem::zeroed();
        ok(cudaGetDeviceProperties_v2(&mut p12, 0));
        assert_eq!(p12.multiProcessorCount as u32, FAKE_SMS);
        assert_eq!((p12.major, p12.minor), (9, 0));
        assert_eq!(p12.sharedMemPerBlockOptin, p.sharedMemPerBlockOptin);
        assert_eq!(p12.totalGlobalMem, p.totalGlobalMem);
        assert_eq!(
            std::ffi::CStr::from_ptr(p12.name.as_ptr())
                .to_str()
                .unwrap(),
            name
        );
        assert_eq!(
            cudaGetDeviceProperties_v2(&mut p12, 1),
            CudaError::INVALID_DEVICE
        );

        // Pageable copies of 20 MiB: three chunks through staging each way.
        let n = 20 << 20;
        let (mut d, mut d2) = (std::ptr::null_mut(), std::ptr::null_mut());
        ok(cudaMalloc(&mut d, n));
        ok(cudaMalloc(&mut d2, n));
        let src = pattern(n, 7);
        let mut back = vec![0u8; n];
        ok(cudaMemcpy(
            d,
            src.as_ptr().cast(),
            n,
            memcpy_kind::HOST_TO_DEVICE,
        ));
        ok(cudaMemcpy(d2, d, n, memcpy_kind::DEVICE_TO_DEVICE));
        ok(cudaMemcpy(
            back.as_mut_ptr().cast(),
            d2,
            n,
            memcpy_kind::DEFAULT,
        ));
        assert!(back == src, "20 MiB came back changed");

        // A fill with ragged ends: the middle by the engine, the ends staged.
        ok(cudaMemset(d.cast::<u8>().add(3).cast(), 0x5a, 1001));
        let mut head = vec![0u8; 1010];
        ok(cudaMemcpy(
            head.as_mut_ptr().cast(),
            d,
            head.len(),
            memcpy_kind::DEVICE_TO_HOST,
        ));
        assert_eq!(&head[..3], &src[..3]);
        assert!(head[3..1004].iter().all(|&b| b == 0x5a));
        assert_eq!(&head[1004..], &src[1004..1010]);

        // Pinned memory: asynchronous copies on a stream, no staging.
        let mut s: Handle = std::ptr::null_mut();
        ok(cudaStreamCreateWithFlags(&mut s, 1));
        let (mut h1, mut h2) = (std::ptr::null_mut(), std::ptr::null_mut());
        ok(cudaMallocHost(&mut h1, 1 << 20));
        ok(cudaMallocHost(&mut h2, 1 << 20));
        let p1 = std::slice::from_raw_parts_mut(h1.cast::<u8>(), 1 << 20);
        p1.copy_from_slice(&pattern(1 << 20, 99));
        let (mut e1, mut e2): (Handle, Handle) = (std::ptr::null_mut(), std::ptr::null_mut());
        ok(cudaEventCreate(&mut e1));
        ok(cudaEventCreate(&mut e2));
        ok(cudaEventRecord(e1, s));
        ok(cudaMemcpyAsync(
            d,
            h1,
            1 << 20,
            memcpy_kind::HOST_TO_DEVICE,
            s,
        ));
        std::thread::sleep(Duration::from_millis(2));
        ok(cudaMemcpyAsync(
            h2,
            d,
            1 << 20,
            memcpy_kind::DEVICE_TO_HOST,
            s,
        ));
        ok(cudaEventRecord(e2, s));
        ok(cudaEventSynchronize(e2));
        ok(cudaEventQuery(e2));
        let p2 = std::slice::from_raw_parts(h2.cast::<u8>(), 1 << 20);
        assert!(p1 == p2);
        let mut ms = -1.0f32;
        ok(cudaEventElapsedTime(&mut ms, e1, e2));
        assert!(ms >= 0.0, "{ms}");

        // A launch: the GPU gets our parameters in bank 0.
        cudart::embed::register(FATBIN, &[(stub as *const c_void, c"vector_add")]);
        let before = kernels(world).len();
        let mut count = 4096i32;
        let (mut a, mut b, mut c) = (d, d2, d);
        let mut args: [*mut c_void; 4] = [
            (&mut a as *mut *mut c_void).cast(),
            (&mut b as *mut *mut c_void).cast(),
            (&mut c as *mut *mut c_void).cast(),
            (&mut count as *mut i32).cast(),
        ];
        let grid = Dim3 { x: 16, y: 1, z: 1 };
        let block = Dim3 { x: 256, y: 1, z: 1 };
        ok(cudaLaunchKernel(
            stub as *const c_void,
            grid,
            block,
            args.as_mut_ptr(),
            0,
            s,
        ));
        ok(cudaStreamSynchronize(s));
        // Syncs with nothing queued since are answered without the actor,
        // which otherwise gets them in its mailbox or, for a caller that
        // waits on its own thread, as sync points in the lane.
        let asked = || {
            let rt = cudart::runtime::started().unwrap();
            let mailbox = rt
                .actor_snapshots()
                .into_iter()
                .find(|a| a.name == "submit")
                .and_then(|a| a.per_kind.get("synchronize").copied())
                .unwrap_or(0);
            let lane = rt.call(|st| st.submit.stats()).unwrap().caller_syncs;
            (mailbox, lane)
        };
        let syncs = asked();
        assert!(syncs.1 > 0, "the caller waited itself: {syncs:?}");
        ok(cudaStreamSynchronize(s));
        ok(cudaStreamSynchronize(s));
        ok(cudaDeviceSynchronize());
        assert_eq!(asked(), syncs, "an empty sync asked the actor");
        let launched = kernels(world);
        assert_eq!(launched.len(), before + 1);
        let (bank0, g) = &launched[before];
        assert_eq!(*g, [16, 1, 1]);
        let word = |o: usize| {
            u64::from_le_bytes(
                bank0[PARAM_BASE + o..PARAM_BASE + o + 8]
                    .try_into()
                    .unwrap(),
            )
        };
        assert_eq!(
            [word(0), word(8), word(16)],
            [d as u64, d2 as u64, d as u64]
        );
        assert_eq!(
            &bank0[PARAM_BASE + 24..PARAM_BASE + 28],
            &4096i32.to_le_bytes()
        );

        // A captured graph, replayed twice: two more launches, the copy
        // inside it run each time.
        ok(cudaStreamBeginCapture(s, 2));
        ok(cudaMemsetAsync(d2, 0x11, 4096, s));
        ok(cudaLaunchKernel(
            stub as *const c_void,
            grid,
            block,
            args.as_mut_ptr(),
            0,
            s,
        ));
        let mut g: Handle = std::ptr::null_mut();
        ok(cudaStreamEndCapture(s, &mut g));
        let mut exec: Handle = std::ptr::null_mut();
        ok(cudaGraphInstantiate(&mut exec, g, 0));
        ok(cudaMemset(d2, 0, 4096));
        ok(cudaGraphLaunch(exec, s));
        ok(cudaGraphLaunch(exec, s));
        ok(cudaStreamSynchronize(s));
        assert_eq!(kernels(world).len(), before + 3);
        let mut filled = vec![0u8; 4096];
        ok(cudaMemcpy(
            filled.as_mut_ptr().cast(),
            d2,
            4096,
            memcpy_kind::DEVICE_TO_HOST,
        ));
        assert!(filled.iter().all(|&x| x == 0x11));

        // A graph of kernel runs around a fill: each run is recorded once
        // as a chain on the card, and every launch replays it whole, with
        // the parameters captured, in order, after what came before.
        let rt = cudart::runtime::started().unwrap();
        let stats = || rt.call(|st| st.submit.stats()).unwrap();
        let mut capture = |counts: &[i32]| {
            let mut g: Handle = std::ptr::null_mut();
            ok(cudaStreamBeginCapture(s, 2));
            for (i, &n) in counts.iter().enumerate() {
                if i == 3 {
                    ok(cudaMemsetAsync(d2, 0x22, 4096, s));
                }
                count = n;
                ok(cudaLaunchKernel(
                    stub as *const c_void,
                    grid,
                    block,
                    args.as_mut_ptr(),
                    0,
                    s,
                ));
            }
            ok(cudaStreamEndCapture(s, &mut g));
            g
        };
        let counts = |from: usize| -> Vec<i32> {
            kernels(world)[from..]
                .iter()
                .map(|(bank0, _)| {
                    i32::from_le_bytes(bank0[PARAM_BASE + 24..PARAM_BASE + 28].try_into().unwrap())
                })
                .collect()
        };
        let first: Vec<i32> = (101..=105).collect();
        let g5 = capture(&first);
        let mut exec5: Handle = std::ptr::null_mut();
        ok(cudaGraphInstantiate(&mut exec5, g5, 0));
        let (at, s0) = (kernels(world).len(), stats());
        for _ in 0..3 {
            ok(cudaGraphLaunch(exec5, s));
        }
        ok(cudaStreamSynchronize(s));
        let ran: Vec<i32> = first.iter().chain(&first).chain(&first).copied().collect();
        assert_eq!(counts(at), ran, "three replays, each kernel once, in order");
        let s1 = stats();
        assert_eq!(
            s1.recorded_chains - s0.recorded_chains,
            2,
            "the runs before and after the fill"
        );
        assert_eq!(s1.replays - s0.replays, 6);
        assert_eq!(s1.replayed_launches - s0.replayed_launches, 15);
        assert_eq!(s1.launches, s0.launches, "no launch was built again");
        // An update takes new parameters: the chains are recorded afresh.
        let second: Vec<i32> = (201..=205).collect();
        let g5b = capture(&second);
        ok(cudaGraphExecUpdate(exec5, g5b, std::ptr::null_mut()));
        let at = kernels(world).len();
        ok(cudaGraphLaunch(exec5, s));
        ok(cudaStreamSynchronize(s));
        assert_eq!(counts(at), second);
        assert_eq!(stats().recorded_chains - s1.recorded_chains, 2);
        // Ordinary launches after a replay still follow it.
        *args[3].cast::<i32>() = 300;
        ok(cudaLaunchKernel(
            stub as *const c_void,
            grid,
            block,
            args.as_mut_ptr(),
            0,
            s,
        ));
        ok(cudaGraphLaunch(exec5, s));
        ok(cudaStreamSynchronize(s));
        let mut want = vec![300];
        want.extend(&second);
        assert_eq!(counts(at + 5), want);
        let overlaps = world
            .fake
            .0
            .lock()
            .gpu_log
            .iter()
            .filter(|e| matches!(e, GpuEvent::Overlap { .. }))
            .count();
        assert_eq!(overlaps, 0, "every chain waited for the one before");
        // Destroyed, its chains' memory goes back once their replays ran.
        let frees = rt.call(|st| st.memory.stats()).unwrap().device_frees;
        ok(cudaGraphExecDestroy(exec5));
        ok(cudaStreamSynchronize(s));
        ok(cudaGraphDestroy(g5));
        ok(cudaGraphDestroy(g5b));
        // The forget went through the lane; a stats request drains it.
        stats();
        let freed = rt.call(|st| st.memory.stats()).unwrap().device_frees - frees;
        // (The first two went back at the update: their replays had run.)
        assert_eq!(freed, 2, "the chains recorded after the update");

        ok(cudaFreeHost(h1));
        ok(cudaFreeHost(h2));
        ok(cudaFree(d));
        ok(cudaFree(d2));
        ok(cudaDeviceSynchronize());
    }
}
