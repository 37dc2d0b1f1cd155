//! NVIDIA's kernel module as the gsp actor's RM: its client, the VA space
//! UVM manages, the usermode doorbell, and the channel group it schedules.

use crate::error::GspError;
use crate::fault::ChannelFault;
use crate::handle::ObjectHandle;
use crate::info::{
    ComputeFacts, DeviceInfo, GrShape, MemoryOwner, RmBackend, RmMemoryRules, NULL_GR_SHAPE,
};
use crate::kernel::{
    self, ChannelGroup, ChannelObjects, GpuVaSpace, GrFacts, KernelIdentity, KernelRm,
    KernelRmError, RingPlacement, RmDriver, RmTeardown, Usermode,
};
use crate::objects::RmObject;
use crate::resources::{
    ChannelInfo, ChannelSetup, Channels, CopyPlacement, Doorbell, PinnedAlloc, RingSpec, VideoAlloc,
};
use crate::rm::Rm;
use crate::view::CpuView;
use macuda_hw::methods::{compute, copy};
use macuda_hw::rm;
use macuda_hw::{Chip, ChipIdentity};
use macuda_pci::{BarInfo, Capabilities, PciIdentity};
use std::sync::Arc;

/// Compute and copy classes we drive, preferred first.
const COMPUTE_CLASSES: &[u32] = &[
    compute::BLACKWELL_COMPUTE_B,
    compute::BLACKWELL_COMPUTE_A,
    compute::HOPPER_COMPUTE_A,
];
const COPY_CLASSES: &[u32] = &[
    copy::BLACKWELL_DMA_COPY_B,
    copy::BLACKWELL_DMA_COPY_A,
    copy::HOPPER_DMA_COPY_A,
];

/// The kernel path's state. Fields drop in order: channels, then the VA
/// space (closing UVM drops its registrations), then the client.
pub(crate) struct ModuleRm {
    channels: Option<ModuleChannels>,
    usermode: Arc<Usermode>,
    space: GpuVaSpace,
    gr: GrFacts,
    rm: KernelRm,
    /// Which page RM backs an allocation of a size with; the memory actor
    /// is handed the same rules with the device, so its VAs agree.
    memory: RmMemoryRules,
}

struct ModuleChannels {
    group: ChannelGroup,
    /// The copy channel's own group on a copy engine, where it has one.
    copy_group: Option<ChannelGroup>,
    compute: ChannelObjects,
    copy: ChannelObjects,
    debugger: Option<u32>,
    compute_class: u32,
    copy_class: u32,
}

/// What NVIDIA's kernel module says GPU `index` is and the shape of its
/// graphics engine (where RM answers for it), without starting the stack
/// (`macuda info`): a client opened, asked and freed.
///
/// # Errors
/// The module's device files, or RM refusing to identify the GPU.
pub fn identify_module(
    driver: Arc<dyn RmDriver>,
    index: u32,
) -> Result<(KernelIdentity, Result<GrFacts, KernelRmError>), KernelRmError> {
    let rm = KernelRm::open(driver, index)?;
    Ok((rm.identify()?, rm.gr_facts()))
}

impl Drop for ModuleRm {
    /// Our groups leave the scheduler before the fields drop: closing the
    /// VA space's UVM file stops the graphics group's channel, after which
    /// RM refuses every schedule control on that group (0x40 on the H200,
    /// logged at every exit until this came first).
    fn drop(&mut self) {
        if let Err(e) = self.rm.teardown().stop_channels() {
            tracing::warn!(error = %e, "stopping our channel groups failed");
        }
    }
}

