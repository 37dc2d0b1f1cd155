//! The simulated card's engines driven as a driver drives them, over the
//! TinyGPU protocol: a channel allocated through GSP-RM with its ring's VA,
//! its USERD in video memory and its VA space, whose root the driver set
//! with SET_PAGE_DIRECTORY; page tables, ring and push buffer written
//! through BAR1; the doorbell rung through BAR0. The card's PBDMA fetches
//! through the MMU, its copy engine fills memory and its host releases a
//! semaphore, all seen back through BAR1; a ring entry that points where
//! nothing is mapped stops the channel with the MMU's fault.

use macuda_hw::gsp_rpc::{
    event, function, os_error_log, rc_triggered as rc, set_page_directory as spd,
};
use macuda_hw::methods::{copy, host};
use macuda_hw::mmu::{dual_pde, pde, pte, PdeAperture};
use macuda_hw::push::{GpEntry, MethodHeader, SUBCHANNEL_COPY, USERD_GP_GET, USERD_GP_PUT};
use macuda_hw::regs::NV_VIRTUAL_FUNCTION_DOORBELL;
use macuda_hw::rm::control::DEBUG_READ_MMU_FAULT_INFO;
use macuda_hw::rm::{
    address_space, class, ChannelAlloc, MemoryDesc, MmuFaultEntry, Notification, ReadMmuFaultInfo,
    ENGINE_TYPE_GR0, NOTIFICATION_STATUS_ERROR, XID_MMU_FAULT,
};
use macuda_pci::tinygpu::TinyGpuTransport;
use macuda_pci::Transport;
use macuda_sim::channel::ChannelFault;
use macuda_sim::{Card, Server};
use macuda_tests::sim_host::rpc::HostQueues;
use macuda_tests::sim_host::*;
use std::mem::offset_of;
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(2);
const CLIENT: u32 = 0xC1E0_0004;
const DEVICE: u32 = 0x10;
const VA_SPACE: u32 = 0x13;
const CHANNEL: u32 = 0x12;
/// Page tables from video memory 0x1000; one 2 MiB page: VA 0x2000_0000
/// onto video memory 0x20_0000; USERD at 0x8000.
const ROOT: u64 = 0x1000;
const VA: u64 = 0x2000_0000;
const PA: u64 = 0x20_0000;
const USERD: u64 = 0x8000;
/// The channel's error notifier, in video memory.
const NOTIFIER: u64 = 0x9000;
const BAR1: u32 = 1;

fn bar1_write(t: &mut TinyGpuTransport, at: u64, data: &[u8]) {
    t.connection().mmio_write(BAR1, at, data).unwrap();
}

fn bar1_read(t: &mut TinyGpuTransport, at: u64, n: usize) -> Vec<u8> {
    let mut out = vec![0; n];
    t.connection().mmio_read(BAR1, at, &mut out).unwrap();
    out
}

fn call(q: &mut HostQueues, t: &mut TinyGpuTransport, f: u32, payload: &[u8]) -> (u32, Vec<u8>) {
    q.send(t, f, payload);
    let m = q.receive(t, PATIENCE).expect("a reply");
    assert_eq!(m.function, f);
    (m.result, m.payload)
}

/// `rpc_gsp_rm_alloc_v03_00`: client, parent, object, class, status,
/// params size, flags, padding, then the params.
fn alloc(parent: u32, object: u32, class: u32, params: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    for v in [CLIENT, parent, object, class, 0, params.len() as u32, 0, 0] {
        p.extend(v.to_le_bytes());
    }
    p.extend(params);
    p
}

