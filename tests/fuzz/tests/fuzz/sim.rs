//! The simulator's request parsing (the TinyGPU server side), against a
//! hostile client: a stream of request headers and payloads, mutated,
//! sent to one simulated card served over TCP; the server must answer or
//! refuse each and close when the client does, never panic or stall.

use crate::common::{finish, fuzz};
use macuda_fuzz::Rng;
use macuda_pci::tinygpu::wire::{Command, Request, REQUEST_BYTES};
use macuda_pci::tinygpu::Endpoint;
use macuda_sim::{Card, Listen, Server, SimChip};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

const INPUTS: u64 = 3_000;
const TIME: Duration = Duration::from_secs(3);
const MAX_LEN: usize = 4 << 10;
/// How long the client waits for the server to finish with it: past the
/// loop's own bound, so a stalled server is reported as a hang.
const CLIENT_PATIENCE: Duration = Duration::from_secs(30);
/// The simulator's threads, whose panics count as the target's.
const SERVER_THREADS: [&str; 2] = ["tinygpu-server", "tinygpu-clock"];
/// The client's own writer thread.
const WRITER_THREAD: &str = "fuzz-sim-writer";
/// Where the request fields are, from a header's start: command, device,
/// BAR (or handle), and the three arguments.
const REQUEST_FIELDS: [usize; 6] = [0, 1, 5, 9, 17, 25];
const SCRATCH: u64 = 0x1_0000;
const DMA_BYTES: u64 = 8192;
/// A command number past the protocol's.
const UNKNOWN_COMMAND: u8 = 99;

/// A request stream a client might send, and where its header fields
/// are.
fn requests() -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    let mut fields = Vec::new();
    let mut put = |out: &mut Vec<u8>, command: u8, bar: u32, args: [u64; 3], payload: &[u8]| {
        let at = out.len();
        fields.extend(REQUEST_FIELDS.iter().map(|f| at + f));
        Request {
            command,
            dev_id: 0,
            bar,
            args,
        }
        .encode_into(out);
        out.extend_from_slice(payload);
    };
    let c = |c: Command| c as u8;
    let filter = [0xffffu32, 0x2b85]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect::<Vec<u8>>();
    put(&mut out, c(Command::Ping), 0, [0; 3], &[]);
    put(
        &mut out,
        c(Command::Probe),
        0,
        [3, filter.len() as u64, 0x10de],
        &filter,
    );
    for bar in 0..6 {
        put(&mut out, c(Command::MapBar), bar, [0; 3], &[]);
    }
    put(&mut out, c(Command::CfgRead), 0, [0, 2, 0], &[]);
    put(&mut out, c(Command::CfgWrite), 0, [4, 2, 6], &[]);
    put(&mut out, c(Command::MmioRead), 0, [0, 4, 0], &[]);
    put(
        &mut out,
        c(Command::MmioWrite),
        0,
        [SCRATCH, 4, 0],
        &[1, 2, 3, 4],
    );
    put(&mut out, c(Command::MmioRead), 0, [SCRATCH, 4, 0], &[]);
    put(&mut out, c(Command::MapSysmem), 0, [DMA_BYTES, 0, 0], &[]);
    for handle in 0..2 {
        put(
            &mut out,
            c(Command::SysmemWrite),
            handle,
            [0, 6, 0],
            b"macuda",
        );
        put(&mut out, c(Command::SysmemRead), handle, [0, 6, 0], &[]);
    }
    put(&mut out, c(Command::MmioRead), 1, [0, 8, 0], &[]);
    put(&mut out, c(Command::ResizeBar), 1, [0; 3], &[]);
    put(&mut out, c(Command::MapSysmemFd), 0, [DMA_BYTES, 0, 0], &[]);
    put(&mut out, UNKNOWN_COMMAND, 0, [0; 3], &[]);
    put(&mut out, c(Command::Reset), 0, [0; 3], &[]);
    (out, fields)
}

/// Send `input` and read every reply until the server closes.
fn exercise(port: u16, input: &[u8]) -> u64 {
    let Ok(s) = TcpStream::connect(("127.0.0.1", port)) else {
        panic!("the simulator no longer accepts connections");
    };
    let _ = s.set_read_timeout(Some(CLIENT_PATIENCE));
    let mut writer = s.try_clone().expect("a second handle on the socket");
    let input = input.to_vec();
    let sent = std::thread::Builder::new()
        .name(WRITER_THREAD.to_string())
        .spawn(move || {
            let _ = writer.write_all(&input);
            let _ = writer.shutdown(Shutdown::Write);
        })
        .expect("the writer starts");
    let mut replies = Vec::new();
    let mut reader = &s;
    let read = reader.read_to_end(&mut replies);
    let _ = sent.join();
    if let Err(e) = read {
        if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut {
            panic!("the simulator neither answered nor closed within {CLIENT_PATIENCE:?}");
        }
    }
    // What came back, roughly: how many replies' worth.
    (replies.len() / REQUEST_BYTES) as u64
}

/// An edge value into one field of one request.
fn mutate_request(rng: &mut Rng, input: &mut [u8]) {
    const EDGES: [u64; 8] = [
        0,
        1,
        4096,
        1 << 26,
        (1 << 26) + 1,
        1 << 32,
        1 << 63,
        u64::MAX,
    ];
    let requests = input.len() / REQUEST_BYTES;
    let at = rng.below(requests.max(1)) * REQUEST_BYTES;
    let field = *rng.pick(&REQUEST_FIELDS).unwrap_or(&0);
    let value = *rng.pick(&EDGES).unwrap_or(&0);
    let width = match field {
        0 => 1,
        1 | 5 => 4,
        _ => 8,
    };
    if let Some(slot) = input.get_mut(at + field..at + field + width) {
        slot.copy_from_slice(&value.to_le_bytes()[..width]);
    }
}

#[test]
fn sim_requests() {
    let server =
        Server::start(&Listen::Tcp(0), Card::new(SimChip::gb202())).expect("the simulator serves");
    let Endpoint::Tcp { port, .. } = server.endpoint() else {
        panic!("a TCP endpoint");
    };
    let (seed, fields) = requests();
    let mut threads = SERVER_THREADS.to_vec();
    threads.push(WRITER_THREAD);
    let summary = fuzz("sim_requests")
        .seeds([seed])
        .fields(fields)
        .mutate(|rng, input| mutate_request(rng, input))
        .max_len(MAX_LEN)
        .threads(&threads)
        .budget(INPUTS, TIME)
        .run(move |input| exercise(port, input));
    drop(server);
    finish(&summary);
}
