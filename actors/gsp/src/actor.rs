use crate::error::GspError;
use crate::fault::{ChannelFault, MmuFault, SmError};
use crate::handle::ObjectHandle;
use crate::kernel::{
    self, ChannelGroup, ChannelObjects, GpuVaSpace, GrFacts, KernelRm, RingPlacement, RmDriver,
    RmTeardown, Usermode,
};
use crate::objects::{ObjectTree, RmObject};
use crate::view::CpuView;
use macuda_core::{actor_protocol, ActorConfig, ActorJoin};
use macuda_hw::methods::{compute, copy};
use macuda_hw::regs::NV_PGC6_AON_SECURE_SCRATCH_GROUP_42;
use macuda_hw::{Chip, ChipIdentity};
use macuda_pci::{BarInfo, PciHandle, PciIdentity};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Which RM answers this actor's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RmBackend {
    /// No firmware, no kernel module: an object tree kept in software.
    Null,
    /// NVIDIA's kernel module: RM through its ioctls, page tables through
    /// UVM, the GSP firmware run by the module.
    KernelModule,
}

impl RmBackend {
    pub fn describe(self) -> &'static str {
        match self {
            RmBackend::Null => "null RM (no firmware)",
            RmBackend::KernelModule => "NVIDIA kernel module (RM ioctls, UVM page tables)",
        }
    }
}

/// How the gsp actor reaches its RM.
#[derive(Clone)]
pub enum RmChoice {
    /// The software object tree (the null device).
    Null,
    /// GPU `index` of NVIDIA's kernel module, through `driver`'s nodes
    /// (the device files, or a fake of them in tests).
    Kernel {
        driver: Arc<dyn RmDriver>,
        index: u32,
    },
}

/// What the rest of the stack needs to know about the opened device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub identity: PciIdentity,
    pub chip: ChipIdentity,
    pub vram_bytes: u64,
    pub rm: RmBackend,
    /// Objects every later allocation hangs under.
    pub client: ObjectHandle,
    pub device: ObjectHandle,
    pub subdevice: ObjectHandle,
    /// The marketing name, where RM gives one ("NVIDIA H200").
    pub name: Option<String>,
    /// The kernel module's version, on that path.
    pub driver_version: Option<String>,
    /// The SM array and memory system, as a CUDA runtime reports them.
    pub compute: ComputeFacts,
}

/// What a CUDA runtime reports of a device beyond its identity: the SM
/// array and the memory system (`cudaDeviceProp`'s per-device fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeFacts {
    /// Video memory a CUDA runtime calls the device's total (RM's heap,
    /// where RM gives one).
    pub total_memory: u64,
    pub sm_count: u32,
    pub warp_size: u32,
    pub max_warps_per_sm: u32,
    pub l2_bytes: u64,
    pub memory_bus_bits: u32,
    /// Domain, bus, device and function, where the device has a PCI
    /// address the host can name.
    pub pci_location: Option<[u32; 4]>,
}

/// The null card stands in for an RTX 5090: its published SM count, L2
/// and memory bus.
pub const NULL_COMPUTE: ComputeFacts = ComputeFacts {
    total_memory: 32 << 30,
    sm_count: 170,
    warp_size: 32,
    max_warps_per_sm: 48,
    l2_bytes: 96 << 20,
    memory_bus_bits: 512,
    pci_location: None,
};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GspStats {
    pub allocs: u64,
    pub frees: u64,
    pub live_objects: u64,
    pub register_reads: u64,
    /// Bytes of video and pinned host memory RM holds for us now.
    pub rm_memory_bytes: u64,
    pub cpu_mappings: u64,
    pub channel_groups: u64,
}

/// Video memory RM allocated and mapped into our VA space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VideoAlloc {
    pub handle: ObjectHandle,
    /// What RM gave: a whole number of its page size.
    pub bytes: u64,
}

/// Pinned host memory mapped into our VA space, with the process's view.
#[derive(Debug, Clone)]
pub struct PinnedAlloc {
    pub handle: ObjectHandle,
    pub bytes: u64,
    pub view: CpuView,
}

/// Where one channel's ring and USERD live (memory the caller allocated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RingSpec {
    pub ring_memory: ObjectHandle,
    pub ring_va: u64,
    pub entries: u32,
    pub userd_memory: ObjectHandle,
    pub userd_offset: u64,
}

