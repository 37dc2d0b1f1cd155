//! A simulated NVIDIA GPU, served over the TinyGPU protocol so that any
//! driver that speaks it (ours, tinygrad's) can be pointed at it: the
//! bare-metal path's test world, since no card here is ours to boot.
//!
//! What it plays so far: the card on the bus (configuration space, BARs,
//! the bus-master gate on DMA, a function-level reset after which it
//! boots again by itself), BAR0's identity and boot-status registers,
//! BAR1 onto sparse video memory, the host memory a TinyGPU server hands
//! out (shared mappings of at most 32 segments, server-side page lists),
//! and the boot through the FSP: its EMEM queue, the chain of trust
//! checked against the FMC image in host memory, the FMC's FB layout and
//! WPR2, and the GSP's fence and lockdown release; GSP-RM's queues and
//! object tree; and MMU v3 (`mmu`): page tables walked from the root a
//! driver hands GSP-RM, faults typed as the GPU reports them, and a TLB
//! that keeps translations until the invalidate register is written and
//! flags every stale use; and the engines behind the doorbell (`pbdma`,
//! `channel`): GPFIFO and push buffers fetched through the MMU, host
//! semaphores, copies and fills, QMD chains walked, a stopped channel
//! reported through RM (error notifier, RC_TRIGGERED, the debugger's
//! fault info); GET_GSP_STATIC_INFO; and faults injected on demand
//! (`faults`). The CPU sequencer and the log buffers come next
//! (reference/gsp.md section 9 lists what the card must do).

pub mod boot_record;
pub mod card;
pub mod channel;
pub mod chip;
pub mod config;
pub mod dma;
pub mod faults;
pub mod fmc;
pub mod fsp;
pub mod gsp_falcon;
pub mod gsp_rm;
pub mod host_memory;
pub mod kernel_models;
pub mod mmu;
pub mod pbdma;
pub mod server;
pub mod vram;

pub use boot_record::BootRecord;
pub use card::Card;
pub use chip::SimChip;
pub use dma::DmaError;
pub use server::{Device, Listen, Server, WireFault};

/// Serve a simulated `chip` as `listen` says (TCP on 127.0.0.1 only).
pub fn serve(listen: &Listen, chip: SimChip) -> std::io::Result<Server<Card>> {
    Server::start(listen, Card::new(chip))
}
