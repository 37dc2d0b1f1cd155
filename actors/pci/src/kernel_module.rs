//! The transport of the kernel-module path: NVIDIA's module owns the PCI
//! function (its config space, BARs, interrupts and reset), and everything
//! we do goes through its RM ioctls in the gsp actor. This transport is
//! the pci actor's honest answer on that path: it touches nothing, and
//! every PCI-level operation is declined with the reason.

use crate::error::PciError;
use crate::transport::{BarInfo, DmaId, DmaRegion, Opener, Transport};
use macuda_hw::pci::Width;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Opens the (empty) transport for GPU `index` of the kernel module.
pub struct KernelModuleOpener {
    index: u32,
    /// PCI-level operations anything asked of its transports (each one
    /// declined): the record that shows nothing touched the function.
    attempts: Arc<AtomicU64>,
}

impl KernelModuleOpener {
    pub fn new(index: u32) -> KernelModuleOpener {
        KernelModuleOpener {
            index,
            attempts: Arc::default(),
        }
    }

    /// How many PCI-level operations were asked of (and declined by) the
    /// transports this opener made.
    pub fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::Relaxed)
    }
}

impl Opener for KernelModuleOpener {
    fn describe(&self) -> String {
        format!("NVIDIA's kernel module (GPU {})", self.index)
    }

    fn open(&self) -> Result<Box<dyn Transport>, PciError> {
        Ok(Box::new(KernelModuleTransport {
            attempts: Arc::clone(&self.attempts),
        }))
    }

    fn owns_function(&self) -> bool {
        false
    }
}

struct KernelModuleTransport {
    attempts: Arc<AtomicU64>,
}

impl KernelModuleTransport {
    fn owned(&self, what: &'static str) -> PciError {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        PciError::OwnedByKernelModule { what }
    }
}

impl Transport for KernelModuleTransport {
    fn backend(&self) -> &'static str {
        "kernel"
    }

    fn owns_function(&self) -> bool {
        false
    }

    fn config_read(&mut self, _offset: u16, _width: Width) -> Result<u32, PciError> {
        Err(self.owned("config space"))
    }

    fn config_write(&mut self, _offset: u16, _width: Width, _value: u32) -> Result<(), PciError> {
        Err(self.owned("config space"))
    }

    fn bars(&mut self) -> Result<Vec<BarInfo>, PciError> {
        Err(self.owned("the BARs"))
    }

    fn mmio_read(&mut self, _offset: u64, _out: &mut [u8]) -> Result<(), PciError> {
        Err(self.owned("BAR0 registers"))
    }

    fn mmio_write(&mut self, _offset: u64, _data: &[u8]) -> Result<(), PciError> {
        Err(self.owned("BAR0 registers"))
    }

    fn doorbell(&mut self, _token: u32) -> Result<(), PciError> {
        Err(self.owned("the doorbell register (ours is RM's usermode page)"))
    }

    fn alloc_dma(&mut self, _bytes: u64) -> Result<DmaRegion, PciError> {
        Err(self.owned("DMA memory (RM pins host memory instead)"))
    }

    fn dma_read(&mut self, _id: DmaId, _offset: u64, _out: &mut [u8]) -> Result<(), PciError> {
        Err(self.owned("DMA memory"))
    }

    fn dma_write(&mut self, _id: DmaId, _offset: u64, _data: &[u8]) -> Result<(), PciError> {
        Err(self.owned("DMA memory"))
    }

    fn function_reset(&mut self) -> Result<(), PciError> {
        Err(self.owned("function reset (we never reset a GPU the module serves)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pci_operation_is_declined_and_nothing_is_touched() {
        let o = KernelModuleOpener::new(0);
        assert!(!o.owns_function());
        let mut t = o.open().unwrap();
        assert!(!t.owns_function());
        assert!(matches!(
            t.config_read(0, Width::U16),
            Err(PciError::OwnedByKernelModule { .. })
        ));
        assert!(t.function_reset().is_err());
        assert!(t.mmio_read32(0).is_err());
        assert!(t.alloc_dma(4096).is_err());
        let e = t.config_write(4, Width::U16, 0).unwrap_err();
        assert!(e.to_string().contains("kernel module"), "{e}");
        assert_eq!(o.attempts(), 5, "each declined operation is counted");
    }
}