/// The two channels the submit actor drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelSetup {
    pub compute: RingSpec,
    pub copy: RingSpec,
}

/// One channel as RM made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelInfo {
    pub channel: ObjectHandle,
    /// The engine object bound on it.
    pub engine: ObjectHandle,
    /// The engine's class (what SET_OBJECT names).
    pub class: u32,
    /// What the doorbell takes.
    pub token: u32,
}

/// The graphics engine's shape: what the channel's shader local memory is
/// sized by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrShape {
    pub gpcs: u32,
    pub tpcs_per_gpc: u32,
    pub sms_per_tpc: u32,
    pub max_warps_per_sm: u32,
}

impl From<GrFacts> for GrShape {
    fn from(f: GrFacts) -> GrShape {
        GrShape {
            gpcs: f.gpcs,
            tpcs_per_gpc: f.tpcs_per_gpc,
            sms_per_tpc: f.sms_per_tpc,
            max_warps_per_sm: f.max_warps_per_sm,
        }
    }
}

/// The null RM has no engine to ask: it answers with the largest shape of
/// the chips we drive (GB202: 12 GPCs; 9 TPCs per GPC covers GH100's 8x9
/// slots; 2 SMs per TPC; 64 warps per SM), so sizes built on it are never
/// too small.
const NULL_GR_SHAPE: GrShape = GrShape {
    gpcs: 12,
    tpcs_per_gpc: 9,
    sms_per_tpc: 2,
    max_warps_per_sm: 64,
};

/// A channel group with its compute and copy channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Channels {
    pub group: ObjectHandle,
    pub compute: ChannelInfo,
    pub copy: ChannelInfo,
    pub gr: GrShape,
}

/// How work reaches the engines once it is in memory: a doorbell write
/// with the channel's token.
#[derive(Clone)]
pub enum Doorbell {
    /// A register write through the pci actor (bare metal, the null card).
    Pci(PciHandle),
    /// The usermode page RM mapped for us (the kernel module).
    Usermode(Arc<Usermode>),
}

impl std::fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Doorbell::Pci(_) => write!(f, "Doorbell(pci)"),
            Doorbell::Usermode(u) => write!(f, "Doorbell(usermode {:#x})", u.class),
        }
    }
}

impl Doorbell {
    /// Tell the engine that `token`'s channel has new GP entries.
    ///
    /// # Errors
    /// The pci path's refusal (the null card declines submission).
    pub fn ring(&self, token: u32) -> Result<(), GspError> {
        match self {
            Doorbell::Pci(pci) => pci.doorbell(token).map_err(GspError::Pci),
            Doorbell::Usermode(u) => {
                u.ring(token);
                Ok(())
            }
        }
    }
}

actor_protocol! {
    /// The gsp actor's handle.
    pub handle GspHandle;
    request GspRequest;
    service GspService;
    error GspError;
    /// Identify the card, read its VRAM size and build the base objects.
    OpenDevice => fn open_device() -> DeviceInfo;
    DeviceInfo => fn device_info() -> DeviceInfo;
    Alloc => fn alloc(parent: ObjectHandle, class: u32) -> ObjectHandle;
    /// Free an object and its subtree; returns how many objects went.
    Free => fn free(handle: ObjectHandle) -> u32;
    Objects => fn objects() -> Vec<RmObject>;
    Stats => fn stats() -> GspStats;
    /// Video memory from RM, mapped for the GPU at `va` (aligned to the
    /// page size [`crate::kernel::video_page`] gives for `bytes`).
    AllocVideo => fn alloc_video(bytes: u64, va: u64) -> VideoAlloc;
    /// Pinned host memory, mapped for the GPU at `va` (4 KiB aligned).
    AllocPinned => fn alloc_pinned(bytes: u64, va: u64) -> PinnedAlloc;
    /// A CPU view of `bytes` of video memory `handle` (through BAR1).
    MapCpu => fn map_cpu(handle: ObjectHandle, bytes: u64) -> CpuView;
    /// Unmap memory from the GPU at `va` and free it.
    FreeMemory => fn free_memory(handle: ObjectHandle, va: u64, bytes: u64) -> ();
    /// A channel group with a compute and a copy channel over the rings
    /// given, scheduled to run.
    CreateChannels => fn create_channels(setup: ChannelSetup) -> Channels;
    /// Free the channel group (after a fault, before fresh channels).
    DestroyChannels => fn destroy_channels() -> ();
    Doorbell => fn doorbell() -> Doorbell;
    /// What RM reported against our channels: `None` while they are
    /// healthy; the Xid, SM error states and MMU faults after an error.
    /// With `deep`, the debugger is asked even when the error notifier is
    /// empty (a wait that timed out wants to know of a fault RM did not
    /// notify).
    ChannelFault => fn channel_fault(deep: bool) -> Option<ChannelFault>;
    /// The supervisor's handle to our RM objects, on the kernel path.
    Teardown => fn teardown() -> Option<RmTeardown>;
}

