//! Small uploads that travel in the compute queue's push buffer, over the
//! fake kernel module whose GPU a thread plays: from pageable memory they
//! return without a sync and land as they were at the call; what is not
//! whole words, or larger than the limit, goes through staging and the
//! copy engine; from pinned memory, which the GPU can write, an upload
//! goes inline only when nothing of ours is left to run, and behind queued
//! work it stays on the copy engine, so it reads what that work wrote.
//! One test: the runtime is per process.

use cudart::api::{memory::*, streams::*};
use cudart::memory::INLINE_UPLOAD_MAX;
use cudart::types::memcpy_kind;
use macuda_tests::fake_rm::GpuEvent;
use macuda_tests::KernelWorld;
use std::ffi::c_void;
use std::time::Duration;

#[path = "support/actor_syncs.rs"]
mod actor_syncs;
use actor_syncs::{ok, syncs};

/// How the GPU wrote `bytes` at `dst`: inline from a push buffer, by the
/// copy engine, or not at all.
#[derive(Debug, PartialEq, Eq)]
enum Wrote {
    Inline,
    CopyEngine,
    Nothing,
}

fn how(world: &KernelWorld, dst: u64, bytes: u64) -> Wrote {
    let log = &world.fake.0.lock().gpu_log;
    let inline = log
        .iter()
        .any(|e| matches!(e, GpuEvent::Upload { dst: d, bytes: b } if *d == dst && *b == bytes));
    let copied = log.iter().any(
        |e| matches!(e, GpuEvent::Copy { dst: d, bytes: b, fill: None, .. } if *d == dst && *b == bytes),
    );
    match (inline, copied) {
        (true, false) => Wrote::Inline,
        (false, true) => Wrote::CopyEngine,
        (false, false) => Wrote::Nothing,
        (true, true) => panic!("{bytes} bytes at {dst:#x} written both ways"),
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
}

#[test]
fn small_uploads_go_inline_where_their_bytes_are_settled() {
    let world: &'static KernelWorld =
        Box::leak(Box::new(KernelWorld::new(Duration::from_secs(10))));
    cudart::runtime::install(world.start()).unwrap();
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

        // Pageable: (offset, length, expected way).
        let cases = [
            (0usize, 4096usize, Wrote::Inline),
            (1 << 20, limit, Wrote::Inline),
            (2 << 20, 6, Wrote::CopyEngine),
            (3 << 20, limit + 4, Wrote::CopyEngine),
        ];
        let before = syncs();
        let mut src = Vec::new();
        for (i, (at, len, _)) in cases.iter().enumerate() {
            src = pattern(*len, i as u8 + 1);
            ok(cudaMemcpyAsync(
                d.cast::<u8>().add(*at).cast(),
                src.as_ptr().cast(),
                *len,
                memcpy_kind::HOST_TO_DEVICE,
                s,
            ));
            // Overwritten at once: the bytes were taken at the call.
            src.fill(0xEE);
        }
        drop(src);
        assert_eq!(syncs(), before, "no upload waited for the GPU");
        for (i, (at, len, way)) in cases.iter().enumerate() {
            let mut back = vec![0u8; *len];
            ok(cudaMemcpy(
                back.as_mut_ptr().cast::<c_void>(),
                d.cast::<u8>().add(*at).cast(),
                *len,
                memcpy_kind::DEVICE_TO_HOST,
            ));
            assert_eq!(back, pattern(*len, i as u8 + 1), "upload {i} landed");
            assert_eq!(
                how(world, base + *at as u64, *len as u64),
                *way,
                "upload {i}"
            );
        }

        // Pinned, with nothing left to run: inline.
        let mut pinned = std::ptr::null_mut();
        ok(cudaMallocHost(&mut pinned, 4096));
        let p = std::slice::from_raw_parts_mut(pinned.cast::<u8>(), 4096);
        p.copy_from_slice(&pattern(4096, 0x40));
        ok(cudaStreamSynchronize(s));
        let at = base + (5 << 19);
        ok(cudaMemcpyAsync(
            at as *mut c_void,
            pinned,
            256,
            memcpy_kind::HOST_TO_DEVICE,
            s,
        ));
        ok(cudaStreamSynchronize(s));
        assert_eq!(how(world, at, 256), Wrote::Inline);

        // Pinned, behind a download into that same pinned memory: the
        // upload must carry what the download wrote, so the copy engine
        // reads it in stream order.
        ok(cudaMemcpyAsync(
            pinned,
            d.cast::<u8>().add(1 << 20).cast(),
            512,
            memcpy_kind::DEVICE_TO_HOST,
            s,
        ));
        let at2 = base + (7 << 19);
        ok(cudaMemcpyAsync(
            at2 as *mut c_void,
            pinned,
            512,
            memcpy_kind::HOST_TO_DEVICE,
            s,
        ));
        ok(cudaStreamSynchronize(s));
        assert_eq!(how(world, at2, 512), Wrote::CopyEngine);
        let mut back = vec![0u8; 512];
        ok(cudaMemcpy(
            back.as_mut_ptr().cast::<c_void>(),
            at2 as *mut c_void,
            512,
            memcpy_kind::DEVICE_TO_HOST,
        ));
        assert_eq!(back, pattern(limit, 2)[..512], "what the download wrote");
        ok(cudaFreeHost(pinned));
        ok(cudaFree(d));
    }
}
