//! Video and pinned host memory from RM, and their GPU mappings in a VA
//! space UVM manages.

use super::client::KernelRm;
use super::error::KernelRmError;
use super::ioctl::{check, escape_call, open_node, raw_ioctl, RmNode};
use crate::info::RmMemoryRules;
use macuda_hw::page;
use macuda_hw::rm::{
    self, class, control, escape, uvm, AllocOsMemory, GidInfo, MemoryAlloc, VaSpaceAlloc,
};
use std::path::Path;
use std::sync::Arc;

/// The VA space RM creates.
const VA_SPACE_BASE: u64 = rm::vaspace::USER_BASE;
const VA_SPACE_SIZE: u64 = rm::vaspace::USER_SIZE;

/// The window channel context buffers (and the device tests' direct path)
/// takes VAs from, one after another: above the window kept for mappings
/// the CPU shares at the same address, below [`MODULE_MEMORY`]'s window.
const GPU_VA_START: u64 = 0x20_0000_0000;
const GPU_VA_END: u64 = 0x40_0000_0000;

/// How the kernel module's RM places and pages what the memory actor asks
/// for. The allocator's VAs run from the end of the direct window up to
/// 2^40, because QMDs, push buffers and constant banks must lie below 2^40
/// (the fields hold VA >> 8 in 32 bits); allocations from 8 MiB take 2 MiB
/// pages.
pub const MODULE_MEMORY: RmMemoryRules = RmMemoryRules {
    va_start: GPU_VA_END,
    va_end: 1 << 40,
    huge_pages_from: 8 << 20,
};

/// A GPU VA space managed by UVM and registered for one GPU.
pub struct GpuVaSpace {
    pub(super) uvm: Box<dyn RmNode>,
    /// Holds the address space for UVM's teardown.
    _uvm_mm: Box<dyn RmNode>,
    pub handle: u32,
    pub uuid: [u8; 16],
    next_va: u64,
}

impl GpuVaSpace {
    /// The next `bytes` of VA at `align` in the direct window (the memory
    /// actor allocates in [`MODULE_MEMORY`]'s window instead).
    ///
    /// # Errors
    /// The window is exhausted.
    pub fn take_va(&mut self, bytes: u64, align: u64) -> Result<u64, KernelRmError> {
        let va = self.next_va.next_multiple_of(align);
        if va + bytes > GPU_VA_END {
            return Err(KernelRmError::VaExhausted { bytes });
        }
        self.next_va = va + bytes;
        Ok(va)
    }
}

/// Video memory RM allocated, not yet mapped anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VideoMemory {
    pub handle: u32,
    /// Rounded up to a whole number of `page`.
    pub bytes: u64,
    /// The page size it is mapped with (2 MiB for large buffers).
    pub page: u64,
}

/// The page RM backs `bytes` of video memory with (see
/// [`RmMemoryRules::video_page`]).
pub fn video_page(bytes: u64) -> u64 {
    MODULE_MEMORY.video_page(bytes)
}

/// Process memory RM pinned (an OS descriptor), with the process's view.
pub struct PinnedHost {
    pub handle: u32,
    pub bytes: u64,
    pub map: Arc<memmap2::MmapRaw>,
}

