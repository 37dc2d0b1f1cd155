//! GSP-RM as the simulated card plays it, driven over the TinyGPU protocol
//! as a driver drives it: the queues linked once the FMC started the GSP,
//! the pre-queued system info and registry taken, GSP_INIT_DONE posted;
//! and every check RM's receiver makes holding: a bad checksum, a
//! sequence out of order or a wrong element count stops it, and it never
//! writes past the host's read pointer.

use macuda_hw::gsp_rpc::{element, event, function, result, MSG_COUNT};
use macuda_pci::tinygpu::TinyGpuTransport;
use macuda_sim::gsp_rm::QueueFault;
use macuda_tests::sim_host::rpc::{registry_table, HostQueues, LogRecord, Received};
use macuda_tests::sim_host::*;
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(2);

#[test]
fn gsp_rm_links_the_queues_takes_the_prequeued_init_and_posts_init_done() {
    let (server, _dir, mut t, mut q) = booted(init_messages);
    let m = q.receive(&mut t, PATIENCE).expect("GSP_INIT_DONE");
    assert_eq!(
        m,
        Received {
            seq: 0,
            function: event::GSP_INIT_DONE,
            result: result::SUCCESS,
            payload: vec![0; 4],
        }
    );
    let card = server.device();
    assert!(card.gsp_rm().init_done());
    assert_eq!(
        card.gsp_rm().registry(),
        [
            ("RMForcePcieConfigSave".to_string(), 1),
            ("RMSecBusResetEnable".to_string(), 1)
        ]
    );
    assert_eq!(
        card.gsp_rm().commands(),
        [function::GSP_SET_SYSTEM_INFO, function::SET_REGISTRY]
    );
}

#[test]
fn gsp_rm_writes_its_log_buffers_as_libos_does() {
    let (server, _dir, mut t, mut q) = booted(init_messages);
    let m = q.receive(&mut t, PATIENCE).expect("GSP_INIT_DONE");
    assert_eq!(m.function, event::GSP_INIT_DONE);
    // An unknown function: taken and answered, both logged.
    q.send(&mut t, 0x7777, &[1, 2, 3, 4]);
    let m = q.receive(&mut t, PATIENCE).expect("a reply");
    assert_eq!(m.result, result::RPC_UNKNOWN_FUNCTION);
    let lines = |records: &[LogRecord]| -> Vec<(&str, Vec<u64>)> {
        records
            .iter()
            .map(|r| (r.metadata.format, r.args.clone()))
            .collect()
    };
    let init = q.log_records(&mut t, b"LOGINIT");
    assert_eq!(init.len(), 2, "{init:?}");
    assert!(init[0]
        .metadata
        .format
        .starts_with("linked the message queues"));
    assert_eq!(init[0].args[1], macuda_hw::gsp_rpc::SHARED_BLOCK_PAGES);
    assert_eq!(init[1].metadata.format, "GSP_INIT_DONE");
    let rm = q.log_records(&mut t, b"LOGRM");
    let took = "took function %#x, sequence %u";
    let posted = "posted function %#x, result %#x";
    assert_eq!(
        lines(&rm),
        [
            (took, vec![u64::from(function::GSP_SET_SYSTEM_INFO), 0]),
            (took, vec![u64::from(function::SET_REGISTRY), 1]),
            (posted, vec![u64::from(event::GSP_INIT_DONE), 0]),
            (took, vec![0x7777, 2]),
            (
                posted,
                vec![0x7777, u64::from(result::RPC_UNKNOWN_FUNCTION)]
            ),
        ]
    );
    let times: Vec<u64> = init.iter().chain(&rm).map(|r| r.time_ns).collect();
    assert!(
        rm.windows(2).all(|w| w[0].time_ns <= w[1].time_ns),
        "{times:?}"
    );
    assert_eq!(server.device().gsp_rm().log_records_lost(), 0);
}

