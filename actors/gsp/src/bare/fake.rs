//! A card for the unit tests of the RPC client: host memory the "card"
//! reaches by DMA (each mapping one contiguous segment, its first pages
//! taken by a segment table as the TinyGPU server's are), and BAR0
//! registers that remember what was written.

use super::CardBus;
use macuda_pci::tinygpu::wire::SEGMENT_TABLE_BYTES;
use macuda_pci::{DmaId, DmaRegion, DmaSegment, PciError};
use std::collections::HashMap;

/// Where mapping `n`'s bus addresses start.
const BUS_STRIDE: u64 = 1 << 32;

#[derive(Default)]
pub struct FakeCard {
    pub mem: HashMap<DmaId, Vec<u8>>,
    pub regs: HashMap<u32, u32>,
    /// Every register write, in order.
    pub writes: Vec<(u32, u32)>,
    /// Refuse mappings larger than this (a platform's limit).
    pub max_mapping: Option<u64>,
}

impl FakeCard {
    /// The bytes at `offset` of mapping `id`.
    pub fn bytes(&self, id: DmaId, offset: u64, len: usize) -> &[u8] {
        &self.mem[&id][offset as usize..offset as usize + len]
    }

    pub fn bytes_mut(&mut self, id: DmaId, offset: u64, len: usize) -> &mut [u8] {
        &mut self.mem.get_mut(&id).expect("a mapping")[offset as usize..offset as usize + len]
    }
}

impl CardBus for FakeCard {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        Ok(self.regs.get(&reg).copied().unwrap_or(0))
    }

    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        self.regs.insert(reg, value);
        self.writes.push((reg, value));
        Ok(())
    }

    fn alloc_dma(&mut self, bytes: u64) -> Result<DmaRegion, PciError> {
        if self.max_mapping.is_some_and(|m| bytes > m) {
            return Err(PciError::Refused { what: "a mapping" });
        }
        let id = DmaId(self.mem.len() as u32 + 1);
        let size = bytes.max(SEGMENT_TABLE_BYTES as u64);
        self.mem.insert(id, vec![0; size as usize]);
        Ok(DmaRegion {
            id,
            bytes: size,
            segments: vec![DmaSegment {
                bus_addr: u64::from(id.0) * BUS_STRIDE,
                bytes: size,
            }],
        })
    }

    fn dma_write(&mut self, id: DmaId, offset: u64, data: &[u8]) -> Result<(), PciError> {
        let m = self
            .mem
            .get_mut(&id)
            .ok_or(PciError::Refused { what: "id" })?;
        let end = offset as usize + data.len();
        if end > m.len() {
            return Err(PciError::OutOfRange {
                what: "a fake mapping".into(),
                offset,
                len: data.len() as u64,
                size: m.len() as u64,
            });
        }
        m[offset as usize..end].copy_from_slice(data);
        Ok(())
    }

    fn dma_read(&mut self, id: DmaId, offset: u64, len: u64) -> Result<Vec<u8>, PciError> {
        let m = self.mem.get(&id).ok_or(PciError::Refused { what: "id" })?;
        m.get(offset as usize..(offset + len) as usize)
            .map(<[u8]>::to_vec)
            .ok_or(PciError::OutOfRange {
                what: "a fake mapping".into(),
                offset,
                len,
                size: m.len() as u64,
            })
    }

    fn config_read32(&mut self, _: u16) -> Result<u32, macuda_pci::PciError> {
        Ok(0)
    }

    fn reset_function(&mut self) -> Result<(), macuda_pci::PciError> {
        Ok(())
    }

    fn clear_bus_master(&mut self) -> Result<(), macuda_pci::PciError> {
        Ok(())
    }
}
