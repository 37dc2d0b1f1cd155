//! One client connection to a TinyGPU server: every command of the
//! protocol, posted writes batched into one send, reads that flush them
//! first, bounded waits, and replies checked before they are believed.

use super::wire::{
    Command, Request, Response, MAX_ERROR_MESSAGE_BYTES, MAX_PROBE_REPLY_BYTES, MAX_TRANSFER_BYTES,
    REQUEST_BYTES, RESPONSE_BYTES, STATUS_ERROR, STATUS_OK,
};
use crate::error::PciError;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Where a TinyGPU server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    Tcp { host: String, port: u16 },
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "TinyGPU socket {}", p.display()),
            Endpoint::Tcp { host, port } => write!(f, "TinyGPU server {host}:{port}"),
        }
    }
}

/// The socket, shared so the opener can sever a connection (to unblock an
/// actor stuck on it, or to free a one-client server) without keeping it
/// alive: the opener holds only a `Weak`.
#[derive(Debug)]
pub(crate) enum Socket {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Socket {
    pub(crate) fn sever(&self) {
        let _ = match self {
            Socket::Unix(s) => s.shutdown(Shutdown::Both),
            Socket::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }

    fn set_timeouts(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Socket::Unix(s) => {
                s.set_read_timeout(t)?;
                s.set_write_timeout(t)
            }
            Socket::Tcp(s) => {
                s.set_read_timeout(t)?;
                s.set_write_timeout(t)
            }
        }
    }

    fn write_all(&self, b: &[u8]) -> std::io::Result<()> {
        match self {
            Socket::Unix(s) => (&*s).write_all(b),
            Socket::Tcp(s) => (&*s).write_all(b),
        }
    }