/// The kernel path's state. Fields drop in order: channels, then the VA
/// space (closing UVM drops its registrations), then the client.
struct KernelState {
    channels: Option<KernelChannels>,
    usermode: Arc<Usermode>,
    space: GpuVaSpace,
    gr: GrFacts,
    rm: KernelRm,
}

struct KernelChannels {
    group: ChannelGroup,
    compute: ChannelObjects,
    copy: ChannelObjects,
    debugger: Option<u32>,
    compute_class: u32,
    copy_class: u32,
}

enum Backend {
    /// Waiting for open_device.
    Unopened(RmChoice),
    Null,
    Kernel(Box<KernelState>),
}

struct NullChannels {
    group: ObjectHandle,
}

struct GspActor {
    pci: PciHandle,
    backend: Backend,
    tree: ObjectTree,
    null_channels: Option<NullChannels>,
    info: Option<DeviceInfo>,
    stats: GspStats,
}

const MIB: u64 = 1 << 20;

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

/// The tokens RM gave the first two channels on the H200, which the null
/// RM hands out too.
const NULL_COMPUTE_TOKEN: u32 = 0xA;
const NULL_COPY_TOKEN: u32 = 0xB;

/// The (channel, compute, copy) classes the null RM's channels claim for
/// a chip: what the kernel module offers that chip.
fn null_classes(chip: Chip) -> (u32, u32, u32) {
    use macuda_hw::methods::host;
    match chip {
        Chip::Hopper { .. } => (
            host::HOPPER_CHANNEL_GPFIFO_A,
            compute::HOPPER_COMPUTE_A,
            copy::HOPPER_DMA_COPY_A,
        ),
        Chip::BlackwellDatacenter { .. } => (
            host::BLACKWELL_CHANNEL_GPFIFO_A,
            compute::BLACKWELL_COMPUTE_A,
            copy::BLACKWELL_DMA_COPY_A,
        ),
        _ => (
            host::BLACKWELL_CHANNEL_GPFIFO_A,
            compute::BLACKWELL_COMPUTE_B,
            copy::BLACKWELL_DMA_COPY_B,
        ),
    }
}

impl GspActor {
    fn read_vram_bytes(&mut self) -> Result<u64, GspError> {
        self.stats.register_reads += 1;
        let mib = self
            .pci
            .mmio_read32(u64::from(NV_PGC6_AON_SECURE_SCRATCH_GROUP_42::ADDR))
            .map_err(GspError::Pci)?;
        if mib == 0 {
            return Err(GspError::NoVram);
        }
        Ok(u64::from(mib) * MIB)
    }

    fn kernel(&mut self) -> Result<&mut KernelState, GspError> {
        match &mut self.backend {
            Backend::Kernel(k) => Ok(k),
            Backend::Null => Err(GspError::NotOnThisRm {
                rm: "null",
                what: "memory and channels through RM",
            }),
            Backend::Unopened(_) => Err(GspError::NotOpen),
        }
    }

    fn open_null(&mut self) -> Result<DeviceInfo, GspError> {
        let identity = self.pci.identify().map_err(GspError::Pci)?;
        let vram_bytes = self.read_vram_bytes()?;
        let client = self.alloc(ObjectHandle::NONE, macuda_hw::class::NV01_ROOT_CLIENT)?;
        let device = self.alloc(client, macuda_hw::class::NV01_DEVICE_0)?;
        let subdevice = self.alloc(device, macuda_hw::class::NV20_SUBDEVICE_0)?;
        self.backend = Backend::Null;
        Ok(DeviceInfo {
            chip: identity.chip,
            identity,
            vram_bytes,
            rm: RmBackend::Null,
            client,
            device,
            subdevice,
            name: None,
            driver_version: None,
            compute: NULL_COMPUTE,
        })
    }

