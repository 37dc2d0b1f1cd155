//! Work on a stream: a kernel launch, a copy, a fill, an event record or
//! wait. Issued on a capturing stream it is recorded (a graph node);
//! otherwise it runs. A graph's replay runs the same nodes, so captured
//! and direct work go through one path.

use crate::error::CudaError;
use crate::launch_log::LoggedLaunch;
use crate::memory::{run_copy, run_copy2d, run_fill};
use crate::runtime::Runtime;
use crate::state::nodes::Node;
use crate::state::registry::Resolved;
use crate::state::streams::StreamState;
use macuda_submit::{LaneItem, LaneLaunch, ParamBlock};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Issue `node` on the stream `handle` names. `sync`: the call returns
/// only once the work is done (cudaMemcpy and the like), which a capture
/// cannot record.
pub fn issue(rt: &Runtime, handle: usize, node: Node, sync: bool) -> Result<(), CudaError> {
    let stream = rt.streams.for_work(handle)?;
    if let Some(capture) = stream.capture.load().as_ref() {
        if sync {
            capture.invalidated.store(true, Ordering::Release);
            return Err(CudaError::STREAM_CAPTURE_UNSUPPORTED);
        }
        if let Node::Record(e) = node {
            // Inside a capture an event is an edge, not a node: streams
            // that wait on it join the capture, and the graph's one order
            // (the capture's) keeps the dependency.
            rt.events.get(e)?.captured.store(Some(Arc::clone(capture)));
            return Ok(());
        }
        capture.nodes.lock().push(node);
        return Ok(());
    }
    run(rt, node, &stream, handle, sync, false)
}

/// Run `node` on `stream` now.
pub fn run(
    rt: &Runtime,
    node: Node,
    stream: &StreamState,
    handle: usize,
    sync: bool,
    from_graph: bool,
) -> Result<(), CudaError> {
    match node {
        Node::Kernel(k) => {
            let r = k.entry.resolve(rt)?;
            launch_now(
                rt, r, k.grid, k.block, k.shared, k.params, stream, handle, from_graph,
            )
        }
        Node::Copy(op) => {
            let (d, s) = op.ends(rt)?;
            run_copy(rt, d, s, op.bytes, stream, sync)
        }
        Node::Copy2d(op) => {
            let (d, s) = op.check(rt)?;
            run_copy2d(rt, &op, d, s, stream, sync)
        }
        Node::Fill(op) => {
            op.check(rt)?;
            run_fill(rt, &op, stream, sync)
        }
        Node::Record(e) => {
            let ev = rt.events.get(e)?;
            rt.push(LaneItem::RecordEvent {
                stream: stream.id,
                event: ev.id,
                timed: ev.timed(),
            })?;
            ev.recorded.store(true, Ordering::Release);
            ev.captured.store(None);
            Ok(())
        }
        Node::Wait(e) => {
            let ev = rt.events.get(e)?;
            rt.push(LaneItem::WaitEvent {
                stream: stream.id,
                event: ev.id,
            })?;
            Ok(())
        }
    }
}

/// Hand a checked launch to the device: the launch log, then the lane;
/// with `MACUDA_SYNC_LAUNCHES`, wait for it and name it if it failed.
///
/// # Errors
/// Only in that synchronous mode: the launch's own error.
#[allow(clippy::too_many_arguments)]
pub fn launch_now(
    rt: &Runtime,
    r: &Resolved,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    params: ParamBlock,
    stream: &StreamState,
    handle: usize,
    from_graph: bool,
) -> Result<(), CudaError> {
    if let Some(log) = &rt.log {
        log.write(&LoggedLaunch {
            mangled: &r.mangled,
            demangled: &r.demangled,
            grid,
            block,
            shared,
            stream: handle,
            params: params.as_slice(),
            graph: from_graph,
        });
    }
    // Counted only while the knob is set: nothing on the launch path else.
    let params = match rt.knobs.gpu_fault_at {
        None => params,
        Some(_) => spoiled(rt, r, params),
    };
    rt.push(LaneItem::Launch(LaneLaunch {
        stream: stream.id,
        kernel: r.kernel,
        grid,
        block,
        dynamic_shared_bytes: shared,
        params,
    }))?;
    if !rt.knobs.sync_launches {
        return Ok(());
    }
    rt.synchronize(stream.id).inspect_err(|e| {
            eprintln!(
                "macuda: {}: {} (grid {grid:?}, block {block:?}, {shared} bytes of dynamic shared memory) failed: {}",
                crate::knobs::SYNC_LAUNCHES,
                r.demangled,
                e.name().to_string_lossy()
            );
        })
}

/// With `MACUDA_INJECT_GPU_FAULT`, this launch's parameters, or the
/// spoiled ones if it is the launch to fault.
fn spoiled(rt: &Runtime, r: &Resolved, params: ParamBlock) -> ParamBlock {
    let n = rt.launches.fetch_add(1, Ordering::Relaxed) + 1;
    match crate::knobs::faulted_params(rt.knobs.gpu_fault_at, n, params.as_slice(), &r.params) {
        Some(bad) => {
            eprintln!(
                "macuda: {}: launch {n} ({}) reads through an unmapped address",
                crate::knobs::INJECT_GPU_FAULT,
                r.demangled
            );
            ParamBlock::new(&bad)
        }
        None => params,
    }
}
