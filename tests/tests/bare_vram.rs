//! Our page tables on a card we booted: after `boot_through_fsp` leaves
//! BAR1 physical, the tables are written into low video memory through
//! the BAR1 window over the TinyGPU socket, the TLB is flushed through
//! BAR0, and the simulated card's own MMU walks what we built. Video
//! memory past the window is refused, never wrapped. GSP-RM takes the
//! root for a VA space of a client of ours (SET_PAGE_DIRECTORY).

use macuda_gsp::bare::{
    alloc_client_objects, boot_through_fsp, set_page_directory, ClientObjects, GspRpc,
};
use macuda_memory::{
    flush_tlb, Aperture, Bar0, FlushLimit, PageFlags, PageSize, PageTables, TableMemory,
    TableMemoryError,
};
use macuda_pci::tinygpu::{TinyGpuOpener, TinyGpuTransport};
use macuda_pci::{enable_bus_master, PciError, Transport};
use macuda_sim::mmu::{Access, PageDirectory, Target, Walked};
use macuda_sim::{Card, Listen, Server};
use macuda_tests::sim_host::{card_trusting_the_test_key, test_firmware};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

const MIB: u64 = 1 << 20;
/// The table pool: low in video memory, well inside a 256 MiB window.
const POOL: std::ops::Range<u64> = 2 * MIB..6 * MIB;

type Shared = Rc<RefCell<TinyGpuTransport>>;

/// Video memory as the builder reaches it: BAR1 over the socket.
struct Bar1Window(Shared);

impl TableMemory for Bar1Window {
    fn read(&self, address: u64, out: &mut [u8]) -> Result<(), TableMemoryError> {
        let len = out.len();
        self.0
            .borrow_mut()
            .vram_read(address, out)
            .map_err(|e| TableMemoryError {
                address,
                len,
                why: e.to_string(),
            })
    }

    fn write(&mut self, address: u64, data: &[u8]) -> Result<(), TableMemoryError> {
        self.0
            .borrow_mut()
            .vram_write(address, data)
            .map_err(|e| TableMemoryError {
                address,
                len: data.len(),
                why: e.to_string(),
            })
    }
}

/// BAR0 over the same socket.
struct Registers(Shared);

impl Bar0 for Registers {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        self.0.borrow_mut().mmio_read32(u64::from(reg))
    }

    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        self.0.borrow_mut().mmio_write32(u64::from(reg), value)
    }
}

fn booted() -> (Server<Card>, tempfile::TempDir, Shared, GspRpc) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &Listen::Unix(dir.path().join("s.sock")),
        Card::new(card_trusting_the_test_key()),
    )
    .unwrap();
    let mut t = TinyGpuOpener::new(server.endpoint(), Duration::from_secs(2))
        .connect()
        .unwrap();
    enable_bus_master(&mut t).unwrap();
    let patience = macuda_tests::sim_host::sim_boot_patience();
    // GSP-RM stays resident on the card; the transport goes on to the
    // tables, the conversation to the objects.
    let booted = boot_through_fsp(&mut t, &test_firmware(), &patience).unwrap();
    (server, dir, Rc::new(RefCell::new(t)), booted.rpc)
}

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
        alloc_client_objects(&mut rpc, bus, h).unwrap();
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
