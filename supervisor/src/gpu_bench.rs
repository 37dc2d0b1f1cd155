//! `macuda bench gpu`: empty-kernel launches per second on a real GPU
//! through our stack, side by side in one run with NVIDIA's runtime doing
//! the same (a small CUDA program built on that machine with nvcc and run
//! as a separate process, so no libcuda ever enters ours): a plain
//! `cudaLaunchKernel` loop and a CUDA graph of the same launches. Prints
//! each figure and the ratios.

use crate::host::{Host, HostConfig, HostError};
use macuda_pci::DeviceSpec;
use macuda_submit::{lane_launch, ChainLink, ChainTuning, GridMembar, LaunchRecord, SubmitConfig};
use macuda_submit::{CallerSync, SubmitError};
use std::path::Path;
use std::time::{Duration, Instant};

/// The empty kernel, compiled by nvcc from tests/cuda/empty.cu.
const EMPTY_FATBIN: &[u8] = include_bytes!("../../tests/cuda/fixtures/empty.size.fatbin");
/// vector_add, for the check that a chain tuning keeps dependent launches
/// in order.
const VECTOR_ADD_FATBIN: &[u8] = include_bytes!("../../tests/cuda/fixtures/vector_add.size.fatbin");
/// Floats the order check adds over, and the launches it chains.
const CHECK_FLOATS: usize = 1 << 16;
const CHECK_CHAIN: usize = 128;
/// Launches run before timing, so chains, caches and clocks are warm.
const WARM_LAUNCHES: u64 = 2_000;
/// Launches between syncs in the token-shaped run: about a small model's
/// decode token (the 1B llama's is about 250 kernels).
pub const TOKEN_LAUNCHES: u64 = 250;
/// The huge-page threshold the page variant runs with: the default
/// descriptor region (4 MiB) and everything larger take 2 MiB pages.
const HUGE_PAGES_FROM: u64 = 2 << 20;
/// What every launch is: one block of one warp, as the reference's are.
const BLOCK: [u32; 3] = [32, 1, 1];

#[derive(Debug, Clone, Default)]
pub struct GpuBench {
    pub launches: u64,
    /// Ours, per launch: wall time from the first push to the end of the
    /// sync, what the caller spent pushing, and where the submit actor's
    /// time went.
    pub ours: Timed,
    /// The same launches in tokens of [`TOKEN_LAUNCHES`] with a sync after
    /// each, as a decode issues them: the descriptor region starts over
    /// at each sync, so its footprint is one token's, not the region's.
    pub tokens: Timed,
    pub cuda_loop_ns: Option<f64>,
    pub cuda_graph_ns: Option<f64>,
    /// Why there is no reference figure, when there is none.
    pub reference_note: Option<String>,
    /// Each chain tuning and depth tried: its figure, and whether a chain
    /// of dependent launches came out right under it.
    pub variants: Vec<(ChainTuning, usize, f64, bool)>,
    /// Each descriptor-region size and diffing setting tried.
    pub regions: Vec<(u64, bool, Timed)>,
    /// The default region on 2 MiB pages (video memory from 2 MiB takes
    /// huge pages): what the GPU's TLB misses on the 4 KiB pages the
    /// module path gives it otherwise cost.
    pub huge_pages: Option<Timed>,
}

