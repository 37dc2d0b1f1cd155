//! CUDA graphs as ggml uses them: capture a stream's work, instantiate it,
//! update an instance from a re-capture of the same shape, replay it. A
//! graph is the list of nodes in the order the capture saw them (events
//! between captured streams serialise them, which keeps every dependency).
//!
//! An instance's first launch records each run of its kernel nodes as a
//! chain on the card (`macuda_submit`'s recorded chains), and every launch
//! then replays a run with one lane item instead of building each kernel's
//! launch again; the other nodes run as a stream runs them. The knobs that
//! must see every launch (the launch log, synchronous launches, an injected
//! GPU fault, the GPU timeline) replay node by node instead.

use crate::error::CudaError;
use crate::runtime::Runtime;
use crate::state::graphs::{Graph, GraphExec, ReplayPlan, ReplayStep};
use crate::state::nodes::Node;
use crate::state::streams::{Capture, StreamTable};
use crate::types::{flags, graph_update};
use crate::work::run;
use macuda_submit::{LaneItem, LaneLaunch, StreamId};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `cudaStreamBeginCapture`.
pub fn begin(rt: &Runtime, handle: usize, mode: i32) -> Result<(), CudaError> {
    if !(flags::CAPTURE_MODE_GLOBAL..=flags::CAPTURE_MODE_RELAXED).contains(&mode) {
        return Err(CudaError::INVALID_VALUE);
    }
    // The legacy stream synchronises with every other: it cannot capture.
    if StreamTable::is_default(handle) && handle != crate::types::STREAM_PER_THREAD {
        return Err(CudaError::STREAM_CAPTURE_UNSUPPORTED);
    }
    let stream = rt.streams.get(handle)?;
    if stream.capturing().is_some() {
        return Err(CudaError::ILLEGAL_STATE);
    }
    stream.capture.store(Some(Arc::new(Capture {
        mode,
        thread: std::thread::current().id(),
        nodes: Mutex::new(Vec::new()),
        invalidated: AtomicBool::new(false),
        origin: handle,
    })));
    if mode != flags::CAPTURE_MODE_RELAXED {
        rt.streams.begin_strict();
    }
    Ok(())
}

/// `cudaStreamEndCapture`: the graph's handle.
pub fn end(rt: &Runtime, handle: usize) -> Result<usize, CudaError> {
    let stream = rt.streams.get(handle)?;
    let capture = stream.capturing().ok_or(CudaError::ILLEGAL_STATE)?;
    if capture.origin != handle {
        return Err(CudaError::STREAM_CAPTURE_UNMATCHED);
    }
    if capture.mode != flags::CAPTURE_MODE_RELAXED && capture.thread != std::thread::current().id()
    {
        return Err(CudaError::STREAM_CAPTURE_WRONG_THREAD);
    }
    for s in rt.streams.in_capture(&capture) {
        s.capture.store(None);
    }
    if capture.mode != flags::CAPTURE_MODE_RELAXED {
        rt.streams.end_strict();
    }
    if capture.invalidated.load(Ordering::Acquire) {
        return Err(CudaError::STREAM_CAPTURE_INVALIDATED);
    }
    let nodes = std::mem::take(&mut *capture.nodes.lock());
    Ok(rt.graphs.add_graph(Graph { nodes }))
}

/// `cudaStreamIsCapturing`.
pub fn status(rt: &Runtime, handle: usize) -> Result<i32, CudaError> {
    let stream = rt.streams.get(handle)?;
    Ok(match stream.capturing() {
        None => flags::CAPTURE_STATUS_NONE,
        Some(c) if c.invalidated.load(Ordering::Acquire) => flags::CAPTURE_STATUS_INVALIDATED,
        Some(_) => flags::CAPTURE_STATUS_ACTIVE,
    })
}

/// `cudaStreamWaitEvent` on an event recorded inside a capture: the
/// waiting stream joins that capture (a fork).
pub fn join(rt: &Runtime, handle: usize, event: usize) -> Result<bool, CudaError> {
    let ev = rt.events.get(event)?;
    let Some(capture) = ev.captured.load_full() else {
        return Ok(false);
    };
    let stream = rt.streams.get(handle)?;
    match stream.capturing() {
        Some(c) if Arc::ptr_eq(&c, &capture) => Ok(true),
        Some(_) => Err(CudaError::STREAM_CAPTURE_UNMATCHED),
        None => {
            stream.capture.store(Some(capture));
            Ok(true)
        }
    }
}

/// `cudaGraphExecUpdate`: the instance takes the new graph's parameters
/// when both have the same nodes (kinds, and kernels); otherwise why not.
/// Its recorded chains hold the old parameters: they are forgotten, and
/// the next launch records afresh.
pub fn update(rt: &Runtime, exec: &GraphExec, graph: &Graph) -> Result<Result<(), i32>, CudaError> {
    let r = take_parameters(exec, graph);
    if r.is_ok() {
        forget(rt, exec)?;
    }
    Ok(r)
}

