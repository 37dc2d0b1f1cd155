//! The gsp actor's RPC client (`macuda_gsp::bare`) against the simulated
//! card's GSP-RM, over the TinyGPU unix socket as on a real card: the
//! system info and registry queued before the boot, GSP_INIT_DONE
//! awaited (running the CPU-sequencer script GSP-RM sends first, when it
//! does), RM objects allocated with real handles, RM's refusals as typed
//! errors, unprompted events kept for the caller, and a corrupted status
//! message caught by its checksum.

use macuda_gsp::bare::logs;
use macuda_gsp::bare::{GspRpc, Notice, RmAlloc, RpcError};
use macuda_hw::gsp_rpc::{event, function, rc_triggered};
use macuda_hw::rm::{class, status};
use macuda_pci::enable_bus_master;
use macuda_pci::tinygpu::TinyGpuTransport;
use macuda_sim::faults::DeviceFault;
use macuda_sim::{Card, Server};
use macuda_tests::sim_host::rpc::{registry_table, HostQueues};
use macuda_tests::sim_host::*;
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(2);
/// Handles: the client names itself (nouveau's form), with
/// tinygrad's client number (the sim's GSP-RM has its own client at
/// nouveau's first).
const CLIENT: u32 = 0xC1E0_0004;
const DEVICE: u32 = 0xCF00_0001;
const SUBDEVICE: u32 = 0xCF00_0002;
/// NV0000_ALLOC_PARAMETERS, NV0080_ALLOC_PARAMETERS and
/// NV2080_ALLOC_PARAMETERS, all zero (device 0, subdevice 0).
const ROOT_PARAMS: usize = 120;
const DEVICE_PARAMS: usize = 56;
const SUBDEVICE_PARAMS: usize = 4;

/// A card booted with the gsp actor's client: its queues staged, the
/// system info and registry posted before the COT, as a driver does.
fn boot(
    before: impl FnOnce(&Server<Card>),
) -> (Server<Card>, tempfile::TempDir, TinyGpuTransport, GspRpc) {
    let (server, dir, mut t) = world();
    before(&server);
    enable_bus_master(&mut t).unwrap();
    let s = stage(&mut t);
    let q = HostQueues::stage(&mut t, &s);
    let mut rpc = GspRpc::new(q.into_queue());
    rpc.set_reply_wait(PATIENCE);
    let info = system_info(&mut t);
    rpc.post(&mut t, function::GSP_SET_SYSTEM_INFO, &info)
        .unwrap();
    rpc.post(&mut t, function::SET_REGISTRY, &registry_table())
        .unwrap();
    let r = send(
        &mut t,
        &cot(&s, &test_key()).encode(),
        macuda_hw::fsp::nvdm::COT,
    );
    assert_eq!(r.error_code, 0);
    (server, dir, t, rpc)
}

fn alloc(
    rpc: &mut GspRpc,
    t: &mut TinyGpuTransport,
    parent: u32,
    object: u32,
    class: u32,
    params: usize,
) -> Result<Vec<u8>, RpcError> {
    rpc.rm_alloc(
        t,
        &RmAlloc {
            client: CLIENT,
            parent,
            object,
            class,
            params: &vec![0; params],
        },
    )
}

#[test]
fn init_done_comes_after_the_system_info_and_registry() {
    let (server, _dir, mut t, mut rpc) = boot(|_| {});
    let m = rpc
        .wait_for(&mut t, event::GSP_INIT_DONE, PATIENCE)
        .unwrap();
    assert_eq!((m.seq, m.function, m.result), (0, event::GSP_INIT_DONE, 0));
    assert!(rpc.init_done());
    let card = server.device();
    assert!(card.gsp_rm().init_done());
    assert_eq!(
        card.gsp_rm().commands(),
        [function::GSP_SET_SYSTEM_INFO, function::SET_REGISTRY]
    );
    assert_eq!(card.gsp_rm().registry().len(), 2);
    assert!(rpc.sequencer_runs().is_empty(), "no script was sent");
}

#[test]
fn the_boot_sequencer_script_is_run_while_init_done_is_awaited() {
    let (server, _dir, mut t, mut rpc) = boot(|s| s.device().send_boot_sequencer());
    rpc.wait_for(&mut t, event::GSP_INIT_DONE, PATIENCE)
        .unwrap();
    let runs = rpc.sequencer_runs();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].commands, 5);
    assert_eq!(
        runs[0].saved[0],
        server.device().chip().boot_42,
        "REG_STORE of BOOT_42"
    );
    assert!(server.device().gsp_rm().init_done());
}

