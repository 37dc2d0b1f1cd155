//! GSP-RM as the simulated card plays it, driven over the TinyGPU protocol
//! as a driver drives it: the queues linked once the FMC started the GSP,
//! the pre-queued system info and registry taken, GSP_INIT_DONE posted;
//! and every check RM's receiver makes holding: a bad checksum, a
//! sequence out of order or a wrong element count stops it, and it never
//! writes past the host's read pointer.

use macuda_hw::fsp::nvdm;
use macuda_hw::gsp_rpc::{element, event, function, result, MSG_COUNT};
use macuda_pci::enable_bus_master;
use macuda_pci::tinygpu::TinyGpuTransport;
use macuda_sim::gsp_rm::QueueFault;
use macuda_sim::{Card, Server};
use macuda_tests::sim_host::rpc::{registry_table, HostQueues, Received};
use macuda_tests::sim_host::*;
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(2);

/// A card booted through the FSP with the queues staged and whatever the
/// caller pre-queued (before the COT, as drivers do).
fn booted(
    prequeue: impl FnOnce(&mut HostQueues, &mut TinyGpuTransport),
) -> (
    Server<Card>,
    tempfile::TempDir,
    TinyGpuTransport,
    HostQueues,
) {
    let (server, dir, mut t) = world();
    enable_bus_master(&mut t).unwrap();
    let s = stage(&mut t);
    let mut q = HostQueues::stage(&mut t, &s);
    prequeue(&mut q, &mut t);
    let r = send(&mut t, &cot(&s, &test_key()).encode(), nvdm::COT);
    assert_eq!(r.error_code, 0);
    (server, dir, t, q)
}

fn init_messages(q: &mut HostQueues, t: &mut TinyGpuTransport) {
    q.send(t, function::GSP_SET_SYSTEM_INFO, &[0; 928]);
    q.send(t, function::SET_REGISTRY, &registry_table());
}

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
    q.send(&mut t, function::GET_GSP_STATIC_INFO, &[0; 16]);
    let m = q.receive(&mut t, PATIENCE).expect("a reply");
    assert_eq!(
        (m.function, m.result),
        (function::GET_GSP_STATIC_INFO, result::RPC_UNKNOWN_FUNCTION)
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