impl GpuBench {
    pub fn render(&self) -> String {
        let o = &self.ours;
        let mut s = format!(
            "ours: {} empty launches, {:.0} ns a launch from first push to sync ({:.1}M launches/s), caller {:.0} ns a push\n",
            self.launches,
            o.total_ns,
            1e3 / o.total_ns,
            o.caller_ns
        );
        if let Some(l) = self.cuda_loop_ns {
            s += &format!(
                "cuda:  cudaLaunchKernel loop {l:.0} ns a launch; ours is {:.2}x its rate\n",
                l / o.total_ns
            );
        }
        if let Some(g) = self.cuda_graph_ns {
            s += &format!(
                "cuda:  CUDA graph {g:.0} ns a kernel; ours is {:.2}x its rate\n",
                g / o.total_ns
            );
        }
        if let Some(n) = &self.reference_note {
            s += &format!("cuda:  {n}\n");
        }
        s += &format!(
            "ours, in the submit actor a launch: build {:.0} ns, hand-over {:.0} ns, waiting for the GPU {:.0} ns\n",
            o.build_ns, o.flush_ns, o.wait_ns
        );
        s += &format!(
            "ours, the hand-over a launch: descriptors {:.0} ns ({:.0} bytes delivered), submissions {:.0} ns (GP_PUT written and read back {:.0} ns)\n",
            o.deliver_ns, o.descriptor_bytes, o.publish_ns, o.gp_put_ns
        );
        let t = &self.tokens;
        s += &format!(
            "ours, in tokens of {TOKEN_LAUNCHES} launches with a sync after each: {:.0} ns a launch (actor: build {:.0}, hand-over {:.0}, waiting {:.0}; {:.0} descriptor bytes delivered a launch)\n",
            t.total_ns, t.build_ns, t.flush_ns, t.wait_ns, t.descriptor_bytes
        );
        for (t, depth, ns, right) in &self.variants {
            s += &format!(
                "variant {:?} / {:?} / chains of {depth}: {ns:.0} ns a launch; a {CHECK_CHAIN}-launch dependent chain {}\n",
                t.link,
                t.membar,
                if *right { "matched the CPU" } else { "DID NOT match the CPU" }
            );
        }
        for (bytes, diffing, t) in &self.regions {
            s += &format!(
                "region {} MiB, diffing {}: {:.0} ns a launch (actor: build {:.0}, hand-over {:.0}, waiting {:.0})\n",
                bytes >> 20,
                if *diffing { "on" } else { "off" },
                t.total_ns,
                t.build_ns,
                t.flush_ns,
                t.wait_ns
            );
        }
        if let Some(t) = &self.huge_pages {
            s += &format!(
                "region on 2 MiB pages: {:.0} ns a launch (actor: build {:.0}, hand-over {:.0}, waiting {:.0})\n",
                t.total_ns, t.build_ns, t.flush_ns, t.wait_ns
            );
        }
        s += &format!(
            "gpu-launch: ours_ns={:.1} cuda_loop_ns={} cuda_graph_ns={} ratio_vs_loop={} ratio_vs_graph={}",
            o.total_ns,
            fmt_opt(self.cuda_loop_ns),
            fmt_opt(self.cuda_graph_ns),
            fmt_opt(self.cuda_loop_ns.map(|l| l / o.total_ns)),
            fmt_opt(self.cuda_graph_ns.map(|g| g / o.total_ns)),
        );
        s
    }
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or("none".to_string(), |x| format!("{x:.2}"))
}

/// Run the reference program and read its `name=value` lines.
fn reference(path: &Path, launches: u64) -> Result<(f64, f64), String> {
    let out = std::process::Command::new(path)
        .arg(launches.to_string())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "{} exited with {}: {}{}",
            path.display(),
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let value = |key: &str| -> Result<f64, String> {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(key)
                    .and_then(|v| v.trim().parse::<f64>().ok())
            })
            .ok_or_else(|| format!("no `{key}` in the reference's output: {text}"))
    };
    Ok((value("cuda_loop_ns=")?, value("cuda_graph_ns=")?))
}

/// The benchmark's Host settings for `device`: a long deadline and a lane
/// deep enough that the caller never waits for the actor.
pub fn bench_config(device: DeviceSpec) -> HostConfig {
    let mut config = HostConfig::new(device);
    config.deadline = Duration::from_secs(60);
    config.submit = SubmitConfig {
        lane_capacity: 1 << 16,
        ..SubmitConfig::default()
    };
    config.report_dir = std::env::temp_dir().join("macuda-bench-reports");
    config
}

