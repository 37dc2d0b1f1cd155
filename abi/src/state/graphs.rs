//! The graphs and their instances a program holds, by handle.

use crate::error::CudaError;
use crate::hash::AddressMap;
use crate::state::nodes::Node;
use crate::state::streams::HandleCounter;
use parking_lot::Mutex;
use std::sync::Arc;

pub struct Graph {
    pub nodes: Vec<Node>,
}

pub struct GraphExec {
    pub nodes: Mutex<Vec<Node>>,
    /// How a launch replays the nodes, made at the first launch after
    /// instantiation or an update (`crate::graph::launch`).
    pub plan: Mutex<Option<Arc<ReplayPlan>>>,
}

/// One step of a graph's replay.
pub enum ReplayStep {
    /// A run of kernel nodes, recorded once as a chain on the card.
    Chain(macuda_submit::RecordedChainId),
    /// Any other node, run as a stream runs it.
    Node(Node),
}

/// A graph instance's nodes as its launches replay them.
pub struct ReplayPlan {
    pub steps: Vec<ReplayStep>,
}

impl ReplayPlan {
    /// The recorded chains, to forget when the plan is dropped.
    pub fn chains(&self) -> impl Iterator<Item = macuda_submit::RecordedChainId> + '_ {
        self.steps.iter().filter_map(|s| match s {
            ReplayStep::Chain(c) => Some(*c),
            ReplayStep::Node(_) => None,
        })
    }
}

pub struct GraphTable {
    graphs: AddressMap<Arc<Graph>>,
    execs: AddressMap<Arc<GraphExec>>,
    graph_handles: HandleCounter,
    exec_handles: HandleCounter,
}

impl Default for GraphTable {
    fn default() -> Self {
        GraphTable {
            graphs: AddressMap::default(),
            execs: AddressMap::default(),
            graph_handles: HandleCounter::new(0x4700_0000),
            exec_handles: HandleCounter::new(0x4800_0000),
        }
    }
}

impl GraphTable {
    pub fn graph(&self, h: usize) -> Result<Arc<Graph>, CudaError> {
        self.graphs
            .get(&h)
            .map(|g| Arc::clone(&g))
            .ok_or(CudaError::INVALID_VALUE)
    }

    pub fn exec(&self, h: usize) -> Result<Arc<GraphExec>, CudaError> {
        self.execs
            .get(&h)
            .map(|g| Arc::clone(&g))
            .ok_or(CudaError::INVALID_VALUE)
    }

    pub fn add_graph(&self, g: Graph) -> usize {
        let h = self.graph_handles.next();
        self.graphs.insert(h, Arc::new(g));
        h
    }

    pub fn destroy_graph(&self, h: usize) -> Result<(), CudaError> {
        self.graphs
            .remove(&h)
            .map(|_| ())
            .ok_or(CudaError::INVALID_VALUE)
    }

    /// The instance taken out of the table (its replay plan still to
    /// forget).
    pub fn destroy_exec(&self, h: usize) -> Result<Arc<GraphExec>, CudaError> {
        self.execs
            .remove(&h)
            .map(|(_, e)| e)
            .ok_or(CudaError::INVALID_VALUE)
    }

    pub fn instantiate(&self, g: &Graph) -> usize {
        let h = self.exec_handles.next();
        self.execs.insert(
            h,
            Arc::new(GraphExec {
                nodes: Mutex::new(g.nodes.clone()),
                plan: Mutex::new(None),
            }),
        );
        h
    }
}
