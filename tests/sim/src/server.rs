//! The TinyGPU wire protocol's server side: a listener on a unix socket
//! (where MAP_SYSMEM_FD passes a real shared-memory fd) or on TCP bound to
//! 127.0.0.1 only, one client at a time as the real servers serve, and a
//! [`Device`] that answers each request. Whatever stands behind the
//! protocol (the simulated card, a test's fake) implements `Device`; the
//! server owns only the wire: framing, posted writes, error replies, fd
//! passing, and the wire-level faults a test can ask for.

use macuda_pci::tinygpu::wire::{
    Command, Request, Response, MAX_TRANSFER_BYTES, REQUEST_BYTES, STATUS_ERROR,
};
use macuda_pci::tinygpu::Endpoint;
use parking_lot::Mutex;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a blocked read or accept looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);
/// How long an idle accept loop sleeps between tries.
const ACCEPT_IDLE: Duration = Duration::from_millis(2);
/// The read buffer: a stream of small posted writes costs a copy each, not
/// a system call each.
const READ_BUFFER_BYTES: usize = 256 << 10;

/// A shared-memory mapping made for MAP_SYSMEM_FD: the fd the client maps,
/// the size it may map, and the index the device knows it by.
pub struct SharedMapping {
    pub fd: OwnedFd,
    pub size: u64,
    pub index: u64,
}

/// What stands behind the protocol. Errors are the text the client gets in
/// the error reply; posted writes have no reply, so theirs are the device's
/// to record.
pub trait Device: Send + 'static {
    /// Every request header, before it is answered (a test's log).
    fn observe(&mut self, _request: &Request) {}
    /// PROBE: the newline-separated device names (tinygrad's remote client
    /// takes the text after the last ':' as the device id).
    fn probe(&mut self) -> String;
    /// MAP_BAR: the server-side address and size of BAR `index`.
    fn bar(&mut self, index: u32) -> Result<(u64, u64), String>;
    fn config_read(&mut self, offset: u64, width: u64) -> Result<u64, String>;
    fn config_write(&mut self, offset: u64, width: u64, value: u64) -> Result<(), String>;
    /// RESET: a function-level reset.
    fn reset(&mut self) -> Result<(), String>;
    fn mmio_read(&mut self, bar: u32, offset: u64, out: &mut [u8]) -> Result<(), String>;
    /// A posted write: no reply reaches the client.
    fn mmio_write(&mut self, bar: u32, offset: u64, data: &[u8]);
    fn map_sysmem_fd(&mut self, size: u64) -> Result<SharedMapping, String>;
    /// MAP_SYSMEM: one bus address per 4 KiB page, and the handle;
    /// `contiguous` asks for one run of bus addresses.
    fn map_sysmem(&mut self, size: u64, contiguous: bool) -> Result<(Vec<u64>, u64), String>;
    fn sysmem_read(&mut self, handle: u32, offset: u64, out: &mut [u8]) -> Result<(), String>;
    /// A posted write into a MAP_SYSMEM allocation.
    fn sysmem_write(&mut self, handle: u32, offset: u64, data: &[u8]);
    /// RESIZE_BAR: a no-op on the macOS server.
    fn resize_bar(&mut self, _bar: u32) -> Result<(), String> {
        Ok(())
    }
    /// Time passes: called every [`TICK`] from the server's clock thread,
    /// so a device runs on its own while the host reads shared memory
    /// without a request (a unix client's mapped DMA memory).
    fn tick(&mut self) {}
}

/// How often a device's clock ticks.
pub const TICK: Duration = Duration::from_millis(1);

/// Where a server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A unix socket at this path (an existing socket file is replaced).
    Unix(PathBuf),
    /// TCP on 127.0.0.1 at this port (0: any free port).
    Tcp(u16),
}

impl std::str::FromStr for Listen {
    type Err = String;

    /// `unix:PATH` or `tcp:PORT`.
    fn from_str(s: &str) -> Result<Listen, String> {
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err("unix: needs a socket path".into());
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        if let Some(port) = s.strip_prefix("tcp:") {
            return port
                .parse::<u16>()
                .map(Listen::Tcp)
                .map_err(|_| format!("tcp:{port}: the port must be a number up to 65535"));
        }
        Err(format!("'{s}': say unix:PATH or tcp:PORT"))
    }
}

