//! The memory actor's CPU access to device memory by GPU address: inside
//! one live allocation it reaches the card's video memory at the right
//! offset; anything else is a typed error; a card without memory access
//! refuses.

use macuda_memory::MemoryError;
use macuda_supervisor::HostError;
use macuda_tests::NullWorld;
use std::time::Duration;

#[test]
fn device_memory_access_stays_inside_one_allocation() {
    let world = NullWorld::playing_gpu(Duration::from_secs(5));
    let host = world.start();
    let a = host.call(|s| s.memory.alloc_device(8192)).unwrap();
    let b = host.call(|s| s.memory.alloc_device(4096)).unwrap();
    host.call(|s| s.memory.write_device(a.va + 8000, vec![7; 192]))
        .unwrap();
    let back = host
        .call(|s| s.memory.read_device(a.va + 7990, 202))
        .unwrap();
    assert_eq!(&back[10..], &[7; 192][..]);
    assert_ne!(&back[..10], &[7; 10][..], "only what was written");
    // Through the card directly: the bytes sit at the allocation's VRAM offset.
    let t = macuda_pci::NullOpener::new(std::sync::Arc::clone(&world.card));
    let mut card = macuda_pci::Opener::open(&t).unwrap();
    let mut raw = [0u8; 4];
    card.vram_read(a.vram_offset + 8000, &mut raw).unwrap();
    assert_eq!(raw, [7; 4]);

    for (va, len) in [(a.va + 8190, 4), (b.va + 4095, 2), (1 << 56, 1), (0, 4)] {
        let err = host.call(|s| s.memory.read_device(va, len)).unwrap_err();
        assert!(
            matches!(err, HostError::Memory(MemoryError::NotAllocated { va: v, len: l }) if v == va && l == len),
            "{va:#x}+{len}: {err:?}"
        );
    }
    host.call(|s| s.memory.free_device(b.va)).unwrap();
    assert!(
        host.call(|s| s.memory.read_device(b.va, 4)).is_err(),
        "freed"
    );
}

#[test]
fn a_card_without_memory_access_refuses() {
    let world = NullWorld::new(Duration::from_secs(5));
    let host = world.start();
    let a = host.call(|s| s.memory.alloc_device(4096)).unwrap();
    let err = host.call(|s| s.memory.read_device(a.va, 8)).unwrap_err();
    assert!(
        matches!(&err, HostError::Memory(MemoryError::Pci(p)) if p.is_refusal()),
        "{err:?}"
    );
}
