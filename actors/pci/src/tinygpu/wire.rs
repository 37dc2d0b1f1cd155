//! The TinyGPU wire protocol, declared once for the client and the test
//! server: 33-byte little-endian requests, 17-byte replies, an error reply
//! followed by its message, and the segment table at the start of a
//! shared-memory DMA mapping.
//!
//! Facts from tinygrad's client (`tinygrad/runtime/support/system.py`,
//! `RemoteCmd`, `RemotePCIDevice._rpc`), its macOS server
//! (`extra/usbgpu/tbgpu/installer/Shared/server.c`) and its TCP server
//! (`extra/remote/serve.py`).

/// Request kinds, in wire order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Command {
    /// arg0 base class (0 = any), arg1 filter length, arg2 vendor; the
    /// filter (pairs of u32 mask, device) follows. Reply: resp0 text length,
    /// resp1 count, then newline-separated device names.
    Probe = 0,
    /// bar = index. Reply: resp0 server-side address, resp1 size.
    MapBar = 1,
    /// arg0 size, arg1 contiguous (ignored by the macOS server). Reply:
    /// resp0 mapped size, resp1 index, and the shared-memory fd by
    /// SCM_RIGHTS; the mapping starts with the segment table.
    MapSysmemFd = 2,
    /// arg0 offset, arg1 width in bytes. Reply: resp0 value.
    CfgRead = 3,
    /// arg0 offset, arg1 width in bytes, arg2 value.
    CfgWrite = 4,
    /// PCIe function-level reset.
    Reset = 5,
    /// bar, arg0 offset, arg1 length. Reply: resp0 length, then the bytes.
    MmioRead = 6,
    /// bar, arg0 offset, arg1 length, then the bytes. Posted: no reply.
    MmioWrite = 7,
    /// arg0 size, arg1 contiguous. Reply: resp0 byte length of the page
    /// list, resp1 handle, then one u64 bus address per 4 KiB page.
    MapSysmem = 8,
    /// bar = handle, arg0 offset, arg1 length. Reply: resp0 length, bytes.
    SysmemRead = 9,
    /// bar = handle, arg0 offset, arg1 length, then the bytes. Posted.
    SysmemWrite = 10,
    /// bar = index. A no-op on the macOS server.
    ResizeBar = 11,
    Ping = 12,
}

impl Command {
    pub const ALL: [Command; 13] = [
        Command::Probe,
        Command::MapBar,
        Command::MapSysmemFd,
        Command::CfgRead,
        Command::CfgWrite,
        Command::Reset,
        Command::MmioRead,
        Command::MmioWrite,
        Command::MapSysmem,
        Command::SysmemRead,
        Command::SysmemWrite,
        Command::ResizeBar,
        Command::Ping,
    ];

    pub fn from_byte(b: u8) -> Option<Command> {
        Command::ALL.get(usize::from(b)).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            Command::Probe => "PROBE",
            Command::MapBar => "MAP_BAR",
            Command::MapSysmemFd => "MAP_SYSMEM_FD",
            Command::CfgRead => "CFG_READ",
            Command::CfgWrite => "CFG_WRITE",
            Command::Reset => "RESET",
            Command::MmioRead => "MMIO_READ",
            Command::MmioWrite => "MMIO_WRITE",
            Command::MapSysmem => "MAP_SYSMEM",
            Command::SysmemRead => "SYSMEM_READ",
            Command::SysmemWrite => "SYSMEM_WRITE",
            Command::ResizeBar => "RESIZE_BAR",
            Command::Ping => "PING",
        }
    }

    /// Writes carry their data after the header and get no reply.
    pub fn is_posted(self) -> bool {
        matches!(self, Command::MmioWrite | Command::SysmemWrite)
    }
}

pub const REQUEST_BYTES: usize = 33;
pub const RESPONSE_BYTES: usize = 17;
pub const STATUS_OK: u8 = 0;
pub const STATUS_ERROR: u8 = 1;

/// The macOS server's bulk buffer: no single transfer may exceed it.
pub const MAX_TRANSFER_BYTES: u64 = 64 << 20;
/// Longer error messages than this are treated as a corrupt reply.
pub const MAX_ERROR_MESSAGE_BYTES: u64 = 64 << 10;
/// Longer PROBE replies than this are treated as a corrupt reply.
pub const MAX_PROBE_REPLY_BYTES: u64 = 1 << 20;
/// The server copies this much of the DMA preparation's output to the start
/// of every shared-memory mapping: (bus address, length) u64 pairs ending
/// with a pair of length 0.
pub const SEGMENT_TABLE_BYTES: usize = 8192;
/// Bytes per entry of the segment table.
pub const SEGMENT_ENTRY_BYTES: usize = 16;
/// Page granule of MAP_SYSMEM's page list and of sysmem sizes.
pub const SYSMEM_PAGE_BYTES: u64 = 4096;
/// The macOS server's smallest shared-memory mapping.
pub const MIN_SYSMEM_FD_BYTES: u64 = 16 << 10;
/// The default TCP port of tinygrad's remote server.
pub const DEFAULT_TCP_PORT: u16 = 6667;