#[test]
fn without_the_registry_there_is_no_init_done() {
    let (server, _dir, mut t, mut q) =
        booted(|q, t| q.send(t, function::GSP_SET_SYSTEM_INFO, &[0; 928]));
    assert_eq!(q.receive(&mut t, Duration::from_millis(200)), None);
    assert!(server.device().gsp_rm().fault().is_none());
    q.send(&mut t, function::SET_REGISTRY, &registry_table());
    assert_eq!(
        q.receive(&mut t, PATIENCE).unwrap().function,
        event::GSP_INIT_DONE
    );
}

fn stopped_by(corrupt: impl FnOnce(&mut Vec<u8>), wanted: &str) {
    let (server, _dir, mut t, mut q) = booted(|q, t| {
        let mut m = q.message(function::GSP_SET_SYSTEM_INFO, &[0; 928]);
        corrupt(&mut m);
        q.send_bytes(t, &m);
        q.send(t, function::SET_REGISTRY, &registry_table());
    });
    assert_eq!(
        q.receive(&mut t, Duration::from_millis(200)),
        None,
        "no INIT_DONE"
    );
    let fault = server.device().gsp_rm().fault().cloned();
    match fault {
        Some(QueueFault::Message { seq: 0, what }) => assert!(what.contains(wanted), "{what}"),
        other => panic!("wanted a fault on message 0 about {wanted}, got {other:?}"),
    }
}

#[test]
fn a_message_whose_checksum_does_not_fold_to_zero_stops_gsp_rm() {
    stopped_by(|m| m[element::BYTES + 40] ^= 1, "checksum");
}

#[test]
fn a_sequence_number_out_of_order_stops_gsp_rm() {
    stopped_by(
        |m| {
            m[element::SEQ_NUM] = 5;
            // Keep the checksum right, so the sequence is what is wrong.
            m[element::CHECKSUM..element::CHECKSUM + 4].fill(0);
            let sum = macuda_hw::gsp_rpc::checksum(&m[..element::BYTES + 32 + 928]);
            m[element::CHECKSUM..element::CHECKSUM + 4].copy_from_slice(&sum.to_le_bytes());
        },
        "seqNum 5",
    );
}

#[test]
fn a_wrong_element_count_stops_gsp_rm() {
    stopped_by(|m| m[element::ELEM_COUNT] = 2, "elemCount 2");
}

#[test]
fn functions_it_does_not_play_are_answered_with_unknown_function() {
    let (_server, _dir, mut t, mut q) = booted(init_messages);
    q.receive(&mut t, PATIENCE).expect("GSP_INIT_DONE");
    q.send(&mut t, function::ALLOC_MEMORY, &[0; 16]);
    let m = q.receive(&mut t, PATIENCE).expect("a reply");
    assert_eq!(
        (m.function, m.result),
        (function::ALLOC_MEMORY, result::RPC_UNKNOWN_FUNCTION)
    );
}

#[test]
fn gsp_rm_never_writes_past_the_hosts_read_pointer() {
    let (_server, _dir, mut t, mut q) = booted(init_messages);
    // 65 commands while the host reads nothing: the status ring keeps one
    // slot empty, so GSP posts INIT_DONE and 61 replies, then holds the
    // rest (and stops taking commands) until the host reads.
    let sent = 65;
    for _ in 0..sent {
        q.send(&mut t, function::NOP, &[]);
    }
    let mut seen = Vec::new();
    while let Some(m) = q.receive(&mut t, Duration::from_millis(300)) {
        seen.push(m.function);
    }
    assert_eq!(
        seen.len(),
        sent + 1,
        "INIT_DONE and every reply, in order, none overwritten"
    );
    assert_eq!(seen[0], event::GSP_INIT_DONE);
    assert!(seen[1..].iter().all(|&f| f == function::NOP));
    assert!(
        sent + 1 > MSG_COUNT as usize - 1,
        "the ring filled on the way"
    );
}

/// `rpc_gsp_rm_alloc_v03_00` for `class` with `params`.
fn alloc(client: u32, parent: u32, object: u32, class: u32, params: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    for v in [client, parent, object, class, 0, params.len() as u32, 0, 0] {
        p.extend(v.to_le_bytes());
    }
    p.extend(params);
    p
}

