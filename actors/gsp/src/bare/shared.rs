//! The RPC shared block GSP-RM finds through the RM arguments
//! (reference/gsp.md 3.9): a page of PTEs listing the block's own pages
//! (so the block need not be contiguous on the bus), the command queue
//! with the header the host writes before boot, and the status queue
//! GSP-RM fills in when it links. The RM arguments (`GSP_ARGUMENTS_CACHED`)
//! sit in a page of their own after the block, for the libos page's
//! RMARGS entry to name.
//!
//! Everything lives in one DMA mapping. A mapping from the TinyGPU
//! server starts with its segment table, which is the transport's
//! bookkeeping, so the block starts past it on every transport (the cost
//! is two pages).

use super::rpc_error::RpcError;
use super::CardBus;
use macuda_hw::gsp_rpc::{
    self, rm_args, tx_header, ENTRY_OFF, MSGQ_FLAGS_SWAP_RX, MSGQ_VERSION, MSG_COUNT, MSG_SIZE,
    PTE_PAGE_BYTES, QUEUE_BYTES, RX_HDR_OFF, SHARED_BLOCK_BYTES, SHARED_BLOCK_PAGES,
};
use macuda_hw::le::{put_u32, put_u64};
use macuda_pci::tinygpu::wire::SEGMENT_TABLE_BYTES;
use macuda_pci::DmaRegion;

/// Bytes the libos page's RMARGS entry names: one page, as RM hands it.
pub const RMARGS_BYTES: u64 = PTE_PAGE_BYTES;

/// Where the block starts in its mapping: past the segment table.
const BLOCK_AT: u64 = (SEGMENT_TABLE_BYTES as u64).next_multiple_of(PTE_PAGE_BYTES);
/// Where the RM arguments start in the mapping.
const ARGS_AT: u64 = BLOCK_AT + SHARED_BLOCK_BYTES;
/// The whole mapping.
const MAPPING_BYTES: u64 = ARGS_AT + RMARGS_BYTES;

/// The command queue's `msgqTxHeader`, as the host writes it before boot:
/// its write pointer 0, the read pointer after it (the host's into the
/// status queue, SWAP_RX) 0 as the block is zeroed.
pub fn command_queue_header() -> [u8; tx_header::BYTES] {
    let mut h = [0u8; tx_header::BYTES];
    for (at, v) in [
        (tx_header::VERSION, MSGQ_VERSION),
        (tx_header::SIZE, QUEUE_BYTES),
        (tx_header::MSG_SIZE, MSG_SIZE),
        (tx_header::MSG_COUNT, MSG_COUNT),
        (tx_header::WRITE_PTR, 0),
        (tx_header::FLAGS, MSGQ_FLAGS_SWAP_RX),
        (tx_header::RX_HDR_OFF, RX_HDR_OFF),
        (tx_header::ENTRY_OFF, ENTRY_OFF),
    ] {
        put_u32(&mut h, at, v);
    }
    h
}

/// `GSP_ARGUMENTS_CACHED` for a block whose PTE page is at `block_bus`:
/// the queues' place; everything else (suspend/resume, profiler) zero.
pub fn rm_args(block_bus: u64) -> [u8; rm_args::BYTES] {
    let mut a = [0u8; rm_args::BYTES];
    put_u64(&mut a, rm_args::SHARED_MEM_PHYS_ADDR, block_bus);
    // CAST: 129 pages.
    put_u32(
        &mut a,
        rm_args::PAGE_TABLE_ENTRY_COUNT,
        SHARED_BLOCK_PAGES as u32,
    );
    put_u64(&mut a, rm_args::CMD_QUEUE_OFFSET, gsp_rpc::CMD_QUEUE_OFFSET);
    put_u64(
        &mut a,
        rm_args::STAT_QUEUE_OFFSET,
        gsp_rpc::STAT_QUEUE_OFFSET,
    );
    a
}

/// The block, staged in host memory.
#[derive(Debug, Clone)]
pub struct SharedBlock {
    region: DmaRegion,
}

impl SharedBlock {
    /// Map the block and the RM arguments, and write the PTE page, the
    /// command queue's header and the arguments.
    ///
    /// # Errors
    /// The transport's, or a mapping the card cannot reach in full.
    pub fn stage(bus: &mut dyn CardBus) -> Result<SharedBlock, RpcError> {
        let region = bus.alloc_dma(MAPPING_BYTES)?;
        let reach = |offset: u64| {
            region.bus_addr(offset).ok_or(RpcError::Unreachable {
                offset,
                bytes: region.bytes,
            })
        };
        let mut ptes = Vec::with_capacity(SHARED_BLOCK_PAGES as usize * 8);
        for page in 0..SHARED_BLOCK_PAGES {
            ptes.extend(reach(BLOCK_AT + page * PTE_PAGE_BYTES)?.to_le_bytes());
        }
        reach(ARGS_AT + RMARGS_BYTES - 1)?;
        let block = SharedBlock { region };
        bus.dma_write(block.region.id, BLOCK_AT, &ptes)?;
        block.write(bus, gsp_rpc::CMD_QUEUE_OFFSET, &command_queue_header())?;
        let args = rm_args(block.bus_addr());
        bus.dma_write(block.region.id, ARGS_AT, &args)?;
        Ok(block)
    }

