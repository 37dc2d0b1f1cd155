//! The scripted workload `macuda demo` runs: a little of everything every
//! actor does, in the order a CUDA program would ask for it, so that a
//! fault injected into any actor lands in the middle of real work.

use crate::host::{Host, HostError};
use macuda_core::ActorSnapshot;
use macuda_hw::class;
use macuda_hw::pci::{offset, Command, Width};
use macuda_submit::SubmitError;
use macuda_submit::{LaneItem, LaunchRecord};
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

/// Device pointers must be at least this aligned (CUDA's promise).
const DEVICE_POINTER_ALIGN: u64 = 256;
/// The largest launch of the workload covers this many floats, all of
/// which are checked.
const CHECKED_FLOATS: usize = 2048;
/// Bytes the copy round trip moves.
const ROUND_TRIP_BYTES: usize = 64 << 10;

/// A step the device may not take: run where its capabilities say it can,
/// otherwise noted (with what it lacks) as declined by design, without
/// trying.
fn if_able<T>(
    report: &mut WorkloadReport,
    what: &str,
    able: bool,
    lacks: &str,
    step: impl FnOnce() -> Result<T, HostError>,
) -> Result<Option<T>, HostError> {
    if able {
        return step().map(Some);
    }
    report.refusals.push(format!("{what}: {lacks}"));
    Ok(None)
}

