//! A unit of stream work as a graph keeps it and a stream runs it: a
//! kernel launch with its parameter block, a copy, a fill, an event record
//! or wait.

use crate::state::memory_map::{Copy2dOp, CopyOp, FillOp};
use crate::state::registry::KernelEntry;
use macuda_submit::ParamBlock;
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
