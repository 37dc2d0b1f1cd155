//! What the kernel module says the GPU is: its name, chip, memory and
//! the graphics engine's shape.

use super::client::KernelRm;
use super::error::KernelRmError;
use macuda_hw::rm::{self, control, fb_info, ArchInfo, FbInfoV2, GpuNameString, PciInfo};
use std::path::PathBuf;

/// What the kernel module says the GPU is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelIdentity {
    pub index: u32,
    pub node: PathBuf,
    pub pci: PciInfo,
    pub gpu_id: u32,
    pub driver_version: String,
    pub name: String,
    pub architecture: u32,
    pub implementation: u32,
    pub chip: Option<&'static str>,
    /// Video memory clients can use.
    pub vram_bytes: u64,
    pub l2_bytes: u64,
    pub memory_bus_bits: u32,
    /// The heap RM allocates clients' video memory from.
    pub heap_bytes: u64,
    /// Video memory less what RM keeps for itself.
    pub usable_bytes: u64,
}

/// The graphics engine's shape, from GR_GET_INFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrFacts {
    pub gpcs: u32,
    pub tpcs_per_gpc: u32,
    pub sms_per_tpc: u32,
    pub max_warps_per_sm: u32,
    /// e.g. 0x900 on the H200.
    pub sm_version: u32,
    pub warp_size: u32,
    /// FP32 cores of the SMs RM enabled, and per SM: their ratio is the
    /// SM count (the LITTER figures above are the chip's maximum).
    pub cores: u32,
    pub cores_per_sm: u32,
}

/// FP32 cores per SM by compute capability (the programming guide's
/// table), for where RM does not say (the H200 answers MAX_SP_PER_SM
/// with 0).
pub fn fp32_cores_per_sm(compute_capability: u32) -> u32 {
    match compute_capability {
        75 | 80 => 64,
        _ => 128,
    }
}

impl GrFacts {
    /// SMs the engine really has: enabled cores over cores per SM (RM's
    /// figure, else the architecture's), or the chip's most when RM gave
    /// no core count.
    pub fn sm_count(&self, compute_capability: u32) -> u32 {
        let per_sm = if self.cores_per_sm > 0 {
            self.cores_per_sm
        } else {
            fp32_cores_per_sm(compute_capability)
        };
        if self.cores > 0 {
            self.cores / per_sm
        } else {
            self.gpcs * self.tpcs_per_gpc * self.sms_per_tpc
        }
    }
}

impl KernelRm {
    /// What the GPU is: name, chip, video memory, driver.
    ///
    /// # Errors
    /// Any control RM refuses.
    pub fn identify(&self) -> Result<KernelIdentity, KernelRmError> {
        let mut name = GpuNameString::default();
        self.control(self.subdevice, control::GPU_GET_NAME_STRING, &mut name)?;
        let mut arch = ArchInfo::default();
        self.control(self.subdevice, control::MC_GET_ARCH_INFO, &mut arch)?;
        let asked = [
            fb_info::RAM_SIZE,
            fb_info::L2CACHE_SIZE,
            fb_info::BUS_WIDTH,
            fb_info::HEAP_SIZE,
            fb_info::USABLE_RAM_SIZE,
        ];
        let mut fb = FbInfoV2 {
            // CAST: five entries.
            count: asked.len() as u32,
            ..FbInfoV2::default()
        };
        for (e, index) in fb.entries.iter_mut().zip(asked) {
            e.index = index;
        }
        self.control(self.subdevice, control::FB_GET_INFO_V2, &mut fb)?;
        Ok(KernelIdentity {
            index: self.index,
            node: self.node.clone(),
            pci: self.card.pci_info,
            gpu_id: self.card.gpu_id,
            driver_version: self.driver_version.clone(),
            name: rm::c_string(&name.name),
            architecture: arch.architecture,
            implementation: arch.implementation,
            chip: rm::chip_name(arch.architecture, arch.implementation),
            vram_bytes: u64::from(fb.entries[0].data) << 10,
            l2_bytes: u64::from(fb.entries[1].data),
            memory_bus_bits: fb.entries[2].data,
            heap_bytes: u64::from(fb.entries[3].data) << 10,
            usable_bytes: u64::from(fb.entries[4].data) << 10,
        })
    }

    /// The graphics engine's shape: what sizes the shader local memory
    /// the channel must provide.
    ///
    /// # Errors
    /// RM refusing the control.
    pub fn gr_facts(&self) -> Result<GrFacts, KernelRmError> {
        let indices = [
            rm::gr_info::LITTER_NUM_GPCS,
            rm::gr_info::LITTER_NUM_TPC_PER_GPC,
            rm::gr_info::LITTER_NUM_SM_PER_TPC,
            rm::gr_info::MAX_WARPS_PER_SM,
            rm::gr_info::SM_VERSION,
            rm::gr_info::MAX_THREADS_PER_WARP,
            rm::gr_info::GPU_CORE_COUNT,
            rm::gr_info::MAX_SP_PER_SM,
        ];
        let mut list = indices.map(|index| rm::InfoEntry { index, data: 0 });
        let mut params = rm::GrGetInfo {
            // CAST: eight entries.
            list_size: list.len() as u32,
            list: list.as_mut_ptr() as u64,
            ..rm::GrGetInfo::default()
        };
        self.control(self.subdevice, control::GR_GET_INFO, &mut params)?;
        Ok(GrFacts {
            gpcs: list[0].data,
            tpcs_per_gpc: list[1].data,
            sms_per_tpc: list[2].data,
            max_warps_per_sm: list[3].data,
            sm_version: list[4].data,
            warp_size: list[5].data,
            cores: list[6].data,
            cores_per_sm: list[7].data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gr(cores: u32, cores_per_sm: u32) -> GrFacts {
        GrFacts {
            gpcs: 8,
            tpcs_per_gpc: 9,
            sms_per_tpc: 2,
            max_warps_per_sm: 64,
            sm_version: 0x900,
            warp_size: 32,
            cores,
            cores_per_sm,
        }
    }

    #[test]
    fn the_sm_count_is_enabled_cores_over_cores_per_sm() {
        // What the H200 answered: 16896 cores, 0 per SM (so the
        // architecture's 128), 144 SMs at most.
        assert_eq!(gr(16896, 0).sm_count(90), 132);
        assert_eq!(gr(16896, 128).sm_count(90), 132);
        assert_eq!(gr(6912, 0).sm_count(80), 108, "A100: 64 cores per SM");
        assert_eq!(gr(0, 0).sm_count(90), 144, "no core count: the chip's most");
    }
}