impl ModuleRm {
    /// GPU `index` of the module, through `driver`'s nodes: the client, its
    /// VA space and doorbell page, and what the device is. Allocations
    /// from `huge_pages_from` bytes take huge pages (the module's
    /// threshold, [`kernel::MODULE_MEMORY`], where `None`).
    pub(crate) fn open(
        driver: Arc<dyn RmDriver>,
        index: u32,
        huge_pages_from: Option<u64>,
    ) -> Result<(ModuleRm, DeviceInfo), GspError> {
        let memory = RmMemoryRules {
            huge_pages_from: huge_pages_from.unwrap_or(kernel::MODULE_MEMORY.huge_pages_from),
            ..kernel::MODULE_MEMORY
        };
        let rm = KernelRm::open(driver, index)?;
        let identity = rm.identify()?;
        let space = rm.va_space()?;
        let usermode = Arc::new(rm.usermode()?);
        // The engine's shape only sizes shader local memory: without it, a
        // shape no chip exceeds keeps every launch covered.
        let gr = rm.gr_facts().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "GR_GET_INFO refused; sizing local memory for the largest engine");
            GrFacts {
                gpcs: NULL_GR_SHAPE.gpcs,
                tpcs_per_gpc: NULL_GR_SHAPE.tpcs_per_gpc,
                sms_per_tpc: NULL_GR_SHAPE.sms_per_tpc,
                max_warps_per_sm: NULL_GR_SHAPE.max_warps_per_sm,
                sm_version: 0,
                warp_size: 0,
                cores: 0,
                cores_per_sm: 0,
            }
        });
        let chip = ChipIdentity {
            boot_0: 0,
            boot_42: 0,
            chip: Chip::from_architecture(
                identity.architecture >> macuda_hw::rm::ARCHITECTURE_SHIFT,
                identity.implementation,
            ),
        };
        let card = rm.card();
        let info = DeviceInfo {
            identity: PciIdentity {
                backend: "kernel".to_string(),
                vendor: identity.pci.vendor_id,
                device: identity.pci.device_id,
                revision_and_class: 0,
                bars: vec![
                    BarInfo {
                        index: 0,
                        bytes: card.reg_size,
                    },
                    BarInfo {
                        index: 1,
                        bytes: card.fb_size,
                    },
                ],
                chip,
                // The module booted GSP-RM; it runs under the module.
                firmware_resident: true,
            },
            chip,
            vram_bytes: identity.vram_bytes,
            rm: RmBackend::KernelModule,
            // Memory through RM's mappings, DMA through pinned RM system
            // memory, submission through the channel's usermode doorbell.
            can: Capabilities::ALL,
            memory: MemoryOwner::Rm(memory),
            firmware: format!(
                "GSP firmware is the kernel module's ({}): not ours to load or unload",
                identity.driver_version
            ),
            client: ObjectHandle(rm.client()),
            device: ObjectHandle(rm.device()),
            subdevice: ObjectHandle(rm.subdevice()),
            name: Some(identity.name.clone()),
            driver_version: Some(identity.driver_version.clone()),
            compute: ComputeFacts {
                total_memory: if identity.heap_bytes > 0 {
                    identity.heap_bytes
                } else {
                    identity.vram_bytes
                },
                sm_count: gr.sm_count(chip.chip.compute_capability().unwrap_or(0)),
                warp_size: gr.warp_size,
                max_warps_per_sm: gr.max_warps_per_sm,
                l2_bytes: identity.l2_bytes,
                memory_bus_bits: identity.memory_bus_bits,
                pci_location: Some([
                    identity.pci.domain,
                    u32::from(identity.pci.bus),
                    u32::from(identity.pci.slot),
                    u32::from(identity.pci.function),
                ]),
            },
        };
        let rm = ModuleRm {
            channels: None,
            usermode,
            space,
            gr,
            rm,
            memory,
        };
        Ok((rm, info))
    }
}

impl Rm for ModuleRm {
    fn alloc(&mut self, parent: ObjectHandle, class: u32) -> Result<ObjectHandle, GspError> {
        // Objects that need no parameters (memory goes through
        // alloc_video, channels through create_channels).
        Ok(ObjectHandle(self.rm.alloc(
            parent.0,
            class,
            None::<&mut ()>,
        )?))
    }

    fn free(&mut self, handle: ObjectHandle) -> Result<u32, GspError> {
        self.rm.free(self.rm.device(), handle.0)?;
        Ok(1)
    }

    fn objects(&self) -> Vec<RmObject> {
        // RM keeps the tree; we do not mirror it.
        Vec::new()
    }

