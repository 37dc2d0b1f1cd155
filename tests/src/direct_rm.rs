//! The kernel-module RM driven directly, without the actors: video and
//! host memory at the next free VA of a UVM space, and GPFIFO channels
//! whose ring and USERD the test writes itself and whose doorbell it
//! rings. Only the device tests (tests/tests/kernel_rm.rs) and their fake
//! counterparts use this path; the stack submits through the submit actor.

use macuda_gsp::kernel::{
    ChannelGroup, GpuVaSpace, KernelRm, KernelRmError, RingPlacement, RmMapping, Usermode,
};
use macuda_hw::gpfifo::ENTRY_BYTES;
use macuda_hw::page;
use macuda_hw::push::{USERD_BYTES, USERD_GP_GET, USERD_GP_PUT};
use std::sync::Arc;

/// Video memory mapped into a GPU VA space (and maybe for the CPU).
pub struct VramBuffer {
    pub handle: u32,
    /// The GPU virtual address.
    pub va: u64,
    pub bytes: u64,
    pub cpu: Option<Box<dyn RmMapping>>,
}

/// A GPFIFO channel whose ring and USERD the CPU writes.
pub struct GpfifoChannel {
    pub handle: u32,
    pub engine: u32,
    pub engine_class: u32,
    /// What the doorbell takes to run this channel.
    pub token: u32,
    pub entries: u32,
    userd_offset: u64,
    memory: VramBuffer,
    put: u32,
}

impl GpfifoChannel {
    fn cpu(&self) -> *mut u8 {
        // The channel memory is always allocated with a CPU mapping.
        self.memory
            .cpu
            .as_ref()
            .map_or(std::ptr::null_mut(), |m| m.as_ptr())
    }

    /// Hand a push buffer (GPU VA, length in dwords) to the engine: the
    /// GP entry at GP_PUT, GP_PUT past it in USERD, then the doorbell.
    ///
    /// # Errors
    /// A push buffer the GP entry cannot describe.
    pub fn submit(
        &mut self,
        usermode: &Usermode,
        push_va: u64,
        dwords: u32,
    ) -> Result<(), macuda_hw::push::FormatError> {
        let entry = macuda_hw::push::GpEntry::subroutine(push_va, dwords)?.encode();
        let base = self.cpu();
        let slot = u64::from(self.put) * ENTRY_BYTES;
        self.put = (self.put + 1) % self.entries;
        // SAFETY: the ring and USERD lie inside the channel memory's CPU
        // mapping (entries x 8 bytes, then USERD); volatile stores to
        // device memory.
        unsafe {
            std::ptr::write_volatile(base.add(slot as usize).cast::<u64>(), entry);
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            std::ptr::write_volatile(
                base.add((self.userd_offset + USERD_GP_PUT) as usize)
                    .cast::<u32>(),
                self.put,
            );
        }
        usermode.ring(self.token);
        Ok(())
    }

    /// GP_GET as the engine last reported it in USERD.
    pub fn gp_get(&self) -> u32 {
        // SAFETY: inside the channel memory's CPU mapping; volatile, the
        // engine writes it.
        unsafe {
            std::ptr::read_volatile(
                self.cpu()
                    .add((self.userd_offset + USERD_GP_GET) as usize)
                    .cast::<u32>(),
            )
        }
    }
}

/// Pinned host memory mapped into a GPU VA space.
pub struct HostBuffer {
    pub handle: u32,
    /// The GPU virtual address.
    pub va: u64,
    pub bytes: u64,
    /// The process's view of the same memory.
    pub map: Arc<memmap2::MmapRaw>,
}

/// The direct path's allocations and channels, on [`KernelRm`].
pub trait DirectPath {
    /// Pinned host memory mapped at the next free VA of `space`.
    ///
    /// # Errors
    /// RM or UVM refusing.
    fn alloc_host(&self, space: &mut GpuVaSpace, bytes: u64) -> Result<HostBuffer, KernelRmError>;
    /// Video memory mapped at the next free VA of `space` and, with `cpu`,
    /// for the CPU through BAR1.
    ///
    /// # Errors
    /// RM or UVM refusing, or the VA window exhausted.
    fn alloc_vram(
        &self,
        space: &mut GpuVaSpace,
        bytes: u64,
        cpu: bool,
    ) -> Result<VramBuffer, KernelRmError>;
    /// A GPFIFO channel in `group` with an object of `engine_class` on it,
    /// its ring and USERD in video memory the CPU writes.
    ///
    /// # Errors
    /// RM or UVM refusing a step.
    fn channel(
        &self,
        space: &mut GpuVaSpace,
        group: &ChannelGroup,
        engine_class: u32,
        entries: u32,
    ) -> Result<GpfifoChannel, KernelRmError>;
}

impl DirectPath for KernelRm {
    /// Pinned host memory mapped into `space` at the next free VA: the
    /// direct path the device tests drive.
    ///
    /// # Errors
    /// As `KernelRm::pin_host` and `KernelRm::map_gpu`.
    fn alloc_host(&self, space: &mut GpuVaSpace, bytes: u64) -> Result<HostBuffer, KernelRmError> {
        let pinned = self.pin_host(bytes)?;
        let va = space.take_va(pinned.bytes, page::SMALL)?;
        self.map_gpu(space, pinned.handle, va, pinned.bytes)?;
        Ok(HostBuffer {
            handle: pinned.handle,
            va,
            bytes: pinned.bytes,
            map: pinned.map,
        })
    }

    /// Video memory mapped into `space` at the next free VA and, with
    /// `cpu`, for the CPU through BAR1: the direct path the device tests
    /// drive.
    ///
    /// # Errors
    /// RM or UVM refusing, or the VA window exhausted.
    fn alloc_vram(
        &self,
        space: &mut GpuVaSpace,
        bytes: u64,
        cpu: bool,
    ) -> Result<VramBuffer, KernelRmError> {
        let video = self.alloc_video(bytes, macuda_gsp::kernel::video_page(bytes))?;
        let va = space.take_va(video.bytes, video.page)?;
        self.map_gpu(space, video.handle, va, video.bytes)?;
        let cpu = if cpu {
            // CAST: allocations fit the address space.
            Some(self.map(video.handle, video.bytes as usize)?)
        } else {
            None
        };
        Ok(VramBuffer {
            handle: video.handle,
            va,
            bytes: video.bytes,
            cpu,
        })
    }

    /// A GPFIFO channel in `group` with an object of `engine_class` on it:
    /// its ring and USERD in video memory the CPU writes through BAR1, its
    /// work-submit token, and its context buffers mapped through UVM (the
    /// direct path: the channel rings itself).
    ///
    /// # Errors
    /// RM or UVM refusing a step.
    fn channel(
        &self,
        space: &mut GpuVaSpace,
        group: &ChannelGroup,
        engine_class: u32,
        entries: u32,
    ) -> Result<GpfifoChannel, KernelRmError> {
        let ring_bytes = u64::from(entries) * ENTRY_BYTES;
        let userd_offset = ring_bytes.next_multiple_of(USERD_BYTES);
        let memory = self.alloc_vram(space, userd_offset + USERD_BYTES, true)?;
        let objects = self.channel_on(
            space,
            group,
            engine_class,
            &RingPlacement {
                ring_memory: memory.handle,
                ring_va: memory.va,
                entries,
                userd_memory: memory.handle,
                userd_offset,
            },
        )?;
        Ok(GpfifoChannel {
            handle: objects.channel,
            engine: objects.engine,
            engine_class,
            token: objects.token,
            entries,
            userd_offset,
            memory,
            put: 0,
        })
    }
}
