//! The TinyGPU client against the fake server: every command over a unix
//! socket (with real fd passing) and over TCP, batching of posted writes,
//! and a peer that misbehaves in every way the client must survive
//! without a panic or a hang.

use macuda_hw::pci::{offset, Command as PciCommand, Width};
use macuda_pci::tinygpu::wire::Command;
use macuda_pci::tinygpu::{Connection, Endpoint, TinyGpuOpener, TinyGpuTransport};
use macuda_pci::{clear_bus_master, enable_bus_master, read_identity, PciError, Transport};
use macuda_sim::WireFault;
use macuda_tests::fake_tinygpu::FakeTinyGpu;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_millis(500);

fn open(fake: &FakeTinyGpu) -> TinyGpuTransport {
    TinyGpuOpener::new(fake.endpoint(), TIMEOUT)
        .connect()
        .expect("connect to the fake")
}

fn conn(fake: &FakeTinyGpu) -> Connection {
    Connection::connect(&fake.endpoint(), 0, TIMEOUT).expect("connect")
}

#[test]
fn every_command_over_a_unix_socket() {
    let fake = FakeTinyGpu::unix();
    let mut c = conn(&fake);
    c.ping().unwrap();
    assert_eq!(
        c.probe(0x10DE, 0x03, &[(0xFF00, 0x2B00)]).unwrap(),
        vec!["fake-gb202:0"]
    );
    assert_eq!(c.map_bar(1).unwrap().1, 256 << 20);
    assert!(matches!(
        c.map_bar(2),
        Err(PciError::Server {
            command: "MAP_BAR",
            ..
        })
    ));
    c.map_bar(0).unwrap();
    assert_eq!(c.cfg_read(0, 2).unwrap(), 0x10DE);
    c.cfg_write(4, 2, 0x0006).unwrap();
    assert_eq!(c.cfg_read(4, 2).unwrap(), 0x0006);
    c.mmio_write(0, 0x1000, &0xCAFE_F00Du32.to_le_bytes())
        .unwrap();
    let mut b = [0u8; 4];
    c.mmio_read(0, 0x1000, &mut b).unwrap();
    assert_eq!(
        u32::from_le_bytes(b),
        0xCAFE_F00D,
        "a read must see the posted write before it"
    );
    c.resize_bar(1).unwrap();
    c.reset().unwrap();
    assert_eq!(
        c.cfg_read(4, 2).unwrap(),
        0,
        "reset clears the command register"
    );
    let (fd, size, index) = c.map_sysmem_fd(100_000, false).unwrap();
    assert!(size >= 100_000 && size % 4096 == 0);
    assert_eq!(index, 0);
    drop(fd);
    let (handle, pages) = c.map_sysmem(3 * 4096, false).unwrap();
    assert_eq!(pages.len(), 3);
    c.sysmem_write(handle, 10, b"hello").unwrap();
    let mut back = [0u8; 5];
    c.sysmem_read(handle, 10, &mut back).unwrap();
    assert_eq!(&back, b"hello");
    let card = fake.card();
    for cmd in Command::ALL {
        assert!(
            card.count(cmd) > 0,
            "{} never reached the server",
            cmd.name()
        );
    }
    assert_eq!(card.resets, 1);
}

#[test]
fn the_transport_identifies_the_card_and_toggles_bus_mastering() {
    let fake = FakeTinyGpu::unix();
    let mut t = open(&fake);
    assert_eq!(t.backend(), "tinygpu");
    let id = read_identity(&mut t).unwrap();
    assert_eq!(id.chip.chip.to_string(), "GB202");
    assert!(id.small_bar());
    assert!(!id.firmware_resident);
    assert_eq!(
        id.bars.iter().map(|b| b.index).collect::<Vec<_>>(),
        vec![0, 1, 3]
    );
    enable_bus_master(&mut t).unwrap();
    assert!(PciCommand(fake.card().command_register()).bus_master());
    let change = clear_bus_master(&mut t).unwrap();
    assert!(change.before.bus_master() && !change.after.bus_master());
    assert!(!PciCommand(fake.card().command_register()).bus_master());
    fake.card().poke32(0x1F_A828, 0x10);
    assert!(read_identity(&mut t).unwrap().firmware_resident);
    assert!(matches!(
        t.config_read(4095, Width::U32),
        Err(PciError::ConfigOutOfRange { .. })
    ));
    assert!(matches!(
        t.mmio_read32(64 << 20),
        Err(PciError::OutOfRange { .. })
    ));
}