    fn open_kernel(
        &mut self,
        driver: Arc<dyn RmDriver>,
        index: u32,
    ) -> Result<DeviceInfo, GspError> {
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
        self.backend = Backend::Kernel(Box::new(KernelState {
            channels: None,
            usermode,
            space,
            gr,
            rm,
        }));
        Ok(info)
    }
}

impl GspService for GspActor {
    fn open_device(&mut self) -> Result<DeviceInfo, GspError> {
        let choice = match std::mem::replace(&mut self.backend, Backend::Null) {
            Backend::Unopened(c) => c,
            other => {
                self.backend = other;
                return self.info.clone().ok_or(GspError::NotOpen);
            }
        };
        let info = match choice {
            RmChoice::Null => self.open_null(),
            RmChoice::Kernel { driver, index } => {
                let r = self.open_kernel(Arc::clone(&driver), index);
                if r.is_err() {
                    self.backend = Backend::Unopened(RmChoice::Kernel { driver, index });
                }
                r
            }
        }?;
        tracing::info!(chip = %info.chip.chip, vram_mib = info.vram_bytes / MIB, rm = info.rm.describe(), "device open");
        self.info = Some(info.clone());
        Ok(info)
    }

    fn device_info(&mut self) -> Result<DeviceInfo, GspError> {
        self.info.clone().ok_or(GspError::NotOpen)
    }

    fn alloc(&mut self, parent: ObjectHandle, class: u32) -> Result<ObjectHandle, GspError> {
        if let Backend::Kernel(k) = &mut self.backend {
            // Objects that need no parameters (memory goes through
            // alloc_video, channels through create_channels).
            let h = k.rm.alloc(parent.0, class, None::<&mut ()>)?;
            self.stats.allocs += 1;
            return Ok(ObjectHandle(h));
        }
        let h = self.tree.alloc(parent, class)?;
        self.stats.allocs += 1;
        self.stats.live_objects = self.tree.len() as u64;
        Ok(h)
    }

    fn free(&mut self, handle: ObjectHandle) -> Result<u32, GspError> {
        if let Backend::Kernel(k) = &mut self.backend {
            k.rm.free(k.rm.device(), handle.0)?;
            self.stats.frees += 1;
            return Ok(1);
        }
        let n = self.tree.free(handle)?;
        self.stats.frees += u64::from(n);
        self.stats.live_objects = self.tree.len() as u64;
        Ok(n)
    }

    fn objects(&mut self) -> Result<Vec<RmObject>, GspError> {
        Ok(self.tree.all())
    }

    fn stats(&mut self) -> Result<GspStats, GspError> {
        Ok(self.stats)
    }

    fn alloc_video(&mut self, bytes: u64, va: u64) -> Result<VideoAlloc, GspError> {
        let k = self.kernel()?;
        let video = k.rm.alloc_video(bytes)?;
        if !va.is_multiple_of(video.page) {
            let _ = k.rm.free(k.rm.device(), video.handle);
            return Err(GspError::MisalignedVa {
                va,
                align: video.page,
            });
        }
        if let Err(e) = k.rm.map_gpu(&k.space, video.handle, va, video.bytes) {
            let _ = k.rm.free(k.rm.device(), video.handle);
            return Err(e.into());
        }
        self.stats.allocs += 1;
        self.stats.rm_memory_bytes += video.bytes;
        Ok(VideoAlloc {
            handle: ObjectHandle(video.handle),
            bytes: video.bytes,
        })
    }

    fn alloc_pinned(&mut self, bytes: u64, va: u64) -> Result<PinnedAlloc, GspError> {
        let k = self.kernel()?;
        let pinned = k.rm.pin_host(bytes)?;
        if let Err(e) = k.rm.map_gpu(&k.space, pinned.handle, va, pinned.bytes) {
            let _ = k.rm.free(k.rm.device(), pinned.handle);
            return Err(e.into());
        }
        self.stats.allocs += 1;
        self.stats.rm_memory_bytes += pinned.bytes;
        let map: Arc<dyn kernel::RmMapping> = pinned.map;
        Ok(PinnedAlloc {
            handle: ObjectHandle(pinned.handle),
            bytes: pinned.bytes,
            view: CpuView::new(map),
        })
    }

