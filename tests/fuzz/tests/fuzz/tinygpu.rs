//! The TinyGPU client's reply parsing, against a hostile server. An
//! honest server answers a fixed client script once; what it sent is the
//! seed. Each fuzz input is such a reply stream, mutated: a server sends
//! it whole to the client running the same script (the client reads
//! replies in order, so a stream sent at once is a server answering each
//! request at once), then closes its side, so the client meets every
//! malformed header, lying length and early end there is, never silence.

use crate::common::{finish, fuzz};
use macuda_fuzz::{combine, outcome};
use macuda_hw::pci::Width;
use macuda_pci::tinygpu::wire::{
    Command, Request, Response, MAX_TRANSFER_BYTES, REQUEST_BYTES, RESPONSE_BYTES, STATUS_ERROR,
};
use macuda_pci::tinygpu::{Endpoint, TinyGpuOpener};
use macuda_pci::Transport;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const INPUTS: u64 = 4_000;
const TIME: Duration = Duration::from_secs(3);
const MAX_LEN: usize = 4 << 10;
/// The client's bound on each wait. The server always closes, so this is
/// reached only if the client waits on something that never comes.
const CLIENT_TIMEOUT: Duration = Duration::from_millis(500);
/// How long the server waits for the client to connect, and then to
/// finish, before it gives up (a client stuck longer is a hang, which
/// the loop reports).
const SERVER_PATIENCE: Duration = Duration::from_secs(2);
/// Between looks for the client's connection.
const ACCEPT_POLL: Duration = Duration::from_micros(100);
/// The server's threads, whose panics count as the target's.
const SERVER_THREAD: &str = "fuzz-tinygpu-server";

/// The honest server's card: BAR0 16 MiB, BAR1 256 MiB, nothing else.
const BAR0_BYTES: u64 = 16 << 20;
const BAR1_BYTES: u64 = 256 << 20;
const BAR_ADDRESS: u64 = 0x1_0000_0000;
/// DMA pages it hands out, from here up.
const FIRST_PAGE: u64 = 0x8000_0000;
const PAGE_BYTES: u64 = 4096;
const SYSMEM_HANDLE: u64 = 7;
const NVIDIA: u16 = 0x10de;
const DISPLAY_CLASS: u8 = 3;
const DEVICE_LIST: &str = "0000:01:00.0\n";

/// The client's script: every request the transport makes, and the
/// connection's own (probe, ping) besides.
fn client_script(port: u16) -> u64 {
    let opener = TinyGpuOpener::new(
        Endpoint::Tcp {
            host: Ipv4Addr::LOCALHOST.to_string(),
            port,
        },
        CLIENT_TIMEOUT,
    );
    let connected = opener.connect();
    let Ok(mut t) = connected else {
        return outcome(&connected);
    };
    let mut outcomes = vec![
        outcome(&t.connection().ping()),
        outcome(
            &t.connection()
                .probe(NVIDIA, DISPLAY_CLASS, &[(0xffff, 0x2b85)]),
        ),
        outcome(&t.config_read(0, Width::U16)),
        outcome(&t.config_read(4, Width::U32)),
        outcome(&t.config_write(4, Width::U16, 0x6)),
        outcome(&t.bars()),
        outcome(&t.mmio_read32(0)),
        outcome(&t.mmio_write32(0x100, 1)),
    ];
    let mut block = [0u8; 16];
    outcomes.push(outcome(&t.mmio_read(0x200, &mut block)));
    outcomes.push(outcome(&t.doorbell(0xa)));
    let dma = t.alloc_dma(2 * PAGE_BYTES);
    outcomes.push(outcome(&dma));
    if let Ok(region) = &dma {
        outcomes.push(outcome(&t.dma_write(region.id, 0, b"macuda")));
        outcomes.push(outcome(&t.dma_read(region.id, 0, &mut block)));
        outcomes.push(outcome(&t.dma_view(region.id).map(|v| v.is_some())));
    }
    outcomes.push(outcome(&t.vram_read(0, &mut block)));
    outcomes.push(outcome(&t.function_reset()));
    outcomes.push(outcome(&t.flush()));
    combine(&outcomes)
}