#[test]
fn shared_dma_memory_arrives_by_fd_with_its_segment_table() {
    let fake = FakeTinyGpu::unix();
    let mut t = open(&fake);
    let region = t.alloc_dma(200 << 10).unwrap();
    assert!(region.bytes >= 200 << 10);
    // The fake scatters in 64 KiB segments, 1 MiB apart on the bus.
    assert_eq!(region.segments.len(), 4);
    assert_eq!(region.covered(), region.bytes);
    assert_eq!(region.bus_addr(64 << 10), Some(region.segments[1].bus_addr));
    // The table at the start of the mapping is cleared for the caller.
    let mut head = [0xFFu8; 32];
    t.dma_read(region.id, 0, &mut head).unwrap();
    assert_eq!(head, [0u8; 32]);
    // Writes through our mapping are the server's memory too.
    t.dma_write(region.id, 9000, b"through shared memory")
        .unwrap();
    assert_eq!(
        fake.card().shared_bytes(0, 9000, 21),
        b"through shared memory"
    );
    assert!(matches!(
        t.dma_read(region.id, region.bytes - 2, &mut [0u8; 4]),
        Err(PciError::OutOfRange { .. })
    ));
}

#[test]
fn a_truncated_scatter_list_is_reported_as_partial_coverage() {
    let fake = FakeTinyGpu::unix();
    let mut t = open(&fake);
    // 33 segments would be needed; like macOS, only 32 are listed.
    let region = t.alloc_dma(33 * (64 << 10)).unwrap();
    assert_eq!(region.segments.len(), 32);
    assert_eq!(region.covered(), 32 * (64 << 10));
    assert!(region.covered() < region.bytes);
    assert_eq!(region.bus_addr(32 * (64 << 10)), None);
}

#[test]
fn every_command_over_tcp() {
    let fake = FakeTinyGpu::tcp();
    let mut t = open(&fake);
    assert_eq!(t.backend(), "remote");
    assert_eq!(
        read_identity(&mut t).unwrap().chip.chip.to_string(),
        "GB202"
    );
    t.mmio_write32(0x2000, 7).unwrap();
    assert_eq!(t.mmio_read32(0x2000).unwrap(), 7);
    let region = t.alloc_dma(8 * 4096).unwrap();
    // Two runs of pages: the client coalesces contiguous pages.
    assert_eq!(region.segments.len(), 2);
    assert_eq!(region.covered(), 8 * 4096);
    t.dma_write(region.id, 4090, b"across a page").unwrap();
    let mut back = [0u8; 13];
    t.dma_read(region.id, 4090, &mut back).unwrap();
    assert_eq!(&back, b"across a page");
    t.function_reset().unwrap();
    // The server serves one client at a time.
    drop(t);
    let mut c = conn(&fake);
    c.ping().unwrap();
    assert!(matches!(
        c.map_sysmem_fd(4096, false),
        Err(PciError::Unsupported {
            backend: "remote",
            ..
        })
    ));
}

