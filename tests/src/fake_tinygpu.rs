//! A TinyGPU server for the client's tests: the sim's server
//! (`macuda_sim::server`, which owns the wire) in front of a small model of
//! a card that logs what it was asked and whose bytes a test can poke, and
//! told to break the wire (`WireFault`) or its segment tables.

use macuda_pci::tinygpu::wire::{
    encode_segment_table, Command, Request, MIN_SYSMEM_FD_BYTES, SEGMENT_TABLE_BYTES,
    SYSMEM_PAGE_BYTES,
};
use macuda_pci::tinygpu::Endpoint;
use macuda_sim::server::{Device, Listen, Server, SharedMapping, WireFault};
use std::collections::HashMap;
use std::os::fd::OwnedFd;

/// Bus addresses the fake hands out for shared memory start here.
const SHARED_BUS_BASE: u64 = 0x80_0000_0000;
/// ... and for MAP_SYSMEM page lists here.
const REMOTE_BUS_BASE: u64 = 0x40_0000_0000;
/// The fake scatters shared memory into segments of this size...
const SEGMENT_BYTES: u64 = 64 << 10;
/// ... and, like macOS, lists at most this many.
const MAX_SEGMENTS: usize = 32;

/// The card behind the fake server.
pub struct FakeCard {
    pub config: Vec<u8>,
    pub bar_bytes: [u64; 6],
    /// Sparse BAR0 contents, by 4 KiB page.
    bar0: HashMap<u64, Box<[u8; 4096]>>,
    pub resets: u32,
    /// Every request header received, in order.
    pub log: Vec<Request>,
    shared: Vec<memmap2::MmapMut>,
    remote: Vec<Vec<u8>>,
    /// Shared mappings get a segment table that never terminates.
    unterminated_segments: bool,
}

impl FakeCard {
    /// An RTX 5090 as the fake presents it: GB202, 32 GiB, 256 MiB BAR1.
    pub fn gb202() -> FakeCard {
        let mut config = vec![0u8; 4096];
        config[0..2].copy_from_slice(&0x10DEu16.to_le_bytes());
        config[2..4].copy_from_slice(&0x2B85u16.to_le_bytes());
        config[8..12].copy_from_slice(&0x0300_00A1u32.to_le_bytes());
        let mut card = FakeCard {
            config,
            bar_bytes: [64 << 20, 256 << 20, 0, 32 << 20, 0, 0],
            bar0: HashMap::new(),
            resets: 0,
            log: Vec::new(),
            shared: Vec::new(),
            remote: Vec::new(),
            unterminated_segments: false,
        };
        card.poke32(0x0, 0x1B20_00A1);
        card.poke32(0xA00, 0x1B2A_1000);
        card.poke32(0x11_83A4, 32 * 1024);
        card
    }

    pub fn poke32(&mut self, offset: u64, value: u32) {
        self.bar0_write(offset, &value.to_le_bytes());
    }

    pub fn peek32(&self, offset: u64) -> u32 {
        let mut b = [0u8; 4];
        self.bar0_read(offset, &mut b);
        u32::from_le_bytes(b)
    }

    fn bar0_write(&mut self, offset: u64, data: &[u8]) {
        for (i, b) in data.iter().enumerate() {
            let at = offset + i as u64;
            let page = self
                .bar0
                .entry(at / 4096)
                .or_insert_with(|| Box::new([0u8; 4096]));
            page[(at % 4096) as usize] = *b;
        }
    }

    fn bar0_read(&self, offset: u64, out: &mut [u8]) {
        for (i, b) in out.iter_mut().enumerate() {
            let at = offset + i as u64;
            *b = self
                .bar0
                .get(&(at / 4096))
                .map_or(0, |p| p[(at % 4096) as usize]);
        }
    }

    pub fn command_register(&self) -> u16 {
        u16::from_le_bytes([self.config[4], self.config[5]])
    }

    /// Bytes of shared DMA mapping `index` as the server sees them.
    pub fn shared_bytes(&self, index: usize, offset: usize, len: usize) -> Vec<u8> {
        self.shared[index][offset..offset + len].to_vec()
    }

    /// Bytes of MAP_SYSMEM allocation `handle`.
    pub fn remote_bytes(&self, handle: usize) -> &[u8] {
        &self.remote[handle]
    }

    pub fn count(&self, command: Command) -> usize {
        self.log
            .iter()
            .filter(|r| r.command == command as u8)
            .count()
    }
}

/// A running fake server; it stops when dropped.
pub struct FakeTinyGpu {
    server: Server<FakeCard>,
    _dir: Option<tempfile::TempDir>,
}

impl FakeTinyGpu {
    /// Listen on a unix socket in a fresh temp directory.
    pub fn unix() -> FakeTinyGpu {
        let dir = tempfile::tempdir().expect("temp dir");
        let listen = Listen::Unix(dir.path().join("tinygpu.sock"));
        let server =
            Server::start(&listen, FakeCard::gb202()).expect("fake server on a unix socket");
        FakeTinyGpu {
            server,
            _dir: Some(dir),
        }
    }

    /// Listen on TCP on the loopback interface.
    pub fn tcp() -> FakeTinyGpu {
        let server = Server::start(&Listen::Tcp(0), FakeCard::gb202()).expect("fake server on TCP");
        FakeTinyGpu { server, _dir: None }
    }

    pub fn endpoint(&self) -> Endpoint {
        self.server.endpoint()
    }

    /// The `--device` word that reaches this server.
    pub fn device_word(&self) -> String {
        self.server.device_word()
    }

