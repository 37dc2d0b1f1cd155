//! The scripted workload `macuda demo` runs: a little of everything every
//! actor does, in the order a CUDA program would ask for it, so that a
//! fault injected into any actor lands in the middle of real work.

use crate::host::{Host, HostError};
use macuda_core::ActorSnapshot;
use macuda_hw::class;
use macuda_hw::pci::{offset, Command, Width};
use macuda_submit::LaunchRecord;
use std::time::Duration;

/// What the workload did, line by line.
#[derive(Debug, Default, Clone)]
pub struct WorkloadReport {
    pub steps: Vec<String>,
    /// Operations the device declined by design (the null device refuses
    /// DMA and submission).
    pub refusals: Vec<String>,
}

/// Real modules compiled from tests/cuda by NVIDIA's nvcc (PyPI).
const VECTOR_ADD_FATBIN: &[u8] = include_bytes!("../../tests/cuda/fixtures/vector_add.size.fatbin");
const BANKS_FATBIN: &[u8] = include_bytes!("../../tests/cuda/fixtures/banks.size.fatbin");
/// For a chip whose compute capability is not known, load the Blackwell code.
const DEFAULT_SM: u32 = 120;

/// Device pointers must be at least this aligned (CUDA's promise).
const DEVICE_POINTER_ALIGN: u64 = 256;

