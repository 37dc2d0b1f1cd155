//! Work on a stream: a kernel launch, a copy, a fill, an event record or
//! wait. Issued on a capturing stream it is recorded (a graph node);
//! otherwise it runs. A graph's replay runs the same nodes, so captured
//! and direct work go through one path.

use crate::error::CudaError;
use crate::memory::{run_copy, run_copy2d, run_fill, Copy2dOp, CopyOp, FillOp};
use crate::registry::KernelEntry;
use crate::runtime::Runtime;
use crate::streams::StreamState;
use macuda_submit::{LaneItem, ParamBlock};
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[derive(Clone)]
pub struct KernelNode {
    pub entry: Arc<KernelEntry>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared: u32,
    /// A copy of the parameter block: the caller's argument pointers are
    /// dead once the launch call returns.
    pub params: ParamBlock,
}

#[derive(Clone)]
pub enum Node {
    Kernel(KernelNode),
    Copy(CopyOp),
    Copy2d(Copy2dOp),
    Fill(FillOp),
    /// An event record (by handle).
    Record(usize),
    /// A wait for an event (by handle).
    Wait(usize),
}

impl Node {
    /// The kind, for a graph update's topology check.
    pub fn kind(&self) -> u8 {
        match self {
            Node::Kernel(_) => 0,
            Node::Copy(_) | Node::Copy2d(_) => 1,
            Node::Fill(_) => 2,
            Node::Record(_) => 3,
            Node::Wait(_) => 4,
        }
    }
}

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
            crate::launch::launch_now(
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
