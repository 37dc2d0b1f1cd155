//! Faults injected into the simulated card at the bus and in GSP-RM, seen
//! as a driver sees them over the TinyGPU protocol: a card off the bus
//! reads all ones everywhere (configuration space too) and a reset does
//! not bring it back; a corrupted GSP-RM message is caught by the gsp
//! actor's receiver by its checksum, and the next is whole again.

use macuda_gsp::bare::RpcError;
use macuda_hw::gsp_rpc::{event, function};
use macuda_hw::pci::{offset, Width};
use macuda_hw::regs::NV_PMC_BOOT_0;
use macuda_pci::tinygpu::TinyGpuTransport;
use macuda_pci::{enable_bus_master, Transport};
use macuda_sim::faults::DeviceFault;
use macuda_tests::sim_host::rpc::{registry_table, HostQueues};
use macuda_tests::sim_host::*;
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(2);

fn boot_0(t: &mut TinyGpuTransport) -> u32 {
    t.mmio_read32(u64::from(NV_PMC_BOOT_0::ADDR)).unwrap()
}

#[test]
fn a_card_off_the_bus_reads_all_ones_and_no_reset_brings_it_back() {
    let (server, _dir, mut t) = world();
    let chip = server.device().chip().boot_0;
    assert_eq!(boot_0(&mut t), chip);
    server.device().inject(DeviceFault::OffTheBus);
    assert_eq!(boot_0(&mut t), u32::MAX);
    assert_eq!(
        t.config_read(offset::VENDOR_ID, Width::U16).unwrap(),
        0xFFFF,
        "the vendor id"
    );
    t.mmio_write32(0x1704, 0x1234).unwrap();
    assert_eq!(
        t.mmio_read32(0x1704).unwrap(),
        u32::MAX,
        "writes go nowhere"
    );
    t.function_reset().unwrap();
    assert_eq!(boot_0(&mut t), u32::MAX, "still gone after a reset");
    // Our stack's identification names it for what it is.
    let e = macuda_pci::read_identity(&mut t).unwrap_err();
    assert!(
        matches!(
            e,
            macuda_pci::PciError::OffTheBus {
                what: "configuration space"
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("fallen off the bus"), "{e}");
}

#[test]
fn a_corrupted_gsp_rm_message_fails_its_checksum_and_the_next_is_whole() {
    let (server, _dir, mut t) = world();
    enable_bus_master(&mut t).unwrap();
    let s = stage(&mut t);
    let mut q = HostQueues::stage(&mut t, &s);
    q.send(&mut t, function::GSP_SET_SYSTEM_INFO, &[0; 928]);
    q.send(&mut t, function::SET_REGISTRY, &registry_table());
    server.device().inject(DeviceFault::CorruptReply { nth: 1 });
    let r = send(
        &mut t,
        &cot(&s, &test_key()).encode(),
        macuda_hw::fsp::nvdm::COT,
    );
    assert_eq!(r.error_code, 0);
    // The gsp actor's receiver names what is wrong, with both values.
    match q.receive_checked(&mut t, PATIENCE) {
        Err(RpcError::Checksum {
            seq: 0,
            function,
            stored,
            computed,
        }) => {
            assert_eq!(function, event::GSP_INIT_DONE);
            assert_ne!(stored, computed, "the corrupted message's checksum");
        }
        other => panic!("wanted a checksum error on GSP_INIT_DONE, got {other:?}"),
    }
    // Stepped over, the next message goes out whole: a call's reply.
    q.discard(&mut t).unwrap();
    q.send(&mut t, function::NOP, &[]);
    let m = q.receive_checked(&mut t, PATIENCE).expect("a reply");
    assert_eq!((m.seq, m.function), (1, function::NOP));
}
