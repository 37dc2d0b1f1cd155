//! The video memory page tables live in, as the page-table builder
//! reaches it: physical bytes read and written by address. On a card that
//! is BAR1 in physical mode (so the tables must sit inside its window);
//! in tests the simulated GPU's video memory or a plain buffer.

/// Why the bytes of a table could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("video memory at {address:#x} (+{len} bytes) could not be reached: {why}")]
pub struct TableMemoryError {
    pub address: u64,
    pub len: usize,
    pub why: String,
}

/// Physical video memory, byte-addressed.
pub trait TableMemory {
    /// # Errors
    /// The range is not reachable (past the window, transport down).
    fn read(&self, address: u64, out: &mut [u8]) -> Result<(), TableMemoryError>;

    /// # Errors
    /// The range is not reachable (past the window, transport down).
    fn write(&mut self, address: u64, data: &[u8]) -> Result<(), TableMemoryError>;
}
