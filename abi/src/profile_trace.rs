//! `MACUDA_PROFILE=FILE`: the per-kernel GPU timeline the submit actor
//! recorded, written at exit as a Chrome trace-event JSON (opens in
//! ui.perfetto.dev) at FILE and a text summary beside it at FILE.txt.
//!
//! The GPU reports when each kernel ended; a kernel of a chain starts when
//! the one before it in the chain ended, and a chain's first kernel when
//! the compute queue reached the chain's head (its own report). A copy's
//! start is inferred the same way on the copy queue. Host pushes and sync
//! points are on the host's clock; the two clocks are aligned by the
//! engine's clock read at the profile's start, where the device has one.
//! The caller's time in our entry points (`crate::call_spans`) goes on the
//! host's side of the trace, and the summary splits the GPU's idle at
//! sync points by whose turn it was.

use crate::call_spans::CallSpan;
use cpp_demangle::{DemangleOptions, Symbol};
use macuda_submit::{ProfileRecord, ProfileReport, ProfiledWork, QueueKind};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// Trace-event process ids: the GPU's engines and the host.
const GPU_PID: u32 = 1;
const HOST_PID: u32 = 2;
/// Thread ids within the GPU process, one per queue.
const COMPUTE_TID: u32 = 1;
const COPY_TID: u32 = 2;
/// Uploads the compute queue writes from its push buffers: a track of
/// their own, so the compute track holds kernels only.
const UPLOAD_TID: u32 = 3;
/// Host thread of sync points; streams' pushes go on tid = 100 + stream.
const SYNC_TID: u32 = 1;
const STREAM_TID_BASE: u32 = 100;
/// The caller's threads in our entry points: tid = 200 + thread.
const CALLER_TID_BASE: u32 = 200;
/// Entry points the summary names by the caller's time in them.
const TOP_CALLS: usize = 12;
/// Kernels the summary names by time.
const TOP_KERNELS: usize = 15;

/// One piece of GPU work placed on the host's timeline (ns).
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub record: ProfileRecord,
    pub start_ns: f64,
    pub end_ns: f64,
}

/// A kernel's readable name: demangled, without its parameter list.
pub fn kernel_name(mangled: &str) -> String {
    Symbol::new(mangled)
        .ok()
        .and_then(|s| s.demangle(&DemangleOptions::new().no_params()).ok())
        .unwrap_or_else(|| mangled.to_string())
}

/// Where each stamped kernel and copy ran, on the host's clock.
pub fn spans(report: &ProfileReport) -> Vec<Span> {
    // GPU ns -> host ns: by the epoch where there is one, else counted
    // from the first report.
    let base = report.gpu_epoch_ns.unwrap_or_else(|| {
        report
            .records
            .iter()
            .filter_map(|r| r.gpu_ns)
            .min()
            .unwrap_or(0)
    });
    let at = |gpu: u64| gpu as f64 - base as f64;
    let mut out = Vec::new();
    // The last end seen on each queue, and each chain's start.
    let mut compute_end: Option<f64> = None;
    let mut copy_end: Option<f64> = None;
    let chain_starts: BTreeMap<u64, f64> = report
        .records
        .iter()
        .filter_map(|r| match r.work {
            ProfiledWork::ChainStart { chain } => r.gpu_ns.map(|g| (chain, at(g))),
            _ => None,
        })
        .collect();
    let mut by_gpu: Vec<&ProfileRecord> = report.records.iter().collect();
    by_gpu.sort_by_key(|r| (r.gpu_ns.unwrap_or(u64::MAX), r.serial));
    for r in by_gpu {
        let Some(gpu) = r.gpu_ns else { continue };
        let end = at(gpu);
        let start = match &r.work {
            ProfiledWork::Kernel {
                chain, position, ..
            } => {
                let chain_start = chain_starts.get(chain).copied();
                if *position == 0 {
                    chain_start.unwrap_or(end)
                } else {
                    compute_end.or(chain_start).unwrap_or(end)
                }
            }
            // Not before it was pushed, nor before the copy ahead of it ended.
            ProfiledWork::Copy { .. } => copy_end.unwrap_or(f64::MIN).max(r.pushed_ns as f64),
            ProfiledWork::Upload { .. } => compute_end.unwrap_or(f64::MIN).max(r.pushed_ns as f64),
            ProfiledWork::ChainStart { .. } => continue,
        };
        let start = start.min(end);
        match r.queue {
            QueueKind::Compute => compute_end = Some(end),
            QueueKind::Copy => copy_end = Some(end),
        }
        out.push(Span {
            record: r.clone(),
            start_ns: start,
            end_ns: end,
        });
    }
    out
}