/// `rpc_gsp_rm_control_v03_00` of `cmd` with `params`.
fn control(client: u32, object: u32, cmd: u32, params: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    for v in [client, object, cmd, 0, params.len() as u32, 0] {
        p.extend(v.to_le_bytes());
    }
    p.extend(params);
    p
}

/// Send one call and read its reply: (rpc_result, the status field).
fn call(
    q: &mut HostQueues,
    t: &mut TinyGpuTransport,
    function: u32,
    payload: &[u8],
    status_at: usize,
) -> (u32, u32, Vec<u8>) {
    q.send(t, function, payload);
    let m = q.receive(t, PATIENCE).expect("a reply");
    assert_eq!(m.function, function);
    let status = u32::from_le_bytes(m.payload[status_at..status_at + 4].try_into().unwrap());
    (m.result, status, m.payload)
}

#[test]
fn the_object_tree_is_built_controlled_and_freed_with_rms_statuses() {
    use macuda_hw::rm::{class, status};
    let (server, _dir, mut t, mut q) = booted(init_messages);
    q.receive(&mut t, PATIENCE).expect("GSP_INIT_DONE");
    let c = 0xC1E0_0004;
    let a = |q: &mut HostQueues, t: &mut TinyGpuTransport, parent, object, class, params: &[u8]| {
        call(
            q,
            t,
            function::GSP_RM_ALLOC,
            &alloc(c, parent, object, class, params),
            16,
        )
    };
    assert_eq!(
        a(&mut q, &mut t, 0, 1, class::NV01_DEVICE_0, &[0; 56]).0,
        status::INVALID_CLIENT
    );
    assert_eq!(
        a(&mut q, &mut t, 0, 0xCF00_0000, class::NV01_ROOT, &[0; 120]).0,
        0
    );
    assert_eq!(
        a(&mut q, &mut t, c, 0x10, class::NV01_DEVICE_0, &[0; 55]).0,
        status::INVALID_PARAM_STRUCT
    );
    let (r, st, _) = a(&mut q, &mut t, c, 0x10, class::NV01_DEVICE_0, &[0; 56]);
    assert_eq!((r, st), (0, 0));
    assert_eq!(
        a(&mut q, &mut t, c, 0x11, class::NV20_SUBDEVICE_0, &[0; 4]).0,
        status::INVALID_OBJECT_PARENT
    );
    assert_eq!(
        a(&mut q, &mut t, 0x10, 0x11, class::NV20_SUBDEVICE_0, &[0; 4]).0,
        0
    );
    assert_eq!(
        a(&mut q, &mut t, 0x10, 0x12, 0xC86F, &[0; 368]).0,
        status::INVALID_CLASS,
        "Hopper's channel on a GB202"
    );
    assert_eq!(
        a(
            &mut q,
            &mut t,
            0x10,
            0x12,
            class::BLACKWELL_CHANNEL_GPFIFO_A,
            &[0; 368]
        )
        .0,
        0
    );
    // The device info table: graphics on runlist 0, the copy engines on theirs.
    let (r, _, reply) = call(
        &mut q,
        &mut t,
        function::GSP_RM_CONTROL,
        &control(c, 0x11, 0x2080_1112, &[0; 3212]),
        12,
    );
    assert_eq!(r, 0);
    let params = &reply[24..];
    assert_eq!(u32::from_le_bytes(params[4..8].try_into().unwrap()), 3);
    let engine = |i: usize, d: usize| {
        u32::from_le_bytes(params[12 + i * 100 + 4 * d..][..4].try_into().unwrap())
    };
    assert_eq!((engine(0, 2), engine(0, 3)), (1, 0));
    // The work submit token is the channel's id; on a subdevice it is refused.
    let (r, _, reply) = call(
        &mut q,
        &mut t,
        function::GSP_RM_CONTROL,
        &control(c, 0x12, 0xC36F_0108, &[0; 4]),
        12,
    );
    assert_eq!((r, &reply[24..28]), (0, &0u32.to_le_bytes()[..]));
    assert_eq!(
        call(
            &mut q,
            &mut t,
            function::GSP_RM_CONTROL,
            &control(c, 0x11, 0xC36F_0108, &[0; 4]),
            12
        )
        .0,
        status::NOT_SUPPORTED
    );
    assert_eq!(
        call(
            &mut q,
            &mut t,
            function::GSP_RM_CONTROL,
            &control(c, 0x11, 0x2080_FFFF, &[]),
            12
        )
        .0,
        status::NOT_SUPPORTED
    );
    // FREE of the device takes the subdevice and the channel with it.
    let mut free = Vec::new();
    for v in [c, c, 0x10, 0] {
        free.extend(u32::to_le_bytes(v));
    }
    assert_eq!(call(&mut q, &mut t, function::FREE, &free, 12).0, 0);
    assert!(server
        .device()
        .gsp_rm()
        .calls()
        .objects
        .of_client(c)
        .is_empty());
    assert_eq!(
        call(&mut q, &mut t, function::FREE, &free, 12).0,
        status::OBJECT_NOT_FOUND
    );
}

