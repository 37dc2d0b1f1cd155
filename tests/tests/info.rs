//! `macuda info` on real transports (the fake TinyGPU server over a unix
//! socket and over TCP), the card lock, the demo's own boot of a TinyGPU
//! card (which needs the images), and its refusal of a device whose RM is
//! not built yet.

use macuda_hw::pci::Command as PciCommand;
use macuda_pci::{open_transport, DeviceSpec, PciError};
use macuda_tests::fake_tinygpu::FakeTinyGpu;
use macuda_tests::run_macuda as run;

fn info_on(fake: &FakeTinyGpu) {
    // Boot left bus mastering on, as a crashed run would.
    fake.card().config[4] = 0x06;
    fake.card().poke32(0x1F_A828, 0x0007_F4A0);
    let device = fake.device_word();
    let (code, out, err) = run(&["info", "--device", &device]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("pci id:    10de:2b85"), "{out}");
    assert!(out.contains("BAR1:      256 MiB (small BAR)"), "{out}");
    assert!(
        out.contains("chip:      GB202 (NV_PMC_BOOT_0 0x1b2000a1, NV_PMC_BOOT_42 0x1b2a1000)"),
        "{out}"
    );
    assert!(out.contains("GSP firmware resident"), "{out}");
    assert!(out.contains("bus mastering off"), "{out}");
    let command = PciCommand(fake.card().command_register());
    assert!(!command.bus_master(), "the card was left mastering the bus");
    assert!(
        command.0 & PciCommand::MEMORY_SPACE != 0,
        "memory decoding is needed to read registers"
    );
    // Identification reads, it does not boot: no reset, no DMA.
    assert_eq!(fake.card().resets, 0);
}

#[test]
fn info_over_a_unix_socket() {
    info_on(&FakeTinyGpu::unix());
}

#[test]
fn info_over_tcp() {
    info_on(&FakeTinyGpu::tcp());
}

#[test]
fn info_reports_firmware_not_resident_when_wpr2_is_down() {
    let fake = FakeTinyGpu::unix();
    let (code, out, _) = run(&["info", "--device", &fake.device_word()]);
    assert_eq!(code, 0);
    assert!(out.contains("not resident (WPR2 down)"), "{out}");
}

#[test]
fn one_process_per_card() {
    let fake = FakeTinyGpu::unix();
    let spec: DeviceSpec = fake.device_word().parse().unwrap();
    let first = open_transport(&spec).expect("first opener takes the card");
    match open_transport(&spec) {
        Err(PciError::CardBusy { pid, .. }) => assert_eq!(pid, std::process::id().to_string()),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a second opener got the card"),
    }
    let (code, _, err) = run(&["info", "--device", &fake.device_word()]);
    assert_ne!(code, 0);
    assert!(err.contains("in use by process"), "{err}");
    drop(first);
    assert!(open_transport(&spec).is_ok(), "the lock was not released");
}

#[test]
fn processes_share_the_card_nvidia_s_module_drives() {
    // The module boots and arbitrates the card, as for its own libcuda, so
    // two openers of the kernel path coexist (llama.cpp's test runs do).
    let spec: DeviceSpec = "kernel:0".parse().unwrap();
    let first = open_transport(&spec).expect("first opener");
    let second = open_transport(&spec).expect("a second opener of the module's card");
    assert_eq!(first.describe(), second.describe());
}

#[test]
fn a_dead_server_is_a_clear_error() {
    let fake = FakeTinyGpu::unix();
    let device = fake.device_word();
    drop(fake);
    let (code, _, err) = run(&["info", "--device", &device]);
    assert_ne!(code, 0);
    assert!(err.contains("cannot reach TinyGPU socket"), "{err}");
}

#[test]
fn the_demo_boots_a_tinygpu_card_itself_and_without_the_images_says_which() {
    let fake = FakeTinyGpu::unix();
    let empty = tempfile::tempdir().unwrap();
    let dir = empty.path().to_str().unwrap();
    let (code, _, err) = run(&["--device", &fake.device_word(), "demo", "--firmware", dir]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("boot failed in `gsp`") && err.contains("the GSP firmware for the card"),
        "{err}"
    );
    // Recovery left the card unable to master the bus.
    assert_eq!(
        fake.card().config[4] & PciCommand::BUS_MASTER as u8,
        0,
        "bus mastering left on"
    );
}

#[test]
fn the_demo_refuses_a_device_whose_rm_is_not_built() {
    let (code, _, err) = run(&["--device", "sysfs:0000:01:00.0", "demo"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("not built yet") && err.contains("macuda info"),
        "{err}"
    );
}

#[test]
fn info_recorded_over_tinygpu_replays_strictly() {
    let fake = FakeTinyGpu::unix();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("info.trace");
    let trace_arg = trace.to_str().unwrap().to_string();
    let (code, out, err) = run(&[
        "info",
        "--device",
        &fake.device_word(),
        "--record",
        &trace_arg,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("session:   2 connection(s) recorded"), "{out}");
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.starts_with(macuda_pci::TRACE_HEADER), "{text}");
    assert!(
        text.contains("# connection 2"),
        "recovery's fresh connection is in the same trace: {text}"
    );
    drop(fake);

    // Replaying the trace needs no server: the same program makes the same
    // accesses and every one of them is checked.
    let replay = format!("replay:{trace_arg}");
    let (code, replayed, err) = run(&["info", "--device", &replay]);
    assert_eq!(code, 0, "{err}");
    assert!(replayed.contains("chip:      GB202"), "{replayed}");
    assert!(
        replayed.contains("session:   replay complete"),
        "{replayed}"
    );

    // A changed write in the trace is a divergence naming its line.
    let (line_no, line) = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with("cfg_write 0x004"))
        .last()
        .map(|(i, l)| (i + 1, l.to_string()))
        .expect("the exit's command-register write was recorded");
    assert!(line.starts_with("cfg_write"));
    let bent: String = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i + 1 == line_no {
                "cfg_write 0x004 u16 0x0007".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let bent_path = dir.path().join("bent.trace");
    std::fs::write(&bent_path, bent).unwrap();
    let (code, _, err) = run(&[
        "info",
        "--device",
        &format!("replay:{}", bent_path.display()),
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains(&format!("line {line_no}")),
        "the divergence does not name line {line_no}: {err}"
    );
}