fn us(ns: f64) -> f64 {
    ns / 1000.0
}

/// The Chrome trace-event document.
pub fn chrome_trace(report: &ProfileReport, calls: &[CallSpan]) -> Value {
    let mut events = vec![
        json!({"ph": "M", "pid": GPU_PID, "name": "process_name", "args": {"name": "GPU"}}),
        json!({"ph": "M", "pid": GPU_PID, "tid": COMPUTE_TID, "name": "thread_name", "args": {"name": "compute queue"}}),
        json!({"ph": "M", "pid": GPU_PID, "tid": COPY_TID, "name": "thread_name", "args": {"name": "copy queue"}}),
        json!({"ph": "M", "pid": GPU_PID, "tid": UPLOAD_TID, "name": "thread_name", "args": {"name": "compute queue: uploads"}}),
        json!({"ph": "M", "pid": HOST_PID, "name": "process_name", "args": {"name": "host"}}),
        json!({"ph": "M", "pid": HOST_PID, "tid": SYNC_TID, "name": "thread_name", "args": {"name": "sync points"}}),
    ];
    for s in spans(report) {
        let r = &s.record;
        let (name, tid, args) = match &r.work {
            ProfiledWork::Kernel {
                name,
                grid,
                block,
                chain,
                position,
                ..
            } => (
                kernel_name(name),
                COMPUTE_TID,
                json!({"mangled": name, "grid": grid, "block": block, "chain": chain,
                       "position": position, "stream": r.stream.map(|s| s.0), "serial": r.serial}),
            ),
            ProfiledWork::Copy { bytes, fill } => (
                if *fill { "fill" } else { "copy" }.to_string(),
                COPY_TID,
                json!({"bytes": bytes, "serial": r.serial}),
            ),
            ProfiledWork::Upload { bytes } => (
                "upload".to_string(),
                UPLOAD_TID,
                json!({"bytes": bytes, "serial": r.serial}),
            ),
            ProfiledWork::ChainStart { .. } => continue,
        };
        events.push(json!({
            "ph": "X", "pid": GPU_PID, "tid": tid, "name": name,
            "ts": us(s.start_ns), "dur": us(s.end_ns - s.start_ns), "args": args,
        }));
    }
    for r in &report.records {
        match (&r.work, r.stream) {
            (ProfiledWork::Kernel { name, .. }, Some(stream)) => events.push(json!({
                "ph": "i", "s": "t", "pid": HOST_PID, "tid": STREAM_TID_BASE + stream.0,
                "name": format!("push {}", kernel_name(name)), "ts": us(r.pushed_ns as f64),
            })),
            (ProfiledWork::ChainStart { chain }, _) => events.push(json!({
                "ph": "i", "s": "p", "pid": HOST_PID, "tid": SYNC_TID,
                "name": format!("chain {chain} handed over"), "ts": us(r.pushed_ns as f64),
            })),
            _ => {}
        }
    }
    for s in &report.syncs {
        events.push(json!({
            "ph": "X", "pid": HOST_PID, "tid": SYNC_TID, "name": "sync",
            "ts": us(s.began_ns as f64), "dur": us(s.ended_ns.saturating_sub(s.began_ns) as f64),
            "args": {"stream": s.stream.map(|x| x.0)},
        }));
    }
    let mut threads: Vec<u32> = calls.iter().map(|c| c.thread).collect();
    threads.sort_unstable();
    threads.dedup();
    for t in threads {
        events.push(
            json!({"ph": "M", "pid": HOST_PID, "tid": CALLER_TID_BASE + t, "name": "thread_name",
                           "args": {"name": format!("caller thread {t} in the runtime")}}),
        );
    }
    for c in calls {
        events.push(json!({
            "ph": "X", "pid": HOST_PID, "tid": CALLER_TID_BASE + c.thread, "name": c.name,
            "ts": us(c.began_ns as f64), "dur": us(c.ended_ns.saturating_sub(c.began_ns) as f64),
        }));
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "producer": "macuda-rs MACUDA_PROFILE",
            "missing_reports": report.missing,
            "clocks_aligned": report.gpu_epoch_ns.is_some(),
        },
    })
}

