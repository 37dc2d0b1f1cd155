//! CUDA graphs as ggml uses them: capture a stream's work, instantiate it,
//! update an instance from a re-capture of the same shape, replay it. A
//! graph is the list of nodes in the order the capture saw them (events
//! between captured streams serialise them, which keeps every dependency).

use crate::error::CudaError;
use crate::runtime::Runtime;
use crate::state::graphs::{Graph, GraphExec};
use crate::state::nodes::Node;
use crate::state::streams::{Capture, StreamTable};
use crate::types::{flags, graph_update};
use crate::work::run;
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
pub fn update(exec: &GraphExec, graph: &Graph) -> Result<(), i32> {
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
    let nodes = exec.nodes.lock().clone();
    for node in nodes {
        run(rt, node, &stream, handle, false, true)?;
    }
    Ok(())
}
