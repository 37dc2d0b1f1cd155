//! The whole stack on a real GPU through NVIDIA's kernel module (no libcuda
//! in the process): the Host's actors, our loader and our submit, kernels
//! from our own CUDA fixtures. Every test needs /dev/nvidiactl and is
//! ignored unless asked for (`--include-ignored`, as tests/device/run.sh
//! does); the same paths run against the fake of the module in
//! kernel_host.rs everywhere.

use macuda_gsp::kernel::CTL_NODE;
use macuda_loader::{FunctionInfo, ModuleId};
use macuda_pci::DeviceSpec;
use macuda_submit::{KernelId, LaneItem, LaunchRecord, StreamId, SubmitError};
use macuda_supervisor::{Host, HostConfig, HostError};
use std::time::{Duration, Instant};

/// The stack on the GPU; asked for without the module, a failure.
fn gpu() -> Host {
    gpu_with(|_| {})
}

/// As [`gpu`], with the config changed first.
fn gpu_with(change: impl FnOnce(&mut HostConfig)) -> Host {
    assert!(
        std::path::Path::new(CTL_NODE).exists(),
        "{CTL_NODE} is absent: this test needs NVIDIA's kernel module and a GPU"
    );
    let mut config = HostConfig::new(DeviceSpec::Kernel { index: 0 });
    config.deadline = Duration::from_secs(30);
    // A faulted channel is reported well before this; a healthy one
    // finishes far sooner.
    config.submit.sync_timeout = Duration::from_secs(5);
    config.report_dir = std::env::temp_dir().join("macuda-gpu-test-reports");
    change(&mut config);
    let host = Host::start(config).expect("the stack opens the GPU");
    eprintln!("{}", host.device_line());
    host
}

fn fixture(name: &str) -> Vec<u8> {
    // From the tests crate (cargo test) or the repository root (run.sh).
    ["cuda/fixtures", "tests/cuda/fixtures"]
        .iter()
        .find_map(|d| std::fs::read(format!("{d}/{name}")).ok())
        .unwrap_or_else(|| panic!("fixture {name}"))
}

struct Kernel {
    module: ModuleId,
    id: KernelId,
    info: FunctionInfo,
}

fn kernel(host: &Host, fatbin: &str, name: &str) -> Kernel {
    let sm = host.device().chip.chip.sm();
    let module = host
        .call(|s| s.loader.load_module(fixture(fatbin), sm))
        .unwrap();
    let info = host
        .call(|s| s.loader.function(module, name.to_string()))
        .unwrap();
    let id = host
        .call(|s| s.submit.register_kernel(info.kernel_desc()))
        .unwrap();
    Kernel { module, id, info }
}

fn record(k: &Kernel, grid: [u32; 3], block: [u32; 3], args: &[&[u8]]) -> LaunchRecord {
    LaunchRecord {
        kernel: k.id,
        grid,
        block,
        dynamic_shared_bytes: 0,
        params: k.info.marshal(args).unwrap(),
    }
}