    /// The bus address of the block's first page (the PTE page).
    pub fn bus_addr(&self) -> u64 {
        self.region.bus_addr(BLOCK_AT).expect("checked when staged")
    }

    /// The bus address of `GSP_ARGUMENTS_CACHED`, for the libos page's
    /// RMARGS entry (with [`RMARGS_BYTES`]).
    pub fn rmargs_bus_addr(&self) -> u64 {
        self.region.bus_addr(ARGS_AT).expect("checked when staged")
    }

    /// The mapping that holds it.
    pub fn region(&self) -> &DmaRegion {
        &self.region
    }

    /// Where block byte `offset` lies in the mapping.
    pub fn mapping_offset(offset: u64) -> u64 {
        BLOCK_AT + offset
    }

    /// Block bytes at `offset`.
    ///
    /// # Errors
    /// The transport's.
    pub fn read(&self, bus: &mut dyn CardBus, offset: u64, len: u64) -> Result<Vec<u8>, RpcError> {
        Ok(bus.dma_read(self.region.id, BLOCK_AT + offset, len)?)
    }

    /// # Errors
    /// The transport's.
    pub fn write(&self, bus: &mut dyn CardBus, offset: u64, data: &[u8]) -> Result<(), RpcError> {
        Ok(bus.dma_write(self.region.id, BLOCK_AT + offset, data)?)
    }

    /// # Errors
    /// The transport's.
    pub fn read_u32(&self, bus: &mut dyn CardBus, offset: u64) -> Result<u32, RpcError> {
        let b = self.read(bus, offset, 4)?;
        let b: [u8; 4] = b.as_slice().try_into().map_err(|_| RpcError::Unreachable {
            offset,
            bytes: self.region.bytes,
        })?;
        Ok(u32::from_le_bytes(b))
    }

    /// # Errors
    /// The transport's.
    pub fn write_u32(&self, bus: &mut dyn CardBus, offset: u64, v: u32) -> Result<(), RpcError> {
        self.write(bus, offset, &v.to_le_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::FakeCard;
    use super::*;
    use macuda_hw::le::{u32_at, u64_at};

    #[test]
    fn the_block_lists_its_pages_and_the_arguments_name_it() {
        let mut card = FakeCard::default();
        let block = SharedBlock::stage(&mut card).unwrap();
        let id = block.region().id;
        let ptes = card.bytes(id, BLOCK_AT, SHARED_BLOCK_PAGES as usize * 8);
        assert_eq!(u64_at(ptes, 0), block.bus_addr(), "PTE 0 is the PTE page");
        assert_eq!(
            u64_at(ptes, 8 * 128),
            block.bus_addr() + 128 * PTE_PAGE_BYTES
        );
        let h = card.bytes(id, BLOCK_AT + gsp_rpc::CMD_QUEUE_OFFSET, tx_header::BYTES);
        assert_eq!(u32_at(h, tx_header::MSG_COUNT), 63);
        assert_eq!(u32_at(h, tx_header::ENTRY_OFF), 0x1000);
        assert_eq!(u32_at(h, tx_header::FLAGS), MSGQ_FLAGS_SWAP_RX);
        let args_offset = block.rmargs_bus_addr() - block.region().segments[0].bus_addr;
        let a = card.bytes(id, args_offset, rm_args::BYTES);
        assert_eq!(u64_at(a, rm_args::SHARED_MEM_PHYS_ADDR), block.bus_addr());
        assert_eq!(u32_at(a, rm_args::PAGE_TABLE_ENTRY_COUNT), 129);
        assert_eq!(u64_at(a, rm_args::CMD_QUEUE_OFFSET), 0x1000);
        assert_eq!(u64_at(a, rm_args::STAT_QUEUE_OFFSET), 0x41000);
        assert!(
            BLOCK_AT >= SEGMENT_TABLE_BYTES as u64,
            "the segment table is left alone"
        );
    }

    #[test]
    fn a_mapping_refused_is_a_typed_error() {
        let mut card = FakeCard {
            max_mapping: Some(4096),
            ..FakeCard::default()
        };
        assert!(matches!(
            SharedBlock::stage(&mut card),
            Err(RpcError::Bus(_))
        ));
    }
}