/// Faults on the wire, for the client's robustness tests: each acts on the
/// replies to one command (or all of them, for `Trickle`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireFault {
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

    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(b),
            Conn::Tcp(s) => s.read(b),
        }
    }

    fn prepare(&self) -> std::io::Result<()> {
        match self {
            Conn::Unix(s) => {
                s.set_nonblocking(false)?;
                s.set_read_timeout(Some(STOP_POLL))
            }
            Conn::Tcp(s) => {
                s.set_nonblocking(false)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(STOP_POLL))
            }
        }
    }
}

/// A running server; it stops when dropped (or when `stop` is called).
pub struct Server<D: Device> {
    endpoint: Endpoint,
    device: Arc<Mutex<D>>,
    fault: Arc<Mutex<WireFault>>,
    connections: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    clock: Option<JoinHandle<()>>,
}

impl<D: Device> Server<D> {
    /// Listen as `listen` says and serve `device` on a thread of its own.
    pub fn start(listen: &Listen, device: D) -> std::io::Result<Server<D>> {
        let (listener, endpoint) = match listen {
            Listen::Unix(path) => {
                if path.exists() {
                    std::fs::remove_file(path)?;
                }
                let l = UnixListener::bind(path)?;
                l.set_nonblocking(true)?;
                (Listener::Unix(l), Endpoint::Unix(path.clone()))
            }
            Listen::Tcp(port) => {
                let l = TcpListener::bind((Ipv4Addr::LOCALHOST, *port))?;
                l.set_nonblocking(true)?;
                let port = l.local_addr()?.port();
                let host = Ipv4Addr::LOCALHOST.to_string();
                (Listener::Tcp(l), Endpoint::Tcp { host, port })
            }
        };
        let device = Arc::new(Mutex::new(device));
        let fault = Arc::new(Mutex::new(WireFault::None));
        let connections = Arc::new(AtomicU32::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (device, fault, connections, stop) = (
                Arc::clone(&device),
                Arc::clone(&fault),
                Arc::clone(&connections),
                Arc::clone(&stop),
            );
            std::thread::Builder::new()
                .name("tinygpu-server".into())
                .spawn(move || serve(listener, &device, &fault, &connections, &stop))?
        };
        let clock = {
            let (device, stop) = (Arc::clone(&device), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("tinygpu-clock".into())
                .spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        device.lock().tick();
                        std::thread::sleep(TICK);
                    }
                })?
        };
        Ok(Server {
            endpoint,
            device,
            fault,
            connections,
            stop,
            thread: Some(thread),
            clock: Some(clock),
        })
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

    /// The device, locked (the server waits while a test holds it).
    pub fn device(&self) -> parking_lot::MutexGuard<'_, D> {
        self.device.lock()
    }

    pub fn set_fault(&self, fault: WireFault) {
        *self.fault.lock() = fault;
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u32 {
        self.connections.load(Ordering::SeqCst)
    }

    /// Serve until `stop` turns true (a CLI's Ctrl-C), then shut down.
    pub fn run_until(self, stop: &AtomicBool) {
        self.run_until_watching(stop, |_| {});
    }

    /// As `run_until`, and `watch` sees the device at every poll and once
    /// more at the end, so that a CLI can report what changed while it
    /// served (a boot record written out) without a thread of its own.
    pub fn run_until_watching(mut self, stop: &AtomicBool, mut watch: impl FnMut(&D)) {
        while !stop.load(Ordering::SeqCst) && self.thread.as_ref().is_some_and(|t| !t.is_finished())
        {
            watch(&self.device.lock());
            std::thread::sleep(STOP_POLL);
        }
        watch(&self.device.lock());
        self.shut_down();
    }

    fn shut_down(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in [self.thread.take(), self.clock.take()]
            .into_iter()
            .flatten()
        {
            let _ = t.join();
        }
        if let Endpoint::Unix(path) = &self.endpoint {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl<D: Device> Drop for Server<D> {
    fn drop(&mut self) {
        self.shut_down();
    }
}

fn serve<D: Device>(
    listener: Listener,
    device: &Mutex<D>,
    fault: &Mutex<WireFault>,
    connections: &AtomicU32,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::SeqCst) {
        let accepted = match &listener {
            Listener::Unix(l) => l.accept().map(|(s, _)| Conn::Unix(s)),
            Listener::Tcp(l) => l.accept().map(|(s, _)| Conn::Tcp(s)),
        };
        match accepted {
            Ok(mut conn) => {
                connections.fetch_add(1, Ordering::SeqCst);
                if conn.prepare().is_err() {
                    continue;
                }
                // One client at a time, as the real servers do.
                serve_client(&mut conn, device, fault, stop);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(ACCEPT_IDLE),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::warn!("tinygpu server: accept failed, stopping: {e}");
                return;
            }
        }
    }
}

/// Buffered reads over a connection whose reads time out now and then (so
/// the stop flag is noticed).
struct Reader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Reader {
    fn new() -> Reader {
        Reader {
            buf: vec![0u8; READ_BUFFER_BYTES],
            start: 0,
            end: 0,
        }
    }

    /// Read exactly `b.len()` bytes; `false` at end of stream or on stop.
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
            match conn.read(&mut self.buf) {
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
        Reply::with_body(r0, r1, Vec::new())
    }

    fn with_body(r0: u64, r1: u64, body: Vec<u8>) -> Reply {
        Reply {
            header: Response::ok(r0, r1),
            body,
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

/// The payload bytes that follow a request header.
fn payload_bytes(command: Command, req: &Request) -> u64 {
    match command {
        Command::Probe | Command::MmioWrite | Command::SysmemWrite => req.args[1],
        _ => 0,
    }
}

fn serve_client<D: Device>(
    conn: &mut Conn,
    device: &Mutex<D>,
    fault: &Mutex<WireFault>,
    stop: &AtomicBool,
) {
    let mut head = [0u8; REQUEST_BYTES];
    let mut reader = Reader::new();
    loop {
        if !reader.read_fully(conn, &mut head, stop) {
            return;
        }
        let req = Request::decode(&head);
        device.lock().observe(&req);
        let Some(command) = Command::from_byte(req.command) else {
            let reply = Reply::err(&format!("unknown command {}", req.command));
            if send(conn, reply, &WireFault::None, None).is_err() {
                return;
            }
            continue;
        };
        let carries = payload_bytes(command, &req);
        if carries > MAX_TRANSFER_BYTES {
            // The rest of the stream cannot be framed any more.
            let message = format!(
                "{} carries {carries} bytes, more than the {MAX_TRANSFER_BYTES} one transfer may",
                command.name()
            );
            let _ = send(conn, Reply::err(&message), &WireFault::None, None);
            return;
        }
        let mut payload = vec![0u8; carries as usize];
        if !reader.read_fully(conn, &mut payload, stop) {
            return;
        }
        let f = fault.lock().clone();
        let reply = match &f {
            WireFault::Error {
                command: c,
                message,
            } if *c == command => Some(Reply::err(message)),
            WireFault::Stall { command: c } if *c == command => {
                while !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(ACCEPT_IDLE);
                }
                return;
            }
            _ => answer(
                command,
                &req,
                &payload,
                &mut *device.lock(),
                matches!(conn, Conn::Unix(_)),
            ),
        };
        let Some(mut reply) = reply else { continue };
        if f == (WireFault::Oversize { command }) {
            reply.header.values[0] += 4096;
        }
        if send(conn, reply, &f, Some(command)).is_err() {
            return;
        }
    }
}

/// The device's answer to one request; `None` for posted writes.
fn answer<D: Device>(
    command: Command,
    req: &Request,
    payload: &[u8],
    device: &mut D,
    unix: bool,
) -> Option<Reply> {
    let [a0, a1, a2] = req.args;
    let bar = req.bar;
    let reply = match command {
        Command::Ping => Reply::ok(0, 0),
        Command::ResizeBar => match device.resize_bar(bar) {
            Ok(()) => Reply::ok(0, 0),
            Err(e) => Reply::err(&e),
        },
        Command::Probe => {
            let text = device.probe().into_bytes();
            Reply::with_body(text.len() as u64, 1, text)
        }
        Command::MapBar => match device.bar(bar) {
            Ok((address, size)) => Reply::ok(address, size),
            Err(e) => Reply::err(&e),
        },
        Command::CfgRead => match device.config_read(a0, a1) {
            Ok(v) => Reply::ok(v, 0),
            Err(e) => Reply::err(&e),
        },
        Command::CfgWrite => match device.config_write(a0, a1, a2) {
            Ok(()) => Reply::ok(0, 0),
            Err(e) => Reply::err(&e),
        },
        Command::Reset => match device.reset() {
            Ok(()) => Reply::ok(0, 0),
            Err(e) => Reply::err(&e),
        },
        Command::MmioRead | Command::SysmemRead => {
            if a1 > MAX_TRANSFER_BYTES {
                return Some(Reply::err(&format!(
                    "{} of {a1} bytes is more than the {MAX_TRANSFER_BYTES} one transfer may",
                    command.name()
                )));
            }
            let mut body = vec![0u8; a1 as usize];
            let read = if command == Command::MmioRead {
                device.mmio_read(bar, a0, &mut body)
            } else {
                device.sysmem_read(bar, a0, &mut body)
            };
            match read {
                Ok(()) => Reply::with_body(a1, 0, body),
                Err(e) => Reply::err(&e),
            }
        }
        Command::MmioWrite => {
            device.mmio_write(bar, a0, payload);
            return None;
        }
        Command::SysmemWrite => {
            device.sysmem_write(bar, a0, payload);
            return None;
        }
        Command::MapSysmemFd => {
            if !unix {
                return Some(Reply::err("MAP_SYSMEM_FD needs a unix socket"));
            }
            match device.map_sysmem_fd(a0) {
                Ok(m) => Reply {
                    header: Response::ok(m.size, m.index),
                    body: Vec::new(),
                    fd: Some(m.fd),
                },
                Err(e) => Reply::err(&e),
            }
        }
        Command::MapSysmem => match device.map_sysmem(a0, a1 != 0) {
            Ok((pages, handle)) => {
                let list: Vec<u8> = pages.iter().flat_map(|p| p.to_le_bytes()).collect();
                Reply::with_body(list.len() as u64, handle, list)
            }
            Err(e) => Reply::err(&e),
        },
    };
    Some(reply)
}

fn send(
    conn: &mut Conn,
    reply: Reply,
    fault: &WireFault,
    command: Option<Command>,
) -> std::io::Result<()> {
    let mut header = reply.header;
    match (fault, command) {
        (WireFault::BadStatus { command: c }, Some(cmd)) if *c == cmd => header.status = 7,
        (WireFault::HugeErrorMessage { command: c }, Some(cmd)) if *c == cmd => {
            header.status = STATUS_ERROR;
            header.values[0] = 1 << 40;
        }
        _ => {}
    }
    let mut bytes = header.encode().to_vec();
    let head_len = bytes.len();
    bytes.extend_from_slice(&reply.body);
    if let Some(fd) = reply.fd {
        let Conn::Unix(s) = conn else {
            return Err(std::io::Error::other("an fd cannot travel over TCP"));
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
        // The kernel duplicated the fd into the client; ours closes here.
        return Ok(());
    }
    match (fault, command) {
        (WireFault::CloseMidReply { command: c, after }, Some(cmd)) if *c == cmd => {
            conn.write_all(&bytes[..(*after).min(bytes.len())])?;
            Err(std::io::Error::other("closing mid-reply as told"))
        }
        (WireFault::Trickle, _) => {
            for b in &bytes {
                conn.write_all(std::slice::from_ref(b))?;
                std::thread::sleep(Duration::from_micros(50));
            }
            Ok(())
        }
        _ => conn.write_all(&bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_words_parse_and_bad_ones_say_why() {
        assert_eq!(
            "unix:/tmp/x.sock".parse::<Listen>(),
            Ok(Listen::Unix(PathBuf::from("/tmp/x.sock")))
        );
        assert_eq!("tcp:6667".parse::<Listen>(), Ok(Listen::Tcp(6667)));
        assert!("tcp:99999".parse::<Listen>().unwrap_err().contains("65535"));
        assert!("unix:".parse::<Listen>().unwrap_err().contains("path"));
        assert!("udp:1".parse::<Listen>().unwrap_err().contains("unix:PATH"));
    }
}
