//! What the runtime keeps per process, below every operation: the tables
//! of registered code, allocations, streams, events and graphs, and the
//! nodes of stream work. Nothing here reaches the device or the runtime;
//! the operations above (memory, work, launch, graph, resolve) do.

pub mod graphs;
pub mod memory_map;
pub mod nodes;
pub mod registry;
pub mod streams;
