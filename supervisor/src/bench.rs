//! `macuda bench launch`: the host cost of a launch through the lane on the
//! null device, and the descriptor bytes a steady decode-like token
//! delivers per flush with cross-token diffing on and off.

use crate::host::{Host, HostConfig, HostError};
use macuda_pci::DeviceSpec;
use macuda_submit::SubmitError;
use macuda_submit::{
    KernelDesc, KernelId, LaneLaunch, LaunchLane, ParamBlock, StreamId, SubmitConfig,
};
use std::time::{Duration, Instant};

/// A ggml-sized kernel: 12 eight-byte parameters.
const PARAMS: usize = 12;
/// Distinct kernels in a token, as a decode step cycles through its ops.
const KERNELS_PER_TOKEN: u32 = 20;
/// Launches in one token (the seed notes measured 1,600-2,000).
const TOKEN_LAUNCHES: u64 = 1_600;
/// Tokens run for the flush measurement; the first ones warm the mirror.
const TOKENS: u64 = 24;
const WARM_TOKENS: u64 = 4;
/// Lane records callers may run ahead by in the benchmark.
const LANE_CAPACITY: usize = 1 << 15;
/// Launches whose parameters change every token (positions, lengths).
const CHANGING_PER_TOKEN: u64 = 24;

#[derive(Debug, Clone, Copy)]
pub struct LaunchBench {
    pub launches: u64,
    pub caller_ns: f64,
    pub build_ns: f64,
    pub flush_bytes_diffing: f64,
    pub flush_bytes_plain: f64,
    pub flushes_per_token: f64,
}

fn host(diffing: bool) -> Result<Host, HostError> {
    let mut config = HostConfig::new(DeviceSpec::Null);
    config.deadline = Duration::from_secs(30);
    config.submit = SubmitConfig {
        diffing,
        lane_capacity: LANE_CAPACITY,
        ..SubmitConfig::default()
    };
    config.report_dir = std::env::temp_dir().join("macuda-bench-reports");
    Host::start(config)
}

fn register(host: &Host, sm_param_base: u32) -> Result<Vec<KernelId>, HostError> {
    (0..KERNELS_PER_TOKEN)
        .map(|i| {
            let k = KernelDesc {
                name: format!("ggml_op_{i}"),
                entry: 0x1_0000_0000 + u64::from(i) * 0x1000,
                code_bytes: 2048,
                registers: 32 + i % 8,
                barriers: 1,
                shared_bytes: 0x400 * u64::from(1 + i % 4),
                local_bytes: 0,
                param_base: sm_param_base,
                param_bytes: (PARAMS * 8) as u32,
                banks: Vec::new(),
            };
            host.call(|s| s.submit.register_kernel(k))
        })
        .collect()
}