    fn map_cpu(&mut self, handle: ObjectHandle, bytes: u64) -> Result<CpuView, GspError> {
        let k = self.kernel()?;
        let len = usize::try_from(bytes).map_err(|_| GspError::TooLarge { bytes })?;
        let map = k.rm.map(handle.0, len)?;
        self.stats.cpu_mappings += 1;
        Ok(CpuView::new(Arc::from(map)))
    }

    fn free_memory(&mut self, handle: ObjectHandle, va: u64, bytes: u64) -> Result<(), GspError> {
        let k = self.kernel()?;
        // Both steps are tried; the first failure is reported.
        let unmapped = k.rm.unmap_gpu(&k.space, va, bytes);
        let freed = k.rm.free(k.rm.device(), handle.0);
        unmapped?;
        freed?;
        self.stats.frees += 1;
        self.stats.rm_memory_bytes = self.stats.rm_memory_bytes.saturating_sub(bytes);
        Ok(())
    }

    fn create_channels(&mut self, setup: ChannelSetup) -> Result<Channels, GspError> {
        if matches!(self.backend, Backend::Null) {
            return self.null_channels(setup);
        }
        let k = self.kernel()?;
        if k.channels.is_some() {
            return Err(GspError::ChannelsExist);
        }
        let compute_class = k.rm.pick_class("compute", COMPUTE_CLASSES)?;
        let copy_class = k.rm.pick_class("copy", COPY_CLASSES)?;
        let group = k.rm.channel_group(&k.space)?;
        k.rm.track_group(group.handle);
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
            let compute = k.rm.channel_on(
                &mut k.space,
                &group,
                compute_class,
                &placement(&setup.compute),
            )?;
            let copy =
                k.rm.channel_on(&mut k.space, &group, copy_class, &placement(&setup.copy))?;
            // The debugger is for diagnosis only; a module that refuses it
            // still runs work, and faults are then reported without it.
            let debugger = match k.rm.debugger(compute.engine) {
                Ok(d) => Some(d),
                Err(e) => {
                    tracing::warn!(error = %e, "no debugger object: faults will name the Xid only");
                    None
                }
            };
            k.rm.schedule(&group)?;
            Ok((compute, copy, debugger))
        })();
        let (compute, copy, debugger) = match built {
            Ok(parts) => parts,
            Err(e) => {
                // Freeing the group frees the channels made so far.
                k.rm.untrack_group(group.handle);
                let _ = k.rm.free(k.rm.device(), group.handle);
                return Err(e);
            }
        };
        let ch = KernelChannels {
            group,
            compute,
            copy,
            debugger,
            compute_class,
            copy_class,
        };
        let gr = GrShape::from(k.gr);
        let out = Channels {
            group: ObjectHandle(ch.group.handle),
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
        k.channels = Some(ch);
        self.stats.channel_groups += 1;
        Ok(out)
    }

    fn destroy_channels(&mut self) -> Result<(), GspError> {
        if matches!(self.backend, Backend::Null) {
            let c = self.null_channels.take().ok_or(GspError::NoChannels)?;
            self.free(c.group)?;
            return Ok(());
        }
        let k = self.kernel()?;
        let ch = k.channels.take().ok_or(GspError::NoChannels)?;
        k.rm.untrack_group(ch.group.handle);
        // The order RM's teardown wants: off the scheduler, out of UVM,
        // then freed (the group frees its channels and engine objects). A
        // group RM already removed may refuse the first steps; the free is
        // what matters.
        if let Err(e) = k.rm.unschedule(&ch.group) {
            tracing::debug!(error = %e, "unscheduling a channel group");
        }
        for c in [ch.copy.channel, ch.compute.channel] {
            if let Err(e) = k.rm.unregister_channel(&k.space, c) {
                tracing::debug!(error = %e, channel = c, "unregistering a channel");
            }
        }
        if let Some(d) = ch.debugger {
            let _ = k.rm.free(k.rm.device(), d);
        }
        // A group RM will not free stays with the client (freed with it at
        // the end); fresh channels do not need it gone.
        if let Err(e) = k.rm.free(k.rm.device(), ch.group.handle) {
            tracing::warn!(error = %e, group = ch.group.handle, "freeing a removed channel group");
        }
        Ok(())
    }

    fn doorbell(&mut self) -> Result<Doorbell, GspError> {
        match &self.backend {
            Backend::Kernel(k) => Ok(Doorbell::Usermode(Arc::clone(&k.usermode))),
            Backend::Null => Ok(Doorbell::Pci(self.pci.clone())),
            Backend::Unopened(_) => Err(GspError::NotOpen),
        }
    }

    fn channel_fault(&mut self, deep: bool) -> Result<Option<ChannelFault>, GspError> {
        let Backend::Kernel(k) = &mut self.backend else {
            return Ok(None);
        };
        let Some(ch) = &k.channels else {
            return Ok(None);
        };
        let notified = ch.group.error();
        if notified.is_none() && !deep {
            return Ok(None);
        }
        let (xid, engine) = notified.map_or((0, 0), |e| (e.xid, e.engine));
        let mut fault = ChannelFault {
            xid,
            xid_name: if notified.is_some() {
                macuda_hw::rm::xid_name(xid).to_string()
            } else {
                "none in the error notifier".to_string()
            },
            engine,
            debugger: None,
            sm_errors: Vec::new(),
            mmu_fault: false,
            mmu_faults: Vec::new(),
        };
        match ch.debugger.map(|d| k.rm.fault_state(d, ch.compute.channel)) {
            Some(Ok(state)) => {
                fault.debugger = Some("read".to_string());
                fault.sm_errors = state
                    .sm_errors
                    .iter()
                    .map(|(sm, e)| SmError::from_registers(*sm, e))
                    .collect();
                fault.mmu_fault = state.mmu_fault;
                fault.mmu_faults = state.mmu_faults.iter().map(MmuFault::from_entry).collect();
            }
            Some(Err(e)) => fault.debugger = Some(format!("refused: {e}")),
            None => fault.debugger = None,
        }
        // Without a notified error, only a fault the debugger saw counts.
        if notified.is_none() && !fault.mmu_fault && fault.sm_errors.is_empty() {
            return Ok(None);
        }
        Ok(Some(fault))
    }

    fn teardown(&mut self) -> Result<Option<RmTeardown>, GspError> {
        match &self.backend {
            Backend::Kernel(k) => Ok(Some(k.rm.teardown())),
            _ => Ok(None),
        }
    }
}

