//! GPFIFO ring entries: each is two 32-bit words naming a push buffer's
//! address and length. The full field layout lands with the submission
//! formats; the entry size is what ring sizing needs now.

/// Bytes per GPFIFO entry.
pub const ENTRY_BYTES: u64 = 8;