fn params(i: u64, token: u64) -> [u8; PARAMS * 8] {
    let mut p = [0u8; PARAMS * 8];
    for k in 0..PARAMS as u64 {
        // Buffer pointers and sizes that stay put from token to token...
        let mut v = 0x7000_0000_0000 + i * 0x10000 + k * 0x100;
        // ... except in the launches that carry the token's position.
        if k == 3 && i.is_multiple_of(TOKEN_LAUNCHES / CHANGING_PER_TOKEN) {
            v = token;
        }
        p[k as usize * 8..k as usize * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    p
}

fn launch(kernels: &[KernelId], stream: StreamId, i: u64, token: u64) -> LaneLaunch {
    LaneLaunch {
        stream,
        kernel: kernels[(i % kernels.len() as u64) as usize],
        grid: [(i % 64) as u32 + 1, 1, 1],
        block: [256, 1, 1],
        dynamic_shared_bytes: 0,
        params: ParamBlock::new(&params(i, token)),
    }
}

/// Push `n` launches through the lane; returns caller ns per launch and
/// the actor's build ns per launch.
fn throughput(n: u64) -> Result<(f64, f64), HostError> {
    let host = host(true)?;
    let base = host
        .device()
        .chip
        .chip
        .compute_capability()
        .and_then(macuda_hw::cbank0::for_sm);
    let kernels = register(&host, base.map_or(0x380, |a| a.param_base))?;
    let lane: LaunchLane = host.call(|s| s.submit.lane())?;
    let stream = host.call(|s| s.submit.create_stream())?;
    let before = host.call(|s| s.submit.stats())?;
    // The caller's cost is the push itself: records are made beforehand,
    // and each token is pushed into a drained lane, so the figure is what a
    // caller pays while the actor keeps up, not the actor's own throughput
    // (which build_ns measures). Tokens end in a synchronisation, as decode
    // steps do, so descriptors line up from token to token.
    let mut caller = Duration::ZERO;
    let mut pushed = 0;
    let mut token = 0;
    while pushed < n {
        let count = TOKEN_LAUNCHES.min(n - pushed);
        let records: Vec<LaneLaunch> = (0..count)
            .map(|i| launch(&kernels, stream, i, token))
            .collect();
        let started = Instant::now();
        for r in records {
            lane.launch(r).map_err(SubmitError::from)?;
        }
        caller += started.elapsed();
        // The null device declines the hand-over; that is expected here.
        let _ = host.call(|s| s.submit.synchronize(stream));
        pushed += count;
        token += 1;
    }
    // The null device declines the hand-over; that is expected here.
    let _ = host.call(|s| s.submit.synchronize(stream));
    let after = host.call(|s| s.submit.stats())?;
    let built = after.launches - before.launches;
    let build_ns = (after.build_ns - before.build_ns) as f64 / built.max(1) as f64;
    drop(host.shutdown());
    Ok((caller.as_nanos() as f64 / n as f64, build_ns))
}

/// Descriptor bytes per flush over steady-state tokens.
fn steady_tokens(diffing: bool) -> Result<(f64, f64), HostError> {
    let host = host(diffing)?;
    let base = host
        .device()
        .chip
        .chip
        .compute_capability()
        .and_then(macuda_hw::cbank0::for_sm);
    let kernels = register(&host, base.map_or(0x380, |a| a.param_base))?;
    let lane: LaunchLane = host.call(|s| s.submit.lane())?;
    let stream = host.call(|s| s.submit.create_stream())?;
    let mut measured = (0u64, 0u64);
    for token in 0..TOKENS {
        let before = host.call(|s| s.submit.stats())?;
        for i in 0..TOKEN_LAUNCHES {
            lane.launch(launch(&kernels, stream, i, token))
                .map_err(SubmitError::from)?;
        }
        // The token boundary: the host samples and waits (a standstill).
        let _ = host.call(|s| s.submit.synchronize(stream));
        let after = host.call(|s| s.submit.stats())?;
        if token >= WARM_TOKENS {
            measured.0 += after.descriptor_bytes - before.descriptor_bytes;
            measured.1 += after.flushes - before.flushes;
        }
    }
    drop(host.shutdown());
    let flushes = measured.1.max(1) as f64;
    Ok((
        measured.0 as f64 / flushes,
        flushes / (TOKENS - WARM_TOKENS) as f64,
    ))
}

/// Run the whole benchmark.
///
/// # Errors
/// The null Host failing to start or answer.
pub fn launch_bench(launches: u64) -> Result<LaunchBench, HostError> {
    let (caller_ns, build_ns) = throughput(launches)?;
    let (flush_bytes_diffing, flushes_per_token) = steady_tokens(true)?;
    let (flush_bytes_plain, _) = steady_tokens(false)?;
    Ok(LaunchBench {
        launches,
        caller_ns,
        build_ns,
        flush_bytes_diffing,
        flush_bytes_plain,
        flushes_per_token,
    })
}

impl LaunchBench {
    pub fn render(&self) -> String {
        format!(
            "launch lane on the null device, {} launches of a kernel with {PARAMS} parameters:\n\
             \x20 caller side: {:.0} ns per launch (goal <= 100)\n\
             \x20 actor side, QMD + bank 0 into the shadow: {:.0} ns per launch (goal <= 300)\n\
             steady tokens of {TOKEN_LAUNCHES} launches ({KERNELS_PER_TOKEN} kernels, {CHANGING_PER_TOKEN} with a changing parameter), chains of 128, {:.1} flushes per token:\n\
             \x20 descriptor bytes per flush, cross-token aligned diffing on:  {:.0} (goal <= 2048)\n\
             \x20 descriptor bytes per flush, diffing off:                      {:.0}\n\
             launch: caller_ns={:.0} build_ns={:.0} flush_bytes={:.0}",
            self.launches,
            self.caller_ns,
            self.build_ns,
            self.flushes_per_token,
            self.flush_bytes_diffing,
            self.flush_bytes_plain,
            self.caller_ns,
            self.build_ns,
            self.flush_bytes_diffing
        )
    }
}