    fn alloc_video(&mut self, bytes: u64, va: u64) -> Result<VideoAlloc, GspError> {
        let video = self.rm.alloc_video(bytes, self.memory.video_page(bytes))?;
        if !va.is_multiple_of(video.page) {
            let _ = self.rm.free(self.rm.device(), video.handle);
            return Err(GspError::MisalignedVa {
                va,
                align: video.page,
            });
        }
        if let Err(e) = self.rm.map_gpu(&self.space, video.handle, va, video.bytes) {
            let _ = self.rm.free(self.rm.device(), video.handle);
            return Err(e.into());
        }
        Ok(VideoAlloc {
            handle: ObjectHandle(video.handle),
            bytes: video.bytes,
        })
    }

    fn alloc_pinned(&mut self, bytes: u64, va: u64) -> Result<PinnedAlloc, GspError> {
        let pinned = self.rm.pin_host(bytes)?;
        if let Err(e) = self
            .rm
            .map_gpu(&self.space, pinned.handle, va, pinned.bytes)
        {
            let _ = self.rm.free(self.rm.device(), pinned.handle);
            return Err(e.into());
        }
        let map: Arc<dyn kernel::RmMapping> = pinned.map;
        Ok(PinnedAlloc {
            handle: ObjectHandle(pinned.handle),
            bytes: pinned.bytes,
            view: CpuView::new(map),
        })
    }

    fn map_cpu(&mut self, handle: ObjectHandle, bytes: u64) -> Result<CpuView, GspError> {
        let len = usize::try_from(bytes).map_err(|_| GspError::TooLarge { bytes })?;
        let map = self.rm.map(handle.0, len)?;
        Ok(CpuView::new(Arc::from(map)))
    }

    fn free_memory(&mut self, handle: ObjectHandle, va: u64, bytes: u64) -> Result<(), GspError> {
        // Both steps are tried; the first failure is reported.
        let unmapped = self.rm.unmap_gpu(&self.space, va, bytes);
        let freed = self.rm.free(self.rm.device(), handle.0);
        unmapped?;
        freed?;
        Ok(())
    }

    fn create_channels(&mut self, setup: ChannelSetup) -> Result<Channels, GspError> {
        if self.channels.is_some() {
            return Err(GspError::ChannelsExist);
        }
        let compute_class = self.rm.pick_class("compute", COMPUTE_CLASSES)?;
        let copy_class = self.rm.pick_class("copy", COPY_CLASSES)?;
        let group = self.rm.channel_group(&self.space)?;
        self.rm.track_group(group.handle);
        let copy_group = match setup.copy_placement {
            CopyPlacement::ComputeGroup => None,
            CopyPlacement::CopyEngine(n) => {
                let engine = *rm::ENGINE_TYPE_COPY
                    .get(usize::from(n))
                    .ok_or(GspError::NoSuchCopyEngine { index: n })?;
                match self.rm.channel_group_on(&self.space, engine) {
                    Ok(g) => {
                        self.rm.track_group(g.handle);
                        Some(g)
                    }
                    Err(e) => {
                        self.rm.untrack_group(group.handle);
                        let _ = self.rm.free(self.rm.device(), group.handle);
                        return Err(e.into());
                    }
                }
            }
        };
        let placement = |r: &RingSpec| RingPlacement {
            ring_memory: r.ring_memory.0,
            ring_va: r.ring_va,
            entries: r.entries,
            userd_memory: r.userd_memory.0,
            userd_offset: r.userd_offset,
        };
        let built = (|| -> Result<(ChannelObjects, ChannelObjects, Option<u32>), GspError> {
            // The compute channel first: UVM refuses a group whose first
            // channel is a copy channel.
            let compute = self.rm.channel_on(
                &mut self.space,
                &group,
                compute_class,
                &placement(&setup.compute),
            )?;
            let copy = self.rm.channel_on(
                &mut self.space,
                copy_group.as_ref().unwrap_or(&group),
                copy_class,
                &placement(&setup.copy),
            )?;
            // The debugger is for diagnosis only; a module that refuses it
            // still runs work, and faults are then reported without it.
            let debugger = match self.rm.debugger(compute.engine) {
                Ok(d) => Some(d),
                Err(e) => {
                    tracing::warn!(error = %e, "no debugger object: faults will name the Xid only");
                    None
                }
            };
            self.rm.schedule(&group)?;
            if let Some(g) = &copy_group {
                self.rm.schedule(g)?;
            }
            Ok((compute, copy, debugger))
        })();
        let (compute, copy, debugger) = match built {
            Ok(parts) => parts,
            Err(e) => {
                // Freeing a group frees the channels made in it so far.
                for g in copy_group.iter().chain([&group]) {
                    self.rm.untrack_group(g.handle);
                    let _ = self.rm.free(self.rm.device(), g.handle);
                }
                return Err(e);
            }
        };
        let ch = ModuleChannels {
            group,
            copy_group,
            compute,
            copy,
            debugger,
            compute_class,
            copy_class,
        };
        let gr = GrShape::from(self.gr);
        let out = Channels {
            group: ObjectHandle(ch.group.handle),
            copy_group: ObjectHandle(ch.copy_group.as_ref().unwrap_or(&ch.group).handle),
            compute: ChannelInfo {
                channel: ObjectHandle(ch.compute.channel),
                engine: ObjectHandle(ch.compute.engine),
                class: ch.compute_class,
                token: ch.compute.token,
            },
            copy: ChannelInfo {
                channel: ObjectHandle(ch.copy.channel),
                engine: ObjectHandle(ch.copy.engine),
                class: ch.copy_class,
                token: ch.copy.token,
            },
            gr,
        };
        self.channels = Some(ch);
        Ok(out)
    }