#[test]
fn client_device_and_subdevice_are_allocated_with_real_handles() {
    let (server, _dir, mut t, mut rpc) = boot(|_| {});
    rpc.wait_for(&mut t, event::GSP_INIT_DONE, PATIENCE)
        .unwrap();
    alloc(&mut rpc, &mut t, 0, CLIENT, class::NV01_ROOT, ROOT_PARAMS).unwrap();
    alloc(
        &mut rpc,
        &mut t,
        CLIENT,
        DEVICE,
        class::NV01_DEVICE_0,
        DEVICE_PARAMS,
    )
    .unwrap();
    let p = alloc(
        &mut rpc,
        &mut t,
        DEVICE,
        SUBDEVICE,
        class::NV20_SUBDEVICE_0,
        SUBDEVICE_PARAMS,
    )
    .unwrap();
    assert_eq!(p.len(), SUBDEVICE_PARAMS, "the parameters come back");
    let objects = server.device().gsp_rm().calls().objects.of_client(CLIENT);
    let made: Vec<(u32, u32, u32)> = objects
        .iter()
        .map(|(h, o)| (*h, o.class, o.parent))
        .collect();
    assert_eq!(
        made,
        [
            (DEVICE, class::NV01_DEVICE_0, CLIENT),
            (SUBDEVICE, class::NV20_SUBDEVICE_0, DEVICE)
        ]
    );
    // A control on the subdevice: the engines GSP-RM lists.
    let table = rpc
        .rm_control(&mut t, CLIENT, SUBDEVICE, 0x2080_1112, &[0; 3212])
        .unwrap();
    assert_eq!(u32::from_le_bytes(table[4..8].try_into().unwrap()), 3);
    rpc.rm_free(&mut t, CLIENT, CLIENT, DEVICE).unwrap();
    assert!(server
        .device()
        .gsp_rm()
        .calls()
        .objects
        .of_client(CLIENT)
        .is_empty());
}

#[test]
fn a_bad_parent_is_rms_status_as_a_typed_error() {
    let (_server, _dir, mut t, mut rpc) = boot(|_| {});
    rpc.wait_for(&mut t, event::GSP_INIT_DONE, PATIENCE)
        .unwrap();
    alloc(&mut rpc, &mut t, 0, CLIENT, class::NV01_ROOT, ROOT_PARAMS).unwrap();
    // A subdevice straight under the client, not a device.
    let e = alloc(
        &mut rpc,
        &mut t,
        CLIENT,
        SUBDEVICE,
        class::NV20_SUBDEVICE_0,
        SUBDEVICE_PARAMS,
    )
    .unwrap_err();
    assert_eq!(e.rm_status(), Some(status::INVALID_OBJECT_PARENT), "{e}");
    assert!(
        e.to_string().contains("NV_ERR_INVALID_OBJECT_PARENT"),
        "{e}"
    );
    let e = rpc
        .rm_free(&mut t, CLIENT, CLIENT, 0xCF00_0099)
        .unwrap_err();
    assert_eq!(e.rm_status(), Some(status::OBJECT_NOT_FOUND), "{e}");
    // The conversation goes on after a refusal.
    alloc(
        &mut rpc,
        &mut t,
        CLIENT,
        DEVICE,
        class::NV01_DEVICE_0,
        DEVICE_PARAMS,
    )
    .unwrap();
}

#[test]
fn events_posted_while_a_call_waits_are_kept_for_the_caller() {
    let (server, _dir, mut t, mut rpc) = boot(|_| {});
    rpc.wait_for(&mut t, event::GSP_INIT_DONE, PATIENCE)
        .unwrap();
    let mut rc = vec![0u8; rc_triggered::BYTES];
    rc[rc_triggered::EXCEPT_TYPE..][..4].copy_from_slice(&31u32.to_le_bytes());
    rc[rc_triggered::CHID..][..4].copy_from_slice(&7u32.to_le_bytes());
    let mut card = server.device();
    card.gsp_rm_mut().post_event(event::RC_TRIGGERED, rc);
    card.gsp_rm_mut()
        .post_event(event::MMU_FAULT_QUEUED, vec![]);
    drop(card);
    alloc(&mut rpc, &mut t, 0, CLIENT, class::NV01_ROOT, ROOT_PARAMS).unwrap();
    let notices = rpc.take_notices();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert!(matches!(
        notices[0],
        Notice::RcTriggered {
            xid: 31,
            chid: 7,
            ..
        }
    ));
    assert_eq!(notices[1], Notice::MmuFaultQueued);
}

#[test]
fn a_corrupted_status_message_is_caught_by_its_checksum() {
    let (server, _dir, mut t, mut rpc) = boot(|_| {});
    rpc.wait_for(&mut t, event::GSP_INIT_DONE, PATIENCE)
        .unwrap();
    server.device().inject(DeviceFault::CorruptReply { nth: 1 });
    let e = alloc(&mut rpc, &mut t, 0, CLIENT, class::NV01_ROOT, ROOT_PARAMS).unwrap_err();
    match e {
        RpcError::Checksum {
            function,
            stored,
            computed,
            ..
        } => {
            assert_eq!(function, function::GSP_RM_ALLOC);
            assert_ne!(stored, computed);
        }
        other => panic!("wanted a checksum error, got {other}"),
    }
    // Stepped over, the conversation goes on.
    rpc.queue().discard(&mut t).unwrap();
    alloc(
        &mut rpc,
        &mut t,
        CLIENT,
        DEVICE,
        class::NV01_DEVICE_0,
        DEVICE_PARAMS,
    )
    .unwrap();
}

#[test]
fn gsp_rms_log_buffers_decode_with_the_actors_reader() {
    let (_server, _dir, mut t, mut q) = booted(init_messages);
    q.receive(&mut t, PATIENCE).expect("GSP_INIT_DONE");
    let init = q.log_records(&mut t, b"LOGINIT");
    assert_eq!(init.len(), 2, "linked, then GSP_INIT_DONE");
    assert_eq!(init[1].metadata.format, "GSP_INIT_DONE");
    let rendered = logs::render(init[0].metadata.format, &init[0].args);
    assert!(
        rendered.starts_with("linked the message queues"),
        "{rendered}"
    );
}
