//! Our memory on a card we boot, as the gsp actor's RM needs it: the
//! page tables and video memory are the memory actor's (its crate builds
//! on this one, so they cannot be named here), handed to the RM at open
//! through [`TablesFactory`] once the card runs.

use crate::bare::golden::ContextMemory;
use std::sync::Arc;

/// Our memory on the card as this RM needs it: what the golden context
/// takes ([`ContextMemory`]), the root GSP-RM is told, and where a VA of
/// ours lies in video memory (a channel's USERD).
pub trait CardTables: ContextMemory + Send {
    /// The root of our page tables.
    fn root(&self) -> u64;
    /// The physical address of video memory mapped at `va`, if ours.
    fn phys_of(&self, va: u64) -> Option<u64>;
    /// Video memory the tables can still hand out to the user, in bytes.
    fn capacity(&self) -> u64;
}

/// What the card is once GSP-RM runs: what its memory is laid out by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootedCard {
    /// The CPU's window onto video memory (BAR1).
    pub bar1_bytes: u64,
    pub vram_bytes: u64,
    /// The top of what we may hand out, under the firmware's hold-back.
    pub vram_ceiling: u64,
}

/// Makes our memory for a booted card (the supervisor's, over the memory
/// actor's tables); the words say why it could not.
pub type TablesFactory =
    Arc<dyn Fn(&BootedCard) -> Result<Box<dyn CardTables>, String> + Send + Sync>;
