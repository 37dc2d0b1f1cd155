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

    pub fn destroy_exec(&self, h: usize) -> Result<(), CudaError> {
        self.execs
            .remove(&h)
            .map(|_| ())
            .ok_or(CudaError::INVALID_VALUE)
    }

    pub fn instantiate(&self, g: &Graph) -> usize {
        let h = self.exec_handles.next();
        self.execs.insert(
            h,
            Arc::new(GraphExec {
                nodes: Mutex::new(g.nodes.clone()),
            }),
        );
        h
    }
}
