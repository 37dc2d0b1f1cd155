//! Constant bank 0: per launch, a driver area that compiled kernels read
//! (blockDim, gridDim, the local-memory window, the initial stack pointer)
//! followed by the kernel's parameters. The offsets differ per
//! architecture; they were read from ptxas SASS and from CUDA's own bank 0
//! on an H200 (reference/submission.md section 8, reference/cuda-binary-
//! and-runtime-abi.md section 2.9).

/// Where the driver words live for one architecture family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverArea {
    pub family: &'static str,
    /// blockDim.x, .y, .z as three u32.
    pub block_dim: u32,
    /// gridDim.x, .y, .z as three u32.
    pub grid_dim: u32,
    /// 64-bit shared-memory window base. sm_90 and later read SR_SWINHI
    /// instead, but CUDA and tinygrad still fill it.
    pub shared_window: u32,
    /// 64-bit local-memory window base (generic <-> local conversion).
    pub local_window: u32,
    /// u32 loaded into R1 by the first instruction of every kernel.
    pub stack_top: u32,
    /// u32 `%dynamic_smem_size`, where it has a fixed slot.
    pub dynamic_shared: Option<u32>,
    /// 64-bit memory descriptor for `desc[UR]` accesses; CUDA leaves it 0.
    pub memory_descriptor: u32,
    /// Where nvcc puts the parameters (EIATTR_PARAM_CBANK) for this family.
    pub param_base: u32,
}

/// Ampere and Ada (sm_80 .. sm_89).
pub const AMPERE: DriverArea = DriverArea {
    family: "sm_80-89",
    block_dim: 0x00,
    grid_dim: 0x0c,
    shared_window: 0x18,
    local_window: 0x20,
    stack_top: 0x28,
    dynamic_shared: Some(0x2c),
    memory_descriptor: 0x118,
    param_base: 0x160,
};

/// Hopper (sm_90).
pub const HOPPER: DriverArea = DriverArea {
    family: "sm_90",
    block_dim: 0x00,
    grid_dim: 0x0c,
    shared_window: 0x18,
    local_window: 0x20,
    stack_top: 0x28,
    dynamic_shared: Some(0x2c),
    memory_descriptor: 0x208,
    param_base: 0x210,
};

/// Blackwell (sm_100, sm_120): 224 driver words. The dynamic shared size is
/// read through an index scaled by the cluster size, so it has no fixed slot.
pub const BLACKWELL: DriverArea = DriverArea {
    family: "sm_100/120",
    block_dim: 0x360,
    grid_dim: 0x370,
    shared_window: 0x2f0,
    local_window: 0x2f8,
    stack_top: 0x37c,
    dynamic_shared: None,
    memory_descriptor: 0x358,
    param_base: 0x380,
};

/// The initial stack pointer CUDA and tinygrad both use: the top of a 16 MiB
/// per-thread local window less 0x240 bytes the ABI keeps above the stack.
pub const STACK_TOP: u32 = 0x00FF_FDC0;
/// A thread's local address window: 16 MiB, the stack at its top.
pub const LOCAL_WINDOW_BYTES: u32 = 1 << 24;
/// What the ABI keeps between the stack's top and the window's: the QMD's
/// SHADER_LOCAL_MEMORY_HIGH_SIZE, which covers the window from its top
/// down, must reach past these bytes and then the whole stack (on the H200
/// a launch covering only the stack faulted: "Out Of Range Address" at
/// stack addresses).
pub const ABOVE_STACK_BYTES: u32 = LOCAL_WINDOW_BYTES - STACK_TOP;

/// Bank addresses are stored `>> 6` in QMD V04/V05 and sizes `>> 4`.
pub const BANK_ADDRESS_ALIGN: u64 = 64;
pub const BANK_SIZE_ALIGN: u64 = 16;

/// Per-launch and per-channel values of the driver area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DriverWords {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_window: u64,
    pub local_window: u64,
    pub dynamic_shared_bytes: u32,
}

fn put(out: &mut [u8], at: u32, bytes: &[u8]) -> Option<()> {
    let at = at as usize;
    out.get_mut(at..at + bytes.len())?.copy_from_slice(bytes);
    Some(())
}

impl DriverArea {
    /// Write the driver words into the start of a bank-0 image: blockDim,
    /// gridDim, both windows, the stack top and (where it has a slot) the
    /// dynamic shared size. Everything else stays as it is (zero in a fresh
    /// bank; CUDA leaves the memory descriptor 0). `None` when `out` is
    /// shorter than the driver area.
    pub fn write(&self, out: &mut [u8], w: &DriverWords) -> Option<()> {
        if out.len() < self.param_base as usize {
            return None;
        }
        for i in 0..3 {
            put(
                out,
                self.block_dim + 4 * i as u32,
                &w.block[i].to_le_bytes(),
            )?;
            put(out, self.grid_dim + 4 * i as u32, &w.grid[i].to_le_bytes())?;
        }
        put(out, self.shared_window, &w.shared_window.to_le_bytes())?;
        put(out, self.local_window, &w.local_window.to_le_bytes())?;
        put(out, self.stack_top, &STACK_TOP.to_le_bytes())?;
        if let Some(at) = self.dynamic_shared {
            put(out, at, &w.dynamic_shared_bytes.to_le_bytes())?;
        }
        Some(())
    }
}

/// The driver area for a compute capability (major*10 + minor).
pub fn for_sm(sm: u32) -> Option<DriverArea> {
    match sm {
        80..=89 => Some(AMPERE),
        90..=99 => Some(HOPPER),
        100..=129 => Some(BLACKWELL),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_and_the_blackwell_224_words() {
        assert_eq!(for_sm(90), Some(HOPPER));
        assert_eq!(for_sm(120), Some(BLACKWELL));
        assert_eq!(for_sm(86), Some(AMPERE));
        assert_eq!(for_sm(75), None);
        assert_eq!(BLACKWELL.param_base / 4, 224);
        assert_eq!(BLACKWELL.stack_top / 4, 223);
        assert_eq!(BLACKWELL.block_dim / 4, 216);
        assert_eq!(BLACKWELL.grid_dim / 4, 220);
        assert_eq!(
            (BLACKWELL.local_window / 4, BLACKWELL.shared_window / 4),
            (190, 188)
        );
        // Every driver word lies below the parameters.
        for a in [AMPERE, HOPPER, BLACKWELL] {
            for w in [
                a.block_dim + 8,
                a.grid_dim + 8,
                a.local_window + 4,
                a.stack_top,
                a.memory_descriptor + 4,
            ] {
                assert!(w < a.param_base, "{}: {w:#x}", a.family);
            }
        }
    }
}
