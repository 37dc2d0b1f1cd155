//! One transport shared by the parts of our bare-metal stack that reach
//! the card inside one command: the page-table builder (video memory
//! through the BAR1 window), the TLB flush (BAR0) and the RPC
//! conversation. Each access borrows the transport for itself only, so
//! they can take turns inside one call (the golden context maps memory
//! between RPCs).

use macuda_gsp::bare::CardBus;
use macuda_memory::{Bar0, TableMemory, TableMemoryError};
use macuda_pci::{DmaId, DmaRegion, PciError, Transport};
use std::cell::RefCell;
use std::rc::Rc;

/// A handle on the shared transport; clones share it.
#[derive(Clone)]
pub struct CardPort<'a>(pub Rc<RefCell<&'a mut dyn Transport>>);

impl<'a> CardPort<'a> {
    pub fn new(t: &'a mut dyn Transport) -> CardPort<'a> {
        CardPort(Rc::new(RefCell::new(t)))
    }

    /// Video memory through BAR1 (physical, inside the window).
    ///
    /// # Errors
    /// The transport's, or an address past the window.
    pub fn vram_read(&self, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        self.0.borrow_mut().vram_read(offset, out)
    }

    /// # Errors
    /// As [`CardPort::vram_read`].
    pub fn vram_write(&self, offset: u64, data: &[u8]) -> Result<(), PciError> {
        self.0.borrow_mut().vram_write(offset, data)
    }

    /// # Errors
    /// The transport's.
    pub fn doorbell(&self, token: u32) -> Result<(), PciError> {
        self.0.borrow_mut().doorbell(token)
    }
}

impl TableMemory for CardPort<'_> {
    fn read(&self, address: u64, out: &mut [u8]) -> Result<(), TableMemoryError> {
        let len = out.len();
        self.vram_read(address, out).map_err(|e| TableMemoryError {
            address,
            len,
            why: e.to_string(),
        })
    }

    fn write(&mut self, address: u64, data: &[u8]) -> Result<(), TableMemoryError> {
        self.vram_write(address, data)
            .map_err(|e| TableMemoryError {
                address,
                len: data.len(),
                why: e.to_string(),
            })
    }
}

impl Bar0 for CardPort<'_> {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        self.0.borrow_mut().mmio_read32(u64::from(reg))
    }

    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        self.0.borrow_mut().mmio_write32(u64::from(reg), value)
    }
}

impl CardBus for CardPort<'_> {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        CardBus::read32(&mut **self.0.borrow_mut(), reg)
    }
    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        CardBus::write32(&mut **self.0.borrow_mut(), reg, value)
    }
    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        CardBus::alloc_dma(&mut **self.0.borrow_mut(), bytes)
    }
    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        CardBus::dma_write(&mut **self.0.borrow_mut(), id, offset, data)
    }
    fn dma_read(&mut self, id: DmaId, offset: u64, len: u64) -> Result<Vec<u8>, PciError> {
        CardBus::dma_read(&mut **self.0.borrow_mut(), id, offset, len)
    }
    fn config_read32(&mut self, offset: u16) -> Result<u32, PciError> {
        CardBus::config_read32(&mut **self.0.borrow_mut(), offset)
    }
    fn reset_function(&mut self) -> Result<(), PciError> {
        CardBus::reset_function(&mut **self.0.borrow_mut())
    }
    fn clear_bus_master(&mut self) -> Result<(), PciError> {
        CardBus::clear_bus_master(&mut **self.0.borrow_mut())
    }
}
