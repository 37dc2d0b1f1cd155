//! Our page tables on a card we booted: after `boot_through_fsp` leaves
//! BAR1 physical, the tables are written into low video memory through
//! the BAR1 window over the TinyGPU socket, the TLB is flushed through
//! BAR0, and the simulated card's own MMU walks what we built. Video
//! memory past the window is refused, never wrapped. GSP-RM takes the
//! root for a VA space of a client of ours (SET_PAGE_DIRECTORY).

use macuda_gsp::bare::{alloc_client_objects, set_page_directory, ClientObjects, TablesOwner};
use macuda_memory::{flush_tlb, Aperture, FlushLimit, PageFlags, PageSize, PageTables};
use macuda_pci::tinygpu::TinyGpuTransport;
use macuda_pci::{PciError, Transport};
use macuda_sim::mmu::{Access, PageDirectory, Target, Walked};
use macuda_tests::sim_host::bar1::{booted, Bar1Window, Registers};

const MIB: u64 = 1 << 20;
/// The table pool: low in video memory, well inside a 256 MiB window.
const POOL: std::ops::Range<u64> = 2 * MIB..6 * MIB;

#[test]
fn tables_written_through_bar1_are_walked_by_the_cards_mmu() {
    let (server, _dir, t, mut rpc) = booted();
    let mut tables = PageTables::new(Bar1Window(t.clone()), POOL).unwrap();
    let mut bar0 = Registers(t.clone());
    let (va, pa) = (0x7_4000_0000, 0x1234_5000);
    let big = (0x7_8000_0000, 0x4000_0000);
    for (va, pa, size) in [(va, pa, PageSize::Small), (big.0, big.1, PageSize::Huge)] {
        let inv = tables
            .map(
                va,
                pa,
                size.bytes(),
                size,
                Aperture::Video,
                PageFlags::default(),
            )
            .unwrap();
        flush_tlb(&mut bar0, &inv, FlushLimit::default()).unwrap();
        tables.invalidated(inv).unwrap();
    }
    // What we wrote reached the card: the host's copy reads back the same.
    tables.verify().unwrap();
    let root = PageDirectory {
        target: Target::Video,
        address: tables.pdb().address,
    };
    for (va, pa) in [
        (va + 0x18, pa + 0x18),
        (big.0 + 0x12_3458, big.1 + 0x12_3458),
    ] {
        match server.device().translate(root, va, Access::Write) {
            Ok(Walked::Page(p)) => assert_eq!(p.physical(va), pa),
            other => panic!("{va:#x} walks to {other:?}"),
        }
    }
    // GSP-RM takes the root for a VA space of a client of ours, as the
    // one its channels will use.
    let h = ClientObjects {
        client: 0xC1E0_0002,
        device: 0xC1E0_0003,
        subdevice: 0xC1E0_0004,
        va_space: 0xC1E0_0005,
    };
    {
        let mut bus = t.borrow_mut();
        let bus: &mut TinyGpuTransport = &mut bus;
        alloc_client_objects(&mut rpc, bus, h, TablesOwner::Driver).unwrap();
        set_page_directory(&mut rpc, bus, h, tables.pdb().address).unwrap();
    }
    assert_eq!(
        server
            .device()
            .gsp_rm()
            .calls()
            .root_of(h.client, h.va_space),
        Some(root)
    );
    // Unmapped and flushed: the card faults where nothing is mapped.
    let inv = tables.unmap(va, PageSize::Small.bytes()).unwrap();
    flush_tlb(&mut bar0, &inv, FlushLimit::default()).unwrap();
    tables.invalidated(inv).unwrap();
    assert!(server.device().translate(root, va, Access::Read).is_err());
    assert!(server.device().tlb().stale_uses().is_empty());
}

#[test]
fn video_memory_past_the_bar1_window_is_refused() {
    let (server, _dir, t, _) = booted();
    let window = server.device().chip().bars[1].unwrap().size;
    let mut t = t.borrow_mut();
    let mut word = [0u8; 4];
    t.vram_write(window - 4, &[1, 2, 3, 4]).unwrap();
    t.vram_read(window - 4, &mut word).unwrap();
    assert_eq!(word, [1, 2, 3, 4]);
    assert!(matches!(
        t.vram_read(window - 2, &mut word),
        Err(PciError::OutOfRange { .. })
    ));
    assert!(t.vram_write(window, &[0]).is_err());
}
