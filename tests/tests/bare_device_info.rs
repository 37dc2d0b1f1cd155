//! The golden context's first control on a card we booted: after
//! `boot_through_fsp`, a client's first objects, then the FIFO
//! device-info table read from the subdevice, with the runlists of the
//! graphics/compute engine and the first copy engine; then
//! COPY_SERVER_RESERVED_PDES on the VA space.

use macuda_gsp::bare::device_info::read_device_info;
use macuda_gsp::bare::reserved_pdes::{copy_server_reserved_pdes, ReservedPdesError, WINDOW_BYTES};
use macuda_gsp::bare::{
    alloc_client_objects, boot_through_fsp, BootPatience, ClientObjects, TablesOwner,
};
use macuda_pci::enable_bus_master;
use macuda_pci::tinygpu::TinyGpuOpener;
use macuda_sim::{Card, Listen, Server};
use macuda_tests::sim_host::{card_trusting_the_test_key, test_firmware};
use std::time::Duration;

#[test]
fn the_device_info_table_names_graphics_and_copy_runlists() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &Listen::Unix(dir.path().join("s.sock")),
        Card::new(card_trusting_the_test_key()),
    )
    .unwrap();
    let mut t = TinyGpuOpener::new(server.endpoint(), macuda_pci::TRANSPORT_TIMEOUT)
        .connect()
        .unwrap();
    enable_bus_master(&mut t).unwrap();
    let patience = BootPatience {
        card_boot: Duration::from_secs(2),
        fsp_answer: Duration::from_secs(2),
        gsp_start: Duration::from_secs(2),
        queue_link: Duration::from_secs(2),
        init_done: Duration::from_secs(2),
        bar1_bind: Duration::from_millis(200),
    };
    let mut rpc = boot_through_fsp(&mut t, &test_firmware(), &patience)
        .unwrap()
        .rpc;
    let h = ClientObjects {
        client: 0xC1E0_0012,
        device: 0xC1E0_0013,
        subdevice: 0xC1E0_0014,
        va_space: 0xC1E0_0015,
    };
    alloc_client_objects(&mut rpc, &mut t, h, TablesOwner::Driver).unwrap();
    let table = read_device_info(&mut rpc, &mut t, h.client, h.subdevice).unwrap();
    assert!(!table.entries.is_empty());
    assert!(table.graphics_runlist().is_some(), "{table:?}");
    assert!(table.copy_runlist().is_some(), "{table:?}");
    // The sim takes the control on a VA space (it does not check the
    // levels); on any other object RM refuses it, typed.
    let tables = [0x20_0000, 0x20_1000, 0x20_2000, 0x20_3000];
    copy_server_reserved_pdes(
        &mut rpc,
        &mut t,
        h.client,
        h.subdevice,
        h.va_space,
        WINDOW_BYTES,
        &tables,
    )
    .unwrap();
    assert!(matches!(
        copy_server_reserved_pdes(
            &mut rpc,
            &mut t,
            h.client,
            h.subdevice,
            h.subdevice,
            WINDOW_BYTES,
            &tables
        ),
        Err(ReservedPdesError::Rpc(_))
    ));
    drop(server);
}