/// A request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub command: u8,
    pub dev_id: u32,
    pub bar: u32,
    pub args: [u64; 3],
}

impl Request {
    pub fn new(command: Command, dev_id: u32, bar: u32, args: [u64; 3]) -> Request {
        Request {
            command: command as u8,
            dev_id,
            bar,
            args,
        }
    }

    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(self.command);
        out.extend_from_slice(&self.dev_id.to_le_bytes());
        out.extend_from_slice(&self.bar.to_le_bytes());
        for a in self.args {
            out.extend_from_slice(&a.to_le_bytes());
        }
    }

    pub fn decode(b: &[u8; REQUEST_BYTES]) -> Request {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        Request {
            command: b[0],
            dev_id: u32_at(1),
            bar: u32_at(5),
            args: [u64_at(9), u64_at(17), u64_at(25)],
        }
    }
}

/// A reply header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    pub status: u8,
    pub values: [u64; 2],
}

impl Response {
    pub fn ok(resp0: u64, resp1: u64) -> Response {
        Response {
            status: STATUS_OK,
            values: [resp0, resp1],
        }
    }

    pub fn encode(&self) -> [u8; RESPONSE_BYTES] {
        let mut b = [0u8; RESPONSE_BYTES];
        b[0] = self.status;
        b[1..9].copy_from_slice(&self.values[0].to_le_bytes());
        b[9..17].copy_from_slice(&self.values[1].to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; RESPONSE_BYTES]) -> Response {
        let mut r0 = [0u8; 8];
        let mut r1 = [0u8; 8];
        r0.copy_from_slice(&b[1..9]);
        r1.copy_from_slice(&b[9..17]);
        Response {
            status: b[0],
            values: [u64::from_le_bytes(r0), u64::from_le_bytes(r1)],
        }
    }
}

/// Parse a segment table: pairs up to the first of length 0. `None` when no
/// terminator appears within `table` (a corrupt or hostile mapping).
pub fn parse_segment_table(table: &[u8]) -> Option<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    for entry in table.chunks_exact(SEGMENT_ENTRY_BYTES) {
        let mut a = [0u8; 8];
        let mut l = [0u8; 8];
        a.copy_from_slice(&entry[..8]);
        l.copy_from_slice(&entry[8..]);
        let (addr, len) = (u64::from_le_bytes(a), u64::from_le_bytes(l));
        if len == 0 {
            return Some(out);
        }
        out.push((addr, len));
    }
    None
}

/// Write a segment table (the test server's side).
pub fn encode_segment_table(segments: &[(u64, u64)], out: &mut [u8]) {
    for (i, (a, l)) in segments.iter().chain(std::iter::once(&(0, 0))).enumerate() {
        let at = i * SEGMENT_ENTRY_BYTES;
        if at + SEGMENT_ENTRY_BYTES > out.len() {
            break;
        }
        out[at..at + 8].copy_from_slice(&a.to_le_bytes());
        out[at + 8..at + 16].copy_from_slice(&l.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_keep_their_wire_numbers() {
        for (i, c) in Command::ALL.iter().enumerate() {
            assert_eq!(*c as u8 as usize, i);
            assert_eq!(Command::from_byte(i as u8), Some(*c));
        }
        assert_eq!(Command::Ping as u8, 12);
        assert_eq!(Command::from_byte(13), None);
        assert!(Command::MmioWrite.is_posted() && Command::SysmemWrite.is_posted());
        assert!(!Command::MmioRead.is_posted());
    }

    #[test]
    fn headers_are_packed_little_endian() {
        let r = Request::new(Command::CfgWrite, 7, 2, [0x04, 2, 0x0006]);
        let mut b = Vec::new();
        r.encode_into(&mut b);
        assert_eq!(b.len(), REQUEST_BYTES);
        assert_eq!(b[0], 4);
        assert_eq!(&b[1..5], &7u32.to_le_bytes());
        assert_eq!(&b[5..9], &2u32.to_le_bytes());
        assert_eq!(&b[9..17], &4u64.to_le_bytes());
        assert_eq!(&b[25..33], &6u64.to_le_bytes());
        let arr: [u8; REQUEST_BYTES] = b.try_into().unwrap();
        assert_eq!(Request::decode(&arr), r);
        let resp = Response::ok(0xAABB, 9);
        let e = resp.encode();
        assert_eq!(e[0], STATUS_OK);
        assert_eq!(Response::decode(&e), resp);
    }

    #[test]
    fn segment_tables_round_trip_and_need_a_terminator() {
        let segs = vec![(0x1000, 0x4000), (0x9000, 0x2000)];
        let mut t = vec![0xFFu8; 64];
        encode_segment_table(&segs, &mut t);
        assert_eq!(parse_segment_table(&t), Some(segs));
        let unterminated = vec![0x11u8; 64];
        assert_eq!(parse_segment_table(&unterminated), None);
    }
}
