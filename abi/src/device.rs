//! What `cudaGetDeviceProperties` and `cudaDeviceGetAttribute` answer:
//! the device's own figures (name, memory, SM count, L2, bus, PCI address,
//! from RM on the kernel path) and the limits its compute capability fixes
//! (the CUDA programming guide's table of technical specifications).

use crate::types::{dev_attr, DeviceProp12, DeviceProp13};
use macuda_gsp::ComputeFacts;
use std::ffi::c_char;

pub use macuda_hw::sm::{arch_limits, ArchLimits, REGISTERS_PER_SM, RESERVED_SHARED_PER_BLOCK};

/// What every CUDA device since sm_30 allows.
pub const MAX_THREADS_PER_BLOCK: u32 = 1024;
pub const MAX_BLOCK_DIM: [u32; 3] = [1024, 1024, 64];
pub const MAX_GRID_DIM: [u32; 3] = [0x7FFF_FFFF, 65535, 65535];
/// Shared memory one block may use without opting in.
pub const SHARED_PER_BLOCK: u64 = 48 << 10;
pub const REGISTERS_PER_BLOCK: u32 = 64 << 10;
/// ptxas never gives a thread more.
pub const MAX_REGISTERS_PER_THREAD: u32 = 255;
pub const CONSTANT_MEMORY: u64 = 64 << 10;
pub const TEXTURE_ALIGNMENT: u64 = 512;
pub const TEXTURE_PITCH_ALIGNMENT: u64 = 32;
pub const SURFACE_ALIGNMENT: u64 = 512;
pub const MAX_PITCH: u64 = 0x7FFF_FFFF;
/// Copy engines a device runs copies on beside compute.
pub const ASYNC_ENGINES: u32 = 2;

/// One device as our runtime reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceFacts {
    pub name: String,
    pub sm: u32,
    pub total_memory: u64,
    pub compute: ComputeFacts,
    pub pci_device_id: u16,
    pub arch: ArchLimits,
}

impl DeviceFacts {
    pub fn major(&self) -> u32 {
        self.sm / 10
    }

    pub fn minor(&self) -> u32 {
        self.sm % 10
    }

    pub fn reserved_shared_per_block(&self) -> u64 {
        self.arch.reserved_shared_per_block
    }

    /// A kernel's own static shared memory (hw's `ArchLimits` says whether
    /// the cubin's figure holds the system's reserve).
    pub fn user_static_shared(&self, cubin_shared: u64) -> u64 {
        self.arch.user_static_shared(cubin_shared)
    }

    fn pci(&self) -> [u32; 4] {
        self.compute.pci_location.unwrap_or([0; 4])
    }

    /// `cudaDeviceGetPCIBusId`'s text: `dddd:bb:dd.f`.
    pub fn pci_bus_id(&self) -> String {
        let [domain, bus, device, function] = self.pci();
        format!("{domain:04x}:{bus:02x}:{device:02x}.{function:x}")
    }