fn put_u32(p: &mut [u8], at: usize, v: u32) {
    p[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(p: &mut [u8], at: usize, v: u64) {
    p[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// `NV_CHANNEL_ALLOC_PARAMS` as tinygrad fills the fields the engines use.
fn channel_params() -> Vec<u8> {
    let mut p = vec![0u8; std::mem::size_of::<ChannelAlloc>()];
    put_u64(&mut p, offset_of!(ChannelAlloc, gp_fifo_offset), VA);
    put_u32(&mut p, offset_of!(ChannelAlloc, gp_fifo_entries), 32);
    put_u32(&mut p, offset_of!(ChannelAlloc, h_va_space), VA_SPACE);
    let userd = offset_of!(ChannelAlloc, userd_mem);
    put_u64(&mut p, userd + offset_of!(MemoryDesc, base), USERD);
    put_u64(&mut p, userd + offset_of!(MemoryDesc, size), 0x200);
    put_u32(
        &mut p,
        userd + offset_of!(MemoryDesc, address_space),
        address_space::FBMEM,
    );
    let notifier = offset_of!(ChannelAlloc, error_notifier_mem);
    put_u64(&mut p, notifier + offset_of!(MemoryDesc, base), NOTIFIER);
    put_u64(&mut p, notifier + offset_of!(MemoryDesc, size), 0x1000);
    put_u32(
        &mut p,
        notifier + offset_of!(MemoryDesc, address_space),
        address_space::FBMEM,
    );
    p
}

/// A booted card with GSP-RM up, the channel allocated and its VA
/// space's root set; page tables and USERD written, zeroed around them.
fn channel_world() -> (
    Server<Card>,
    tempfile::TempDir,
    TinyGpuTransport,
    HostQueues,
) {
    let (server, dir, mut t, mut q) = booted(init_messages);
    q.receive(&mut t, PATIENCE).expect("GSP_INIT_DONE");
    for (parent, object, class, params) in [
        (0, 0xCF00_0000, class::NV01_ROOT, vec![0u8; 120]),
        (CLIENT, DEVICE, class::NV01_DEVICE_0, vec![0u8; 56]),
        (DEVICE, VA_SPACE, class::FERMI_VASPACE_A, vec![0u8; 64]),
        (
            DEVICE,
            CHANNEL,
            class::BLACKWELL_CHANNEL_GPFIFO_A,
            channel_params(),
        ),
    ] {
        let (r, _) = call(
            &mut q,
            &mut t,
            function::GSP_RM_ALLOC,
            &alloc(parent, object, class, &params),
        );
        assert_eq!(r, 0, "{class:#x}");
    }
    let mut spd_payload = vec![0u8; spd::BYTES];
    put_u32(&mut spd_payload, spd::H_CLIENT, CLIENT);
    put_u64(&mut spd_payload, spd::PHYS_ADDRESS, ROOT);
    put_u32(&mut spd_payload, spd::NUM_ENTRIES, 2);
    put_u32(&mut spd_payload, spd::H_VA_SPACE, VA_SPACE);
    let (r, _) = call(&mut q, &mut t, function::SET_PAGE_DIRECTORY, &spd_payload);
    assert_eq!(r, 0);
    // Video memory starts as junk: every table page is zeroed first.
    for page in [0x1000u64, 0x2000, 0x3000, 0x4000, 0x5000, USERD, NOTIFIER] {
        bar1_write(&mut t, page, &[0; 4096]);
    }
    let table = |at: u64| -> [u8; 8] {
        let e = pde::APERTURE.set(0, PdeAperture::Video.encode());
        (pde::ADDRESS.set(e, at >> pde::ADDRESS_SHIFT) as u64).to_le_bytes()
    };
    bar1_write(&mut t, 0x1000, &table(0x2000));
    bar1_write(&mut t, 0x2000, &table(0x3000));
    bar1_write(&mut t, 0x3000, &table(0x4000));
    // VA 0x2000_0000 is PD1 entry 1 and PD0 entry 0: a 2 MiB page there.
    bar1_write(&mut t, 0x4008, &table(0x5000));
    let leaf = pte::ADDRESS.set(
        pte::KIND.set(pte::VALID.set(0, 1), pte::KIND_GENERIC_MEMORY),
        PA >> pte::ADDRESS_SHIFT,
    ) as u64;
    assert_eq!(dual_pde::SIZE, 16);
    bar1_write(&mut t, 0x5000, &leaf.to_le_bytes());
    (server, dir, t, q)
}

fn inc(sc: u8, method: u32, data: &[u32]) -> Vec<u32> {
    let mut w = vec![MethodHeader::incrementing(sc, method, data.len() as u16)
        .unwrap()
        .encode()];
    w.extend_from_slice(data);
    w
}

/// Queue `words` as ring entry `n` (segment at VA + 0x1000 * (n + 1)),
/// move GP_PUT past it and ring the doorbell with the channel's token.
fn submit(t: &mut TinyGpuTransport, n: u32, segment: u64, words: &[u32], token: u32) {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    bar1_write(t, segment - VA + PA, &bytes);
    let entry = GpEntry::subroutine(segment, words.len() as u32)
        .unwrap()
        .encode();
    bar1_write(t, PA + u64::from(n) * 8, &entry.to_le_bytes());
    bar1_write(t, USERD + USERD_GP_PUT, &(n + 1).to_le_bytes());
    t.mmio_write32(u64::from(NV_VIRTUAL_FUNCTION_DOORBELL::ADDR), token)
        .unwrap();
}

fn wait_for(t: &mut TinyGpuTransport, at: u64, want: &[u8]) -> bool {
    let end = Instant::now() + PATIENCE;
    while Instant::now() < end {
        if bar1_read(t, at, want.len()) == want {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

#[test]
fn a_channel_rung_through_the_doorbell_fills_memory_and_releases_its_semaphore() {
    let (server, _dir, mut t, mut q) = channel_world();
    // The work submit token GSP-RM hands out for the channel.
    let mut ctrl = Vec::new();
    for v in [CLIENT, CHANNEL, 0xC36F_0108, 0, 4, 0] {
        ctrl.extend(u32::to_le_bytes(v));
    }
    ctrl.extend([0; 4]);
    let (r, reply) = call(&mut q, &mut t, function::GSP_RM_CONTROL, &ctrl);
    assert_eq!(r, 0);
    let token = u32::from_le_bytes(reply[24..28].try_into().unwrap());
    let (fill_at, sem_at) = (VA + 0x4_0000, VA + 0x3_0000);
    let mut w = inc(
        SUBCHANNEL_COPY,
        host::SET_OBJECT::BYTE_OFFSET,
        &[copy::BLACKWELL_DMA_COPY_B],
    );
    w.extend(inc(
        SUBCHANNEL_COPY,
        copy::SET_REMAP_CONST_A::BYTE_OFFSET,
        &[0xDEAD_BEEF],
    ));
    w.extend(inc(
        SUBCHANNEL_COPY,
        copy::OFFSET_OUT_UPPER::BYTE_OFFSET,
        &[0, fill_at as u32],
    ));
    w.extend(inc(
        SUBCHANNEL_COPY,
        copy::LINE_LENGTH_IN::BYTE_OFFSET,
        &[16],
    ));
    w.extend(inc(
        SUBCHANNEL_COPY,
        copy::LAUNCH_DMA::BYTE_OFFSET,
        &[copy::LAUNCH_DMA::DATA_TRANSFER_TYPE_NON_PIPELINED
            | copy::LAUNCH_DMA::REMAP_ENABLE_TRUE << 10],
    ));
    let release = host::SEM_EXECUTE::OPERATION_RELEASE
        | host::SEM_EXECUTE::RELEASE_WFI_EN << 20
        | host::SEM_EXECUTE::PAYLOAD_SIZE_64BIT << 24;
    w.extend(inc(
        0,
        host::SEM_ADDR_LO::BYTE_OFFSET,
        &[sem_at as u32, 0, 0x9ABC, 0x1234, release],
    ));
    // Not fetched before the doorbell.
    bar1_write(&mut t, sem_at - VA + PA, &[0; 8]);
    submit(&mut t, 0, VA + 0x1000, &w, token);
    assert!(
        wait_for(&mut t, sem_at - VA + PA, &0x1234_0000_9ABCu64.to_le_bytes()),
        "the release never landed: {:?}",
        server.device().channel_fault(token)
    );
    let filled = bar1_read(&mut t, fill_at - VA + PA, 64);
    assert!(filled.chunks(4).all(|c| c == 0xDEAD_BEEFu32.to_le_bytes()));
    assert_eq!(
        bar1_read(&mut t, USERD + USERD_GP_GET, 4),
        1u32.to_le_bytes(),
        "GP_GET moved"
    );
    assert!(server.device().channel_fault(token).is_none());
    // An entry whose segment lies where nothing is mapped: the channel
    // stops with the MMU's fault, typed as the GPU types it (PDE).
    let bad = GpEntry::subroutine(0x7000_0000, 4).unwrap().encode();
    bar1_write(&mut t, PA + 8, &bad.to_le_bytes());
    bar1_write(&mut t, USERD + USERD_GP_PUT, &2u32.to_le_bytes());
    t.mmio_write32(u64::from(NV_VIRTUAL_FUNCTION_DOORBELL::ADDR), token)
        .unwrap();
    // Posted writes travel with the next request that waits for a reply.
    bar1_read(&mut t, USERD, 4);
    let end = Instant::now() + PATIENCE;
    let fault = loop {
        if let Some(f) = server.device().channel_fault(token).cloned() {
            break f;
        }
        assert!(Instant::now() < end, "no fault");
        std::thread::sleep(Duration::from_millis(2));
    };
    assert!(
        matches!(&fault, ChannelFault::Mmu { engine: "host (push buffer)", fault, .. } if fault.fault_type() == 0),
        "{fault}"
    );
    // RM wrote the channel's error notifier: Xid 31 on the graphics
    // engine, the status last.
    let slot = bar1_read(&mut t, NOTIFIER, std::mem::size_of::<Notification>());
    let field = |at: usize, n: usize| slot[at..at + n].to_vec();
    assert_eq!(
        field(offset_of!(Notification, info32), 4),
        XID_MMU_FAULT.to_le_bytes()
    );
    assert_eq!(
        field(offset_of!(Notification, info16), 2),
        (ENGINE_TYPE_GR0 as u16).to_le_bytes()
    );
    assert_eq!(
        field(offset_of!(Notification, status), 2),
        NOTIFICATION_STATUS_ERROR.to_le_bytes()
    );
    // GSP-RM tells the driver: RC_TRIGGERED with the channel, Xid 31, the
    // address and the fault's type.
    let m = q.receive(&mut t, PATIENCE).expect("RC_TRIGGERED");
    assert_eq!(m.function, event::RC_TRIGGERED);
    let word = |at: usize| u32::from_le_bytes(m.payload[at..at + 4].try_into().unwrap());
    assert_eq!(
        (
            word(rc::CHID),
            word(rc::EXCEPT_TYPE),
            word(rc::MMU_FAULT_ADDR_LO),
            word(rc::MMU_FAULT_ADDR_HI),
            word(rc::MMU_FAULT_TYPE)
        ),
        (token, XID_MMU_FAULT, 0x7000_0000, 0, 0)
    );
    // And the Xid's line of text, for the driver's log.
    let m = q.receive(&mut t, PATIENCE).expect("OS_ERROR_LOG");
    assert_eq!(m.function, event::OS_ERROR_LOG);
    assert_eq!(m.payload.len(), os_error_log::BYTES);
    let word = |at: usize| u32::from_le_bytes(m.payload[at..at + 4].try_into().unwrap());
    assert_eq!(
        (word(os_error_log::EXCEPT_TYPE), word(os_error_log::CHID)),
        (XID_MMU_FAULT, token)
    );
    let text = &m.payload[os_error_log::ERR_STRING..];
    let text = String::from_utf8_lossy(&text[..text.iter().position(|&b| b == 0).unwrap()]);
    assert!(
        text.starts_with("Xid 31, channel 0: the host (push buffer) faulted"),
        "{text}"
    );
    // GSP-RM's own log (LOGRM) has the line too.
    let want = [u64::from(token), u64::from(XID_MMU_FAULT)];
    let stopped = |q: &HostQueues, t: &mut TinyGpuTransport| {
        q.log_records(t, b"LOGRM")
            .iter()
            .any(|r| r.metadata.format.starts_with("channel %u stopped") && r.args == want)
    };
    let end = Instant::now() + PATIENCE;
    while !stopped(&q, &mut t) {
        assert!(Instant::now() < end, "LOGRM never said the channel stopped");
        std::thread::sleep(Duration::from_millis(2));
    }
    // A token RM never handed out is ignored.
    t.mmio_write32(u64::from(NV_VIRTUAL_FUNCTION_DOORBELL::ADDR), 77)
        .unwrap();
    bar1_read(&mut t, USERD, 4);
    assert!(server.device().channel(77).is_none());
    assert!(server.device().channel_fault(77).is_none());
}

/// The token of the channel `channel_world` made (its first: 0), a
/// 64-bit release of `value` at `sem_at` queued as entry `n`, and the
/// doorbell rung.
fn release(t: &mut TinyGpuTransport, n: u32, sem_at: u64, value: u64) {
    let exec = host::SEM_EXECUTE::OPERATION_RELEASE | host::SEM_EXECUTE::PAYLOAD_SIZE_64BIT << 24;
    let w = inc(
        0,
        host::SEM_ADDR_LO::BYTE_OFFSET,
        &[sem_at as u32, 0, value as u32, (value >> 32) as u32, exec],
    );
    submit(t, n, VA + 0x1000 * u64::from(n + 1), &w, 0);
}

#[test]
fn a_dropped_doorbell_leaves_the_work_queued_until_the_next_one() {
    use macuda_sim::faults::DeviceFault;
    let (server, _dir, mut t, _q) = channel_world();
    let sem_at = VA + 0x3_0000;
    bar1_write(&mut t, sem_at - VA + PA, &[0; 8]);
    server.device().inject(DeviceFault::DropDoorbell { nth: 1 });
    release(&mut t, 0, sem_at, 5);
    // Ticks go by: nothing fetches an entry without a doorbell.
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(bar1_read(&mut t, sem_at - VA + PA, 8), [0; 8]);
    assert_eq!(server.device().faults().struck.len(), 1);
    t.mmio_write32(u64::from(NV_VIRTUAL_FUNCTION_DOORBELL::ADDR), 0)
        .unwrap();
    assert!(wait_for(&mut t, sem_at - VA + PA, &5u64.to_le_bytes()));
}

#[test]
fn hung_engines_run_nothing_and_an_injected_address_faults_in_the_mmu() {
    use macuda_sim::faults::DeviceFault;
    let (server, _dir, mut t, _q) = channel_world();
    let sem_at = VA + 0x3_0000;
    bar1_write(&mut t, sem_at - VA + PA, &[0; 8]);
    server.device().inject(DeviceFault::HangEngines);
    release(&mut t, 0, sem_at, 6);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(bar1_read(&mut t, sem_at - VA + PA, 8), [0; 8], "hung");
    assert!(
        server.device().channel_fault(0).is_none(),
        "hung is not faulted"
    );
    // A fresh card: the semaphore's page faults, whatever the tables say.
    let (server, _dir, mut t, mut q) = channel_world();
    server
        .device()
        .inject(DeviceFault::FaultAddress { va: sem_at });
    release(&mut t, 0, sem_at, 7);
    bar1_read(&mut t, USERD, 4);
    let end = Instant::now() + PATIENCE;
    let fault = loop {
        if let Some(f) = server.device().channel_fault(0).cloned() {
            break f;
        }
        assert!(Instant::now() < end, "no fault");
        std::thread::sleep(Duration::from_millis(2));
    };
    assert!(
        matches!(&fault, ChannelFault::Mmu { engine: "host (semaphore)", fault, .. } if fault.fault_type() == 2),
        "{fault}"
    );
    let m = q.receive(&mut t, PATIENCE).expect("RC_TRIGGERED");
    assert_eq!(m.function, event::RC_TRIGGERED);
    let m = q.receive(&mut t, PATIENCE).expect("OS_ERROR_LOG");
    assert_eq!(m.function, event::OS_ERROR_LOG);
    // A debugger of the client reads it back once: the address, PTE, a
    // write.
    let (r, _) = call(
        &mut q,
        &mut t,
        function::GSP_RM_ALLOC,
        &alloc(DEVICE, 0x20, class::GT200_DEBUGGER, &[0; 8]),
    );
    assert_eq!(r, 0);
    let read = |q: &mut HostQueues, t: &mut TinyGpuTransport| {
        let mut ctrl = Vec::new();
        let size = std::mem::size_of::<ReadMmuFaultInfo>() as u32;
        for v in [CLIENT, 0x20, DEBUG_READ_MMU_FAULT_INFO, 0, size, 0] {
            ctrl.extend(u32::to_le_bytes(v));
        }
        ctrl.extend(vec![0u8; size as usize]);
        let (r, reply) = call(q, t, function::GSP_RM_CONTROL, &ctrl);
        assert_eq!(r, 0);
        reply[24..].to_vec()
    };
    let info = read(&mut q, &mut t);
    let u32_at = |at: usize| u32::from_le_bytes(info[at..at + 4].try_into().unwrap());
    assert_eq!(u32_at(offset_of!(ReadMmuFaultInfo, count)), 1);
    let e = offset_of!(ReadMmuFaultInfo, entries);
    assert_eq!(
        u64::from_le_bytes(info[e..e + 8].try_into().unwrap()),
        sem_at
    );
    assert_eq!(u32_at(e + offset_of!(MmuFaultEntry, fault_type)), 2, "PTE");
    assert_eq!(
        u32_at(e + offset_of!(MmuFaultEntry, access_type)),
        1,
        "WRITE"
    );
    let again = read(&mut q, &mut t);
    assert_eq!(
        &again[offset_of!(ReadMmuFaultInfo, count)..][..4],
        [0; 4],
        "read once"
    );
}