/// Our side on the Host `config` opens, then the reference program at
/// `reference_program`.
///
/// # Errors
/// The stack failing to open the device or to run the launches.
pub fn gpu_bench(
    config: HostConfig,
    launches: u64,
    reference_program: Option<&Path>,
    with_variants: bool,
) -> Result<GpuBench, HostError> {
    let mut bench = GpuBench {
        launches,
        ..GpuBench::default()
    };
    // The first run in a process also wakes the GPU's clocks (on the H200
    // it came out ~40% slower than the same run repeated): it is not kept.
    time_empty_launches(config.clone(), launches, launches)?;
    bench.ours = time_empty_launches(config.clone(), launches, launches)?;
    bench.tokens = time_empty_launches(config.clone(), launches, TOKEN_LAUNCHES)?;
    if with_variants {
        let default_depth = config.submit.chain_depth;
        let mut tried = Vec::new();
        for link in [ChainLink::InvalidateCopySchedule, ChainLink::Schedule] {
            for membar in [GridMembar::System, GridMembar::Gpu] {
                tried.push((
                    ChainTuning {
                        link,
                        membar,
                        ..ChainTuning::default()
                    },
                    default_depth,
                ));
            }
        }
        for depth in [32, 512] {
            tried.push((ChainTuning::default(), depth));
        }
        for (tuning, depth) in tried {
            let mut c = config.clone();
            c.submit.chain = tuning;
            c.submit.chain_depth = depth;
            let right = dependent_chain_is_right(c.clone())?;
            let t = time_empty_launches(c, launches, launches)?;
            bench.variants.push((tuning, depth, t.total_ns, right));
        }
        // The descriptor region's size and diffing: what the actor's
        // hand-over costs when the region fits the CPU's caches, and when
        // it compares nothing.
        for (bytes, diffing) in [(2u64 << 20, true), (8 << 20, true), (4 << 20, false)] {
            let mut c = config.clone();
            c.submit.descriptor_bytes = bytes;
            c.submit.diffing = diffing;
            let t = time_empty_launches(c, launches, launches)?;
            bench.regions.push((bytes, diffing, t));
        }
        let mut c = config.clone();
        c.huge_pages_from = Some(HUGE_PAGES_FROM);
        bench.huge_pages = Some(time_empty_launches(c, launches, launches)?);
    }
    match reference_program {
        Some(p) => match reference(p, launches) {
            Ok((l, g)) => {
                bench.cuda_loop_ns = Some(l);
                bench.cuda_graph_ns = Some(g);
            }
            Err(e) => bench.reference_note = Some(e),
        },
        None => {
            bench.reference_note = Some("no reference program given (--reference PATH)".to_string())
        }
    }
    Ok(bench)
}

/// What one timed run of empty launches gave, per launch.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timed {
    pub total_ns: f64,
    pub caller_ns: f64,
    pub build_ns: f64,
    pub flush_ns: f64,
    pub wait_ns: f64,
    /// The hand-over's parts: delivering descriptors, and the submissions
    /// (of which GP_PUT's write and read-back), with the descriptor bytes
    /// delivered.
    pub deliver_ns: f64,
    pub publish_ns: f64,
    pub gp_put_ns: f64,
    pub descriptor_bytes: f64,
}

