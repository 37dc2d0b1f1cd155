//! A booted simulated card as our bare-metal code reaches it: the
//! transport shared between the page-table builder (video memory through
//! the BAR1 window), the TLB flush (BAR0) and the RPC conversation, and
//! our memory on the card over them.

use macuda_gsp::bare::{boot_through_fsp, CardBus, GspRpc};
use macuda_memory::{Bar0, BareLayout, BareMemory, TableMemory, TableMemoryError};
use macuda_pci::tinygpu::{TinyGpuOpener, TinyGpuTransport};
use macuda_pci::{enable_bus_master, DmaId, DmaRegion, PciError, Transport};
use macuda_sim::{Card, Listen, Server};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// One transport, shared by the parts that reach the card.
pub type Shared = Rc<RefCell<TinyGpuTransport>>;

/// Video memory as the builder reaches it: BAR1 over the socket.
pub struct Bar1Window(pub Shared);

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
pub struct Registers(pub Shared);

impl Bar0 for Registers {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        self.0.borrow_mut().mmio_read32(u64::from(reg))
    }

    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        self.0.borrow_mut().mmio_write32(u64::from(reg), value)
    }
}

/// A simulated card served on a unix socket, booted to GSP-RM through
/// its FSP with the test firmware; GSP-RM stays resident, the transport
/// goes on to the tables, the conversation to the objects.
pub fn booted() -> (Server<Card>, tempfile::TempDir, Shared, GspRpc) {
    booted_card(Card::new(super::card_trusting_the_test_key()))
}

/// [`booted`] on a card of the caller's making (its host memory's
/// segment size, say).
pub fn booted_card(card: Card) -> (Server<Card>, tempfile::TempDir, Shared, GspRpc) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let server =
        Server::start(&Listen::Unix(dir.path().join("s.sock")), card).expect("the sim serves");
    let mut t = TinyGpuOpener::new(server.endpoint(), Duration::from_secs(2))
        .connect()
        .expect("the sim answers");
    enable_bus_master(&mut t).expect("bus mastering");
    let booted = boot_through_fsp(&mut t, &super::test_firmware(), &super::sim_boot_patience())
        .expect("the sim boots");
    (server, dir, Rc::new(RefCell::new(t)), booted.rpc)
}

/// Our memory on the booted card, its tables and video memory where
/// `layout` puts them (keep both inside the BAR1 window for the test to
/// read what the engines wrote).
pub fn bare_memory(t: &Shared, layout: BareLayout) -> BareMemory<Bar1Window, Registers> {
    BareMemory::new(Bar1Window(t.clone()), Registers(t.clone()), layout)
        .expect("the root is written")
}

/// The shared transport as the RPC conversation's bus, borrowed for each
/// access only, so that the tables and the conversation can take turns
/// inside one call (the golden context maps memory between RPCs).
pub struct SharedBus(pub Shared);

impl CardBus for SharedBus {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        CardBus::read32(&mut *self.0.borrow_mut(), reg)
    }
    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        CardBus::write32(&mut *self.0.borrow_mut(), reg, value)
    }
    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        CardBus::alloc_dma(&mut *self.0.borrow_mut(), bytes)
    }
    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        CardBus::dma_write(&mut *self.0.borrow_mut(), id, offset, data)
    }
    fn dma_read(&mut self, id: DmaId, offset: u64, len: u64) -> Result<Vec<u8>, PciError> {
        CardBus::dma_read(&mut *self.0.borrow_mut(), id, offset, len)
    }
    fn config_read32(&mut self, offset: u16) -> Result<u32, PciError> {
        CardBus::config_read32(&mut *self.0.borrow_mut(), offset)
    }
    fn reset_function(&mut self) -> Result<(), PciError> {
        CardBus::reset_function(&mut *self.0.borrow_mut())
    }
    fn clear_bus_master(&mut self) -> Result<(), PciError> {
        CardBus::clear_bus_master(&mut *self.0.borrow_mut())
    }
}