    fn destroy_channels(&mut self) -> Result<(), GspError> {
        let ch = self.channels.take().ok_or(GspError::NoChannels)?;
        let groups: Vec<&ChannelGroup> = [&ch.group].into_iter().chain(&ch.copy_group).collect();
        // The order RM's teardown wants: off the scheduler, out of UVM,
        // then freed (a group frees its channels and engine objects). A
        // group RM already removed may refuse the first steps; the free is
        // what matters.
        for g in &groups {
            self.rm.untrack_group(g.handle);
            if let Err(e) = self.rm.unschedule(g) {
                tracing::debug!(error = %e, group = g.handle, "unscheduling a channel group");
            }
        }
        for c in [&ch.copy, &ch.compute].into_iter().filter(|c| c.registered) {
            if let Err(e) = self.rm.unregister_channel(&self.space, c.channel) {
                tracing::debug!(error = %e, channel = c.channel, "unregistering a channel");
            }
        }
        if let Some(d) = ch.debugger {
            let _ = self.rm.free(self.rm.device(), d);
        }
        // A group RM will not free stays with the client (freed with it at
        // the end); fresh channels do not need it gone.
        for g in groups {
            if let Err(e) = self.rm.free(self.rm.device(), g.handle) {
                tracing::warn!(error = %e, group = g.handle, "freeing a removed channel group");
            }
        }
        Ok(())
    }

    fn doorbell(&self) -> Doorbell {
        Doorbell::Usermode(Arc::clone(&self.usermode))
    }

    fn channel_fault(&mut self, deep: bool) -> Result<Option<ChannelFault>, GspError> {
        let Some(ch) = &self.channels else {
            return Ok(None);
        };
        // RM removes the group of the channel that failed: either one.
        let notified = ch
            .group
            .error()
            .or_else(|| ch.copy_group.as_ref().and_then(ChannelGroup::error));
        if notified.is_none() && !deep {
            return Ok(None);
        }
        let state = ch
            .debugger
            .map(|d| self.rm.fault_state(d, ch.compute.channel))
            .map(|r| r.map_err(|e| e.to_string()));
        Ok(ChannelFault::from_reports(
            notified.map(|e| (e.xid, e.engine)),
            state,
        ))
    }

    fn teardown(&self) -> Option<RmTeardown> {
        Some(self.rm.teardown())
    }
}