fn floats(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn to_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn to_u32(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// c = a + b over `n` floats, checked against the CPU; returns the time
/// from the launch to the sync's return.
fn vector_add(host: &Host, k: &Kernel, stream: StreamId, n: usize) -> Duration {
    let bytes = (n * 4) as u64;
    let [a, b, c] = [0, 1, 2].map(|_| host.call(|s| s.memory.alloc_device(bytes)).unwrap());
    let av: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let bv: Vec<f32> = (0..n).map(|i| 1.0 - (i % 1000) as f32).collect();
    host.call(|s| s.memory.write_device(a.va, floats(&av)))
        .unwrap();
    host.call(|s| s.memory.write_device(b.va, floats(&bv)))
        .unwrap();
    host.call(|s| s.memory.write_device(c.va, vec![0xFF; n * 4]))
        .unwrap();
    let ni = i32::try_from(n).unwrap();
    let grid = [u32::try_from(n.div_ceil(256)).unwrap(), 1, 1];
    let l = record(
        k,
        grid,
        [256, 1, 1],
        &[
            &a.va.to_le_bytes(),
            &b.va.to_le_bytes(),
            &c.va.to_le_bytes(),
            &ni.to_le_bytes(),
        ],
    );
    let started = Instant::now();
    host.call(|s| s.submit.launch(stream, l)).unwrap();
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    let took = started.elapsed();
    let out = to_f32(&host.call(|s| s.memory.read_device(c.va, bytes)).unwrap());
    let wrong = (0..n).filter(|&i| out[i] != av[i] + bv[i]).count();
    assert_eq!(wrong, 0, "{wrong} of {n} floats differ from the CPU's");
    for buf in [a, b, c] {
        host.call(|s| s.memory.free_device(buf.va)).unwrap();
    }
    took
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn vector_add_of_16m_floats_runs_through_loader_and_submit_and_matches_the_cpu() {
    let host = gpu();
    let k = kernel(&host, "vector_add.size.fatbin", "vector_add");
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let took = vector_add(&host, &k, stream, 16 << 20);
    eprintln!("vector_add of 16M floats matched the CPU; launch to sync {took:?}");
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn a_kernel_reading_block_and_grid_dimensions_sees_the_launch() {
    let host = gpu();
    let k = kernel(&host, "dims.size.fatbin", "dims");
    let (grid, block) = ([3u32, 2, 2], [4u32, 2, 2]);
    let threads = (block.iter().product::<u32>() * grid.iter().product::<u32>()) as usize;
    let out = host
        .call(|s| s.memory.alloc_device((threads * 32) as u64))
        .unwrap();
    host.call(|s| s.memory.write_device(out.va, vec![0xEE; threads * 32]))
        .unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    host.call(|s| {
        s.submit
            .launch(stream, record(&k, grid, block, &[&out.va.to_le_bytes()]))
    })
    .unwrap();
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    let got = to_u32(
        &host
            .call(|s| s.memory.read_device(out.va, (threads * 32) as u64))
            .unwrap(),
    );
    let per_block = block.iter().product::<u32>();
    for t in 0..grid.iter().product::<u32>() {
        for l in 0..per_block {
            let at = 8 * (t * per_block + l) as usize;
            assert_eq!(
                &got[at..at + 8],
                &[block[0], block[1], block[2], grid[0], grid[1], grid[2], t, l],
                "block {t} thread {l}"
            );
        }
    }
    eprintln!("dims: {threads} threads each saw blockDim {block:?} and gridDim {grid:?}");
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn a_constant_table_in_bank_3_and_a_relocated_table_in_bank_4_give_the_right_results() {
    let host = gpu();
    let k = kernel(&host, "banks.size.fatbin", "scale_by_table");
    let table = host
        .call(|s| s.loader.global(k.module, "scale_table".into()))
        .unwrap();
    let calls = host
        .call(|s| s.loader.global(k.module, "calls".into()))
        .unwrap();
    let scale: Vec<f32> = (0..64).map(|i| 1.0 + i as f32 / 8.0).collect();
    host.call(|s| s.memory.write_device(table.address, floats(&scale)))
        .unwrap();
    host.call(|s| s.memory.write_device(calls.address, vec![0; 4]))
        .unwrap();
    let n = 10_000usize;
    let input: Vec<f32> = (0..n).map(|i| i as f32 - 5000.0).collect();
    let (src, dst) = (
        host.call(|s| s.memory.alloc_device((n * 4) as u64))
            .unwrap(),
        host.call(|s| s.memory.alloc_device((n * 4) as u64))
            .unwrap(),
    );
    host.call(|s| s.memory.write_device(src.va, floats(&input)))
        .unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let ni = i32::try_from(n).unwrap();
    for _ in 0..3 {
        host.call(|s| {
            s.submit.launch(
                stream,
                record(
                    &k,
                    [u32::try_from(n.div_ceil(128)).unwrap(), 1, 1],
                    [128, 1, 1],
                    &[
                        &src.va.to_le_bytes(),
                        &dst.va.to_le_bytes(),
                        &ni.to_le_bytes(),
                    ],
                ),
            )
        })
        .unwrap();
    }
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    let lookup = [3u16, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3];
    let out = to_f32(
        &host
            .call(|s| s.memory.read_device(dst.va, (n * 4) as u64))
            .unwrap(),
    );
    for i in 0..n {
        let want = input[i] * scale[i % 64] + f32::from(lookup[i % 16]);
        assert_eq!(out[i], want, "element {i}");
    }
    let counted = to_u32(
        &host
            .call(|s| s.memory.read_device(calls.address, 4))
            .unwrap(),
    );
    assert_eq!(counted[0], 3, "the __device__ counter saw each launch once");
    eprintln!("banks: {n} results from the bank-3 table and the relocated bank-4 table match; the device counter reads 3");
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn a_gib_goes_host_to_device_to_device_to_host_through_the_copy_engine_byte_exact() {
    let host = gpu();
    const GIB: u64 = 1 << 30;
    let src = host.call(|s| s.memory.alloc_host(GIB)).unwrap();
    let back = host.call(|s| s.memory.alloc_host(GIB)).unwrap();
    let d1 = host.call(|s| s.memory.alloc_device(GIB)).unwrap();
    let d2 = host.call(|s| s.memory.alloc_device(GIB)).unwrap();
    let (sv, bv) = (src.view.clone().unwrap(), back.view.clone().unwrap());
    let pattern: Vec<u8> = (0..GIB / 8)
        .flat_map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes())
        .collect();
    sv.write(0, &pattern).unwrap();
    bv.write(0, &vec![0x5A; GIB as usize]).unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    let started = Instant::now();
    for (from, to) in [
        (src.va.unwrap(), d1.va),
        (d1.va, d2.va),
        (d2.va, back.va.unwrap()),
    ] {
        lane.push(LaneItem::Copy {
            stream,
            src: from,
            dst: to,
            bytes: GIB,
        })
        .unwrap();
    }
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    let took = started.elapsed();
    let mut got = vec![0u8; GIB as usize];
    bv.read(0, &mut got).unwrap();
    assert!(got == pattern, "the GiB came back different");
    eprintln!("1 GiB pinned host -> device -> device -> pinned host, byte-exact, in {took:?}");
}

/// The copy channel in a channel group of its own on copy engine 2, as
/// CUDA places its copies: inputs copied in, a kernel ordered after them
/// on the compute channel (another group), its output copied out after it,
/// all on one stream, and the result as the CPU computes it.
#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn copies_on_a_copy_engine_of_their_own_order_with_kernels_on_the_compute_channel() {
    let host = gpu_with(|c| {
        c.submit.copy_placement = macuda_gsp::CopyPlacement::CopyEngine(2);
    });
    let ch = host.call(|s| s.submit.channels()).unwrap();
    assert_ne!(
        ch.group, ch.copy_group,
        "the copy channel has its own group"
    );
    let k = kernel(&host, "vector_add.size.fatbin", "vector_add");
    let n: usize = 16 << 20;
    let bytes = (n * 4) as u64;
    let av: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    let bv: Vec<f32> = (0..n).map(|i| 3.0 - (i % 777) as f32).collect();
    let [ha, hb, hc] = [0, 1, 2].map(|_| host.call(|s| s.memory.alloc_host(bytes)).unwrap());
    let [da, db, dc] = [0, 1, 2].map(|_| host.call(|s| s.memory.alloc_device(bytes)).unwrap());
    ha.view.as_ref().unwrap().write(0, &floats(&av)).unwrap();
    hb.view.as_ref().unwrap().write(0, &floats(&bv)).unwrap();
    hc.view
        .as_ref()
        .unwrap()
        .write(0, &vec![0xFF; n * 4])
        .unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    let copy = |src: u64, dst: u64| {
        lane.push(LaneItem::Copy {
            stream,
            src,
            dst,
            bytes,
        })
        .unwrap()
    };
    let started = Instant::now();
    copy(ha.va.unwrap(), da.va);
    copy(hb.va.unwrap(), db.va);
    let ni = i32::try_from(n).unwrap();
    let grid = [u32::try_from(n.div_ceil(256)).unwrap(), 1, 1];
    let l = record(
        &k,
        grid,
        [256, 1, 1],
        &[
            &da.va.to_le_bytes(),
            &db.va.to_le_bytes(),
            &dc.va.to_le_bytes(),
            &ni.to_le_bytes(),
        ],
    );
    host.call(|s| s.submit.launch(stream, l)).unwrap();
    copy(dc.va, hc.va.unwrap());
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    let took = started.elapsed();
    let mut got = vec![0u8; n * 4];
    hc.view.as_ref().unwrap().read(0, &mut got).unwrap();
    let out = to_f32(&got);
    let wrong = (0..n).filter(|&i| out[i] != av[i] + bv[i]).count();
    assert_eq!(wrong, 0, "{wrong} of {n} floats differ from the CPU's");
    eprintln!(
        "copy group {:#x} on copy engine 2: 2 copies in, vector_add of 16M floats, 1 copy out, as the CPU computes, in {took:?}",
        ch.copy_group.0
    );
}

/// Sizes on either side of the page-size boundaries: each must map (RM's
/// memory and the VA we took for it with the same page size) and carry its
/// bytes through the copy engine both ways.
#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn device_allocations_of_sizes_around_the_page_boundaries_map_and_copy_byte_exact() {
    let host = gpu();
    const MIB: u64 = 1 << 20;
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    for bytes in [
        1,
        4095,
        64 << 10 | 1,
        2 * MIB - 1,
        2 * MIB + 1,
        8_384_768,
        8 * MIB - 1,
        8 * MIB,
        8 * MIB + 1,
        100 * MIB + 3,
    ] {
        let d = host
            .call(|s| s.memory.alloc_device(bytes))
            .unwrap_or_else(|e| panic!("cudaMalloc-like allocation of {bytes} bytes: {e}"));
        let src = host.call(|s| s.memory.alloc_host(bytes)).unwrap();
        let back = host.call(|s| s.memory.alloc_host(bytes)).unwrap();
        let (sv, bv) = (src.view.clone().unwrap(), back.view.clone().unwrap());
        let pattern: Vec<u8> = (0..bytes).map(|i| (i * 131 % 251) as u8).collect();
        sv.write(0, &pattern).unwrap();
        bv.write(0, &vec![0xA5; bytes as usize]).unwrap();
        for (from, to) in [(src.va.unwrap(), d.va), (d.va, back.va.unwrap())] {
            lane.push(LaneItem::Copy {
                stream,
                src: from,
                dst: to,
                bytes,
            })
            .unwrap();
        }
        host.call(|s| s.submit.synchronize(stream)).unwrap();
        let mut got = vec![0u8; bytes as usize];
        bv.read(0, &mut got).unwrap();
        assert!(got == pattern, "{bytes} bytes came back different");
        host.call(|s| s.memory.free_device(d.va)).unwrap();
        host.call(|s| s.memory.free_host(src.va.unwrap())).unwrap();
        host.call(|s| s.memory.free_host(back.va.unwrap())).unwrap();
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn dependent_launches_in_the_ramps_chains_complete_in_order() {
    let host = gpu();
    let k = kernel(&host, "vector_add.size.fatbin", "vector_add");
    let n = 1usize << 20;
    let bytes = (n * 4) as u64;
    let [a, b, c] = [0, 1, 2].map(|_| host.call(|s| s.memory.alloc_device(bytes)).unwrap());
    let av: Vec<f32> = (0..n).map(|i| (i % 4096) as f32).collect();
    let bv: Vec<f32> = (0..n).map(|i| 0.25 * (i % 7) as f32).collect();
    host.call(|s| s.memory.write_device(a.va, floats(&av)))
        .unwrap();
    host.call(|s| s.memory.write_device(b.va, floats(&bv)))
        .unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let before = host.call(|s| s.submit.stats()).unwrap();
    let ni = i32::try_from(n).unwrap();
    let grid = [u32::try_from(n.div_ceil(256)).unwrap(), 1, 1];
    let started = Instant::now();
    for i in 0..128 {
        let src = if i == 0 { a.va } else { c.va };
        let l = record(
            &k,
            grid,
            [256, 1, 1],
            &[
                &src.to_le_bytes(),
                &b.va.to_le_bytes(),
                &c.va.to_le_bytes(),
                &ni.to_le_bytes(),
            ],
        );
        host.call(|s| s.submit.launch(stream, l)).unwrap();
    }
    let first = host.call(|s| s.submit.synchronize(stream)).unwrap();
    let took = started.elapsed();
    let after = host.call(|s| s.submit.stats()).unwrap();
    // After a standstill the chains ramp up: 8, 16, 32 and 64 launches,
    // then 8 more (a sync point closes the last); each head waits for the
    // tail before it, so every launch still runs after the one before.
    assert_eq!(
        after.chains - before.chains,
        5,
        "chains of 8, 16, 32, 64 and 8"
    );
    assert_eq!(after.launches - before.launches, 128);
    let out = to_f32(&host.call(|s| s.memory.read_device(c.va, bytes)).unwrap());
    for i in 0..n {
        let mut want = av[i] + bv[i];
        for _ in 1..128 {
            want += bv[i];
        }
        assert_eq!(
            out[i], want,
            "element {i}: every launch ran, each after the last"
        );
    }
    eprintln!("128 dependent launches over 1M floats in 5 chains matched the CPU (timeline {first}); {took:?}");
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn a_kernel_with_a_stack_runs_in_the_local_memory_submit_gives_the_channel() {
    let host = gpu();
    let k = kernel(&host, "stack.size.fatbin", "local_sum");
    assert!(k.info.local_bytes > 0, "the fixture has a stack");
    let n = 1usize << 16;
    let out = host
        .call(|s| s.memory.alloc_device((n * 4) as u64))
        .unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let ni = i32::try_from(n).unwrap();
    host.call(|s| {
        s.submit.launch(
            stream,
            record(
                &k,
                [u32::try_from(n / 128).unwrap(), 1, 1],
                [128, 1, 1],
                &[&out.va.to_le_bytes(), &ni.to_le_bytes()],
            ),
        )
    })
    .unwrap();
    host.call(|s| s.submit.synchronize(stream)).unwrap();
    let got = to_u32(
        &host
            .call(|s| s.memory.read_device(out.va, (n * 4) as u64))
            .unwrap(),
    );
    for (i, g) in got.iter().enumerate() {
        let mut scratch = [0u32; 96];
        for kk in 0..96 {
            let slot = (kk * 5 + i) % 96;
            scratch[slot] = ((i * 31 + slot) % 97) as u32;
        }
        let want: u32 = (0..96).map(|kk| scratch[(kk * 7 + i) % 96]).sum();
        assert_eq!(*g, want, "thread {i}");
    }
    eprintln!(
        "local_sum: {} bytes of stack per thread, {n} results match",
        k.info.local_bytes
    );
}

fn expect_fault(host: &Host, stream: StreamId) -> macuda_gsp::ChannelFault {
    let started = Instant::now();
    let err = host
        .call(|s| s.submit.synchronize(stream))
        .expect_err("the faulting launch never completes");
    let HostError::Submit(SubmitError::ChannelFault(f)) = err else {
        panic!("not a channel fault: {err:?}");
    };
    eprintln!("reported after {:?}: {f}", started.elapsed());
    assert!(host.outcome().is_none(), "the stack stays up");
    *f
}

/// The supervisor's contained recovery of the channel fault: fresh
/// channels, a report, the stack up.
fn fresh_channels(host: &Host) -> std::sync::Arc<macuda_supervisor::RecoveryOutcome> {
    let recovered = macuda_tests::contained(host, |i| {
        matches!(i, macuda_core::Incident::ChannelFault { .. })
    });
    assert!(
        recovered.steps.iter().all(|s| s.ok),
        "{:?}",
        recovered.steps
    );
    assert!(recovered.report.is_ok(), "{:?}", recovered.report);
    recovered
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn an_unmapped_address_is_reported_as_an_mmu_fault_and_fresh_channels_run_again() {
    let host = gpu();
    let k = kernel(&host, "faults.size.fatbin", "read_through");
    let out = host.call(|s| s.memory.alloc_device(4096)).unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    let unmapped = macuda_memory::NEVER_MAPPED_VA;
    host.call(|s| {
        s.submit.launch(
            stream,
            record(
                &k,
                [1, 1, 1],
                [32, 1, 1],
                &[&unmapped.to_le_bytes(), &out.va.to_le_bytes()],
            ),
        )
    })
    .unwrap();
    let f = expect_fault(&host, stream);
    assert!(
        f.mmu_fault || f.xid == 31,
        "an unmapped read is an MMU fault: {f}"
    );
    if f.mmu_fault {
        assert!(
            f.mmu_faults
                .iter()
                .any(|m| m.address >> 12 == unmapped >> 12),
            "the fault names the address: {f:?}"
        );
    }
    let recovered = fresh_channels(&host);
    eprintln!("the supervisor's contained recovery: {:?}", recovered.steps);
    let add = kernel(&host, "vector_add.size.fatbin", "vector_add");
    let took = vector_add(&host, &add, stream, 1 << 20);
    eprintln!("then vector_add on the fresh channels matched the CPU in {took:?}");
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn a_trap_is_reported_as_an_sm_error_not_an_mmu_fault_and_fresh_channels_run_again() {
    let host = gpu();
    let k = kernel(&host, "faults.size.fatbin", "trap_now");
    let out = host.call(|s| s.memory.alloc_device(4096)).unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    host.call(|s| {
        s.submit.launch(
            stream,
            record(&k, [1, 1, 1], [32, 1, 1], &[&out.va.to_le_bytes()]),
        )
    })
    .unwrap();
    let f = expect_fault(&host, stream);
    assert!(!f.mmu_fault, "a trap touches no unmapped memory: {f}");
    assert!(
        f.xid == 13 || !f.sm_errors.is_empty(),
        "a trap is a GR exception / SM error: {f}"
    );
    fresh_channels(&host);
    let add = kernel(&host, "vector_add.size.fatbin", "vector_add");
    let took = vector_add(&host, &add, stream, 1 << 20);
    eprintln!("then vector_add on the fresh channels matched the CPU in {took:?}");
}