/// What the summary reports, in numbers (tests read these).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub kernels: usize,
    pub copies: usize,
    pub missing: u64,
    pub kernel_ns: f64,
    /// From the first chain start to the last kernel's end.
    pub span_ns: f64,
    /// Compute-queue idle between chains with no sync point in between.
    pub seam_idle_ns: f64,
    /// Compute-queue idle between chains across a sync point (the host
    /// took its turn: a token boundary).
    pub boundary_idle_ns: f64,
    /// (name, launches, total ns), most time first.
    pub top: Vec<(String, usize, f64)>,
    /// Of the idle at sync points: the caller inside our entry points
    /// (any thread), and outside them (its own code).
    pub boundary_in_calls_ns: f64,
    pub boundary_in_caller_ns: f64,
    /// Of the idle at sync points, by the entry point the caller was in
    /// (name, ns), most first.
    pub boundary_by_call: Vec<(&'static str, f64)>,
    /// The caller's time in our entry points: (name, calls, total ns),
    /// most time first.
    pub calls: Vec<(&'static str, usize, f64)>,
}

/// How much of `[from, to)` the spans cover, counted once where they
/// overlap (`spans` sorted by start).
fn covered(spans: &[(f64, f64)], from: f64, to: f64) -> f64 {
    let mut total = 0.0;
    let mut reach = from;
    for &(a, b) in spans {
        if a >= to {
            break;
        }
        let (a, b) = (a.max(reach), b.min(to));
        if b > a {
            total += b - a;
            reach = b;
        }
    }
    total
}

pub fn summarize(report: &ProfileReport, calls: &[CallSpan]) -> Summary {
    let spans = spans(report);
    let kernels: Vec<&Span> = spans
        .iter()
        .filter(|s| matches!(s.record.work, ProfiledWork::Kernel { .. }))
        .collect();
    let mut s = Summary {
        kernels: kernels.len(),
        copies: spans.len() - kernels.len(),
        missing: report.missing,
        kernel_ns: kernels.iter().map(|k| k.end_ns - k.start_ns).sum(),
        ..Summary::default()
    };
    if let (Some(first), Some(last)) = (kernels.first(), kernels.last()) {
        s.span_ns = last.end_ns - first.start_ns;
    }
    let mut call_spans: Vec<(f64, f64)> = calls
        .iter()
        .map(|c| (c.began_ns as f64, c.ended_ns as f64))
        .collect();
    call_spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut by_call: BTreeMap<&'static str, f64> = BTreeMap::new();
    // Gaps between one chain's last kernel and the next chain's first.
    for w in kernels.windows(2) {
        let (a, b) = (w[0], w[1]);
        let (ProfiledWork::Kernel { chain: ca, .. }, ProfiledWork::Kernel { chain: cb, .. }) =
            (&a.record.work, &b.record.work)
        else {
            continue;
        };
        if ca == cb {
            continue;
        }
        let gap = (b.start_ns - a.end_ns).max(0.0);
        let sync_between = report
            .syncs
            .iter()
            .any(|y| y.ended_ns >= a.record.pushed_ns && y.ended_ns <= b.record.pushed_ns);
        if sync_between {
            s.boundary_idle_ns += gap;
            let (from, to) = (a.end_ns, a.end_ns + gap);
            let inside = covered(&call_spans, from, to);
            s.boundary_in_calls_ns += inside;
            s.boundary_in_caller_ns += gap - inside;
            for c in calls {
                let o = (c.ended_ns as f64).min(to) - (c.began_ns as f64).max(from);
                if o > 0.0 {
                    *by_call.entry(c.name).or_default() += o;
                }
            }
        } else {
            s.seam_idle_ns += gap;
        }
    }
    let mut by_name: BTreeMap<String, (usize, f64)> = BTreeMap::new();
    for k in &kernels {
        if let ProfiledWork::Kernel { name, .. } = &k.record.work {
            let e = by_name.entry(kernel_name(name)).or_default();
            e.0 += 1;
            e.1 += k.end_ns - k.start_ns;
        }
    }
    s.top = by_name.into_iter().map(|(n, (c, t))| (n, c, t)).collect();
    s.top.sort_by(|a, b| b.2.total_cmp(&a.2));
    s.top.truncate(TOP_KERNELS);
    s.boundary_by_call = by_call.into_iter().collect();
    s.boundary_by_call.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut per_call: BTreeMap<&'static str, (usize, f64)> = BTreeMap::new();
    for c in calls {
        let e = per_call.entry(c.name).or_default();
        e.0 += 1;
        e.1 += c.ended_ns.saturating_sub(c.began_ns) as f64;
    }
    s.calls = per_call.into_iter().map(|(n, (k, t))| (n, k, t)).collect();
    s.calls.sort_by(|a, b| b.2.total_cmp(&a.2));
    s.calls.truncate(TOP_CALLS);
    s
}

/// The summary as text.
pub fn summary_text(report: &ProfileReport, calls: &[CallSpan]) -> String {
    let s = summarize(report, calls);
    let pct = |part: f64| {
        if s.span_ns > 0.0 {
            100.0 * part / s.span_ns
        } else {
            0.0
        }
    };
    let mut out = format!(
        "macuda GPU timeline: {} kernels, {} copies, {} reports missing{}\n\
         span {:.1} us from the first chain's start to the last kernel's end\n\
         kernels busy {:.1} us ({:.1}%), idle at chain seams {:.1} us ({:.1}%), idle at sync points {:.1} us ({:.1}%)\n",
        s.kernels,
        s.copies,
        s.missing,
        if report.stamped {
            ""
        } else {
            " (the device executes nothing: no GPU reports)"
        },
        us(s.span_ns),
        us(s.kernel_ns),
        pct(s.kernel_ns),
        us(s.seam_idle_ns),
        pct(s.seam_idle_ns),
        us(s.boundary_idle_ns),
        pct(s.boundary_idle_ns),
    );
    if !calls.is_empty() {
        out.push_str(&format!(
            "of the idle at sync points: the caller in our entry points {:.1} us, in its own code {:.1} us; by entry point:",
            us(s.boundary_in_calls_ns),
            us(s.boundary_in_caller_ns),
        ));
        for (name, ns) in &s.boundary_by_call {
            out.push_str(&format!(" {name} {:.1} us;", us(*ns)));
        }
        out.push('\n');
        out.push_str("the caller's time in our entry points:\n");
        push_totals(&mut out, &s.calls);
    }
    out.push_str("top kernels by GPU time (start inferred from the one before in its chain):\n");
    push_totals(&mut out, &s.top);
    out
}

/// One line per (name, count, total ns): the total, the count and the mean.
fn push_totals(out: &mut String, rows: &[(impl std::fmt::Display, usize, f64)]) {
    for (name, count, ns) in rows {
        out.push_str(&format!(
            "  {:>10.1} us  {:>6} x {:>8.2} us  {name}\n",
            us(*ns),
            count,
            us(*ns / *count as f64),
        ));
    }
}

/// Write the trace at `path` and the summary at `path` + `.txt`.
///
/// # Errors
/// Either file not written.
pub fn write(report: &ProfileReport, calls: &[CallSpan], path: &Path) -> std::io::Result<()> {
    let trace = serde_json::to_vec(&chrome_trace(report, calls)).map_err(std::io::Error::other)?;
    std::fs::write(path, trace)?;
    let mut txt = path.as_os_str().to_owned();
    txt.push(".txt");
    std::fs::write(txt, summary_text(report, calls))
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_submit::{KernelId, ProfiledSync, StreamId};

    fn record(
        serial: u64,
        work: ProfiledWork,
        queue: QueueKind,
        pushed: u64,
        gpu: u64,
    ) -> ProfileRecord {
        ProfileRecord {
            serial,
            work,
            stream: Some(StreamId(1)),
            queue,
            pushed_ns: pushed,
            gpu_ns: Some(gpu),
        }
    }

    fn kernel(name: &str, chain: u64, position: u32) -> ProfiledWork {
        ProfiledWork::Kernel {
            kernel: KernelId(0),
            name: name.into(),
            grid: [2, 1, 1],
            block: [64, 1, 1],
            chain,
            position,
        }
    }

    /// Two chains in one token, a sync, a third chain: the seam and the
    /// boundary are told apart, kernels start where the one before ended.
    fn report() -> ProfileReport {
        use QueueKind::Compute;
        let mm = "_Z7rmsnormPKfPfi";
        ProfileReport {
            records: vec![
                record(1, kernel(mm, 1, 0), Compute, 10, 1_100),
                record(2, kernel("vector_add", 1, 1), Compute, 20, 1_300),
                record(3, ProfiledWork::ChainStart { chain: 1 }, Compute, 30, 1_000),
                record(4, kernel(mm, 2, 0), Compute, 40, 1_600),
                record(5, ProfiledWork::ChainStart { chain: 2 }, Compute, 50, 1_500),
                record(6, kernel(mm, 3, 0), Compute, 5_000, 6_100),
                record(
                    7,
                    ProfiledWork::ChainStart { chain: 3 },
                    Compute,
                    5_010,
                    6_000,
                ),
                record(
                    8,
                    ProfiledWork::Copy {
                        bytes: 64,
                        fill: false,
                    },
                    QueueKind::Copy,
                    60,
                    1_700,
                ),
            ],
            syncs: vec![ProfiledSync {
                stream: Some(StreamId(1)),
                began_ns: 100,
                ended_ns: 2_000,
            }],
            missing: 0,
            gpu_epoch_ns: Some(0),
            stamped: true,
        }
    }

    /// The caller across the sync of `report()`: in cudaStreamSynchronize
    /// until 2,100, in its own code, then in cudaGraphLaunch from 4,000.
    fn calls() -> Vec<CallSpan> {
        let span = |name, began_ns, ended_ns| CallSpan {
            name,
            thread: 1,
            began_ns,
            ended_ns,
        };
        vec![
            span("cudaStreamSynchronize", 90, 2_100),
            span("cudaGraphLaunch", 4_000, 5_020),
        ]
    }

    #[test]
    fn the_idle_at_a_sync_point_is_split_by_whose_turn_it_was() {
        let s = summarize(&report(), &calls());
        // The gap is 1600 -> 6000: the sync until 2100 (500), the caller's
        // own code 2100 -> 4000 (1900), the graph launch 4000 -> 5020
        // (1020), then no one until the chain started at 6000 (980).
        assert_eq!(s.boundary_idle_ns, 4400.0);
        assert_eq!(s.boundary_in_calls_ns, 1520.0);
        assert_eq!(s.boundary_in_caller_ns, 2880.0);
        assert_eq!(
            s.boundary_by_call,
            [
                ("cudaGraphLaunch", 1020.0),
                ("cudaStreamSynchronize", 500.0)
            ]
        );
        assert_eq!(s.calls[0], ("cudaStreamSynchronize", 1, 2010.0));
        let text = summary_text(&report(), &calls());
        assert!(text.contains("in its own code 2.9 us"), "{text}");
        assert!(text.contains("cudaGraphLaunch 1.0 us"), "{text}");
    }

    #[test]
    fn kernels_start_where_their_chain_or_the_one_before_them_left_off() {
        let s = spans(&report());
        let k: Vec<(u64, f64, f64)> = s
            .iter()
            .filter(|x| matches!(x.record.work, ProfiledWork::Kernel { .. }))
            .map(|x| (x.record.serial, x.start_ns, x.end_ns))
            .collect();
        assert_eq!(
            k,
            [
                (1, 1000.0, 1100.0),
                (2, 1100.0, 1300.0),
                (4, 1500.0, 1600.0),
                (6, 6000.0, 6100.0)
            ]
        );
    }

    #[test]
    fn the_summary_splits_idle_into_seams_and_sync_points_and_ranks_kernels() {
        let s = summarize(&report(), &[]);
        assert_eq!((s.kernels, s.copies, s.missing), (4, 1, 0));
        assert_eq!(s.kernel_ns, 100.0 + 200.0 + 100.0 + 100.0);
        assert_eq!(s.seam_idle_ns, 200.0, "1300 -> 1500 inside the token");
        assert_eq!(s.boundary_idle_ns, 4400.0, "1600 -> 6000 across the sync");
        assert_eq!(s.top[0], ("rmsnorm".to_string(), 3, 300.0));
        let text = summary_text(&report(), &[]);
        assert!(
            text.contains("4 kernels, 1 copies, 0 reports missing"),
            "{text}"
        );
    }

    #[test]
    fn the_trace_is_trace_event_json_with_demangled_names() {
        let t = chrome_trace(&report(), &calls());
        let events = t["traceEvents"].as_array().unwrap();
        let kernel_events: Vec<&Value> = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["tid"] == COMPUTE_TID && e["pid"] == GPU_PID)
            .collect();
        assert_eq!(kernel_events.len(), 4);
        assert_eq!(kernel_events[0]["name"], "rmsnorm");
        assert_eq!(kernel_events[0]["args"]["mangled"], "_Z7rmsnormPKfPfi");
        assert_eq!(kernel_events[0]["ts"], 1.0);
        assert_eq!(kernel_events[0]["dur"], 0.1);
        assert!(events.iter().any(|e| e["name"] == "sync" && e["ph"] == "X"));
        let graph_launch = events
            .iter()
            .find(|e| e["name"] == "cudaGraphLaunch")
            .unwrap();
        assert_eq!(graph_launch["tid"], CALLER_TID_BASE + 1);
        assert_eq!(graph_launch["ts"], 4.0);
        assert_eq!(t["otherData"]["missing_reports"], 0);
        // Round trip as JSON text.
        let text = serde_json::to_string(&t).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["traceEvents"].as_array().unwrap().len(), events.len());
    }

    /// An upload the compute queue wrote lies on a track of its own and
    /// holds back the kernel after it.
    #[test]
    fn an_inline_upload_has_its_own_track_and_the_next_kernel_starts_after_it() {
        use QueueKind::Compute;
        let r = ProfileReport {
            records: vec![
                record(1, ProfiledWork::Upload { bytes: 256 }, Compute, 10, 900),
                record(2, ProfiledWork::ChainStart { chain: 1 }, Compute, 20, 950),
                record(3, kernel("_Z7rmsnormPKfPfi", 1, 0), Compute, 20, 1_400),
            ],
            syncs: vec![],
            missing: 0,
            gpu_epoch_ns: Some(0),
            stamped: true,
        };
        let t = chrome_trace(&r, &[]);
        let events = t["traceEvents"].as_array().unwrap();
        let upload = events
            .iter()
            .find(|e| e["ph"] == "X" && e["name"] == "upload")
            .unwrap();
        assert_eq!(upload["tid"], UPLOAD_TID);
        assert_eq!(upload["args"]["bytes"], 256);
        assert!(events
            .iter()
            .filter(|e| e["ph"] == "X" && e["tid"] == COMPUTE_TID)
            .all(|e| e["name"] == "rmsnorm"));
        let k = spans(&r)
            .into_iter()
            .find(|s| matches!(s.record.work, ProfiledWork::Kernel { .. }))
            .unwrap();
        assert_eq!(
            k.start_ns, 950.0,
            "from its chain's start, after the upload"
        );
    }

    #[test]
    fn write_puts_the_trace_and_the_summary_side_by_side() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("decode.json");
        write(&report(), &calls(), &path).unwrap();
        let trace: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert!(trace["traceEvents"].is_array());
        let txt = std::fs::read_to_string(dir.path().join("decode.json.txt")).unwrap();
        assert!(txt.starts_with("macuda GPU timeline"), "{txt}");
    }
}