    /// `cudaDeviceGetAttribute`; `None` for an attribute we do not know.
    pub fn attribute(&self, attr: i32) -> Option<i64> {
        let c = &self.compute;
        let a = &self.arch;
        let v: i64 = match attr {
            dev_attr::MAX_THREADS_PER_BLOCK => MAX_THREADS_PER_BLOCK.into(),
            dev_attr::MAX_BLOCK_DIM_X => MAX_BLOCK_DIM[0].into(),
            dev_attr::MAX_BLOCK_DIM_Y => MAX_BLOCK_DIM[1].into(),
            dev_attr::MAX_BLOCK_DIM_Z => MAX_BLOCK_DIM[2].into(),
            dev_attr::MAX_GRID_DIM_X => MAX_GRID_DIM[0].into(),
            dev_attr::MAX_GRID_DIM_Y => MAX_GRID_DIM[1].into(),
            dev_attr::MAX_GRID_DIM_Z => MAX_GRID_DIM[2].into(),
            dev_attr::MAX_SHARED_MEMORY_PER_BLOCK => SHARED_PER_BLOCK as i64,
            dev_attr::TOTAL_CONSTANT_MEMORY => CONSTANT_MEMORY as i64,
            dev_attr::WARP_SIZE => c.warp_size.into(),
            dev_attr::MAX_PITCH => MAX_PITCH as i64,
            dev_attr::MAX_REGISTERS_PER_BLOCK => REGISTERS_PER_BLOCK.into(),
            dev_attr::TEXTURE_ALIGNMENT => TEXTURE_ALIGNMENT as i64,
            dev_attr::MULTI_PROCESSOR_COUNT => c.sm_count.into(),
            dev_attr::INTEGRATED => 0,
            dev_attr::CAN_MAP_HOST_MEMORY => 1,
            dev_attr::CONCURRENT_KERNELS => 1,
            dev_attr::ECC_ENABLED => 0,
            dev_attr::PCI_BUS_ID => self.pci()[1].into(),
            dev_attr::PCI_DEVICE_ID => self.pci()[2].into(),
            dev_attr::PCI_DOMAIN_ID => self.pci()[0].into(),
            dev_attr::GLOBAL_MEMORY_BUS_WIDTH => c.memory_bus_bits.into(),
            dev_attr::L2_CACHE_SIZE => c.l2_bytes as i64,
            dev_attr::MAX_THREADS_PER_MULTI_PROCESSOR => a.max_threads_per_sm.into(),
            dev_attr::ASYNC_ENGINE_COUNT => ASYNC_ENGINES.into(),
            dev_attr::UNIFIED_ADDRESSING => 1,
            dev_attr::COMPUTE_CAPABILITY_MAJOR => self.major().into(),
            dev_attr::COMPUTE_CAPABILITY_MINOR => self.minor().into(),
            dev_attr::STREAM_PRIORITIES_SUPPORTED => 1,
            dev_attr::MAX_SHARED_MEMORY_PER_MULTIPROCESSOR => a.shared_per_sm as i64,
            dev_attr::MAX_REGISTERS_PER_MULTIPROCESSOR => REGISTERS_PER_SM.into(),
            // No managed memory and no pageable access: ggml then keeps to
            // cudaMalloc and pinned staging.
            dev_attr::MANAGED_MEMORY => 0,
            dev_attr::PAGEABLE_MEMORY_ACCESS => 0,
            dev_attr::CONCURRENT_MANAGED_ACCESS => 0,
            dev_attr::COMPUTE_PREEMPTION_SUPPORTED => 1,
            // Cooperative launches run as ordinary ones here: no grid-sync
            // workspace is provided, so we do not claim them.
            dev_attr::COOPERATIVE_LAUNCH => 0,
            dev_attr::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN => a.shared_per_block_optin as i64,
            dev_attr::HOST_REGISTER_SUPPORTED => 1,
            dev_attr::MAX_BLOCKS_PER_MULTIPROCESSOR => a.max_blocks_per_sm.into(),
            dev_attr::RESERVED_SHARED_MEMORY_PER_BLOCK => self.reserved_shared_per_block() as i64,
            dev_attr::MEMORY_POOLS_SUPPORTED => 0,
            dev_attr::CLUSTER_LAUNCH => i64::from(self.sm >= 90),
            _ => return None,
        };
        Some(v)
    }

    fn attr_i32(&self, attr: i32) -> i32 {
        i32::try_from(self.attribute(attr).unwrap_or(0)).unwrap_or(i32::MAX)
    }

    /// CUDA 13's `cudaDeviceProp`.
    pub fn props13(&self) -> DeviceProp13 {
        // SAFETY: the struct is plain C data; all-zero is a valid value.
        let mut p: DeviceProp13 = unsafe { std::mem::zeroed() };
        copy_name(&mut p.name, &self.name);
        macro_rules! common {
            ($p:ident) => {
                $p.totalGlobalMem = self.total_memory as usize;
                $p.sharedMemPerBlock = SHARED_PER_BLOCK as usize;
                $p.regsPerBlock = REGISTERS_PER_BLOCK as i32;
                $p.warpSize = self.attr_i32(dev_attr::WARP_SIZE);
                $p.memPitch = MAX_PITCH as usize;
                $p.maxThreadsPerBlock = MAX_THREADS_PER_BLOCK as i32;
                $p.maxThreadsDim = MAX_BLOCK_DIM.map(|d| d as i32);
                $p.maxGridSize = MAX_GRID_DIM.map(|d| d as i32);
                $p.totalConstMem = CONSTANT_MEMORY as usize;
                $p.major = self.major() as i32;
                $p.minor = self.minor() as i32;
                $p.textureAlignment = TEXTURE_ALIGNMENT as usize;
                $p.texturePitchAlignment = TEXTURE_PITCH_ALIGNMENT as usize;
                $p.multiProcessorCount = self.attr_i32(dev_attr::MULTI_PROCESSOR_COUNT);
                $p.canMapHostMemory = 1;
                $p.surfaceAlignment = SURFACE_ALIGNMENT as usize;
                $p.concurrentKernels = 1;
                $p.pciBusID = self.attr_i32(dev_attr::PCI_BUS_ID);
                $p.pciDeviceID = self.attr_i32(dev_attr::PCI_DEVICE_ID);
                $p.pciDomainID = self.attr_i32(dev_attr::PCI_DOMAIN_ID);
                $p.asyncEngineCount = ASYNC_ENGINES as i32;
                $p.unifiedAddressing = 1;
                $p.memoryBusWidth = self.attr_i32(dev_attr::GLOBAL_MEMORY_BUS_WIDTH);
                $p.l2CacheSize = self.attr_i32(dev_attr::L2_CACHE_SIZE);
                $p.maxThreadsPerMultiProcessor =
                    self.attr_i32(dev_attr::MAX_THREADS_PER_MULTI_PROCESSOR);
                $p.streamPrioritiesSupported = 1;
                $p.globalL1CacheSupported = 1;
                $p.localL1CacheSupported = 1;
                $p.sharedMemPerMultiprocessor = self.arch.shared_per_sm as usize;
                $p.regsPerMultiprocessor = REGISTERS_PER_SM as i32;
                $p.computePreemptionSupported = 1;
                $p.sharedMemPerBlockOptin = self.arch.shared_per_block_optin as usize;
                $p.maxBlocksPerMultiProcessor = self.arch.max_blocks_per_sm as i32;
                $p.reservedSharedMemPerBlock = self.reserved_shared_per_block() as usize;
                $p.hostRegisterSupported = 1;
                $p.clusterLaunch = self.attr_i32(dev_attr::CLUSTER_LAUNCH);
            };
        }
        common!(p);
        p.gpuPciDeviceID = (u32::from(self.pci_device_id) << 16) | u32::from(NVIDIA_VENDOR);
        p
    }