/// `launches` empty launches through the lane after a warm-up, with a
/// stream sync after every `sync_every` and at the end: wall ns a launch
/// from the first push to the end of the last sync, the caller's ns a
/// push (syncs included), and where the submit actor's time went.
fn time_empty_launches(
    config: HostConfig,
    launches: u64,
    sync_every: u64,
) -> Result<Timed, HostError> {
    let host = Host::start(config)?;
    let sm = host.device().chip.chip.sm();
    let m = host.call(|s| s.loader.load_module(EMPTY_FATBIN.to_vec(), sm))?;
    let f = host.call(|s| s.loader.function(m, "empty".into()))?;
    let kernel = host.call(|s| s.submit.register_kernel(f.kernel_desc()))?;
    let stream = host.call(|s| s.submit.create_stream())?;
    let lane = host.call(|s| s.submit.lane())?;
    let record = lane_launch(
        stream,
        &LaunchRecord {
            kernel,
            grid: [1, 1, 1],
            block: BLOCK,
            dynamic_shared_bytes: 0,
            params: Vec::new(),
        },
    );
    for _ in 0..WARM_LAUNCHES {
        lane.launch(record.clone()).map_err(SubmitError::from)?;
    }
    host.call(|s| s.submit.synchronize(stream))?;
    let records: Vec<_> = (0..launches).map(|_| record.clone()).collect();
    let before = host.call(|s| s.submit.stats())?;
    let started = Instant::now();
    for (i, r) in (1..).zip(records) {
        lane.launch(r).map_err(SubmitError::from)?;
        if i % sync_every.max(1) == 0 && i < launches {
            // As the runtime syncs a stream: on this thread where the lane
            // lets it, else through the actor.
            if let CallerSync::AskActor = lane.sync_point() {
                host.call(|s| s.submit.synchronize(stream))?;
            }
        }
    }
    let pushed = started.elapsed();
    host.call(|s| s.submit.synchronize(stream))?;
    let total = started.elapsed();
    let after = host.call(|s| s.submit.stats())?;
    drop(host.shutdown());
    // CAST: nanoseconds of a run of seconds fit f64 exactly enough.
    let per = |ns: u64| ns as f64 / launches as f64;
    Ok(Timed {
        total_ns: total.as_nanos() as f64 / launches as f64,
        caller_ns: pushed.as_nanos() as f64 / launches as f64,
        build_ns: per(after.build_ns - before.build_ns),
        flush_ns: per(after.flush_ns - before.flush_ns),
        wait_ns: per(after.wait_ns - before.wait_ns),
        deliver_ns: per(after.deliver_ns - before.deliver_ns),
        publish_ns: per(after.publish_ns - before.publish_ns),
        gp_put_ns: per(after.gp_put_ns - before.gp_put_ns),
        descriptor_bytes: per(after.descriptor_bytes - before.descriptor_bytes),
    })
}

/// A chain of dependent launches (c = a + b, then c += b again and again)
/// under the Host's chain tuning, checked against the CPU: a tuning that
/// lets a launch start before the one it reads from finished fails it.
fn dependent_chain_is_right(config: HostConfig) -> Result<bool, HostError> {
    let host = Host::start(config)?;
    let sm = host.device().chip.chip.sm();
    let m = host.call(|s| s.loader.load_module(VECTOR_ADD_FATBIN.to_vec(), sm))?;
    let f = host.call(|s| s.loader.function(m, "vector_add".into()))?;
    let kernel = host.call(|s| s.submit.register_kernel(f.kernel_desc()))?;
    let stream = host.call(|s| s.submit.create_stream())?;
    let bytes = (CHECK_FLOATS * 4) as u64;
    let a = host.call(|s| s.memory.alloc_device(bytes))?;
    let b = host.call(|s| s.memory.alloc_device(bytes))?;
    let c = host.call(|s| s.memory.alloc_device(bytes))?;
    let av: Vec<f32> = (0..CHECK_FLOATS).map(|i| (i % 1024) as f32).collect();
    let bv: Vec<f32> = (0..CHECK_FLOATS).map(|i| 0.5 * (i % 3) as f32).collect();
    let bytes_of = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    host.call(|s| s.memory.write_device(a.va, bytes_of(&av)))?;
    host.call(|s| s.memory.write_device(b.va, bytes_of(&bv)))?;
    // CAST: 2^16 fits.
    let n = (CHECK_FLOATS as i32).to_le_bytes();
    for i in 0..CHECK_CHAIN {
        let src = if i == 0 { a.va } else { c.va };
        let params = f
            .marshal(&[
                &src.to_le_bytes(),
                &b.va.to_le_bytes(),
                &c.va.to_le_bytes(),
                &n,
            ])
            .map_err(|e| HostError::Loader(macuda_loader::LoaderError::Image(e)))?;
        host.call(|s| {
            s.submit.launch(
                stream,
                LaunchRecord {
                    kernel,
                    grid: [(CHECK_FLOATS / 256) as u32, 1, 1],
                    block: [256, 1, 1],
                    dynamic_shared_bytes: 0,
                    params,
                },
            )
        })?;
    }
    host.call(|s| s.submit.synchronize(stream))?;
    let out = host.call(|s| s.memory.read_device(c.va, bytes))?;
    let right = out.chunks_exact(4).enumerate().all(|(i, w)| {
        let mut want = av[i] + bv[i];
        for _ in 1..CHECK_CHAIN {
            want += bv[i];
        }
        f32::from_le_bytes([w[0], w[1], w[2], w[3]]) == want
    });
    drop(host.shutdown());
    Ok(right)
}
