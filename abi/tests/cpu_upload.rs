//! `MACUDA_SMALL_UPLOADS=cpu` over the fake kernel module, whose GPU a
//! thread plays: a small upload to an idle GPU is written by the CPU
//! through the card's mapping (the GPU's log shows no write of it, and the
//! sync after it asks nothing of the submit actor); behind queued work,
//! too large, or after its allocation was freed and made again, another
//! way carries it or a fresh window does. Every upload reads back right.
//! One test: the runtime is per process.

use cudart::api::{memory::*, streams::*};
use cudart::knobs::{Knobs, SmallUploads};
use cudart::memory::INLINE_UPLOAD_MAX;
use cudart::types::{memcpy_kind, Handle};
use macuda_tests::fake_rm::GpuEvent;
use macuda_tests::KernelWorld;
use std::ffi::c_void;
use std::time::Duration;

#[path = "support/actor_syncs.rs"]
mod actor_syncs;
use actor_syncs::{ok, syncs};

/// How many times the fake GPU wrote at `dst` (inline or by copy).
fn gpu_writes(world: &KernelWorld, dst: u64) -> usize {
    world
        .fake
        .0
        .lock()
        .gpu_log
        .iter()
        .filter(|e| match e {
            GpuEvent::Upload { dst: d, .. } | GpuEvent::Copy { dst: d, .. } => *d == dst,
            _ => false,
        })
        .count()
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(29) ^ seed).collect()
}

/// Upload `len` bytes of `seed`'s pattern to `at` on stream `s` and sync.
unsafe fn upload(at: u64, len: usize, seed: u8, s: Handle) {
    let src = pattern(len, seed);
    ok(cudaMemcpyAsync(
        at as *mut c_void,
        src.as_ptr().cast(),
        len,
        memcpy_kind::HOST_TO_DEVICE,
        s,
    ));
    ok(cudaStreamSynchronize(s));
}

unsafe fn read_back(at: u64, len: usize) -> Vec<u8> {
    let mut back = vec![0u8; len];
    ok(cudaMemcpy(
        back.as_mut_ptr().cast::<c_void>(),
        at as *const c_void,
        len,
        memcpy_kind::DEVICE_TO_HOST,
    ));
    back
}

#[test]
fn small_uploads_to_an_idle_gpu_are_written_by_the_cpu() {
    let world: &'static KernelWorld =
        Box::leak(Box::new(KernelWorld::new(Duration::from_secs(10))));
    let knobs = Knobs {
        small_uploads: SmallUploads::Cpu,
        ..Knobs::default()
    };
    cudart::runtime::install_with(world.start(), knobs).unwrap();
    let limit = usize::try_from(INLINE_UPLOAD_MAX).unwrap();
    // SAFETY (for the whole test): every pointer passed below is valid for
    // what the call reads or writes.
    unsafe {
        let total = 4 << 20;
        let mut d = std::ptr::null_mut();
        ok(cudaMalloc(&mut d, total));
        let base = d as u64;
        let mut s = std::ptr::null_mut();
        ok(cudaStreamCreate(&mut s));
        ok(cudaStreamSynchronize(s));

        // Idle: the CPU writes it, and the sync after it waits for nothing.
        let before = syncs();
        upload(base + 4096, 4096, 1, s);
        upload(base + (1 << 20), limit, 2, s);
        assert_eq!(syncs(), before, "neither upload nor its sync asked the GPU");
        assert_eq!(gpu_writes(world, base + 4096), 0);
        assert_eq!(gpu_writes(world, base + (1 << 20)), 0);
        assert_eq!(read_back(base + 4096, 4096), pattern(4096, 1));
        assert_eq!(read_back(base + (1 << 20), limit), pattern(limit, 2));

        // Behind queued work: in stream order, by the GPU.
        ok(cudaMemsetAsync(d, 0x5A, 256, s));
        let at = base + (2 << 20);
        upload(at, 512, 3, s);
        assert_eq!(
            gpu_writes(world, at),
            1,
            "queued behind the memset, the GPU wrote it"
        );
        assert_eq!(read_back(at, 512), pattern(512, 3));
        assert_eq!(read_back(base, 256), vec![0x5A; 256]);

        // Over the limit: not the CPU's.
        let big = base + (3 << 20);
        upload(big, limit + 4, 4, s);
        assert_eq!(gpu_writes(world, big), 1);
        assert_eq!(read_back(big, limit + 4), pattern(limit + 4, 4));

        // Freed and made again (the memory actor may hand the same VA
        // back): the window is asked for again and the bytes land.
        ok(cudaFree(d));
        let mut again = std::ptr::null_mut();
        ok(cudaMalloc(&mut again, total));
        let again = again as u64;
        let earlier = gpu_writes(world, again + 8192);
        upload(again + 8192, 1024, 5, s);
        assert_eq!(gpu_writes(world, again + 8192), earlier, "the CPU's again");
        assert_eq!(read_back(again + 8192, 1024), pattern(1024, 5));
        ok(cudaFree(again as *mut c_void));
    }
}