    pub fn card(&self) -> parking_lot::MutexGuard<'_, FakeCard> {
        self.server.device()
    }

    /// Break the wire as `fault` says (`WireFault::None` mends it).
    pub fn misbehave(&self, fault: WireFault) {
        self.server.set_fault(fault);
    }

    /// Shared mappings from now on get a segment table that never ends.
    pub fn unterminate_segment_tables(&self) {
        self.card().unterminated_segments = true;
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u32 {
        self.server.connections()
    }
}

impl Device for FakeCard {
    fn observe(&mut self, request: &Request) {
        self.log.push(*request);
    }

    fn probe(&mut self) -> String {
        "fake-gb202:0".to_string()
    }

    fn bar(&mut self, index: u32) -> Result<(u64, u64), String> {
        match self.bar_bytes.get(index as usize) {
            Some(&size) if size > 0 => Ok((0x1_0000_0000 * (u64::from(index) + 1), size)),
            _ => Err("no such BAR".into()),
        }
    }

    fn config_read(&mut self, offset: u64, width: u64) -> Result<u64, String> {
        let (off, w) = (offset as usize, width as usize);
        if off + w > self.config.len() || !matches!(w, 1 | 2 | 4) {
            return Err("config read out of range".into());
        }
        let mut v = [0u8; 8];
        v[..w].copy_from_slice(&self.config[off..off + w]);
        Ok(u64::from_le_bytes(v))
    }

    fn config_write(&mut self, offset: u64, width: u64, value: u64) -> Result<(), String> {
        let (off, w) = (offset as usize, width as usize);
        if off + w > self.config.len() || !matches!(w, 1 | 2 | 4) {
            return Err("config write out of range".into());
        }
        self.config[off..off + w].copy_from_slice(&value.to_le_bytes()[..w]);
        Ok(())
    }

    fn reset(&mut self) -> Result<(), String> {
        self.resets += 1;
        self.config[4] = 0;
        self.config[5] = 0;
        Ok(())
    }

    fn mmio_read(&mut self, bar: u32, offset: u64, out: &mut [u8]) -> Result<(), String> {
        if bar != 0 || offset + out.len() as u64 > self.bar_bytes[0] {
            return Err("MMIO read outside BAR0".into());
        }
        self.bar0_read(offset, out);
        Ok(())
    }

    fn mmio_write(&mut self, bar: u32, offset: u64, data: &[u8]) {
        if bar == 0 && offset + data.len() as u64 <= self.bar_bytes[0] {
            self.bar0_write(offset, data);
        }
    }

    fn map_sysmem_fd(&mut self, size: u64) -> Result<SharedMapping, String> {
        shared_memory(size, self)
            .map(|(fd, size, index)| SharedMapping { fd, size, index })
            .map_err(|e| format!("shared memory: {e}"))
    }

    fn map_sysmem(&mut self, size: u64, _contiguous: bool) -> Result<(Vec<u64>, u64), String> {
        let pages = size.div_ceil(SYSMEM_PAGE_BYTES);
        let handle = self.remote.len() as u64;
        self.remote
            .push(vec![0u8; (pages * SYSMEM_PAGE_BYTES) as usize]);
        // Two runs of pages, so the client has scatter to coalesce.
        let base = REMOTE_BUS_BASE + handle * (1 << 30);
        let list = (0..pages)
            .map(|i| {
                let gap = if i >= pages / 2 { 1 << 20 } else { 0 };
                base + gap + i * SYSMEM_PAGE_BYTES
            })
            .collect();
        Ok((list, handle))
    }

    fn sysmem_read(&mut self, handle: u32, offset: u64, out: &mut [u8]) -> Result<(), String> {
        match self.remote.get(handle as usize) {
            Some(mem) if offset as usize + out.len() <= mem.len() => {
                out.copy_from_slice(&mem[offset as usize..offset as usize + out.len()]);
                Ok(())
            }
            _ => Err("SYSMEM read out of range".into()),
        }
    }

    fn sysmem_write(&mut self, handle: u32, offset: u64, data: &[u8]) {
        if let Some(mem) = self.remote.get_mut(handle as usize) {
            if offset as usize + data.len() <= mem.len() {
                mem[offset as usize..offset as usize + data.len()].copy_from_slice(data);
            }
        }
    }
}

fn shared_memory(size: u64, card: &mut FakeCard) -> std::io::Result<(OwnedFd, u64, u64)> {
    let alloc = size
        .next_multiple_of(SYSMEM_PAGE_BYTES)
        .max(MIN_SYSMEM_FD_BYTES);
    let (fd, mut map) = macuda_sim::host_memory::memfd(alloc)?;
    let index = card.shared.len() as u64;
    let segments: Vec<(u64, u64)> = (0..alloc.div_ceil(SEGMENT_BYTES))
        .take(MAX_SEGMENTS)
        .map(|i| {
            let start = i * SEGMENT_BYTES;
            // Scattered: each segment lands 1 MiB apart on the bus.
            (
                SHARED_BUS_BASE + index * (1 << 32) + i * (1 << 20),
                SEGMENT_BYTES.min(alloc - start),
            )
        })
        .collect();
    if card.unterminated_segments {
        map[..SEGMENT_TABLE_BYTES].fill(0xAB);
    } else {
        encode_segment_table(&segments, &mut map[..SEGMENT_TABLE_BYTES]);
    }
    card.shared.push(map);
    Ok((fd, alloc, index))
}