impl GspActor {
    fn null_channels(&mut self, setup: ChannelSetup) -> Result<Channels, GspError> {
        let _ = setup;
        if self.null_channels.is_some() {
            return Err(GspError::ChannelsExist);
        }
        let info = self.info.clone().ok_or(GspError::NotOpen)?;
        let (gpfifo_class, compute_class, copy_class) = null_classes(info.chip.chip);
        let group = self.alloc(info.device, macuda_hw::class::KEPLER_CHANNEL_GROUP_A)?;
        let mut channel = |class: u32, token: u32| -> Result<ChannelInfo, GspError> {
            let channel = self.alloc(group, gpfifo_class)?;
            let engine = self.alloc(channel, class)?;
            Ok(ChannelInfo {
                channel,
                engine,
                class,
                token,
            })
        };
        let compute = channel(compute_class, NULL_COMPUTE_TOKEN)?;
        let copy = channel(copy_class, NULL_COPY_TOKEN)?;
        self.null_channels = Some(NullChannels { group });
        self.stats.channel_groups += 1;
        Ok(Channels {
            group,
            compute,
            copy,
            gr: NULL_GR_SHAPE,
        })
    }
}

/// Start the gsp actor over `pci`, with the RM `choice` names; the device
/// opens at [`GspHandle::open_device`].
///
/// # Errors
/// Only if the thread cannot start.
pub fn spawn(
    config: ActorConfig,
    pci: PciHandle,
    choice: RmChoice,
) -> Result<(GspHandle, ActorJoin), GspError> {
    let actor = GspActor {
        pci,
        backend: Backend::Unopened(choice),
        tree: ObjectTree::default(),
        null_channels: None,
        info: None,
        stats: GspStats::default(),
    };
    GspHandle::spawn(config, actor).map_err(GspError::Spawn)
}
