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

/// Kernel parameters as ggml passes them: pointers and sizes, 12 in all.
fn launch_params(ptrs: &[u64], i: u64) -> Vec<u8> {
    let mut p = Vec::with_capacity(12 * 8);
    for k in 0..12u64 {
        let v = ptrs
            .get(k as usize % ptrs.len().max(1))
            .copied()
            .unwrap_or(0)
            + i * k;
        p.extend_from_slice(&v.to_le_bytes());
    }
    p
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

    // loader: two module images, one unloaded again.
    let images: Vec<(String, Vec<u8>)> = [("vector_add", 3_000usize), ("rms_norm", 9_000)]
        .iter()
        .map(|(name, len)| {
            (
                name.to_string(),
                (0..*len).map(|i| (i * 31 % 251) as u8).collect(),
            )
        })
        .collect();
    let mut modules = Vec::new();
    for (name, image) in images {
        modules.push(host.call(|s| s.loader.load_image(name, image))?);
    }
    let loaded = host.call(|s| s.loader.modules())?;
    host.call(|s| s.loader.unload(modules[0]))?;
    let lstats = host.call(|s| s.loader.stats())?;
    r.steps.push(format!(
        "loader: {} modules loaded ({} bytes queued for upload), 1 unloaded, {} live",
        loaded.len(),
        lstats.uploaded_bytes,
        lstats.live
    ));
    std::thread::sleep(pace);

    // submit: two streams, 64 launches, a synchronisation on each.
    let entry = loaded.last().map(|m| m.code.va).unwrap_or(0);
    let ptrs: Vec<u64> = buffers.iter().map(|b| b.va).collect();
    let streams = [
        host.call(|s| s.submit.create_stream())?,
        host.call(|s| s.submit.create_stream())?,
    ];
    for i in 0..64u64 {
        let launch = LaunchRecord {
            entry,
            grid: [(i as u32 % 8) + 1, 1, 1],
            block: [256, 1, 1],
            shared_bytes: 0,
            params: launch_params(&ptrs, i),
        };
        let stream = streams[(i % 2) as usize];
        host.call(|s| s.submit.launch(stream, launch))?;
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
    let sstats = host.call(|s| s.submit.stats())?;
    r.steps.push(format!(
        "submit: {} streams, {} launches built ({} parameter bytes), {} uploads queued, {synced} of 2 synchronisations completed, {} refused",
        sstats.streams, sstats.launches, sstats.param_bytes, sstats.uploads, sstats.refused_flushes
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
