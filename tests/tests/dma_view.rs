//! The CPU's own view of host memory the card reaches by DMA: over a
//! unix socket TinyGPU shares the memory with the server, so bytes
//! written through the view are what `dma_read` and the card see, and the
//! view outlives the transport; over TCP the memory is on the server's
//! host and there is no view, only messages.

use macuda_pci::tinygpu::TinyGpuOpener;
use macuda_pci::{DmaView, Transport};
use macuda_sim::{Card, Listen, Server};
use macuda_tests::sim_host::card_trusting_the_test_key;
use std::time::Duration;

fn serve(listen: Listen) -> Server<Card> {
    Server::start(&listen, Card::new(card_trusting_the_test_key())).unwrap()
}

fn write_through(view: &DmaView, offset: usize, data: &[u8]) {
    assert!(offset + data.len() <= view.len());
    // SAFETY: inside the view (checked); a raw copy, as the view asks.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), view.as_ptr().add(offset), data.len()) };
}

fn read_through(view: &DmaView, offset: usize, len: usize) -> Vec<u8> {
    assert!(offset + len <= view.len());
    let mut out = vec![0u8; len];
    // SAFETY: inside the view (checked).
    unsafe { std::ptr::copy_nonoverlapping(view.as_ptr().add(offset), out.as_mut_ptr(), len) };
    out
}

#[test]
fn over_a_unix_socket_the_view_is_the_memory_the_transport_and_card_share() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(Listen::Unix(dir.path().join("s.sock")));
    let mut t = TinyGpuOpener::new(server.endpoint(), Duration::from_secs(2))
        .connect()
        .unwrap();
    let region = t.alloc_dma(64 << 10).unwrap();
    let view = t
        .dma_view(region.id)
        .unwrap()
        .expect("shared memory has a view");
    assert!(view.len() as u64 >= region.bytes);
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 11 % 251) as u8).collect();
    write_through(&view, 0x1230, &data);
    let mut back = vec![0u8; data.len()];
    t.dma_read(region.id, 0x1230, &mut back).unwrap();
    assert_eq!(back, data);
    // The other way, and what the card reads at the region's bus address.
    t.dma_write(region.id, 0x8000, &[0x5A; 64]).unwrap();
    assert_eq!(read_through(&view, 0x8000, 64), vec![0x5A; 64]);
    let bus = region.bus_addr(0x1230).unwrap();
    let mut seen = vec![0u8; data.len()];
    server.device().host().dma_read(bus, &mut seen).unwrap();
    assert_eq!(seen, data);
    // The view keeps the mapping after the transport is gone.
    drop(t);
    assert_eq!(read_through(&view, 0x1230, 16), data[..16]);
    // An unknown region is an error, not a view.
    let mut t = TinyGpuOpener::new(server.endpoint(), Duration::from_secs(2))
        .connect()
        .unwrap();
    assert!(t.dma_view(region.id).is_err());
}

#[test]
fn over_tcp_there_is_no_view_only_messages() {
    let server = serve(Listen::Tcp(0));
    let mut t = TinyGpuOpener::new(server.endpoint(), Duration::from_secs(2))
        .connect()
        .unwrap();
    let region = t.alloc_dma(8 << 10).unwrap();
    assert!(t.dma_view(region.id).unwrap().is_none());
    t.dma_write(region.id, 0, &[1, 2, 3]).unwrap();
    let mut back = [0u8; 3];
    t.dma_read(region.id, 0, &mut back).unwrap();
    assert_eq!(back, [1, 2, 3]);
}