/// What an honest server answers `req` (with `payload` after it).
fn honest(req: &Request) -> Option<Vec<u8>> {
    let command = Command::from_byte(req.command)?;
    let ok = |a: u64, b: u64| Response::ok(a, b).encode().to_vec();
    let err = |message: &str| {
        let mut v = Response {
            status: STATUS_ERROR,
            values: [message.len() as u64, 0],
        }
        .encode()
        .to_vec();
        v.extend(message.as_bytes());
        v
    };
    let [a0, a1, _] = req.args;
    Some(match command {
        Command::MmioWrite | Command::SysmemWrite => return None,
        Command::Ping | Command::Reset | Command::ResizeBar | Command::CfgWrite => ok(0, 0),
        Command::Probe => {
            let mut v = ok(DEVICE_LIST.len() as u64, 1);
            v.extend(DEVICE_LIST.as_bytes());
            v
        }
        Command::MapBar => match req.bar {
            0 => ok(BAR_ADDRESS, BAR0_BYTES),
            1 => ok(BAR_ADDRESS + BAR0_BYTES, BAR1_BYTES),
            _ => err("no such BAR"),
        },
        Command::CfgRead => ok(if a0 == 0 { u64::from(NVIDIA) } else { 0x6 }, 0),
        Command::MmioRead | Command::SysmemRead => {
            let mut v = ok(a1, 0);
            v.extend((0..a1.min(MAX_TRANSFER_BYTES)).map(|i| i as u8));
            v
        }
        Command::MapSysmem => {
            let pages = a0.div_ceil(PAGE_BYTES);
            let mut v = ok(pages * 8, SYSMEM_HANDLE);
            for p in 0..pages {
                v.extend((FIRST_PAGE + p * PAGE_BYTES).to_le_bytes());
            }
            v
        }
        Command::MapSysmemFd => err("MAP_SYSMEM_FD needs a unix socket"),
    })
}

/// Bytes a request carries after its header.
fn carried(req: &Request) -> u64 {
    match Command::from_byte(req.command) {
        Some(Command::Probe | Command::MmioWrite | Command::SysmemWrite) => req.args[1],
        _ => 0,
    }
}

fn accept(listener: &TcpListener) -> Option<TcpStream> {
    let start = Instant::now();
    while start.elapsed() < SERVER_PATIENCE {
        match listener.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(SERVER_PATIENCE));
                return Some(s);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(ACCEPT_POLL),
            Err(_) => return None,
        }
    }
    None
}

/// What the honest server sent, and where in it each value a client
/// must distrust lies: the two values of every reply header, and every
/// DMA page address.
#[derive(Default)]
struct Sent {
    bytes: Vec<u8>,
    fields: Vec<usize>,
}

/// A server on a fresh port: honest (answering each request, returning
/// what it sent) or hostile (sending `stream` at once, then closing its
/// side and reading whatever the client still sends).
fn serve(stream: Option<Vec<u8>>) -> (u16, JoinHandle<Sent>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    listener.set_nonblocking(true).expect("a polled listener");
    let handle = std::thread::Builder::new()
        .name(SERVER_THREAD.to_string())
        .spawn(move || {
            let Some(mut s) = accept(&listener) else {
                return Sent::default();
            };
            let mut sent = Sent::default();
            match stream {
                Some(bytes) => {
                    let _ = s.write_all(&bytes);
                    let _ = s.shutdown(Shutdown::Write);
                    let _ = std::io::copy(&mut s, &mut std::io::sink());
                }
                None => {
                    let mut head = [0u8; REQUEST_BYTES];
                    while s.read_exact(&mut head).is_ok() {
                        let req = Request::decode(&head);
                        let mut payload = vec![0u8; carried(&req) as usize];
                        if s.read_exact(&mut payload).is_err() {
                            break;
                        }
                        if let Some(reply) = honest(&req) {
                            let at = sent.bytes.len();
                            sent.fields.extend([at + 1, at + 9]);
                            if Command::from_byte(req.command) == Some(Command::MapSysmem) {
                                let pages = (reply.len() - RESPONSE_BYTES) / 8;
                                sent.fields
                                    .extend((0..pages).map(|p| at + RESPONSE_BYTES + 8 * p));
                            }
                            sent.bytes.extend(&reply);
                            if s.write_all(&reply).is_err() {
                                break;
                            }
                        }
                    }
                }
            }
            sent
        })
        .expect("the server thread starts");
    (port, handle)
}

fn exercise(stream: &[u8]) -> u64 {
    let (port, server) = serve(Some(stream.to_vec()));
    let o = client_script(port);
    let _ = server.join();
    o
}

/// The honest conversation's replies, recorded.
fn recorded() -> Sent {
    let (port, server) = serve(None);
    client_script(port);
    server.join().expect("the honest server ends")
}

#[test]
fn tinygpu() {
    let seed = recorded();
    assert!(
        seed.bytes.len() > 10 * RESPONSE_BYTES,
        "the script ran: {} bytes",
        seed.bytes.len()
    );
    let summary = fuzz("tinygpu")
        .seeds([seed.bytes])
        .fields(seed.fields)
        .max_len(MAX_LEN)
        .threads(&[SERVER_THREAD])
        .budget(INPUTS, TIME)
        .run(exercise);
    finish(&summary);
}