#[test]
fn set_page_directory_records_the_root_in_the_memory_its_flags_name() {
    use macuda_hw::gsp_rpc::set_page_directory as spd;
    use macuda_hw::rm::status;
    use macuda_sim::mmu::{PageDirectory, Target};
    let (server, _dir, mut t, mut q) = booted(init_messages);
    q.receive(&mut t, PATIENCE).expect("GSP_INIT_DONE");
    let payload = |root: u64, flags: u32| {
        let mut p = vec![0u8; spd::BYTES];
        p[spd::H_CLIENT..spd::H_CLIENT + 4].copy_from_slice(&0xC1E0_0004u32.to_le_bytes());
        p[spd::PHYS_ADDRESS..spd::PHYS_ADDRESS + 8].copy_from_slice(&root.to_le_bytes());
        p[spd::NUM_ENTRIES..spd::NUM_ENTRIES + 4].copy_from_slice(&2u32.to_le_bytes());
        p[spd::FLAGS..spd::FLAGS + 4].copy_from_slice(&flags.to_le_bytes());
        p[spd::H_VA_SPACE..spd::H_VA_SPACE + 4].copy_from_slice(&0x30u32.to_le_bytes());
        p
    };
    // ALL_CHANNELS with the root in video memory, as tinygrad sends it;
    // then one in coherent host memory.
    let (r, _, _) = call(
        &mut q,
        &mut t,
        function::SET_PAGE_DIRECTORY,
        &payload(0x4000, 0x8),
        0,
    );
    assert_eq!(r, 0);
    let (r, _, _) = call(
        &mut q,
        &mut t,
        function::SET_PAGE_DIRECTORY,
        &payload(0x8_0000_1000, 0x9),
        0,
    );
    assert_eq!(r, 0);
    // An aperture RM does not define, and a short payload, are refused.
    let (r, _, _) = call(
        &mut q,
        &mut t,
        function::SET_PAGE_DIRECTORY,
        &payload(0x5000, 0x3),
        0,
    );
    assert_eq!(r, status::INVALID_ARGUMENT);
    let (r, _, _) = call(
        &mut q,
        &mut t,
        function::SET_PAGE_DIRECTORY,
        &payload(0x5000, 0)[..40],
        0,
    );
    assert_eq!(r, status::INVALID_ARGUMENT);
    let card = server.device();
    assert_eq!(
        card.gsp_rm().calls().page_directories,
        [
            (
                0xC1E0_0004,
                0x30,
                PageDirectory {
                    target: Target::Video,
                    address: 0x4000
                }
            ),
            (
                0xC1E0_0004,
                0x30,
                PageDirectory {
                    target: Target::SystemCoherent,
                    address: 0x8_0000_1000
                }
            ),
        ]
    );
}

