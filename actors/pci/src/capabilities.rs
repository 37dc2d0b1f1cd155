//! What a card does with what the stack hands it, published once by its
//! transport so that the layers above choose their path by it instead of
//! trying and reading the shape of the error.

use serde::{Deserialize, Serialize};

/// What the device behind a transport takes. A real card takes all of it;
/// the null card takes what its profile says (a test that plays the GPU
/// gives it memory and doorbells).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Video memory reads and writes reach memory that keeps them.
    pub video_memory: bool,
    /// Host memory the device can reach (DMA) can be allocated.
    pub dma: bool,
    /// A doorbell hands work to an engine.
    pub submission: bool,
}

impl Capabilities {
    /// A card that takes everything.
    pub const ALL: Capabilities = Capabilities {
        video_memory: true,
        dma: true,
        submission: true,
    };
}