/// Run the workload; `pace` is slept between phases (to give Ctrl-C a
/// window in tests).
///
/// # Errors
/// The first error that is not a refusal by the device.
pub fn run(host: &Host, pace: Duration) -> Result<WorkloadReport, HostError> {
    let mut r = WorkloadReport::default();

    // pci: identification and the command register the boot set; where
    // another driver (NVIDIA's kernel module) owns the function, we touch
    // none of it.
    if !host.owns_function() {
        let d = host.device();
        r.steps.push(format!(
            "pci: NVIDIA's kernel module owns the function (no config access); RM names it {} {:04x}:{:04x}",
            d.name.as_deref().unwrap_or("a GPU"),
            d.identity.vendor,
            d.identity.device
        ));
    } else {
        let id = host.call(|s| s.pci.identify())?;
        let command = host.call(|s| s.pci.config_read(offset::COMMAND, Width::U16))?;
        let command = Command((command & 0xFFFF) as u16);
        let can = host.call(|s| s.pci.capabilities())?;
        let yes = |b: bool| if b { "yes" } else { "no" };
        r.steps.push(format!(
            "pci: {} {:04x}:{:04x}, command {:#06x} (bus master {}), {} BARs; takes video memory access {}, DMA {}, submission {}",
            id.chip.chip,
            id.vendor,
            id.device,
            command.0,
            if command.bus_master() { "on" } else { "off" },
            id.bars.len(),
            yes(can.video_memory),
            yes(can.dma),
            yes(can.submission)
        ));
    }
    std::thread::sleep(pace);

    // gsp: the channels RM made for submit, and where the RM keeps its
    // object tree in software (the null RM), an allocation through it.
    let info = host.call(|s| s.gsp.device_info())?;
    let ch = host.call(|s| s.submit.channels())?;
    let mut line = format!(
        "gsp: {} MiB VRAM via {}; channel group {} with compute {:#06x} (token {:#x}) and copy {:#06x} (token {:#x}); {} GPCs x {} TPCs",
        info.vram_bytes >> 20,
        info.rm.describe(),
        ch.group,
        ch.compute.class,
        ch.compute.token,
        ch.copy.class,
        ch.copy.token,
        ch.gr.gpcs,
        ch.gr.tpcs_per_gpc,
    );
    if host.call(|s| s.gsp.objects())?.is_empty() {
        let g = host.call(|s| s.gsp.stats())?;
        line.push_str(&format!(
            "; {} MiB held through RM",
            g.rm_memory_bytes >> 20
        ));
    } else {
        let device = host.device().device;
        let mem_object = host.call(|s| s.gsp.alloc(device, class::NV01_MEMORY_LOCAL_USER))?;
        let live = host.call(|s| s.gsp.objects())?.len();
        let freed = host.call(|s| s.gsp.free(mem_object))?;
        line.push_str(&format!(
            "; {live} RM objects with a memory object allocated, {freed} freed"
        ));
    }
    r.steps.push(line);
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
    let can = host.device().can;
    let pinned = if_able(
        &mut r,
        "memory: 1 MiB pinned host buffer",
        can.dma,
        "the device reaches no host memory (no DMA)",
        || host.call(|s| s.memory.alloc_host(1 << 20)),
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
    let sm = host.device().chip.chip.sm();
    let mut modules = Vec::new();
    for image in [VECTOR_ADD_FATBIN, BANKS_FATBIN] {
        modules.push(host.call(|s| s.loader.load_module(image.to_vec(), sm))?);
    }
    let loaded = host.call(|s| s.loader.modules())?;
    let add = host.call(|s| s.loader.function(modules[0], "vector_add".to_string()))?;
    std::thread::sleep(pace);

    // submit: two streams, 64 launches of vector_add (half through the
    // request path, half through the lane), a sync on each; the inputs
    // written first where the device keeps memory, the output read back.
    let ptrs: Vec<u64> = buffers.iter().map(|b| b.va).collect();
    let a_vals: Vec<f32> = (0..CHECKED_FLOATS).map(|i| i as f32 * 0.25).collect();
    let b_vals: Vec<f32> = (0..CHECKED_FLOATS).map(|i| 3.0 - i as f32).collect();
    let floats = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    // Where the CPU does not reach the buffers (above a small BAR1), the
    // bytes travel through the pinned buffer and the copy engine.
    let staging = pinned
        .as_ref()
        .and_then(|p| p.va)
        .filter(|_| can.submission);
    let inputs = if_able(
        &mut r,
        "memory: writing the vector_add inputs",
        can.video_memory,
        "the device keeps no video memory",
        || {
            write_device(host, staging.as_ref(), ptrs[0], floats(&a_vals))?;
            write_device(host, staging.as_ref(), ptrs[1], floats(&b_vals))
        },
    )?;
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
            lane.launch(macuda_submit::lane_launch(stream, &launch))
                .map_err(SubmitError::from)?;
        }
    }
    for &stream in &streams {
        host.call(|s| s.submit.synchronize(stream))?;
    }
    if !can.submission {
        r.refusals.push(
            "submit: the launches were built and counted, and handed to nothing: the device takes no submission"
                .to_string(),
        );
    }
    let mut checked = None;
    if inputs.is_some() && can.submission {
        let out = read_device(host, staging.as_ref(), ptrs[2], CHECKED_FLOATS as u64 * 4)?;
        let good = out
            .chunks_exact(4)
            .zip(a_vals.iter().zip(&b_vals))
            .filter(|(c, (a, b))| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) == *a + *b)
            .count();
        checked = Some(good);
    }
    // A round trip through the copy engine: pinned host -> device ->
    // device -> pinned host, ordered after the kernels on one stream.
    let mut round_trip = None;
    if let Some(src) = pinned.as_ref().and_then(|p| p.va) {
        let back = host.call(|s| s.memory.alloc_host(ROUND_TRIP_BYTES as u64))?;
        let pattern: Vec<u8> = (0..ROUND_TRIP_BYTES).map(|i| (i * 7 + 3) as u8).collect();
        if let Some(dst) = back.va {
            host.call(|s| s.memory.write_host(src, pattern.clone()))?;
            host.call(|s| s.memory.write_host(dst, vec![0u8; pattern.len()]))?;
            let stream = streams[0];
            let n = pattern.len() as u64;
            for (from, to) in [(src, ptrs[2]), (ptrs[2], ptrs[1]), (ptrs[1], dst)] {
                lane.push(LaneItem::Copy {
                    stream,
                    src: from,
                    dst: to,
                    bytes: n,
                })
                .map_err(SubmitError::from)?;
            }
            host.call(|s| s.submit.synchronize(stream))?;
            let got = host.call(|s| s.memory.read_host(dst, pattern.len() as u64))?;
            round_trip = Some(got == pattern);
        }
        if let Some(va) = back.va {
            host.call(|s| s.memory.free_host(va))?;
        }
    }
    for &stream in &streams {
        host.call(|s| s.submit.destroy_stream(stream))?;
    }
    host.call(|s| s.loader.unload(modules[0]))?;
    let lstats = host.call(|s| s.loader.stats())?;
    r.steps.push(format!(
        "loader: {} modules for sm_{sm} ({} kernels, {} relocations applied, {} bytes uploaded, {} resident); vector_add at {:#x}, {} registers, parameters at bank-0 offset {:#x}",
        loaded.len(),
        loaded.iter().map(|m| m.kernels.len()).sum::<usize>(),
        lstats.relocations_applied,
        lstats.uploaded_bytes,
        loaded.iter().filter(|m| m.resident).count(),
        add.entry,
        add.registers,
        add.param_base
    ));
    match checked {
        Some(good) => r.steps.push(format!(
            "results: {good} of {CHECKED_FLOATS} vector_add outputs match the CPU's a + b"
        )),
        None => r
            .steps
            .push("results: not checked (the device keeps no memory)".to_string()),
    }
    if let Some(same) = round_trip {
        r.steps.push(format!(
            "copy engine: {ROUND_TRIP_BYTES} bytes pinned host -> device -> device -> pinned host {}",
            if same { "came back byte-exact" } else { "CAME BACK DIFFERENT" }
        ));
    }
    let sstats = host.call(|s| s.submit.stats())?;
    r.steps.push(format!(
        "submit: {} streams, {} launches built ({} through the lane) in {} chains, {} descriptor bytes in {} patches, {} command bytes, both streams synchronised, {} submissions handed to nothing",
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

/// Pinned host memory the copy engine reads and writes, by its GPU
/// address (the CPU writes it through the memory actor, which uses the
/// process's view of it or, where there is none, the transport).
type Staging = u64;

/// Whether `e` says the CPU does not reach the memory (it lies above a
/// small BAR1).
fn beyond_bar1(e: &HostError) -> bool {
    matches!(
        e,
        HostError::Memory(macuda_memory::MemoryError::NotCpuVisible { .. })
    )
}

/// Copy `bytes` from `src` to `dst` (GPU addresses) on a stream of its
/// own, and wait for it.
fn engine_copy(host: &Host, src: u64, dst: u64, bytes: u64) -> Result<(), HostError> {
    let stream = host.call(|s| s.submit.create_stream())?;
    let lane = host.call(|s| s.submit.lane())?;
    lane.push(LaneItem::Copy {
        stream,
        src,
        dst,
        bytes,
    })
    .map_err(SubmitError::from)?;
    host.call(|s| s.submit.synchronize(stream))?;
    host.call(|s| s.submit.destroy_stream(stream))
}

/// Write device memory: by the CPU where it reaches it, else through
/// `staging` and the copy engine.
fn write_device(
    host: &Host,
    staging: Option<&Staging>,
    va: u64,
    data: Vec<u8>,
) -> Result<(), HostError> {
    match (
        host.call(|s| s.memory.write_device(va, data.clone())),
        staging,
    ) {
        (Err(e), Some(&pinned)) if beyond_bar1(&e) => {
            let n = data.len() as u64;
            host.call(|s| s.memory.write_host(pinned, data))?;
            engine_copy(host, pinned, va, n)
        }
        (r, _) => r,
    }
}

/// Read device memory, as [`write_device`] writes it.
fn read_device(
    host: &Host,
    staging: Option<&Staging>,
    va: u64,
    len: u64,
) -> Result<Vec<u8>, HostError> {
    match (host.call(|s| s.memory.read_device(va, len)), staging) {
        (Err(e), Some(&pinned)) if beyond_bar1(&e) => {
            engine_copy(host, va, pinned, len)?;
            host.call(|s| s.memory.read_host(pinned, len))
        }
        (r, _) => r,
    }
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