#[test]
fn static_info_names_the_card_its_fb_below_the_firmware_and_gsp_rms_own_objects() {
    use macuda_hw::gsp_rpc::static_info::{self as si, fb_regions as r};
    use macuda_hw::le::{u32_at, u64_at};
    let (server, _dir, mut t, mut q) = booted(init_messages);
    q.receive(&mut t, PATIENCE).expect("GSP_INIT_DONE");
    q.send(&mut t, function::GET_GSP_STATIC_INFO, &[0; 4]);
    let m = q.receive(&mut t, PATIENCE).expect("the static info");
    assert_eq!((m.function, m.result), (function::GET_GSP_STATIC_INFO, 0));
    let p = m.payload;
    assert_eq!(p.len(), si::BYTES);
    let name = &p[si::GPU_NAME_STRING..si::GPU_NAME_STRING + si::NAME_BYTES];
    assert!(name.starts_with(b"NVIDIA GeForce RTX 5090\0"), "{name:?}");
    let vram = server.device().chip().vram_bytes();
    assert_eq!(u64_at(&p, si::FB_LENGTH), vram);
    let regions = si::FB_REGION_INFO;
    assert_eq!(u32_at(&p, regions + r::COUNT), 1);
    let limit = u64_at(&p, regions + r::FIRST + r::LIMIT);
    let (_, boot) = server.device().gsp();
    let fw_lowest = boot.expect("the FMC ran").layout.non_wpr_heap_offset;
    assert_eq!(
        limit,
        fw_lowest - 1,
        "the driver's FB ends below the firmware's"
    );
    assert!(limit < vram);
    // GSP-RM's own subdevice takes controls like any other.
    let sub = u32_at(&p, si::H_INTERNAL_SUBDEVICE);
    let client = u32_at(&p, si::H_INTERNAL_CLIENT);
    let (r, _, _) = call(
        &mut q,
        &mut t,
        function::GSP_RM_CONTROL,
        &control(client, sub, 0x2080_FFFF, &[]),
        12,
    );
    assert_eq!(
        r,
        macuda_hw::rm::status::NOT_SUPPORTED,
        "found, and the command refused"
    );
}

#[test]
fn a_boot_cpu_sequencer_script_must_run_before_gsp_init_done() {
    use macuda_pci::enable_bus_master;
    let (server, _dir, mut t) = world();
    server.device().send_boot_sequencer();
    enable_bus_master(&mut t).unwrap();
    let s = stage(&mut t);
    let mut q = HostQueues::stage(&mut t, &s);
    init_messages(&mut q, &mut t);
    let r = send(
        &mut t,
        &cot(&s, &test_key()).encode(),
        macuda_hw::fsp::nvdm::COT,
    );
    assert_eq!(r.error_code, 0);
    let m = q.receive(&mut t, PATIENCE).expect("the script");
    assert_eq!((m.function, m.result), (event::GSP_RUN_CPU_SEQUENCER, 0));
    // GSP-RM waits for the host's CPU.
    assert!(q.receive(&mut t, Duration::from_millis(50)).is_none());
    let ran = macuda_gsp::sequencer::run(&mut t, &m.payload).unwrap();
    assert_eq!(ran.commands, 5);
    assert_eq!(ran.saved[0], server.device().chip().boot_42, "REG_STORE");
    let m = q.receive(&mut t, PATIENCE).expect("GSP_INIT_DONE");
    assert_eq!(m.function, event::GSP_INIT_DONE);
    assert!(server.device().gsp_rm().init_done());
}

#[test]
fn a_registry_longer_than_one_record_arrives_in_continuation_records() {
    use macuda_tests::sim_host::rpc::packed_registry;
    let names: Vec<(String, u32)> = (0..5000)
        .map(|i| (format!("RMSimLongEntry{i:05}"), i))
        .collect();
    let table = packed_registry(&names);
    assert!(
        table.len() > macuda_hw::gsp_rpc::RPC_PAYLOAD_MAX,
        "{}",
        table.len()
    );
    let (server, _dir, mut t, mut q) = booted(|q, t| {
        q.send(t, function::GSP_SET_SYSTEM_INFO, &[0; 928]);
        q.send_long(t, function::SET_REGISTRY, &table);
    });
    let m = q.receive(&mut t, PATIENCE).expect("GSP_INIT_DONE");
    assert_eq!(m.function, event::GSP_INIT_DONE);
    let card = server.device();
    let registry = card.gsp_rm().registry();
    assert_eq!(registry.len(), 5000);
    assert_eq!(registry[4999], ("RMSimLongEntry04999".to_string(), 4999));
}
