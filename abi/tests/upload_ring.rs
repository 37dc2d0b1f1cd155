//! Small uploads from pageable memory through the staging ring, over the
//! fake kernel module whose GPU a thread plays: `cudaMemcpyAsync` returns
//! without a sync, the source can be overwritten at once, and each piece
//! lands as it was at its call, also across the ring's wrap and beside a
//! download and a large upload that use the chunk half of staging. One
//! test: the runtime is per process.

use cudart::api::{memory::*, streams::*};
use cudart::types::memcpy_kind;
use macuda_tests::KernelWorld;
use std::ffi::c_void;
use std::time::Duration;

#[path = "support/actor_syncs.rs"]
mod actor_syncs;
use actor_syncs::{ok, syncs};

#[test]
fn small_uploads_return_at_once_and_land_as_they_were_at_the_call() {
    let world: &'static KernelWorld =
        Box::leak(Box::new(KernelWorld::new(Duration::from_secs(10))));
    cudart::runtime::install(world.start()).unwrap();
    // SAFETY (for the whole test): every pointer passed below is valid for
    // what the call reads or writes.
    unsafe {
        let piece = 256 << 10;
        // 48 pieces of 256 KiB: the 8 MiB ring wraps once.
        let pieces = 48;
        let mut d = std::ptr::null_mut();
        ok(cudaMalloc(&mut d, piece * pieces));
        let mut s = std::ptr::null_mut();
        ok(cudaStreamCreate(&mut s));
        ok(cudaStreamSynchronize(s));
        let before = syncs();
        let mut src = vec![0u8; piece];
        for i in 0..pieces {
            src.fill(i as u8 + 1);
            ok(cudaMemcpyAsync(
                d.cast::<u8>().add(i * piece).cast(),
                src.as_ptr().cast(),
                piece,
                memcpy_kind::HOST_TO_DEVICE,
                s,
            ));
            // Overwritten right away: the piece was staged at the call.
            src.fill(0xEE);
        }
        assert_eq!(
            syncs() - before,
            1,
            "48 uploads waited once, where the ring wrapped"
        );
        // A large upload and a download use the chunk half meanwhile.
        let big = 12 << 20;
        let mut d2 = std::ptr::null_mut();
        ok(cudaMalloc(&mut d2, big));
        let pattern: Vec<u8> = (0..big).map(|i| (i * 7 % 251) as u8).collect();
        ok(cudaMemcpyAsync(
            d2,
            pattern.as_ptr().cast(),
            big,
            memcpy_kind::HOST_TO_DEVICE,
            s,
        ));
        let mut back = vec![0u8; piece * pieces];
        ok(cudaMemcpy(
            back.as_mut_ptr().cast::<c_void>(),
            d,
            piece * pieces,
            memcpy_kind::DEVICE_TO_HOST,
        ));
        for i in 0..pieces {
            let got = &back[i * piece..(i + 1) * piece];
            assert!(
                got.iter().all(|&b| b == i as u8 + 1),
                "piece {i} holds what its call saw"
            );
        }
        let mut back2 = vec![0u8; big];
        ok(cudaMemcpy(
            back2.as_mut_ptr().cast::<c_void>(),
            d2,
            big,
            memcpy_kind::DEVICE_TO_HOST,
        ));
        assert!(back2 == pattern, "the large upload");
        // After a sync the ring starts over: no wait for the next piece.
        ok(cudaStreamSynchronize(s));
        let before = syncs();
        ok(cudaMemcpyAsync(
            d,
            src.as_ptr().cast(),
            piece,
            memcpy_kind::HOST_TO_DEVICE,
            s,
        ));
        assert_eq!(syncs(), before);
        ok(cudaStreamSynchronize(s));
        ok(cudaFree(d));
        ok(cudaFree(d2));
    }
}
