//! GSP's side of the message queues: the shared block reached through its
//! PTE page, the host's command queue read with every check RM's receiver
//! makes (header, checksum, sequence, element count, signature, version),
//! and the status queue written with the element count, sequence and
//! checksum RM's sender writes, never past the host's read pointer.

use crate::dma::Dma;
use macuda_hw::gsp_rpc::{
    self, element, rpc_header, tx_header, ENTRY_OFF, MSGQ_FLAGS_SWAP_RX, MSGQ_VERSION, MSG_COUNT,
    MSG_SIZE, QUEUE_BYTES, RPC_HEADER_VERSION, RPC_SIGNATURE, RX_HDR_OFF,
};
use macuda_hw::le::{put_u32 as put, u32_at};

/// What broke the queue protocol. The GSP stops reading the command queue
/// at the first one (as a card's GSP-RM would stop answering); the sim
/// keeps it for the test that caused it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueFault {
    #[error("the shared block: {0}")]
    Block(String),
    #[error("the command queue's header: {0}")]
    Header(String),
    #[error("command {seq}: {what}")]
    Message { seq: u32, what: String },
    #[error("DMA: {0}")]
    Dma(String),
}

/// A message read from the command queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub seq: u32,
    pub function: u32,
    pub payload: Vec<u8>,
}

/// The shared block: the bus address of each of its pages.
pub struct SharedBlock {
    pages: Vec<u64>,
    cmd_offset: u64,
    stat_offset: u64,
}

impl SharedBlock {
    /// The bus address of its first page (the PTE page).
    pub fn first_page(&self) -> u64 {
        self.pages[0]
    }

    /// Pages it spans.
    pub fn page_count(&self) -> u64 {
        self.pages.len() as u64
    }

    /// Read the PTE page at `first_page` (which lists itself first).
    pub fn map(
        dma: &dyn Dma,
        first_page: u64,
        pte_count: u32,
        cmd: u64,
        stat: u64,
    ) -> Result<SharedBlock, QueueFault> {
        let need = gsp_rpc::SHARED_BLOCK_PAGES;
        if u64::from(pte_count) < need {
            return Err(QueueFault::Block(format!(
                "{pte_count} PTEs; the block has {need} pages"
            )));
        }
        if cmd != gsp_rpc::CMD_QUEUE_OFFSET || stat != gsp_rpc::STAT_QUEUE_OFFSET {
            return Err(QueueFault::Block(format!(
                "queues at {cmd:#x} and {stat:#x}; GSP-RM's are at {:#x} and {:#x}",
                gsp_rpc::CMD_QUEUE_OFFSET,
                gsp_rpc::STAT_QUEUE_OFFSET
            )));
        }
        let mut raw = vec![0u8; (need * 8) as usize];
        dma.read(first_page, &mut raw)
            .map_err(|e| QueueFault::Dma(format!("the PTE page: {e}")))?;
        let pages: Vec<u64> = raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        if pages[0] != first_page {
            return Err(QueueFault::Block(format!(
                "PTE 0 is {:#x}, not the PTE page itself ({first_page:#x})",
                pages[0]
            )));
        }
        if let Some(i) = pages
            .iter()
            .position(|&p| p == 0 || p % gsp_rpc::PTE_PAGE_BYTES != 0)
        {
            return Err(QueueFault::Block(format!(
                "PTE {i} is {:#x}, not a page address",
                pages[i]
            )));
        }
        Ok(SharedBlock {
            pages,
            cmd_offset: cmd,
            stat_offset: stat,
        })
    }

    fn address(&self, offset: u64) -> u64 {
        self.pages[(offset / gsp_rpc::PTE_PAGE_BYTES) as usize] + offset % gsp_rpc::PTE_PAGE_BYTES
    }

    /// Read block bytes at `offset` (page by page: the pages are scattered).
    fn read(&self, dma: &dyn Dma, offset: u64, out: &mut [u8]) -> Result<(), QueueFault> {
        let mut done = 0;
        while done < out.len() {
            let at = offset + done as u64;
            let n = ((gsp_rpc::PTE_PAGE_BYTES - at % gsp_rpc::PTE_PAGE_BYTES) as usize)
                .min(out.len() - done);
            dma.read(self.address(at), &mut out[done..done + n])
                .map_err(|e| QueueFault::Dma(format!("block offset {at:#x}: {e}")))?;
            done += n;
        }
        Ok(())
    }

    fn write(&self, dma: &mut dyn Dma, offset: u64, data: &[u8]) -> Result<(), QueueFault> {
        let mut done = 0;
        while done < data.len() {
            let at = offset + done as u64;
            let n = ((gsp_rpc::PTE_PAGE_BYTES - at % gsp_rpc::PTE_PAGE_BYTES) as usize)
                .min(data.len() - done);
            dma.write(self.address(at), &data[done..done + n])
                .map_err(|e| QueueFault::Dma(format!("block offset {at:#x}: {e}")))?;
            done += n;
        }
        Ok(())
    }