#[test]
fn posted_writes_wait_for_a_flush_or_a_read_and_keep_their_order() {
    let fake = FakeTinyGpu::unix();
    let mut c = conn(&fake);
    c.map_bar(0).unwrap();
    for i in 0..100u32 {
        c.mmio_write(0, 0x3000, &i.to_le_bytes()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(
        fake.card().count(Command::MmioWrite),
        0,
        "batched writes went out early"
    );
    let mut b = [0u8; 4];
    c.mmio_read(0, 0x3000, &mut b).unwrap();
    assert_eq!(u32::from_le_bytes(b), 99, "the last write wins: order kept");
    assert_eq!(fake.card().count(Command::MmioWrite), 100);
    // Unbatched: each write goes out on its own.
    c.set_batch_bytes(0);
    c.mmio_write(0, 0x3004, &1u32.to_le_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while fake.card().count(Command::MmioWrite) < 101 {
        assert!(Instant::now() < deadline, "unbatched write never arrived");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn replies_split_into_single_bytes_are_reassembled() {
    let fake = FakeTinyGpu::unix();
    let mut t = open(&fake);
    fake.misbehave(WireFault::Trickle);
    assert_eq!(
        t.config_read(offset::VENDOR_ID, Width::U16).unwrap(),
        0x10DE
    );
    let region = t.alloc_dma(4096).unwrap();
    assert!(!region.segments.is_empty());
    assert_eq!(t.mmio_read32(0xA00).unwrap(), 0x1B2A_1000);
}

#[test]
fn a_peer_that_closes_mid_reply_is_a_typed_error_and_poisons_the_connection() {
    for after in [0, 5, 17, 19] {
        let fake = FakeTinyGpu::unix();
        let mut t = open(&fake);
        fake.misbehave(WireFault::CloseMidReply {
            command: Command::MmioRead,
            after,
        });
        let started = Instant::now();
        let err = t.mmio_read32(0).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(
            matches!(
                err,
                PciError::Closed {
                    command: "MMIO_READ"
                }
            ),
            "after {after} bytes: {err}"
        );
        // The stream is out of step: later requests fail fast instead of
        // misreading.
        fake.misbehave(WireFault::None);
        assert!(t.config_read(0, Width::U16).is_err());
    }
}

#[test]
fn malformed_replies_are_typed_errors() {
    let cases = [
        (
            WireFault::BadStatus {
                command: Command::CfgRead,
            },
            "neither ok",
        ),
        (
            WireFault::HugeErrorMessage {
                command: Command::CfgRead,
            },
            "exceeds",
        ),
    ];
    for (m, needle) in cases {
        let fake = FakeTinyGpu::unix();
        let mut t = open(&fake);
        fake.misbehave(m.clone());
        match t.config_read(0, Width::U16) {
            Err(PciError::Protocol {
                command: "CFG_READ",
                what,
            }) => assert!(what.contains(needle), "{m:?}: {what}"),
            other => panic!("{m:?}: {other:?}"),
        }
    }
    let fake = FakeTinyGpu::unix();
    let mut t = open(&fake);
    fake.misbehave(WireFault::Oversize {
        command: Command::MmioRead,
    });
    assert!(matches!(
        t.mmio_read32(0),
        Err(PciError::Protocol {
            command: "MMIO_READ",
            ..
        })
    ));
    let fake = FakeTinyGpu::unix();
    let mut t = open(&fake);
    fake.unterminate_segment_tables();
    match t.alloc_dma(4096) {
        Err(PciError::Protocol { what, .. }) => assert!(what.contains("terminat"), "{what}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_server_error_carries_its_message() {
    let fake = FakeTinyGpu::unix();
    let mut t = open(&fake);
    fake.misbehave(WireFault::Error {
        command: Command::Reset,
        message: "Driver not available".into(),
    });
    match t.function_reset() {
        Err(PciError::Server {
            command: "RESET",
            message,
        }) => assert_eq!(message, "Driver not available"),
        other => panic!("{other:?}"),
    }
    // An error reply is a whole reply: the connection stays usable.
    assert_eq!(t.config_read(0, Width::U16).unwrap(), 0x10DE);
}

#[test]
fn a_server_that_never_answers_times_out() {
    let fake = FakeTinyGpu::unix();
    let mut t = open(&fake);
    fake.misbehave(WireFault::Stall {
        command: Command::CfgRead,
    });
    let started = Instant::now();
    let err = t.config_read(0, Width::U16).unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(
            err,
            PciError::Timeout {
                command: "CFG_READ",
                ..
            }
        ),
        "{err}"
    );
    assert!(took >= TIMEOUT && took < TIMEOUT * 4, "{took:?}");
}

#[test]
fn an_unreachable_server_is_a_typed_error() {
    let missing = Endpoint::Unix(std::env::temp_dir().join("macuda-no-such-socket.sock"));
    assert!(matches!(
        TinyGpuOpener::new(missing, TIMEOUT).connect(),
        Err(PciError::Connect { .. })
    ));
}

#[test]
fn a_fresh_connection_severs_the_previous_one() {
    let fake = FakeTinyGpu::unix();
    let opener = TinyGpuOpener::new(fake.endpoint(), TIMEOUT);
    let mut first = opener.connect().unwrap();
    first.config_read(0, Width::U16).unwrap();
    let mut second = opener.connect().unwrap();
    assert_eq!(second.config_read(0, Width::U16).unwrap(), 0x10DE);
    assert!(
        first.config_read(0, Width::U16).is_err(),
        "the old connection still works"
    );
    assert_eq!(fake.connections(), 2);
}
