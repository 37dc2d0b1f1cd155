//! `macuda bench gpu`: empty-kernel launches per second on a real GPU
//! through our stack, side by side in one run with NVIDIA's runtime doing
//! the same (a small CUDA program built on that machine with nvcc and run
//! as a separate process, so no libcuda ever enters ours): a plain
//! `cudaLaunchKernel` loop and a CUDA graph of the same launches. Prints
//! each figure and the ratios.

use crate::host::{Host, HostConfig, HostError};
use macuda_pci::DeviceSpec;
use macuda_submit::{lane_launch, LaunchRecord, SubmitConfig};
use std::path::Path;
use std::time::{Duration, Instant};

/// The empty kernel, compiled by nvcc from tests/cuda/empty.cu.
const EMPTY_FATBIN: &[u8] = include_bytes!("../../tests/cuda/fixtures/empty.size.fatbin");
/// Launches run before timing, so chains, caches and clocks are warm.
const WARM_LAUNCHES: u64 = 2_000;
/// What every launch is: one block of one warp, as the reference's are.
const BLOCK: [u32; 3] = [32, 1, 1];

#[derive(Debug, Clone, Default)]
pub struct GpuBench {
    pub launches: u64,
    /// Ours: wall time from the first push to the end of the sync, per launch.
    pub ours_ns: f64,
    /// Ours: what the caller spent pushing, per launch.
    pub ours_caller_ns: f64,
    pub cuda_loop_ns: Option<f64>,
    pub cuda_graph_ns: Option<f64>,
    /// Why there is no reference figure, when there is none.
    pub reference_note: Option<String>,
}

impl GpuBench {
    pub fn render(&self) -> String {
        let mut s = format!(
            "ours: {} empty launches, {:.0} ns a launch from first push to sync ({:.1}M launches/s), caller {:.0} ns a push\n",
            self.launches,
            self.ours_ns,
            1e3 / self.ours_ns,
            self.ours_caller_ns
        );
        if let Some(l) = self.cuda_loop_ns {
            s += &format!(
                "cuda:  cudaLaunchKernel loop {l:.0} ns a launch; ours is {:.2}x its rate\n",
                l / self.ours_ns
            );
        }
        if let Some(g) = self.cuda_graph_ns {
            s += &format!(
                "cuda:  CUDA graph {g:.0} ns a kernel; ours is {:.2}x its rate\n",
                g / self.ours_ns
            );
        }
        if let Some(n) = &self.reference_note {
            s += &format!("cuda:  {n}\n");
        }
        s += &format!(
            "gpu-launch: ours_ns={:.1} cuda_loop_ns={} cuda_graph_ns={} ratio_vs_loop={} ratio_vs_graph={}",
            self.ours_ns,
            fmt_opt(self.cuda_loop_ns),
            fmt_opt(self.cuda_graph_ns),
            fmt_opt(self.cuda_loop_ns.map(|l| l / self.ours_ns)),
            fmt_opt(self.cuda_graph_ns.map(|g| g / self.ours_ns)),
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
) -> Result<GpuBench, HostError> {
    let mut bench = GpuBench {
        launches,
        ..GpuBench::default()
    };
    {
        let host = Host::start(config)?;
        let sm = host.device().chip.chip.compute_capability().unwrap_or(90);
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
            lane.launch(record.clone());
        }
        host.call(|s| s.submit.synchronize(stream))?;
        let records: Vec<_> = (0..launches).map(|_| record.clone()).collect();
        let started = Instant::now();
        for r in records {
            lane.launch(r);
        }
        let pushed = started.elapsed();
        host.call(|s| s.submit.synchronize(stream))?;
        let total = started.elapsed();
        // CAST: nanoseconds of a run of seconds fit f64 exactly enough.
        bench.ours_ns = total.as_nanos() as f64 / launches as f64;
        bench.ours_caller_ns = pushed.as_nanos() as f64 / launches as f64;
        drop(host.shutdown());
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