    fn read_u32(&self, dma: &dyn Dma, offset: u64) -> Result<u32, QueueFault> {
        let mut b = [0u8; 4];
        self.read(dma, offset, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn write_u32(&self, dma: &mut dyn Dma, offset: u64, v: u32) -> Result<(), QueueFault> {
        self.write(dma, offset, &v.to_le_bytes())
    }
}

/// GSP's two ends of the queues, once linked.
pub struct Queues {
    block: SharedBlock,
    /// The next command message's sequence number.
    rx_seq: u32,
    /// The next status message's sequence number.
    tx_seq: u32,
}

impl Queues {
    /// Link: check the host's command-queue header, then publish the
    /// status queue's (its entry offset last: the host waits for it) with
    /// GSP's read pointer at 0.
    pub fn link(dma: &mut dyn Dma, block: SharedBlock) -> Result<Queues, QueueFault> {
        let cmd = block.cmd_offset;
        let field = |d: &dyn Dma, at: usize| block.read_u32(d, cmd + at as u64);
        for (at, want, name) in [
            (tx_header::VERSION, MSGQ_VERSION, "version"),
            (tx_header::SIZE, QUEUE_BYTES, "size"),
            (tx_header::MSG_SIZE, MSG_SIZE, "msgSize"),
            (tx_header::MSG_COUNT, MSG_COUNT, "msgCount"),
            (tx_header::ENTRY_OFF, ENTRY_OFF, "entryOff"),
        ] {
            let got = field(&*dma, at)?;
            if got != want {
                return Err(QueueFault::Header(format!(
                    "{name} is {got:#x}, not {want:#x}"
                )));
            }
        }
        let rx_off = field(&*dma, tx_header::RX_HDR_OFF)?;
        if rx_off < tx_header::BYTES as u32 || rx_off + 4 > ENTRY_OFF {
            return Err(QueueFault::Header(format!(
                "rxHdrOff {rx_off:#x} is not between the header and the entries"
            )));
        }
        let stat = block.stat_offset;
        let mut header = [0u8; tx_header::BYTES];
        for (at, v) in [
            (tx_header::VERSION, MSGQ_VERSION),
            (tx_header::SIZE, QUEUE_BYTES),
            (tx_header::MSG_SIZE, MSG_SIZE),
            (tx_header::MSG_COUNT, MSG_COUNT),
            (tx_header::WRITE_PTR, 0),
            (tx_header::FLAGS, MSGQ_FLAGS_SWAP_RX),
            (tx_header::RX_HDR_OFF, RX_HDR_OFF),
        ] {
            header[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        block.write(dma, stat, &header)?;
        block.write_u32(dma, stat + u64::from(RX_HDR_OFF), 0)?;
        block.write_u32(dma, stat + tx_header::ENTRY_OFF as u64, ENTRY_OFF)?;
        Ok(Queues {
            block,
            rx_seq: 0,
            tx_seq: 0,
        })
    }

    /// The next command, if the host has written one past GSP's read
    /// pointer. Consumes it (moves GSP's read pointer).
    pub fn next_command(&mut self, dma: &mut dyn Dma) -> Result<Option<Command>, QueueFault> {
        let (cmd, stat) = (self.block.cmd_offset, self.block.stat_offset);
        let write_ptr = self
            .block
            .read_u32(&*dma, cmd + tx_header::WRITE_PTR as u64)?;
        let read_at = stat + u64::from(RX_HDR_OFF);
        let read_ptr = self.block.read_u32(&*dma, read_at)?;
        if write_ptr >= MSG_COUNT {
            return Err(QueueFault::Header(format!(
                "writePtr {write_ptr} is past the {MSG_COUNT} elements"
            )));
        }
        if write_ptr == read_ptr {
            return Ok(None);
        }
        let seq = self.rx_seq;
        let bad = |what: String| QueueFault::Message { seq, what };
        let first = self.element(dma, cmd, read_ptr)?;
        let elem_count = u32_at(&first, element::ELEM_COUNT);
        let length = u32_at(&first, element::BYTES + rpc_header::LENGTH) as usize;
        if !(rpc_header::BYTES..=gsp_rpc::MESSAGE_MAX_BYTES - element::BYTES).contains(&length) {
            return Err(bad(format!("rpc length {length}")));
        }
        let want = gsp_rpc::elements_for(length) as u32;
        if elem_count != want {
            return Err(bad(format!(
                "elemCount {elem_count} for an rpc of {length} bytes ({want} elements)"
            )));
        }
        let available = (write_ptr + MSG_COUNT - read_ptr) % MSG_COUNT;
        if elem_count > available {
            return Err(bad(format!("{elem_count} elements, {available} written")));
        }
        let mut msg = first;
        for i in 1..elem_count {
            msg.extend(self.element(dma, cmd, (read_ptr + i) % MSG_COUNT)?);
        }
        msg.truncate(element::BYTES + length);
        if gsp_rpc::checksum(&msg) != 0 {
            return Err(bad("the checksum does not fold to 0".into()));
        }
        let got_seq = u32_at(&msg, element::SEQ_NUM);
        if got_seq != seq {
            return Err(bad(format!("seqNum {got_seq}; {seq} was next")));
        }
        let rpc = &msg[element::BYTES..];
        if u32_at(rpc, rpc_header::SIGNATURE) != RPC_SIGNATURE {
            return Err(bad(format!(
                "signature {:#x}",
                u32_at(rpc, rpc_header::SIGNATURE)
            )));
        }
        if u32_at(rpc, rpc_header::HEADER_VERSION) != RPC_HEADER_VERSION {
            return Err(bad(format!(
                "header version {:#x}",
                u32_at(rpc, rpc_header::HEADER_VERSION)
            )));
        }
        self.block
            .write_u32(dma, read_at, (read_ptr + elem_count) % MSG_COUNT)?;
        self.rx_seq += 1;
        Ok(Some(Command {
            seq,
            function: u32_at(rpc, rpc_header::FUNCTION),
            payload: rpc[rpc_header::BYTES..].to_vec(),
        }))
    }

    /// Post a message (a reply, under its command's function, or an
    /// event). `Ok(false)` when the host has not left room for it yet.
    /// `corrupt`: the checksum goes out wrong (an injected fault).
    pub fn post(
        &mut self,
        dma: &mut dyn Dma,
        function: u32,
        result: u32,
        payload: &[u8],
        corrupt: bool,
    ) -> Result<bool, QueueFault> {
        let (cmd, stat) = (self.block.cmd_offset, self.block.stat_offset);
        let length = rpc_header::BYTES + payload.len();
        let elems = gsp_rpc::elements_for(length) as u32;
        let write_ptr = self
            .block
            .read_u32(&*dma, stat + tx_header::WRITE_PTR as u64)?;
        let host_read = self.block.read_u32(&*dma, cmd + u64::from(RX_HDR_OFF))?;
        if host_read >= MSG_COUNT {
            return Err(QueueFault::Header(format!(
                "the host's status read pointer {host_read} is past the elements"
            )));
        }
        let free = (host_read + MSG_COUNT - write_ptr - 1) % MSG_COUNT;
        if elems > free {
            return Ok(false);
        }
        let mut msg = vec![0u8; elems as usize * MSG_SIZE as usize];
        put(&mut msg, element::SEQ_NUM, self.tx_seq);
        put(&mut msg, element::ELEM_COUNT, elems);
        let r = element::BYTES;
        put(&mut msg, r + rpc_header::HEADER_VERSION, RPC_HEADER_VERSION);
        put(&mut msg, r + rpc_header::SIGNATURE, RPC_SIGNATURE);
        put(&mut msg, r + rpc_header::LENGTH, length as u32);
        put(&mut msg, r + rpc_header::FUNCTION, function);
        put(&mut msg, r + rpc_header::RPC_RESULT, result);
        put(&mut msg, r + rpc_header::RPC_RESULT_PRIVATE, result);
        msg[r + rpc_header::BYTES..r + length].copy_from_slice(payload);
        let sum = gsp_rpc::checksum(&msg[..r + length]) ^ u32::from(corrupt);
        put(&mut msg, element::CHECKSUM, sum);
        for (i, chunk) in msg.chunks(MSG_SIZE as usize).enumerate() {
            let slot = (write_ptr + i as u32) % MSG_COUNT;
            self.block.write(
                dma,
                stat + u64::from(ENTRY_OFF) + u64::from(slot * MSG_SIZE),
                chunk,
            )?;
        }
        self.block.write_u32(
            dma,
            stat + tx_header::WRITE_PTR as u64,
            (write_ptr + elems) % MSG_COUNT,
        )?;
        self.tx_seq += 1;
        Ok(true)
    }

    fn element(&self, dma: &dyn Dma, queue: u64, index: u32) -> Result<Vec<u8>, QueueFault> {
        let mut e = vec![0u8; MSG_SIZE as usize];
        self.block.read(
            dma,
            queue + u64::from(ENTRY_OFF) + u64::from(index * MSG_SIZE),
            &mut e,
        )?;
        Ok(e)
    }
}
