//! A TinyGPU server for tests: it speaks the wire protocol of
//! `macuda_pci::tinygpu::wire` over a unix socket (passing a real
//! shared-memory fd for MAP_SYSMEM_FD) or TCP, backs it with a small model
//! of a card, logs what it was asked, and can be told to misbehave.

use macuda_pci::tinygpu::wire::{
    encode_segment_table, Command, Request, Response, MIN_SYSMEM_FD_BYTES, REQUEST_BYTES,
    SEGMENT_TABLE_BYTES, STATUS_ERROR, SYSMEM_PAGE_BYTES,
};
use macuda_pci::tinygpu::Endpoint;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

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

/// Ways the fake can break the protocol, for the client's robustness tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misbehaviour {
    None,
    /// Send only the first `after` bytes of this command's reply, then close.
    CloseMidReply {
        command: Command,
        after: usize,
    },
    /// Send every reply one byte at a time.
    Trickle,
    /// Announce more data than this read asked for.
    Oversize {
        command: Command,
    },
    /// A status byte that is neither ok nor error.
    BadStatus {
        command: Command,
    },
    /// Refuse this command with a message.
    Error {
        command: Command,
        message: String,
    },
    /// Refuse with an error reply announcing a gigantic message.
    HugeErrorMessage {
        command: Command,
    },
    /// A shared mapping whose segment table never terminates.
    UnterminatedSegments,
    /// Never answer this command.
    Stall {
        command: Command,
    },
}

enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Conn {
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            Conn::Unix(s) => s.write_all(b),
            Conn::Tcp(s) => s.write_all(b),
        }
    }
    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Conn::Unix(s) => s.set_read_timeout(t),
            Conn::Tcp(s) => s.set_read_timeout(t),
        }
    }
}

/// A running fake server; it stops when dropped.
pub struct FakeTinyGpu {
    endpoint: Endpoint,
    card: Arc<Mutex<FakeCard>>,
    misbehaviour: Arc<Mutex<Misbehaviour>>,
    connections: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    _dir: Option<tempfile::TempDir>,
}

impl FakeTinyGpu {
    /// Listen on a unix socket in a fresh temp directory.
    pub fn unix() -> FakeTinyGpu {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tinygpu.sock");
        let listener = UnixListener::bind(&path).expect("bind unix socket");
        Self::run(Listener::Unix(listener), Endpoint::Unix(path), Some(dir))
    }

    /// Listen on TCP on the loopback interface.
    pub fn tcp() -> FakeTinyGpu {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind tcp");
        let port = listener.local_addr().expect("local addr").port();
        let endpoint = Endpoint::Tcp {
            host: "127.0.0.1".to_string(),
            port,
        };
        Self::run(Listener::Tcp(listener), endpoint, None)
    }

    fn run(listener: Listener, endpoint: Endpoint, dir: Option<tempfile::TempDir>) -> FakeTinyGpu {
        let card = Arc::new(Mutex::new(FakeCard::gb202()));
        let misbehaviour = Arc::new(Mutex::new(Misbehaviour::None));
        let connections = Arc::new(AtomicU32::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        match &listener {
            Listener::Unix(l) => l.set_nonblocking(true),
            Listener::Tcp(l) => l.set_nonblocking(true),
        }
        .expect("nonblocking listener");
        let thread = {
            let (card, misbehaviour, connections, stop) = (
                Arc::clone(&card),
                Arc::clone(&misbehaviour),
                Arc::clone(&connections),
                Arc::clone(&stop),
            );
            std::thread::Builder::new()
                .name("fake-tinygpu".into())
                .spawn(move || serve(listener, &card, &misbehaviour, &connections, &stop))
                .expect("server thread")
        };
        FakeTinyGpu {
            endpoint,
            card,
            misbehaviour,
            connections,
            stop,
            thread: Some(thread),
            _dir: dir,
        }
    }

    pub fn endpoint(&self) -> Endpoint {
        self.endpoint.clone()
    }

    /// The `--device` word that reaches this server.
    pub fn device_word(&self) -> String {
        match &self.endpoint {
            Endpoint::Unix(p) => format!("tinygpu:{}", p.display()),
            Endpoint::Tcp { host, port } => format!("remote:{host}:{port}"),
        }
    }

    pub fn card(&self) -> parking_lot::MutexGuard<'_, FakeCard> {
        self.card.lock()
    }