fn refusable<T>(
    report: &mut WorkloadReport,
    what: &str,
    r: Result<T, HostError>,
) -> Result<Option<T>, HostError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_refusal() => {
            // The first link only names the layer the Host called.
            let why = macuda_core::error_chain(&e)[1..].join(": ");
            report.refusals.push(format!("{what}: {why}"));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Run the workload; `pace` is slept between phases (to give Ctrl-C a
/// window in tests).
///
/// # Errors
/// The first error that is not a refusal by the device.
pub fn run(host: &Host, pace: Duration) -> Result<WorkloadReport, HostError> {
    let mut r = WorkloadReport::default();

    // pci: identification and the command register the boot set.
    let id = host.call(|s| s.pci.identify())?;
    let command = host.call(|s| s.pci.config_read(offset::COMMAND, Width::U16))?;
    let command = Command((command & 0xFFFF) as u16);
    r.steps.push(format!(
        "pci: {} {:04x}:{:04x}, command {:#06x} (bus master {}), {} BARs",
        id.chip.chip,
        id.vendor,
        id.device,
        command.0,
        if command.bus_master() { "on" } else { "off" },
        id.bars.len()
    ));
    std::thread::sleep(pace);

    // gsp: the object tree.
    let device = host.device().device;
    let mem_object = host.call(|s| s.gsp.alloc(device, class::NV01_MEMORY_LOCAL_USER))?;
    let live = host.call(|s| s.gsp.objects())?.len();
    let freed = host.call(|s| s.gsp.free(mem_object))?;
    let info = host.call(|s| s.gsp.device_info())?;
    r.steps.push(format!(
        "gsp: {live} RM objects with a memory object allocated, {freed} freed; {} MiB VRAM via {}",
        info.vram_bytes >> 20,
        info.rm.describe()
    ));
    std::thread::sleep(pace);

    // memory: device buffers of ggml-like sizes, some freed, pinned host.
    let sizes: [u64; 8] = [256, 4096, 100_000, 1 << 20, 3 << 20, 64 << 20, 7, 12_345];
    let mut buffers = Vec::new();
    for &bytes in &sizes {
        buffers.push(host.call(|s| s.memory.alloc_device(bytes))?);
    }
    let aligned = buffers.iter().all(|b| b.va % DEVICE_POINTER_ALIGN == 0);
    for b in buffers.drain(..3) {
        host.call(|s| s.memory.free_device(b.va))?;
    }
    let pinned = refusable(
        &mut r,
        "memory: 1 MiB pinned host buffer",
        host.call(|s| s.memory.alloc_host(1 << 20)),
    )?;
    let mstats = host.call(|s| s.memory.stats())?;
    r.steps.push(format!(
        "memory: {} device buffers allocated, 3 freed, all {}-byte aligned: {}; {} KiB in use of {} MiB; pinned host buffer {}",
        sizes.len(),
        DEVICE_POINTER_ALIGN,
        if aligned { "yes" } else { "NO" },
        mstats.vram_used >> 10,
        mstats.vram_allocatable >> 20,
        if pinned.is_some() { "allocated" } else { "refused" }
    ));
    std::thread::sleep(pace);

    // loader: two real fat binaries (vector_add; and banks, whose bank-4
    // address table is relocated), for the device's architecture.
    let sm = host
        .device()
        .chip
        .chip
        .compute_capability()
        .unwrap_or(DEFAULT_SM);
    let mut modules = Vec::new();
    for image in [VECTOR_ADD_FATBIN, BANKS_FATBIN] {
        modules.push(host.call(|s| s.loader.load_module(image.to_vec(), sm))?);
    }
    let loaded = host.call(|s| s.loader.modules())?;
    let add = host.call(|s| s.loader.function(modules[0], "vector_add".to_string()))?;
    std::thread::sleep(pace);

    // submit: two streams, 64 launches of vector_add (half through the
    // request path, half through the lane), a sync on each.
    let ptrs: Vec<u64> = buffers.iter().map(|b| b.va).collect();
    let kernel = host.call(|s| s.submit.register_kernel(add.kernel_desc()))?;
    let lane = host.call(|s| s.submit.lane())?;
    let streams = [
        host.call(|s| s.submit.create_stream())?,
        host.call(|s| s.submit.create_stream())?,
    ];
    for i in 0..64u64 {
        let (a, b, c) = (ptrs[0], ptrs[1], ptrs[2]);
        let n = (256 * (i as i32 % 8 + 1)).to_le_bytes();
        let params = add
            .marshal(&[&a.to_le_bytes(), &b.to_le_bytes(), &c.to_le_bytes(), &n])
            .map_err(|e| HostError::Loader(macuda_loader::LoaderError::Image(e)))?;
        let launch = LaunchRecord {
            kernel,
            grid: [(i as u32 % 8) + 1, 1, 1],
            block: [256, 1, 1],
            dynamic_shared_bytes: 0,
            params,
        };
        let stream = streams[(i % 2) as usize];
        if i % 2 == 0 {
            host.call(|s| s.submit.launch(stream, launch))?;
        } else {
            lane.launch(macuda_submit::lane_launch(stream, &launch));
        }
    }
    let mut synced = 0;
    for &stream in &streams {
        if refusable(
            &mut r,
            "submit: synchronize",
            host.call(|s| s.submit.synchronize(stream)),
        )?
        .is_some()
        {
            synced += 1;
        }
    }
    for &stream in &streams {
        host.call(|s| s.submit.destroy_stream(stream))?;
    }
    host.call(|s| s.loader.unload(modules[0]))?;
    let lstats = host.call(|s| s.loader.stats())?;
    r.steps.push(format!(
        "loader: {} modules for sm_{sm} ({} kernels, {} relocations applied, {} bytes queued for upload); vector_add at {:#x}, {} registers, parameters at bank-0 offset {:#x}",
        loaded.len(),
        loaded.iter().map(|m| m.kernels.len()).sum::<usize>(),
        lstats.relocations_applied,
        lstats.uploaded_bytes,
        add.entry,
        add.registers,
        add.param_base
    ));
    let sstats = host.call(|s| s.submit.stats())?;
    r.steps.push(format!(
        "submit: {} streams, {} launches built ({} through the lane) in {} chains, {} descriptor bytes in {} patches, {} command bytes, {synced} of 2 synchronisations completed, {} submissions refused",
        sstats.streams,
        sstats.launches,
        sstats.lane_launches,
        sstats.chains,
        sstats.descriptor_bytes,
        sstats.descriptor_patches,
        sstats.command_bytes,
        sstats.refused_submissions
    ));
    std::thread::sleep(pace);

    // Clean up what is left, as a program's exit would.
    for b in buffers {
        host.call(|s| s.memory.free_device(b.va))?;
    }
    host.call(|s| s.loader.unload(modules[1]))?;
    let pstats = host.call(|s| s.pci.stats())?;
    r.steps.push(format!(
        "cleanup: all buffers and modules released; pci saw {} config and {} register accesses, {} refusals",
        pstats.config_reads + pstats.config_writes,
        pstats.mmio_reads + pstats.mmio_writes,
        pstats.refusals
    ));
    Ok(r)
}

/// One line per actor: requests handled by kind, and how many failed.
pub fn summary(snapshots: &[ActorSnapshot]) -> Vec<String> {
    snapshots
        .iter()
        .map(|a| {
            let kinds: Vec<String> = a.per_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
            format!(
                "{:<7} {:>4} requests, {} not ok: {}",
                a.name,
                a.handled,
                a.errors,
                kinds.join(", ")
            )
        })
        .collect()
}
