//! The simulated GB202 behind the TinyGPU protocol, reached by our own
//! client as a user would: `macuda info` over a unix socket and over TCP,
//! DMA through shared memory that the card reaches only while bus
//! mastering is on, the 32-segment limit, a function-level reset after
//! which the card boots again, and `macuda sim serve` as a process.

use macuda_hw::regs::{NV_PMC_BOOT_42, NV_THERM_I2CS_SCRATCH};
use macuda_pci::tinygpu::{TinyGpuOpener, TinyGpuTransport};
use macuda_pci::{clear_bus_master, enable_bus_master, PciError, Transport};
use macuda_sim::{Card, DmaError, Listen, Server, SimChip};
use macuda_tests::run_macuda as run;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_millis(2000);

fn quick_gb202() -> SimChip {
    SimChip {
        boot_time: Duration::from_millis(40),
        ..SimChip::gb202()
    }
}

fn on_unix(chip: SimChip, segment_bytes: u64) -> (Server<Card>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let listen = Listen::Unix(dir.path().join("sim.sock"));
    let server = Server::start(&listen, Card::with_segments(chip, segment_bytes)).unwrap();
    (server, dir)
}

fn open(server: &Server<Card>) -> TinyGpuTransport {
    TinyGpuOpener::new(server.endpoint(), TIMEOUT)
        .connect()
        .expect("connect to the sim")
}