    fn read_exact(&self, b: &mut [u8]) -> std::io::Result<()> {
        match self {
            Socket::Unix(s) => (&*s).read_exact(b),
            Socket::Tcp(s) => (&*s).read_exact(b),
        }
    }
}

/// Posted writes are sent when this much is queued, or before any request
/// that waits for a reply.
pub const DEFAULT_BATCH_BYTES: usize = 1 << 20;

pub struct Connection {
    socket: Arc<Socket>,
    endpoint: Endpoint,
    dev_id: u32,
    timeout: Duration,
    posted: Vec<u8>,
    batch_bytes: usize,
    /// Set when a reply could not be read whole: the byte stream is out of
    /// step and every later request must fail rather than misread.
    broken: Option<String>,
}

fn io_error(command: Command, e: std::io::Error, timeout: Duration) -> PciError {
    match e.kind() {
        ErrorKind::UnexpectedEof
        | ErrorKind::ConnectionReset
        | ErrorKind::BrokenPipe
        | ErrorKind::NotConnected => PciError::Closed {
            command: command.name(),
        },
        ErrorKind::WouldBlock | ErrorKind::TimedOut => PciError::Timeout {
            command: command.name(),
            after_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        },
        _ => PciError::Os {
            what: format!("TinyGPU `{}`", command.name()),
            source: e,
        },
    }
}

impl Connection {
    /// Connect with `timeout` bounding the connect and every later wait.
    ///
    /// # Errors
    /// The server cannot be reached.
    pub fn connect(
        endpoint: &Endpoint,
        dev_id: u32,
        timeout: Duration,
    ) -> Result<Connection, PciError> {
        let connect_err = |source| PciError::Connect {
            what: endpoint.to_string(),
            source,
        };
        let socket = match endpoint {
            Endpoint::Unix(path) => Socket::Unix(UnixStream::connect(path).map_err(connect_err)?),
            Endpoint::Tcp { host, port } => {
                use std::net::ToSocketAddrs;
                let addr = (host.as_str(), *port)
                    .to_socket_addrs()
                    .map_err(connect_err)?
                    .next()
                    .ok_or_else(|| {
                        connect_err(std::io::Error::new(ErrorKind::NotFound, "no address"))
                    })?;
                let s = TcpStream::connect_timeout(&addr, timeout).map_err(connect_err)?;
                // Requests are small and latency-bound.
                s.set_nodelay(true).map_err(connect_err)?;
                Socket::Tcp(s)
            }
        };
        socket.set_timeouts(Some(timeout)).map_err(connect_err)?;
        Ok(Connection {
            socket: Arc::new(socket),
            endpoint: endpoint.clone(),
            dev_id,
            timeout,
            posted: Vec::new(),
            batch_bytes: DEFAULT_BATCH_BYTES,
            broken: None,
        })
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    pub(crate) fn weak_socket(&self) -> Weak<Socket> {
        Arc::downgrade(&self.socket)
    }

    /// Send posted writes once `bytes` are queued; 0 sends each at once
    /// (the unbatched mode the benchmark compares against).
    pub fn set_batch_bytes(&mut self, bytes: usize) {
        self.batch_bytes = bytes;
    }

    fn check(&self, command: Command) -> Result<(), PciError> {
        match &self.broken {
            Some(why) => Err(PciError::Protocol {
                command: command.name(),
                what: format!("connection unusable after an earlier bad reply ({why})"),
            }),
            None => Ok(()),
        }
    }

    fn poison(&mut self, command: Command, what: String) -> PciError {
        self.broken = Some(what.clone());
        self.socket.sever();
        PciError::Protocol {
            command: command.name(),
            what,
        }
    }

    fn fail(&mut self, command: Command, e: std::io::Error) -> PciError {
        let err = io_error(command, e, self.timeout);
        // A partial read or write leaves the stream out of step.
        self.broken = Some(err.to_string());
        err
    }

    /// Send every posted write now.
    ///
    /// # Errors
    /// The socket failed.
    pub fn flush(&mut self) -> Result<(), PciError> {
        if self.posted.is_empty() {
            return Ok(());
        }
        self.check(Command::MmioWrite)?;
        let r = self.socket.write_all(&self.posted);
        self.posted.clear();
        r.map_err(|e| self.fail(Command::MmioWrite, e))
    }

    fn post(
        &mut self,
        command: Command,
        bar: u32,
        offset: u64,
        data: &[u8],
    ) -> Result<(), PciError> {
        self.check(command)?;
        if data.len() as u64 > MAX_TRANSFER_BYTES {
            return Err(PciError::OutOfRange {
                what: "one TinyGPU transfer".to_string(),
                offset,
                len: data.len() as u64,
                size: MAX_TRANSFER_BYTES,
            });
        }
        Request::new(command, self.dev_id, bar, [offset, data.len() as u64, 0])
            .encode_into(&mut self.posted);
        self.posted.extend_from_slice(data);
        if self.posted.len() >= self.batch_bytes {
            self.flush()?;
        }
        Ok(())
    }

    /// Send one request (after the posted writes) and read its reply
    /// header; an error reply becomes `PciError::Server` with its message.
    fn call(
        &mut self,
        command: Command,
        bar: u32,
        args: [u64; 3],
        payload: &[u8],
    ) -> Result<Response, PciError> {
        self.send(command, bar, args, payload)?;
        let mut b = [0u8; RESPONSE_BYTES];
        self.socket
            .read_exact(&mut b)
            .map_err(|e| self.fail(command, e))?;
        self.judge(command, Response::decode(&b))
    }

    fn send(
        &mut self,
        command: Command,
        bar: u32,
        args: [u64; 3],
        payload: &[u8],
    ) -> Result<(), PciError> {
        self.check(command)?;
        Request::new(command, self.dev_id, bar, args).encode_into(&mut self.posted);
        self.posted.extend_from_slice(payload);
        let r = self.socket.write_all(&self.posted);
        self.posted.clear();
        r.map_err(|e| self.fail(command, e))
    }

    fn judge(&mut self, command: Command, resp: Response) -> Result<Response, PciError> {
        match resp.status {
            STATUS_OK => Ok(resp),
            STATUS_ERROR => {
                let len = resp.values[0];
                if len > MAX_ERROR_MESSAGE_BYTES {
                    return Err(self.poison(
                        command,
                        format!("error message of {len} bytes exceeds the {MAX_ERROR_MESSAGE_BYTES}-byte limit"),
                    ));
                }
                let mut msg = vec![0u8; len as usize];
                self.socket
                    .read_exact(&mut msg)
                    .map_err(|e| self.fail(command, e))?;
                let message = if msg.is_empty() {
                    "unknown error".to_string()
                } else {
                    String::from_utf8_lossy(&msg).into_owned()
                };
                Err(PciError::Server {
                    command: command.name(),
                    message,
                })
            }
            other => Err(self.poison(
                command,
                format!("status byte {other} is neither ok (0) nor error (1)"),
            )),
        }
    }

    fn read_payload(
        &mut self,
        command: Command,
        len: u64,
        limit: u64,
    ) -> Result<Vec<u8>, PciError> {
        if len > limit {
            return Err(self.poison(
                command,
                format!("reply of {len} bytes exceeds the {limit}-byte limit"),
            ));
        }
        let mut v = vec![0u8; len as usize];
        self.socket
            .read_exact(&mut v)
            .map_err(|e| self.fail(command, e))?;
        Ok(v)
    }

    /// # Errors
    /// Socket failures and bad replies.
    pub fn ping(&mut self) -> Result<(), PciError> {
        self.call(Command::Ping, 0, [0; 3], &[]).map(drop)
    }

    /// Device names the server offers for `vendor`, filtered by `(mask,
    /// device)` pairs (a device matches when `id & mask == device`).
    ///
    /// # Errors
    /// Socket failures and bad replies.
    pub fn probe(
        &mut self,
        vendor: u16,
        base_class: u8,
        filters: &[(u32, u32)],
    ) -> Result<Vec<String>, PciError> {
        let mut payload = Vec::with_capacity(filters.len() * 8);
        for (m, d) in filters {
            payload.extend_from_slice(&m.to_le_bytes());
            payload.extend_from_slice(&d.to_le_bytes());
        }
        let args = [
            u64::from(base_class),
            payload.len() as u64,
            u64::from(vendor),
        ];
        let resp = self.call(Command::Probe, 0, args, &payload)?;
        let text = self.read_payload(Command::Probe, resp.values[0], MAX_PROBE_REPLY_BYTES)?;
        let text = String::from_utf8(text)
            .map_err(|_| self.poison(Command::Probe, "device list is not UTF-8".to_string()))?;
        Ok(text
            .split('\n')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect())
    }

    /// Map BAR `bar` in the server; returns (server-side address, size).
    ///
    /// # Errors
    /// Socket failures, bad replies, or the server refusing the BAR.
    pub fn map_bar(&mut self, bar: u32) -> Result<(u64, u64), PciError> {
        let r = self.call(Command::MapBar, bar, [0; 3], &[])?;
        Ok((r.values[0], r.values[1]))
    }

    /// # Errors
    /// Socket failures and bad replies.
    pub fn cfg_read(&mut self, offset: u16, width: usize) -> Result<u64, PciError> {
        Ok(self
            .call(
                Command::CfgRead,
                0,
                [u64::from(offset), width as u64, 0],
                &[],
            )?
            .values[0])
    }

    /// # Errors
    /// Socket failures and bad replies.
    pub fn cfg_write(&mut self, offset: u16, width: usize, value: u64) -> Result<(), PciError> {
        self.call(
            Command::CfgWrite,
            0,
            [u64::from(offset), width as u64, value],
            &[],
        )
        .map(drop)
    }

    /// # Errors
    /// Socket failures and bad replies.
    pub fn reset(&mut self) -> Result<(), PciError> {
        self.call(Command::Reset, 0, [0; 3], &[]).map(drop)
    }

    /// # Errors
    /// Socket failures and bad replies.
    pub fn resize_bar(&mut self, bar: u32) -> Result<(), PciError> {
        self.call(Command::ResizeBar, bar, [0; 3], &[]).map(drop)
    }

    fn bulk_read(
        &mut self,
        command: Command,
        index: u32,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PciError> {
        let len = out.len() as u64;
        if len > MAX_TRANSFER_BYTES {
            return Err(PciError::OutOfRange {
                what: "one TinyGPU transfer".to_string(),
                offset,
                len,
                size: MAX_TRANSFER_BYTES,
            });
        }
        let resp = self.call(command, index, [offset, len, 0], &[])?;
        if resp.values[0] != len {
            return Err(self.poison(
                command,
                format!(
                    "server announced {} bytes for a {len}-byte read",
                    resp.values[0]
                ),
            ));
        }
        self.socket
            .read_exact(out)
            .map_err(|e| self.fail(command, e))
    }

    /// # Errors
    /// Socket failures, bad replies, the server refusing the range.
    pub fn mmio_read(&mut self, bar: u32, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        self.bulk_read(Command::MmioRead, bar, offset, out)
    }

    /// Posted: queued, sent with the next batch or request.
    ///
    /// # Errors
    /// Socket failures when the batch is sent.
    pub fn mmio_write(&mut self, bar: u32, offset: u64, data: &[u8]) -> Result<(), PciError> {
        self.post(Command::MmioWrite, bar, offset, data)
    }

    /// # Errors
    /// Socket failures, bad replies, the server refusing the range.
    pub fn sysmem_read(
        &mut self,
        handle: u32,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PciError> {
        self.bulk_read(Command::SysmemRead, handle, offset, out)
    }

    /// Posted, like `mmio_write`.
    ///
    /// # Errors
    /// Socket failures when the batch is sent.
    pub fn sysmem_write(&mut self, handle: u32, offset: u64, data: &[u8]) -> Result<(), PciError> {
        self.post(Command::SysmemWrite, handle, offset, data)
    }

    /// DMA memory the server allocates and reaches for the GPU; returns
    /// (handle, one bus address per 4 KiB page).
    ///
    /// # Errors
    /// Socket failures and bad replies.
    pub fn map_sysmem(
        &mut self,
        bytes: u64,
        contiguous: bool,
    ) -> Result<(u32, Vec<u64>), PciError> {
        let resp = self.call(
            Command::MapSysmem,
            0,
            [bytes, u64::from(contiguous), 0],
            &[],
        )?;
        let pages = bytes.div_ceil(super::wire::SYSMEM_PAGE_BYTES);
        let list =
            self.read_payload(Command::MapSysmem, resp.values[0], pages.saturating_mul(8))?;
        if list.len() % 8 != 0 {
            return Err(self.poison(
                Command::MapSysmem,
                format!("page list of {} bytes", list.len()),
            ));
        }
        let handle = u32::try_from(resp.values[1]).map_err(|_| {
            self.poison(
                Command::MapSysmem,
                format!("handle {} out of range", resp.values[1]),
            )
        })?;
        let addrs = list
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        Ok((handle, addrs))
    }

    /// Shared-memory DMA memory (the macOS server); returns the fd, the
    /// mapped size and the server's index.
    ///
    /// # Errors
    /// Not a unix socket, socket failures, bad replies, no fd attached.
    pub fn map_sysmem_fd(
        &mut self,
        bytes: u64,
        contiguous: bool,
    ) -> Result<(OwnedFd, u64, u64), PciError> {
        use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
        let command = Command::MapSysmemFd;
        let raw = match &*self.socket {
            Socket::Unix(s) => s.as_raw_fd(),
            Socket::Tcp(_) => {
                return Err(PciError::Unsupported {
                    backend: "remote",
                    what: "shared-memory DMA (fd passing needs a unix socket)",
                })
            }
        };
        self.send(command, 0, [bytes, u64::from(contiguous), 0], &[])?;
        let mut header = [0u8; RESPONSE_BYTES];
        let mut got = 0usize;
        let mut fds: Vec<OwnedFd> = Vec::new();
        // The fd rides with the first bytes of the reply; the rest of the
        // header may arrive in later reads.
        while got < RESPONSE_BYTES {
            let mut iov = [std::io::IoSliceMut::new(&mut header[got..])];
            let mut space = nix::cmsg_space!([std::os::fd::RawFd; 2]);
            let received = recvmsg::<()>(raw, &mut iov, Some(&mut space), MsgFlags::empty());
            let msg = match received {
                Ok(m) => m,
                Err(errno) => return Err(self.fail(command, std::io::Error::from(errno))),
            };
            let n = msg.bytes;
            if let Ok(cmsgs) = msg.cmsgs() {
                for c in cmsgs {
                    if let ControlMessageOwned::ScmRights(raw) = c {
                        // SAFETY: the kernel just installed these descriptors
                        // in this process for us; nothing else owns them.
                        fds.extend(
                            raw.into_iter()
                                .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                        );
                    }
                }
            }
            if n == 0 {
                return Err(self.fail(command, std::io::Error::from(ErrorKind::UnexpectedEof)));
            }
            got += n;
        }
        let resp = self.judge(command, Response::decode(&header))?;
        let mut fds = fds.into_iter();
        let fd = fds
            .next()
            .ok_or_else(|| self.poison(command, "no file descriptor attached".to_string()))?;
        Ok((fd, resp.values[0], resp.values[1]))
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Posted writes are part of what the caller asked for.
        let _ = self.flush();
    }
}

/// The request header size, re-exported for benchmarks that count bytes.
pub const POSTED_HEADER_BYTES: usize = REQUEST_BYTES;
