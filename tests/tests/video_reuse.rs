//! Freed video memory kept for the next allocation of its size, over the
//! fake kernel module: no RM call for a buffer freed and asked for again,
//! its bytes and address as they were, and everything kept handed back
//! when RM runs out.

use macuda_memory::{KEEP_BYTES, KEEP_LARGEST};
use macuda_supervisor::Host;
use macuda_tests::KernelWorld;
use std::time::Duration;

fn rm_counts(host: &Host) -> (u64, u64) {
    let g = host.call(|s| s.gsp.stats()).unwrap();
    (g.allocs, g.frees)
}

#[test]
fn a_buffer_freed_and_asked_for_again_comes_back_without_rm() {
    let world = KernelWorld::new(Duration::from_secs(10));
    let host = world.start();
    let a = host.call(|s| s.memory.alloc_device(64 << 10)).unwrap();
    host.call(|s| s.memory.write_device(a.va, vec![7; 16]))
        .unwrap();
    host.call(|s| s.memory.free_device(a.va)).unwrap();
    let before = rm_counts(&host);
    // Another size takes new memory; the freed one's size takes it back.
    let other = host.call(|s| s.memory.alloc_device(128 << 10)).unwrap();
    assert_ne!(other.va, a.va);
    let again = host
        .call(|s| s.memory.alloc_device((64 << 10) - 100))
        .unwrap();
    assert_eq!((again.va, again.rm_handle), (a.va, a.rm_handle));
    assert_eq!(
        host.call(|s| s.memory.read_device(again.va, 16)).unwrap(),
        vec![7; 16],
        "the same memory, mapped where it was"
    );
    let after = rm_counts(&host);
    assert_eq!(after.0, before.0 + 1, "only the other size asked RM");
    assert_eq!(after.1, before.1, "nothing went back to RM");
    let m = host.call(|s| s.memory.stats()).unwrap();
    assert_eq!(m.device_reuses, 1);
    assert_eq!(m.vram_kept, 0);
}

#[test]
fn buffers_past_the_budget_go_back_to_rm_at_once() {
    let world = KernelWorld::new(Duration::from_secs(10));
    let host = world.start();
    let big = host
        .call(|s| s.memory.alloc_device(KEEP_LARGEST + (2 << 20)))
        .unwrap();
    let before = rm_counts(&host);
    host.call(|s| s.memory.free_device(big.va)).unwrap();
    assert_eq!(rm_counts(&host).1, before.1 + 1, "too large to keep");
    let n = KEEP_BYTES / KEEP_LARGEST;
    let bufs: Vec<_> = (0..=n)
        .map(|_| host.call(|s| s.memory.alloc_device(KEEP_LARGEST)).unwrap())
        .collect();
    let before = rm_counts(&host);
    for b in &bufs {
        host.call(|s| s.memory.free_device(b.va)).unwrap();
    }
    assert_eq!(rm_counts(&host).1, before.1 + 1, "the one past the budget");
    assert_eq!(
        host.call(|s| s.memory.stats()).unwrap().vram_kept,
        KEEP_BYTES
    );
}

#[test]
fn an_allocation_rm_refuses_hands_back_what_was_kept_first() {
    // The status RM gives when it has no memory left.
    const NO_MEMORY: u32 = 0x51;
    let world = KernelWorld::new(Duration::from_secs(10));
    let host = world.start();
    let a = host.call(|s| s.memory.alloc_device(64 << 10)).unwrap();
    host.call(|s| s.memory.free_device(a.va)).unwrap();
    assert_eq!(host.call(|s| s.memory.stats()).unwrap().vram_kept, 64 << 10);
    let before = rm_counts(&host);
    world.fake.0.lock().refuse = Some((macuda_hw::rm::class::NV1_MEMORY_USER, NO_MEMORY));
    host.call(|s| s.memory.alloc_device(1 << 20))
        .expect_err("RM refuses every video allocation now");
    assert_eq!(
        rm_counts(&host).1,
        before.1 + 1,
        "the kept buffer went back"
    );
    assert_eq!(host.call(|s| s.memory.stats()).unwrap().vram_kept, 0);
    world.fake.0.lock().refuse = None;
    // Its address is free again, and new memory can go there.
    let b = host.call(|s| s.memory.alloc_device(64 << 10)).unwrap();
    assert_eq!(b.va, a.va);
}
