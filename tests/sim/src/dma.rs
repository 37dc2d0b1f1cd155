//! The card's memory as its engines reach it by DMA: the trait the FSP,
//! the FMC and GSP-RM read and write through, and the card's port behind
//! it.

use crate::chip::{Bar, SimChip};
use crate::config::ConfigSpace;
use crate::host_memory::{HostMemory, HostMemoryError};
use crate::vram::Vram;

/// Why the card refused a DMA.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DmaError {
    #[error("bus mastering is off: the card reads and writes no host memory")]
    BusMasterOff,
    #[error(transparent)]
    Host(#[from] HostMemoryError),
}

/// The card's memory as the FSP, the FMC and GSP-RM reach it.
pub trait Dma {
    fn read(&self, address: u64, out: &mut [u8]) -> Result<(), String>;
    fn write(&mut self, address: u64, data: &[u8]) -> Result<(), String>;
}

/// The card's bus-master port as its engines use it: host memory while
/// bus mastering is on, and its own video memory through BAR1's bus
/// addresses (where a large-BAR driver puts boot structures).
pub struct CardDma<'a> {
    bus_master: bool,
    host: &'a mut HostMemory,
    vram: &'a mut Vram,
    bar1: Option<Bar>,
}

impl<'a> CardDma<'a> {
    pub fn new(
        config: &ConfigSpace,
        host: &'a mut HostMemory,
        vram: &'a mut Vram,
        chip: &SimChip,
    ) -> CardDma<'a> {
        CardDma {
            bus_master: config.bus_master(),
            host,
            vram,
            bar1: chip.bars[1],
        }
    }

    /// The video memory offset of a bus address inside BAR1.
    fn in_bar1(&self, address: u64, len: usize) -> Option<u64> {
        let bar = self.bar1?;
        let offset = address.checked_sub(bar.address)?;
        (offset + len as u64 <= bar.size).then_some(offset)
    }
}

impl Dma for CardDma<'_> {
    fn read(&self, address: u64, out: &mut [u8]) -> Result<(), String> {
        if !self.bus_master {
            return Err(DmaError::BusMasterOff.to_string());
        }
        match self.in_bar1(address, out.len()) {
            Some(offset) => self.vram.read(offset, out).map_err(|e| e.to_string()),
            None => self.host.dma_read(address, out).map_err(|e| e.to_string()),
        }
    }

    fn write(&mut self, address: u64, data: &[u8]) -> Result<(), String> {
        if !self.bus_master {
            return Err(DmaError::BusMasterOff.to_string());
        }
        match self.in_bar1(address, data.len()) {
            Some(offset) => self.vram.write(offset, data).map_err(|e| e.to_string()),
            None => self
                .host
                .dma_write(address, data)
                .map_err(|e| e.to_string()),
        }
    }
}