    pub fn misbehave(&self, m: Misbehaviour) {
        *self.misbehaviour.lock() = m;
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u32 {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for FakeTinyGpu {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    listener: Listener,
    card: &Mutex<FakeCard>,
    misbehaviour: &Mutex<Misbehaviour>,
    connections: &AtomicU32,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::SeqCst) {
        let accepted = match &listener {
            Listener::Unix(l) => l.accept().map(|(s, _)| Conn::Unix(s)),
            Listener::Tcp(l) => l.accept().map(|(s, _)| {
                let _ = s.set_nodelay(true);
                Conn::Tcp(s)
            }),
        };
        match accepted {
            Ok(mut conn) => {
                connections.fetch_add(1, Ordering::SeqCst);
                let blocking = match &conn {
                    Conn::Unix(s) => s.set_nonblocking(false),
                    Conn::Tcp(s) => s.set_nonblocking(false),
                };
                if blocking.is_err()
                    || conn
                        .set_read_timeout(Some(Duration::from_millis(50)))
                        .is_err()
                {
                    continue;
                }
                // One client at a time, as the real servers do.
                serve_client(&mut conn, card, misbehaviour, stop);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(_) => return,
        }
    }
}

/// Buffered reads, so a stream of small posted writes costs the server a
/// copy each rather than a system call each.
struct Reader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Reader {
    fn new() -> Reader {
        Reader {
            buf: vec![0u8; 256 << 10],
            start: 0,
            end: 0,
        }
    }

    /// Read exactly `b.len()` bytes, riding out read timeouts (they only
    /// exist so the stop flag is noticed); `false` at end of stream or on
    /// stop.
    fn read_fully(&mut self, conn: &mut Conn, b: &mut [u8], stop: &AtomicBool) -> bool {
        let mut got = 0;
        while got < b.len() {
            if self.start < self.end {
                let n = (self.end - self.start).min(b.len() - got);
                b[got..got + n].copy_from_slice(&self.buf[self.start..self.start + n]);
                self.start += n;
                got += n;
                continue;
            }
            let r = match conn {
                Conn::Unix(s) => s.read(&mut self.buf),
                Conn::Tcp(s) => s.read(&mut self.buf),
            };
            match r {
                Ok(0) => return false,
                Ok(n) => {
                    self.start = 0;
                    self.end = n;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) =>
                {
                    if stop.load(Ordering::SeqCst) {
                        return false;
                    }
                }
                Err(_) => return false,
            }
        }
        true
    }
}

struct Reply {
    header: Response,
    body: Vec<u8>,
    fd: Option<OwnedFd>,
}

impl Reply {
    fn ok(r0: u64, r1: u64) -> Reply {
        Reply {
            header: Response::ok(r0, r1),
            body: Vec::new(),
            fd: None,
        }
    }
    fn err(message: &str) -> Reply {
        Reply {
            header: Response {
                status: STATUS_ERROR,
                values: [message.len() as u64, 0],
            },
            body: message.as_bytes().to_vec(),
            fd: None,
        }
    }
}

fn serve_client(
    conn: &mut Conn,
    card: &Mutex<FakeCard>,
    misbehaviour: &Mutex<Misbehaviour>,
    stop: &AtomicBool,
) {
    let mut head = [0u8; REQUEST_BYTES];
    let mut reader = Reader::new();
    loop {
        if !reader.read_fully(conn, &mut head, stop) {
            return;
        }
        let req = Request::decode(&head);
        card.lock().log.push(req);
        let Some(command) = Command::from_byte(req.command) else {
            if send(
                conn,
                Reply::err(&format!("unknown command {}", req.command)),
                &Misbehaviour::None,
                None,
            )
            .is_err()
            {
                return;
            }
            continue;
        };
        let mut payload = Vec::new();
        let carries = match command {
            Command::Probe | Command::MmioWrite | Command::SysmemWrite => req.args[1],
            _ => 0,
        };
        if carries > 0 {
            payload.resize(carries.min(64 << 20) as usize, 0);
            if !reader.read_fully(conn, &mut payload, stop) {
                return;
            }
        }
        let m = misbehaviour.lock().clone();
        let reply = match &m {
            Misbehaviour::Error {
                command: c,
                message,
            } if *c == command => Some(Reply::err(message)),
            Misbehaviour::Stall { command: c } if *c == command => {
                while !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                return;
            }
            _ => handle(
                command,
                &req,
                &payload,
                &mut card.lock(),
                &m,
                matches!(conn, Conn::Unix(_)),
            ),
        };
        if let Some(reply) = reply {
            if send(conn, reply, &m, Some(command)).is_err() {
                return;
            }
        }
    }
}

fn handle(
    command: Command,
    req: &Request,
    payload: &[u8],
    card: &mut FakeCard,
    m: &Misbehaviour,
    unix: bool,
) -> Option<Reply> {
    let [a0, a1, a2] = req.args;
    let bar = req.bar as usize;
    Some(match command {
        Command::Ping | Command::ResizeBar => Reply::ok(0, 0),
        Command::Probe => {
            let text = b"fake-gb202:0".to_vec();
            Reply {
                header: Response::ok(text.len() as u64, 1),
                body: text,
                fd: None,
            }
        }
        Command::MapBar => match card.bar_bytes.get(bar) {
            Some(&size) if size > 0 => Reply::ok(0x1_0000_0000 * (bar as u64 + 1), size),
            _ => Reply::err("no such BAR"),
        },
        Command::CfgRead => {
            let (off, w) = (a0 as usize, a1 as usize);
            if off + w > card.config.len() || !matches!(w, 1 | 2 | 4) {
                return Some(Reply::err("config read out of range"));
            }
            let mut v = [0u8; 8];
            v[..w].copy_from_slice(&card.config[off..off + w]);
            Reply::ok(u64::from_le_bytes(v), 0)
        }
        Command::CfgWrite => {
            let (off, w) = (a0 as usize, a1 as usize);
            if off + w > card.config.len() || !matches!(w, 1 | 2 | 4) {
                return Some(Reply::err("config write out of range"));
            }
            card.config[off..off + w].copy_from_slice(&a2.to_le_bytes()[..w]);
            Reply::ok(0, 0)
        }
        Command::Reset => {
            card.resets += 1;
            card.config[4] = 0;
            card.config[5] = 0;
            Reply::ok(0, 0)
        }
        Command::MmioRead => {
            if bar != 0 || a0 + a1 > card.bar_bytes[0] {
                return Some(Reply::err("MMIO read outside BAR0"));
            }
            let mut body = vec![0u8; a1 as usize];
            card.bar0_read(a0, &mut body);
            let announced = if matches!(
                m,
                Misbehaviour::Oversize {
                    command: Command::MmioRead
                }
            ) {
                a1 + 4096
            } else {
                a1
            };
            Reply {
                header: Response::ok(announced, 0),
                body,
                fd: None,
            }
        }
        Command::MmioWrite => {
            if bar == 0 && a0 + a1 <= card.bar_bytes[0] {
                card.bar0_write(a0, payload);
            }
            return None;
        }
        Command::MapSysmemFd => {
            if !unix {
                return Some(Reply::err("MAP_SYSMEM_FD needs a unix socket"));
            }
            match shared_memory(a0, card, matches!(m, Misbehaviour::UnterminatedSegments)) {
                Ok((fd, size, index)) => Reply {
                    header: Response::ok(size, index),
                    body: Vec::new(),
                    fd: Some(fd),
                },
                Err(e) => Reply::err(&format!("shared memory: {e}")),
            }
        }
        Command::MapSysmem => {
            let pages = a0.div_ceil(SYSMEM_PAGE_BYTES);
            let handle = card.remote.len() as u64;
            card.remote
                .push(vec![0u8; (pages * SYSMEM_PAGE_BYTES) as usize]);
            // Two runs of pages, so the client has scatter to coalesce.
            let base = REMOTE_BUS_BASE + handle * (1 << 30);
            let mut list = Vec::new();
            for i in 0..pages {
                let gap = if i >= pages / 2 { 1 << 20 } else { 0 };
                list.extend_from_slice(&(base + gap + i * SYSMEM_PAGE_BYTES).to_le_bytes());
            }
            Reply {
                header: Response::ok(list.len() as u64, handle),
                body: list,
                fd: None,
            }
        }
        Command::SysmemRead => match card.remote.get(bar) {
            Some(mem) if (a0 + a1) as usize <= mem.len() => Reply {
                header: Response::ok(a1, 0),
                body: mem[a0 as usize..(a0 + a1) as usize].to_vec(),
                fd: None,
            },
            _ => Reply::err("SYSMEM read out of range"),
        },
        Command::SysmemWrite => {
            if let Some(mem) = card.remote.get_mut(bar) {
                if (a0 as usize) + payload.len() <= mem.len() {
                    mem[a0 as usize..a0 as usize + payload.len()].copy_from_slice(payload);
                }
            }
            return None;
        }
    })
}

fn shared_memory(
    size: u64,
    card: &mut FakeCard,
    unterminated: bool,
) -> std::io::Result<(OwnedFd, u64, u64)> {
    use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
    let alloc = size
        .next_multiple_of(SYSMEM_PAGE_BYTES)
        .max(MIN_SYSMEM_FD_BYTES);
    let fd = memfd_create(c"fake-tinygpu", MemFdCreateFlag::MFD_CLOEXEC)
        .map_err(std::io::Error::from)?;
    let file = std::fs::File::from(fd);
    file.set_len(alloc)?;
    // SAFETY: a fresh memfd of `alloc` bytes that this test server owns;
    // the client maps it too, which is the point.
    let mut map = unsafe {
        memmap2::MmapOptions::new()
            .len(alloc as usize)
            .map_mut(&file)?
    };
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
    if unterminated {
        map[..SEGMENT_TABLE_BYTES].fill(0xAB);
    } else {
        encode_segment_table(&segments, &mut map[..SEGMENT_TABLE_BYTES]);
    }
    card.shared.push(map);
    Ok((OwnedFd::from(file), alloc, index))
}

fn send(
    conn: &mut Conn,
    reply: Reply,
    m: &Misbehaviour,
    command: Option<Command>,
) -> std::io::Result<()> {
    let mut header = reply.header;
    if let (Misbehaviour::BadStatus { command: c }, Some(cmd)) = (m, command) {
        if *c == cmd {
            header.status = 7;
        }
    }
    if let (Misbehaviour::HugeErrorMessage { command: c }, Some(cmd)) = (m, command) {
        if *c == cmd {
            header.status = STATUS_ERROR;
            header.values[0] = 1 << 40;
        }
    }
    let mut bytes = header.encode().to_vec();
    let head_len = bytes.len();
    bytes.extend_from_slice(&reply.body);
    if let Some(fd) = reply.fd {
        let Conn::Unix(s) = conn else {
            return Err(std::io::Error::other("fd over tcp"));
        };
        use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
        let fds = [fd.as_raw_fd()];
        let iov = [std::io::IoSlice::new(&bytes[..head_len])];
        sendmsg::<()>(
            s.as_raw_fd(),
            &iov,
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        )
        .map_err(std::io::Error::from)?;
        // The fd is duplicated into the client by the kernel; ours closes here.
        return Ok(());
    }
    match (m, command) {
        (Misbehaviour::CloseMidReply { command: c, after }, Some(cmd)) if *c == cmd => {
            conn.write_all(&bytes[..(*after).min(bytes.len())])?;
            Err(std::io::Error::other("closing mid-reply as told"))
        }
        (Misbehaviour::Trickle, _) => {
            for b in &bytes {
                conn.write_all(std::slice::from_ref(b))?;
                std::thread::sleep(Duration::from_micros(50));
            }
            Ok(())
        }
        _ => conn.write_all(&bytes),
    }
}