fn take_parameters(exec: &GraphExec, graph: &Graph) -> Result<(), i32> {
    let mut nodes = exec.nodes.lock();
    if nodes.len() != graph.nodes.len() {
        return Err(graph_update::TOPOLOGY_CHANGED);
    }
    for (old, new) in nodes.iter().zip(&graph.nodes) {
        if old.kind() != new.kind() {
            return Err(graph_update::NODE_TYPE_CHANGED);
        }
        if let (Node::Kernel(a), Node::Kernel(b)) = (old, new) {
            if !Arc::ptr_eq(&a.entry, &b.entry) {
                return Err(graph_update::FUNCTION_CHANGED);
            }
        }
    }
    nodes.clone_from_slice(&graph.nodes);
    Ok(())
}

/// `cudaGraphLaunch`: replay every node on the stream, in order.
pub fn launch(rt: &Runtime, exec: &GraphExec, handle: usize) -> Result<(), CudaError> {
    let stream = rt.streams.for_work(handle)?;
    if stream.capturing().is_some() {
        // A graph launched into a capture would become a child graph.
        return Err(CudaError::NOT_SUPPORTED);
    }
    if !records_graphs(rt) {
        let nodes = exec.nodes.lock().clone();
        for node in nodes {
            run(rt, node, &stream, handle, false, true)?;
        }
        return Ok(());
    }
    let plan = plan(rt, exec, stream.id)?;
    for step in &plan.steps {
        match step {
            ReplayStep::Chain(chain) => rt.push(LaneItem::Replay {
                stream: stream.id,
                chain: *chain,
            })?,
            ReplayStep::Node(node) => run(rt, node.clone(), &stream, handle, false, true)?,
        }
    }
    Ok(())
}

/// Whether graph launches replay recorded chains: not when asked to replay
/// node by node, nor while a knob must see each launch on its way (the
/// launch log, synchronous launches, an injected GPU fault, the GPU
/// timeline's per-launch reports).
fn records_graphs(rt: &Runtime) -> bool {
    let k = &rt.knobs;
    !k.graph_nodes
        && rt.log.is_none()
        && !k.sync_launches
        && k.gpu_fault_at.is_none()
        && k.profile.is_none()
}

/// The instance's replay plan, made now if it has none: each run of
/// kernel nodes recorded as one chain.
fn plan(rt: &Runtime, exec: &GraphExec, stream: StreamId) -> Result<Arc<ReplayPlan>, CudaError> {
    let mut slot = exec.plan.lock();
    if let Some(p) = slot.as_ref() {
        return Ok(Arc::clone(p));
    }
    let nodes = exec.nodes.lock().clone();
    let mut steps = Vec::new();
    if let Err(e) = plan_steps(rt, nodes, stream, &mut steps) {
        // What was recorded before the failure is of no use.
        for step in &steps {
            if let ReplayStep::Chain(chain) = step {
                let _ = rt.push(LaneItem::ForgetChain { chain: *chain });
            }
        }
        return Err(e);
    }
    let plan = Arc::new(ReplayPlan { steps });
    *slot = Some(Arc::clone(&plan));
    Ok(plan)
}

fn plan_steps(
    rt: &Runtime,
    nodes: Vec<Node>,
    stream: StreamId,
    steps: &mut Vec<ReplayStep>,
) -> Result<(), CudaError> {
    let mut run_of_kernels = Vec::new();
    for node in nodes {
        match node {
            Node::Kernel(k) => {
                let r = k.entry.resolve(rt)?;
                run_of_kernels.push(LaneLaunch {
                    stream,
                    kernel: r.kernel,
                    grid: k.grid,
                    block: k.block,
                    dynamic_shared_bytes: k.shared,
                    params: k.params,
                });
            }
            other => {
                record_run(rt, &mut run_of_kernels, steps)?;
                steps.push(ReplayStep::Node(other));
            }
        }
    }
    record_run(rt, &mut run_of_kernels, steps)
}

/// Record the kernels gathered so far (if any) as one chain.
fn record_run(
    rt: &Runtime,
    launches: &mut Vec<LaneLaunch>,
    steps: &mut Vec<ReplayStep>,
) -> Result<(), CudaError> {
    if launches.is_empty() {
        return Ok(());
    }
    let launches = std::mem::take(launches);
    let chain = rt.call(|s| s.submit.record_chain(launches))?;
    steps.push(ReplayStep::Chain(chain));
    Ok(())
}

/// Drop the instance's replay plan: its chains are forgotten on the lane,
/// after every replay pushed before, and their memory goes back once those
/// have run.
pub fn forget(rt: &Runtime, exec: &GraphExec) -> Result<(), CudaError> {
    let Some(plan) = exec.plan.lock().take() else {
        return Ok(());
    };
    for chain in plan.chains() {
        rt.push(LaneItem::ForgetChain { chain })?;
    }
    Ok(())
}