    /// CUDA 12's `cudaDeviceProp` (`cudaGetDeviceProperties_v2`).
    pub fn props12(&self) -> DeviceProp12 {
        // SAFETY: as in props13.
        let mut p: DeviceProp12 = unsafe { std::mem::zeroed() };
        copy_name(&mut p.name, &self.name);
        let p13 = self.props13();
        macro_rules! copy {
            ($($f:ident),+) => { $( p.$f = p13.$f; )+ };
        }
        copy!(
            uuid,
            totalGlobalMem,
            sharedMemPerBlock,
            regsPerBlock,
            warpSize,
            memPitch,
            maxThreadsPerBlock,
            maxThreadsDim,
            maxGridSize,
            totalConstMem,
            major,
            minor,
            textureAlignment,
            texturePitchAlignment,
            multiProcessorCount,
            canMapHostMemory,
            surfaceAlignment,
            concurrentKernels,
            pciBusID,
            pciDeviceID,
            pciDomainID,
            asyncEngineCount,
            unifiedAddressing,
            memoryBusWidth,
            l2CacheSize,
            maxThreadsPerMultiProcessor,
            streamPrioritiesSupported,
            globalL1CacheSupported,
            localL1CacheSupported,
            sharedMemPerMultiprocessor,
            regsPerMultiprocessor,
            computePreemptionSupported,
            sharedMemPerBlockOptin,
            maxBlocksPerMultiProcessor,
            reservedSharedMemPerBlock,
            hostRegisterSupported,
            clusterLaunch
        );
        p.deviceOverlap = 1;
        p
    }
}

const NVIDIA_VENDOR: u16 = 0x10DE;

/// A NUL-terminated copy, cut to fit.
fn copy_name(out: &mut [c_char; 256], name: &str) {
    let n = name.len().min(out.len() - 1);
    for (o, b) in out.iter_mut().zip(&name.as_bytes()[..n]) {
        // CAST: bytes of a UTF-8 name into C chars.
        *o = *b as c_char;
    }
    out[n] = 0;
}

/// Whether work runs anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Execution {
    /// A GPU runs kernels and copies, in stream order.
    Gpu,
    /// The null device: memory is kept (host memory stands in for video
    /// memory), copies and memsets are done by the CPU at the call, and
    /// launches are checked, logged and counted but run nowhere.
    Nothing,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_follow_the_family() {
        assert_eq!(arch_limits(90).shared_per_block_optin, 232_448);
        assert_eq!(arch_limits(120).max_threads_per_sm, 1536);
        assert_eq!(
            arch_limits(121).sm,
            120,
            "a new minor takes its major's row"
        );
        assert_eq!(arch_limits(87).sm, 86);
        assert_eq!(arch_limits(103).sm, 100);
    }

    #[test]
    fn a_long_name_is_cut_and_terminated() {
        let mut out = [1 as c_char; 256];
        copy_name(&mut out, &"x".repeat(300));
        assert_eq!(out[254], b'x' as c_char);
        assert_eq!(out[255], 0, "terminated in the last byte");
        copy_name(&mut out, "H200");
        assert_eq!(out[4], 0);
    }
}
