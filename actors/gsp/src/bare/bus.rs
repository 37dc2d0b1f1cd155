//! The card as the bare-metal boot sees it: BAR0 registers and host memory
//! the card reaches by DMA. One trait, so the boot runs over the pci actor
//! (`PciHandle`) in the stack and over a bare `Transport` in tests.

use macuda_hw::pci::Width;
use macuda_pci::{DmaId, DmaRegion, PciError, PciHandle, Transport};

/// BAR0 registers and DMA-visible host memory.
pub trait CardBus {
    /// # Errors
    /// The transport's.
    fn read32(&mut self, reg: u32) -> Result<u32, PciError>;
    /// # Errors
    /// The transport's.
    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError>;
    /// Host memory the card can reach, in one mapping.
    ///
    /// # Errors
    /// The transport's (a refusal when the mapping would be too large).
    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError>;
    /// # Errors
    /// The transport's (out of range, unknown mapping).
    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError>;
    /// # Errors
    /// The transport's (out of range, unknown mapping).
    fn dma_read(&mut self, id: DmaId, offset: u64, len: u64) -> Result<Vec<u8>, PciError>;
    /// A dword of configuration space (the identity GSP-RM is told).
    ///
    /// # Errors
    /// The transport's.
    fn config_read32(&mut self, offset: u16) -> Result<u32, PciError>;
    /// Bus mastering off, a function-level reset, bus mastering back on.
    ///
    /// # Errors
    /// The transport's.
    fn reset_function(&mut self) -> Result<(), PciError>;
    /// Bus mastering off: every way out of a failed boot ends here, so a
    /// card left half-booted cannot write host memory.
    ///
    /// # Errors
    /// The transport's.
    fn clear_bus_master(&mut self) -> Result<(), PciError>;
}

/// One body for both kinds of transport the boot is handed: a concrete
/// one (tests) and a boxed one (the stack's openers).
macro_rules! card_bus_over_transport {
    ($($for:tt)*) => {
        $($for)* {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        self.mmio_read32(u64::from(reg))
    }

    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        self.mmio_write32(u64::from(reg), value)
    }

    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        Transport::alloc_dma(self, bytes)
    }

    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        Transport::dma_write(self, id, offset, data)
    }

    fn dma_read(&mut self, id: DmaId, offset: u64, len: u64) -> Result<Vec<u8>, PciError> {
        let len = usize::try_from(len).map_err(|_| PciError::OutOfRange {
            what: "a DMA read".to_string(),
            offset,
            len,
            size: usize::MAX as u64,
        })?;
        let mut out = vec![0u8; len];
        Transport::dma_read(self, id, offset, &mut out)?;
        Ok(out)
    }

    fn config_read32(&mut self, offset: u16) -> Result<u32, PciError> {
        self.config_read(offset, Width::U32)
    }

    fn reset_function(&mut self) -> Result<(), PciError> {
        macuda_pci::reset_function(self).map(|_| ())
    }

    fn clear_bus_master(&mut self) -> Result<(), PciError> {
        macuda_pci::clear_bus_master(self).map(|_| ())
    }
}
    };
}

card_bus_over_transport!(impl<T: Transport> CardBus for T);
card_bus_over_transport!(impl CardBus for dyn Transport + '_);

/// The pci actor's handle: each call is one request to the actor.
pub struct OverActor<'a>(pub &'a PciHandle);

impl CardBus for OverActor<'_> {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        self.0.mmio_read32(u64::from(reg))
    }

    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        self.0.mmio_write32(u64::from(reg), value)
    }

    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        self.0.alloc_dma(bytes)
    }

    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        self.0.dma_write(id, offset, data.to_vec())
    }

    fn dma_read(&mut self, id: DmaId, offset: u64, len: u64) -> Result<Vec<u8>, PciError> {
        self.0.dma_read(id, offset, len)
    }

    fn config_read32(&mut self, offset: u16) -> Result<u32, PciError> {
        self.0.config_read(offset, Width::U32)
    }

    fn reset_function(&mut self) -> Result<(), PciError> {
        self.0.reset_function()
    }

    fn clear_bus_master(&mut self) -> Result<(), PciError> {
        self.0.clear_bus_master()
    }
}

/// A borrowed transport as a sized [`CardBus`], for callers that hold the
/// transport as `&mut dyn Transport` (a trait object does not coerce to
/// another trait object).
pub struct OverTransport<'a>(pub &'a mut dyn Transport);

impl CardBus for OverTransport<'_> {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        CardBus::read32(self.0, reg)
    }

    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        CardBus::write32(self.0, reg, value)
    }

    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        CardBus::alloc_dma(self.0, bytes)
    }

    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        CardBus::dma_write(self.0, id, offset, data)
    }

    fn dma_read(&mut self, id: DmaId, offset: u64, len: u64) -> Result<Vec<u8>, PciError> {
        CardBus::dma_read(self.0, id, offset, len)
    }

    fn config_read32(&mut self, offset: u16) -> Result<u32, PciError> {
        CardBus::config_read32(self.0, offset)
    }

    fn reset_function(&mut self) -> Result<(), PciError> {
        CardBus::reset_function(self.0)
    }

    fn clear_bus_master(&mut self) -> Result<(), PciError> {
        CardBus::clear_bus_master(self.0)
    }
}
