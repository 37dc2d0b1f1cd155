//! Hardware formats, declared once: PCI configuration space, the GPU
//! registers the stack reads, RM class numbers and the chip table. This
//! crate is pure data and decoding; it performs no I/O, holds no state and
//! calls nothing else in the workspace. Every other crate takes its numbers
//! from here, and the tests in `tests/` pin them to NVIDIA's headers (the
//! project oracle, copied in part under `tests/data/`).

pub mod cbank0;
pub mod chip;
pub mod class;
pub mod fsp;
pub mod gsp_boot;
pub mod gsp_rpc;
pub mod le;
pub mod methods;
pub mod mmu;
pub mod page;
pub mod pci;
pub mod push;
pub mod qmd;
pub mod regs;
pub mod rm;
pub mod sm;
pub mod wpr2;

pub use chip::{Chip, ChipIdentity};
pub use regs::{Field, RegisterDesc};
pub mod gpfifo;
