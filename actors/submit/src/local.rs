//! Shader local memory (per-thread stacks and spills): how large the
//! channel's buffer must be for a per-thread size, by the graphics
//! engine's shape, as SKED checks it.

use macuda_gsp::GrShape;
use macuda_hw::sm::WARP_SIZE;
use macuda_memory::DeviceBuffer;

/// The channel's shader local memory: what per-thread size it covers.
#[derive(Default)]
pub(crate) struct LocalMemory {
    pub(crate) per_thread: u32,
    pub(crate) buffers: Vec<DeviceBuffer>,
}

/// Local memory per thread is handed out in these steps (the channel's
/// size is rebuilt only when a kernel needs more).
const PER_THREAD_STEP: u32 = 0x200;
/// One warp's local memory is rounded to this (tinygrad's rule, which met
/// SKED's check on the H200), a TPC's to the next.
const WARP_GRANULE: u64 = 0x200;
const TPC_GRANULE: u64 = 0x8000;
/// The whole local-memory buffer is rounded to this.
const BUFFER_GRANULE: u64 = 128 << 10;

/// The sizes a channel's local memory takes to give each thread at least
/// `per_thread` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LocalSize {
    /// The per-thread size covered (a whole number of steps).
    pub(crate) per_thread: u32,
    /// Bytes per TPC: what SET_SHADER_LOCAL_MEMORY_NON_THROTTLED names.
    pub(crate) per_tpc: u64,
    /// The buffer: every TPC slot the engine has.
    pub(crate) total: u64,
}

impl LocalSize {
    pub(crate) fn for_threads(per_thread: u32, g: GrShape) -> LocalSize {
        let per_thread = per_thread.next_multiple_of(PER_THREAD_STEP);
        let per_warp =
            (u64::from(per_thread) * u64::from(WARP_SIZE)).next_multiple_of(WARP_GRANULE);
        let per_tpc = (per_warp * u64::from(g.max_warps_per_sm) * u64::from(g.sms_per_tpc))
            .next_multiple_of(TPC_GRANULE);
        let total = (per_tpc * u64::from(g.tpcs_per_gpc) * u64::from(g.gpcs))
            .next_multiple_of(BUFFER_GRANULE);
        LocalSize {
            per_thread,
            per_tpc,
            total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_is_rounded_to_a_step_and_covers_every_tpc_slot() {
        // The H200's shape: 8 GPCs of 9 TPCs of 2 SMs, 64 warps an SM.
        let h200 = GrShape {
            gpcs: 8,
            tpcs_per_gpc: 9,
            sms_per_tpc: 2,
            max_warps_per_sm: 64,
        };
        let s = LocalSize::for_threads(384, h200);
        assert_eq!(s.per_thread, 0x200);
        // 0x200 bytes x 32 lanes = 16 KiB a warp, x 64 warps x 2 SMs.
        assert_eq!(s.per_tpc, 2 << 20);
        assert_eq!(s.total, 144 << 20);
        assert_eq!(LocalSize::for_threads(0x200, h200), s, "already a step");
        assert_eq!(LocalSize::for_threads(0x201, h200).per_thread, 0x400);
    }
}