impl KernelRm {
    /// A GPU VA space whose page tables UVM manages, registered with UVM
    /// for this GPU: what compute and copy channels run in.
    ///
    /// # Errors
    /// UVM or RM refusing a step.
    pub fn va_space(&self) -> Result<GpuVaSpace, KernelRmError> {
        let driver = self.driver.as_ref();
        let uvm_node = open_node(driver, Path::new(uvm::NODE))?;
        let mut init = [uvm::Initialize::default()];
        raw_ioctl(
            uvm_node.as_ref(),
            uvm::INITIALIZE,
            &mut init,
            "UVM_INITIALIZE",
        )?;
        check(init[0].status, "UVM initialisation")?;
        // A second node holds the address space for UVM's teardown at exit;
        // some platforms answer "nothing to do", which is fine.
        let mm = open_node(driver, Path::new(uvm::NODE))?;
        let mut mm_init = [uvm::MmInitialize {
            uvm_fd: uvm_node.fd(),
            status: 0,
        }];
        if let Err(e) = raw_ioctl(
            mm.as_ref(),
            uvm::MM_INITIALIZE,
            &mut mm_init,
            "UVM_MM_INITIALIZE",
        ) {
            tracing::debug!(error = %e, "UVM_MM_INITIALIZE");
        }
        let mut params = VaSpaceAlloc {
            flags: rm::vaspace::IS_EXTERNALLY_OWNED | rm::vaspace::ENABLE_PAGE_FAULTING,
            va_base: VA_SPACE_BASE,
            va_size: VA_SPACE_SIZE,
            ..VaSpaceAlloc::default()
        };
        let handle = self.alloc(self.device, class::FERMI_VASPACE_A, Some(&mut params))?;
        let mut gid = GidInfo {
            flags: rm::GID_FORMAT_BINARY,
            ..GidInfo::default()
        };
        self.control(self.subdevice, control::GPU_GET_GID_INFO, &mut gid)?;
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&gid.data[..16]);
        let mut reg = [uvm::RegisterGpu {
            uuid,
            rm_ctrl_fd: -1,
            ..uvm::RegisterGpu::default()
        }];
        raw_ioctl(
            uvm_node.as_ref(),
            uvm::REGISTER_GPU,
            &mut reg,
            "UVM_REGISTER_GPU",
        )?;
        check(reg[0].status, "registering the GPU with UVM")?;
        let mut reg_va = [uvm::RegisterGpuVaSpace {
            uuid,
            rm_ctrl_fd: self.ctl.fd(),
            h_client: self.client,
            h_va_space: handle,
            status: 0,
        }];
        raw_ioctl(
            uvm_node.as_ref(),
            uvm::REGISTER_GPU_VASPACE,
            &mut reg_va,
            "UVM_REGISTER_GPU_VASPACE",
        )?;
        check(reg_va[0].status, "registering the VA space with UVM")?;
        Ok(GpuVaSpace {
            uvm: uvm_node,
            _uvm_mm: mm,
            handle,
            uuid,
            next_va: GPU_VA_START,
        })
    }

    /// Map `size` bytes of RM memory object `handle` into `space` at `va`
    /// (chosen by the caller, aligned to the object's page size), through
    /// UVM: an external range, then the allocation mapped into it.
    ///
    /// # Errors
    /// UVM refusing the range or the mapping.
    pub fn map_gpu(
        &self,
        space: &GpuVaSpace,
        handle: u32,
        va: u64,
        size: u64,
    ) -> Result<(), KernelRmError> {
        let mut range = [uvm::CreateExternalRange {
            base: va,
            length: size,
            ..uvm::CreateExternalRange::default()
        }];
        raw_ioctl(
            space.uvm.as_ref(),
            uvm::CREATE_EXTERNAL_RANGE,
            &mut range,
            "UVM_CREATE_EXTERNAL_RANGE",
        )?;
        check(range[0].status, "a UVM external range")?;
        let mut map = Box::new(uvm::MapExternalAllocation {
            base: va,
            length: size,
            count: 1,
            rm_ctrl_fd: self.ctl.fd(),
            h_client: self.client,
            h_memory: handle,
            ..uvm::MapExternalAllocation::default()
        });
        map.per_gpu[0] = uvm::GpuMappingAttributes {
            uuid: space.uuid,
            mapping_type: uvm::MAPPING_READ_WRITE_ATOMIC,
            ..uvm::GpuMappingAttributes::default()
        };
        let mapped = raw_ioctl(
            space.uvm.as_ref(),
            uvm::MAP_EXTERNAL_ALLOCATION,
            std::slice::from_mut(map.as_mut()),
            "UVM_MAP_EXTERNAL_ALLOCATION",
        )
        .and_then(|()| check(map.status, "a GPU mapping"));
        if let Err(e) = mapped {
            // Give the range back so a failed mapping leaves nothing behind.
            let _ = self.unmap_gpu(space, va, size);
            return Err(e);
        }
        Ok(())
    }

    /// Remove the GPU mapping (and UVM range) at `va`.
    ///
    /// # Errors
    /// UVM refusing (no range there).
    pub fn unmap_gpu(&self, space: &GpuVaSpace, va: u64, size: u64) -> Result<(), KernelRmError> {
        let mut free = [uvm::Free {
            base: va,
            length: size,
            ..uvm::Free::default()
        }];
        raw_ioctl(space.uvm.as_ref(), uvm::FREE, &mut free, "UVM_FREE")?;
        check(free[0].status, "freeing a UVM range")
    }

    /// Video memory allocated by RM on pages of `page` bytes (small or
    /// huge, as the caller's [`RmMemoryRules`] chose for `bytes`): its
    /// handle and the size it got, a whole number of pages.
    ///
    /// # Errors
    /// RM refusing (out of memory, for one).
    pub fn alloc_video(&self, bytes: u64, page: u64) -> Result<VideoMemory, KernelRmError> {
        let huge = page == page::HUGE;
        let size = bytes.max(1).next_multiple_of(page);
        let mut params = MemoryAlloc {
            owner: self.client,
            kind: rm::memory::TYPE_IMAGE,
            flags: rm::memory::FLAG_IGNORE_BANK_PLACEMENT
                | rm::memory::FLAG_ALIGNMENT_FORCE
                | rm::memory::FLAG_MEMORY_HANDLE_PROVIDED
                | rm::memory::FLAG_MAP_NOT_REQUIRED
                | rm::memory::FLAG_PERSISTENT_VIDMEM,
            attr: rm::memory::ATTR_ALLOW_NONCONTIGUOUS
                // Named either way: left to RM's default, the page size
                // could differ from the one the VA was aligned for.
                | if huge {
                    rm::memory::ATTR_PAGE_SIZE_HUGE
                } else {
                    rm::memory::ATTR_PAGE_SIZE_4KB
                },
            attr2: rm::memory::ATTR2_PREFER_NO_ZBC
                | rm::memory::ATTR2_GPU_CACHEABLE
                | if huge { rm::memory::ATTR2_HUGE_2MB } else { 0 },
            format: rm::memory::FORMAT_GENERIC,
            size,
            alignment: page,
            limit: size - 1,
            ..MemoryAlloc::default()
        };
        let handle = self.alloc(self.device, class::NV1_MEMORY_USER, Some(&mut params))?;
        Ok(VideoMemory {
            handle,
            bytes: size,
            page,
        })
    }

    /// Host memory of this process (an anonymous mapping), pinned by RM as
    /// an OS descriptor: what the copy engine reads and writes on the host
    /// side once it is mapped into a VA space ([`KernelRm::map_gpu`]).
    ///
    /// # Errors
    /// The anonymous mapping, or RM refusing to pin it.
    pub fn pin_host(&self, bytes: u64) -> Result<PinnedHost, KernelRmError> {
        let size = bytes.max(1).next_multiple_of(page::SMALL);
        // CAST: host allocations fit the address space.
        let map = memmap2::MmapMut::map_anon(size as usize)
            .map(memmap2::MmapRaw::from)
            .map_err(|source| KernelRmError::Map {
                object: 0,
                len: size as usize,
                source,
            })?;
        let handle = self
            .next_handle
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut params = [AllocOsMemory {
            h_root: self.client,
            h_object_parent: self.device,
            h_object_new: handle,
            h_class: class::NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
            flags: rm::OS_MEMORY_FLAGS,
            p_memory: map.as_ptr() as u64,
            limit: size - 1,
            fd: -1,
            ..AllocOsMemory::default()
        }];
        // This escape works only on a device node.
        escape_call(
            self.device_node.as_ref(),
            escape::RM_ALLOC_MEMORY,
            &mut params,
            "RM_ALLOC_MEMORY",
        )?;
        check(params[0].status, "pinning host memory")?;
        Ok(PinnedHost {
            handle,
            bytes: size,
            map: Arc::new(map),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_size_is_the_same_for_a_size_and_for_it_rounded_to_that_page() {
        // 8,384,768 bytes (test-backend-ops' SOFT_MAX asked for it) rounds
        // to 8 MiB: once small pages for the VA and huge ones from RM.
        for bytes in [
            1,
            page::SMALL - 1,
            MODULE_MEMORY.huge_pages_from - page::SMALL - 1,
            MODULE_MEMORY.huge_pages_from - page::SMALL + 1,
            8_384_768,
            MODULE_MEMORY.huge_pages_from - 1,
            MODULE_MEMORY.huge_pages_from,
            MODULE_MEMORY.huge_pages_from + 1,
            u64::MAX - 1,
        ] {
            let page = video_page(bytes);
            let rounded = bytes.div_ceil(page).saturating_mul(page);
            assert_eq!(video_page(rounded), page, "{bytes} bytes");
        }
        assert_eq!(video_page(8_384_768), page::HUGE);
        assert_eq!(
            video_page(MODULE_MEMORY.huge_pages_from - page::SMALL),
            page::SMALL
        );
    }
}