fn info_on(server: &Server<Card>) {
    let (code, out, err) = run(&["info", "--device", &server.device_word()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("pci id:    10de:2b85"), "{out}");
    assert!(out.contains("BAR1:      256 MiB (small BAR)"), "{out}");
    assert!(out.contains("chip:      GB202"), "{out}");
    assert!(out.contains("firmware:  not resident (WPR2 down)"), "{out}");
    assert!(out.contains("bus mastering off"), "{out}");
    assert!(!server.device().bus_master());
    assert_eq!(server.device().resets(), 0, "identification does not reset");
}

#[test]
fn info_identifies_the_simulated_gb202_over_a_unix_socket() {
    let (server, _dir) = on_unix(quick_gb202(), 4 << 20);
    info_on(&server);
}

#[test]
fn info_identifies_the_simulated_gb202_over_tcp_on_loopback() {
    let server = Server::start(&Listen::Tcp(0), Card::new(quick_gb202())).unwrap();
    let word = server.device_word();
    assert!(word.starts_with("remote:127.0.0.1:"), "{word}");
    info_on(&server);
}

#[test]
fn the_card_reaches_shared_memory_only_while_it_masters_the_bus() {
    let (server, _dir) = on_unix(quick_gb202(), 64 << 10);
    let mut t = open(&server);
    let region = t.alloc_dma(256 << 10).unwrap();
    assert_eq!(region.segments.len(), 4);
    assert_eq!(region.covered(), region.bytes);
    t.dma_write(region.id, (64 << 10) + 16, b"from the host")
        .unwrap();
    let bus = region.bus_addr((64 << 10) + 16).unwrap();
    let mut seen = [0u8; 13];
    assert_eq!(
        server.device().dma_read(bus, &mut seen),
        Err(DmaError::BusMasterOff)
    );
    enable_bus_master(&mut t).unwrap();
    server.device().dma_read(bus, &mut seen).unwrap();
    assert_eq!(&seen, b"from the host");
    server.device().dma_write(bus, b"from the card").unwrap();
    let mut back = [0u8; 13];
    t.dma_read(region.id, (64 << 10) + 16, &mut back).unwrap();
    assert_eq!(&back, b"from the card");
    clear_bus_master(&mut t).unwrap();
    assert_eq!(
        server.device().dma_write(bus, b"x"),
        Err(DmaError::BusMasterOff),
        "clearing bus mastering stops DMA at once"
    );
}

#[test]
fn a_mapping_past_32_segments_is_refused_with_the_reason() {
    let (server, _dir) = on_unix(quick_gb202(), 64 << 10);
    let mut t = open(&server);
    assert!(t.alloc_dma(32 * (64 << 10)).is_ok());
    match t.alloc_dma(33 * (64 << 10)) {
        Err(PciError::Server { message, .. }) => {
            assert!(message.contains("at most 32"), "{message}")
        }
        other => panic!("a 33-segment mapping gave {other:?}"),
    }
}

#[test]
fn a_function_level_reset_clears_bus_mastering_and_the_card_boots_again() {
    let (server, _dir) = on_unix(quick_gb202(), 4 << 20);
    let mut t = open(&server);
    std::thread::sleep(quick_gb202().boot_time);
    let boot_status = u64::from(NV_THERM_I2CS_SCRATCH::ADDR);
    assert_eq!(t.mmio_read32(boot_status).unwrap(), 0xFF);
    enable_bus_master(&mut t).unwrap();
    t.function_reset().unwrap();
    assert_eq!(server.device().resets(), 1);
    assert!(!server.device().bus_master());
    assert_eq!(t.mmio_read32(boot_status).unwrap(), 0, "booting again");
    let start = Instant::now();
    while t.mmio_read32(boot_status).unwrap() != 0xFF {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "the card never finished its boot"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        t.mmio_read32(u64::from(NV_PMC_BOOT_42::ADDR)).unwrap(),
        SimChip::gb202().boot_42
    );
}

/// The `macuda` binary cargo built for this test run.
fn macuda_binary() -> std::path::PathBuf {
    let mut p = std::env::current_exe().unwrap();
    p.pop();
    if p.ends_with("deps") {
        p.pop();
    }
    p.join("macuda")
}

#[test]
fn macuda_sim_serve_serves_until_interrupted() {
    let bin = macuda_binary();
    if !bin.exists() {
        // Cargo builds the workspace's binaries for its integration tests;
        // a bare `cargo test --test sim` on a fresh tree may not have.
        let status = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "macuda-supervisor", "--bin", "macuda"])
            .status()
            .unwrap();
        assert!(status.success());
    }
    let mut child = Command::new(&bin)
        .args([
            "sim",
            "serve",
            "tcp:0",
            "--boot-ms",
            "50",
            "--fault",
            "drop-doorbell:3",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(
        first.contains(
            "a simulated GB202 (pci 10de:2b85), 32768 MiB VRAM, BAR1 256 MiB, small BAR1"
        ),
        "{first}"
    );
    let word = first.rsplit("--device ").next().unwrap().to_string();
    assert!(word.starts_with("remote:127.0.0.1:"), "{first}");
    let (code, out, err) = run(&["info", "--device", &word]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("chip:      GB202"), "{out}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(rest.iter().any(|l| l == "sim: stopped"), "{rest:?}");
    assert!(
        rest.iter()
            .any(|l| l == "sim: fault injected: DropDoorbell { nth: 3 }"),
        "{rest:?}"
    );
}

#[test]
fn sim_serve_refuses_a_chip_it_does_not_play_and_a_bad_listen_word() {
    let (code, _, err) = run(&["sim", "serve", "tcp:0", "--chip", "ga102"]);
    assert_eq!(code, 2);
    assert!(err.contains("gb202 or gh100"), "{err}");
    let (code, _, err) = run(&["sim", "serve", "udp:1"]);
    assert_eq!(code, 2);
    assert!(err.contains("unix:PATH or tcp:PORT"), "{err}");
    let (code, _, err) = run(&["sim", "serve", "tcp:0", "--fault", "melt"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("drop-doorbell:N") && err.contains("off-the-bus"),
        "{err}"
    );
}

#[test]
fn device_sim_serves_a_simulated_card_in_process_and_info_reads_it() {
    let (code, out, err) = run(&["info", "--device", "sim"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("via a simulated GB202 served in this process"),
        "{out}"
    );
    assert!(out.contains("chip:      GB202"), "{out}");
    assert!(out.contains("BAR1:      256 MiB (small BAR)"), "{out}");
    let (code, out, err) = run(&["info", "--device", "sim:gh100"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("chip:      GH100"), "{out}");
    let (code, _, err) = run(&["info", "--device", "sim:ga102"]);
    assert_eq!(code, 2);
    assert!(err.contains("gb202 or gh100"), "{err}");
    // Beyond identity it needs our own boot of the card, and so the
    // images: without them the stack names the one it could not find.
    let empty = tempfile::tempdir().unwrap();
    let dir = empty.path().to_str().unwrap();
    let (code, _, err) = run(&["demo", "--device", "sim", "--firmware", dir]);
    assert_ne!(code, 0);
    assert!(
        err.contains("the GSP firmware for the card") && err.contains("570.144.bin not found"),
        "{err}"
    );
}
