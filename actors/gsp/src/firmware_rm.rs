//! GSP-RM on a card we boot ourselves, as the gsp actor's RM: the boot
//! through the FSP over the pci actor, the golden context, the user's
//! client over our page tables, and channels over memory the submit actor
//! placed. The page tables and the video memory they map belong to the
//! memory actor; this RM reaches them through [`CardTables`], which the
//! supervisor hands it at open (the memory crate builds on this one, so
//! the tables cannot be named here).

use crate::bare::channels::{
    alloc_group, open_channel, schedule, ChannelMemory, Placed, RpcChannel, ENGINE_TYPE_GRAPHICS,
    INSTANCE_BYTES, METHOD_BUFFER_BYTES,
};
use crate::bare::debugger::{alloc_debugger, diagnose};
use crate::bare::early;
use crate::bare::golden::{build_golden_context, GoldenClasses, GOLDEN_HANDLES};
use crate::bare::reserved_pdes::WINDOW_BYTES;
use crate::bare::{
    alloc_client_objects, boot_through_fsp, set_page_directory, BootPatience, GspRpc, Notice,
    OverActor, RmAlloc, RpcError, TablesOwner, USER_OBJECTS,
};
use crate::bare::{LogReader, SharedJournal, SharedLogMetadata};
use crate::card_tables::{BootedCard, CardTables, TablesFactory};
use crate::error::GspError;
use crate::fault::ChannelFault;
use crate::firmware::{FirmwareSet, Progress, SearchPath};
use crate::handle::ObjectHandle;
use crate::info::{ComputeFacts, DeviceInfo, MemoryOwner, RmBackend, NULL_COMPUTE, NULL_GR_SHAPE};
use crate::kernel::RmTeardown;
use crate::objects::RmObject;
use crate::resources::{
    ChannelInfo, ChannelSetup, Channels, CopyPlacement, Doorbell, PinnedAlloc, RingSpec, VideoAlloc,
};
use crate::rm::Rm;
use crate::view::CpuView;
use macuda_hw::class;
use macuda_hw::gsp_rpc::alloc_params::{device, subdevice, va_space};
use macuda_hw::page;
use macuda_hw::pci::FB_BAR_INDEX;
use macuda_hw::push::USERD_BYTES;
use macuda_pci::PciHandle;

/// The user client's channel objects: a group with one subcontext, the
/// compute and copy channels with their engines, and the debugger.
const GROUP: u32 = 0xC100_0010;
const CONTEXT_SHARE: u32 = 0xC100_0011;
const COMPUTE_CHANNEL: (u32, u32) = (0xC100_0020, 0xC100_0021);
const COPY_CHANNEL: (u32, u32) = (0xC100_0030, 0xC100_0031);
const DEBUGGER: u32 = 0xC100_0040;
/// Objects the caller allocates through [`Rm::alloc`] take handles from
/// here up.
const FIRST_CALLER_HANDLE: u32 = 0xC100_1000;

/// The channels as made.
struct FirmwareChannels {
    compute: RpcChannel,
    copy: RpcChannel,
}

/// The RM of a card we booted.
pub(crate) struct FirmwareRm {
    pci: PciHandle,
    rpc: GspRpc,
    tables: Box<dyn CardTables>,
    classes: GoldenClasses,
    /// The user client's objects, by handle.
    objects: Vec<RmObject>,
    next_handle: u32,
    channels: Option<FirmwareChannels>,
    /// GSP-RM's log buffers, and what crash reports will say of it.
    logs: LogReader,
    journal: SharedJournal,
}

impl FirmwareRm {
    /// Boot the card behind `pci` with its chip's images from `search`,
    /// lay out our memory with `tables`, build the golden context, then
    /// the user's client over our page tables.
    pub(crate) fn open(
        pci: PciHandle,
        search: &SearchPath,
        tables: &TablesFactory,
        (journal, log_metadata): (SharedJournal, Option<SharedLogMetadata>),
    ) -> Result<(FirmwareRm, DeviceInfo), GspError> {
        let identity = pci.identify().map_err(GspError::Pci)?;
        let (_, chip) =
            early::identify(&mut OverActor(&pci)).map_err(|e| GspError::Identify(Box::new(e)))?;
        let firmware = FirmwareSet::load(chip, search, Progress::Hidden)
            .map_err(|e| GspError::Firmware(Box::new(e)))?;
        let firmware = &firmware;
        let can = pci.capabilities().map_err(GspError::Pci)?;
        let bar1_bytes = identity
            .bars
            .iter()
            .find(|b| b.index == FB_BAR_INDEX)
            .map(|b| b.bytes)
            .ok_or(GspError::NoBar1)?;
        let booted = boot_through_fsp(&mut OverActor(&pci), firmware, &BootPatience::default())
            .map_err(GspError::Boot)?;
        tracing::info!(
            chip = ?booted.chip,
            steps = booted.timings.len(),
            "GSP-RM booted through the FSP"
        );
        let card = BootedCard {
            bar1_bytes,
            vram_bytes: booted.vram_bytes,
            vram_ceiling: booted.vram_ceiling,
        };
        let mut tables = tables(&card).map_err(|why| GspError::CardMemory { why })?;
        let logs = LogReader::new(&booted.staged, log_metadata);
        let mut rpc = booted.rpc;
        let classes = GoldenClasses::for_chip(booted.chip);
        let bus = &mut OverActor(&pci);
        let golden = build_golden_context(
            &mut rpc,
            bus,
            &mut *tables,
            GOLDEN_HANDLES,
            classes,
            WINDOW_BYTES,
        )
        .map_err(|e| GspError::Golden(Box::new(e)))?;
        tracing::info!(buffers = golden.buffers.len(), "golden context promoted");
        let u = USER_OBJECTS;
        alloc_client_objects(&mut rpc, bus, u, TablesOwner::Driver).map_err(rpc_error)?;
        set_page_directory(&mut rpc, bus, u, tables.root()).map_err(rpc_error)?;
        let objects = vec![
            object(u.client, 0, class::NV01_ROOT),
            object(u.device, u.client, class::NV01_DEVICE_0),
            object(u.subdevice, u.device, class::NV20_SUBDEVICE_0),
            object(u.va_space, u.device, class::FERMI_VASPACE_A),
        ];
        let info = DeviceInfo {
            chip: booted.identity,
            identity,
            vram_bytes: booted.vram_bytes,
            rm: RmBackend::Firmware,
            can,
            memory: MemoryOwner::Tables,
            firmware: format!(
                "GSP-RM {} booted by us through the FSP",
                firmware
                    .gsp
                    .version
                    .as_deref()
                    .unwrap_or("(unknown version)")
            ),
            client: ObjectHandle(u.client),
            device: ObjectHandle(u.device),
            subdevice: ObjectHandle(u.subdevice),
            name: Some(booted.static_info.name.clone()).filter(|n| !n.is_empty()),
            driver_version: None,
            compute: ComputeFacts {
                total_memory: tables.capacity(),
                l2_bytes: u64::from(booted.static_info.l2_bytes),
                // The SM array is not asked of GSP-RM yet: the null
                // card's (an RTX 5090's) stands in.
                ..NULL_COMPUTE
            },
        };
        let mut rm = FirmwareRm {
            pci,
            rpc,
            tables,
            classes,
            objects,
            next_handle: FIRST_CALLER_HANDLE,
            channels: None,
            logs,
            journal,
        };
        rm.note();
        Ok((rm, info))
    }

    /// One channel of the group over `spec`'s ring and USERD, with memory
    /// for its instance block and method buffer from our tables.
    fn channel(
        &mut self,
        under: &crate::bare::channels::ChannelParent,
        spec: &RingSpec,
        handles: (u32, u32),
        engine_class: u32,
    ) -> Result<RpcChannel, GspError> {
        let userd = self
            .tables
            .phys_of(spec.userd_va)
            .ok_or(GspError::NotOurMemory {
                what: "USERD",
                va: spec.userd_va,
            })?;
        let mut video = |what: &'static str, bytes| {
            self.tables
                .video(bytes, page::SMALL)
                .map_err(|why| GspError::CardMemory {
                    why: format!("{what}: {why}"),
                })
        };
        let memory = ChannelMemory {
            ring_va: spec.ring_va,
            entries: spec.entries,
            userd: Placed::Video(userd),
            userd_bytes: USERD_BYTES,
            instance: video("an instance block", INSTANCE_BYTES)?,
            method_buffer: video("a method buffer", METHOD_BUFFER_BYTES)?,
            error_notifier: None,
        };
        let ch = open_channel(
            &mut self.rpc,
            &mut OverActor(&self.pci),
            under,
            (handles.0, self.classes.channel),
            (handles.1, engine_class),
            &memory,
            ENGINE_TYPE_GRAPHICS,
        )
        .map_err(rpc_error)?;
        self.objects
            .push(object(handles.0, under.parent, self.classes.channel));
        self.objects
            .push(object(handles.1, handles.0, engine_class));
        Ok(ch)
    }

    /// Bring the journal up to date: after every call that spoke to
    /// GSP-RM (its log lines also go to `tracing`).
    fn note(&mut self) {
        self.journal
            .lock()
            .update(&self.rpc, &mut self.logs, &mut OverActor(&self.pci));
    }

    /// Whether GSP-RM has said a channel of ours stopped.
    fn notified(&self, chans: &FirmwareChannels) -> bool {
        self.rpc.notices().any(|n| {
            matches!(n, Notice::RcTriggered { chid, .. }
                if *chid == chans.compute.token || *chid == chans.copy.token)
        })
    }
}

fn rpc_error(e: RpcError) -> GspError {
    GspError::Rpc(Box::new(e))
}

fn object(handle: u32, parent: u32, class: u32) -> RmObject {
    RmObject {
        handle: ObjectHandle(handle),
        parent: ObjectHandle(parent),
        class,
    }
}

/// The parameters of a class the caller may allocate with none of its
/// own: zeros of the size RM checks, where the class has a structure.
fn zero_params(class: u32) -> Vec<u8> {
    let bytes = match class {
        class::NV01_DEVICE_0 => device::BYTES,
        class::NV20_SUBDEVICE_0 => subdevice::BYTES,
        class::FERMI_VASPACE_A => va_space::BYTES,
        _ => 0,
    };
    vec![0; bytes]
}

const RM_NAME: &str = "GSP-RM (bare metal)";

/// The RM's calls, each followed by a journal update (in the trait's
/// implementation below).
impl FirmwareRm {
    fn noting<T>(&mut self, call: impl FnOnce(&mut FirmwareRm) -> T) -> T {
        let r = call(self);
        self.note();
        r
    }

    fn alloc_now(&mut self, parent: ObjectHandle, class: u32) -> Result<ObjectHandle, GspError> {
        let handle = self.next_handle;
        self.rpc
            .rm_alloc(
                &mut OverActor(&self.pci),
                &RmAlloc {
                    client: USER_OBJECTS.client,
                    parent: parent.0,
                    object: handle,
                    class,
                    params: &zero_params(class),
                },
            )
            .map_err(rpc_error)?;
        self.next_handle += 1;
        self.objects.push(object(handle, parent.0, class));
        Ok(ObjectHandle(handle))
    }

    fn free_now(&mut self, handle: ObjectHandle) -> Result<u32, GspError> {
        let parent = self
            .objects
            .iter()
            .find(|o| o.handle == handle)
            .map(|o| o.parent)
            .ok_or(GspError::NoSuchObject(handle))?;
        self.rpc
            .rm_free(
                &mut OverActor(&self.pci),
                USER_OBJECTS.client,
                parent.0,
                handle.0,
            )
            .map_err(rpc_error)?;
        // RM frees the subtree: everything whose chain of parents reaches
        // the handle goes from our list too.
        let mut gone = vec![handle];
        let mut i = 0;
        while i < gone.len() {
            let h = gone[i];
            gone.extend(
                self.objects
                    .iter()
                    .filter(|o| o.parent == h)
                    .map(|o| o.handle),
            );
            i += 1;
        }
        self.objects.retain(|o| !gone.contains(&o.handle));
        // CAST: a handful of objects.
        Ok(gone.len() as u32)
    }

    fn create_channels_now(&mut self, setup: ChannelSetup) -> Result<Channels, GspError> {
        if self.channels.is_some() {
            return Err(GspError::ChannelsExist);
        }
        if let CopyPlacement::CopyEngine(_) = setup.copy_placement {
            return Err(GspError::NotOnThisRm {
                rm: RM_NAME,
                what: "copy channels on a copy engine of their own yet",
            });
        }
        let u = USER_OBJECTS;
        let under = alloc_group(
            &mut self.rpc,
            &mut OverActor(&self.pci),
            u.client,
            u.device,
            u.va_space,
            (GROUP, CONTEXT_SHARE),
        )
        .map_err(rpc_error)?;
        self.objects
            .push(object(GROUP, u.device, class::KEPLER_CHANNEL_GROUP_A));
        self.objects
            .push(object(CONTEXT_SHARE, GROUP, class::FERMI_CONTEXT_SHARE_A));
        let (compute_class, copy_class) = (self.classes.compute, self.classes.copy);
        let compute = self.channel(&under, &setup.compute, COMPUTE_CHANNEL, compute_class)?;
        let copy = self.channel(&under, &setup.copy, COPY_CHANNEL, copy_class)?;
        let bus = &mut OverActor(&self.pci);
        alloc_debugger(
            &mut self.rpc,
            bus,
            u.client,
            u.device,
            DEBUGGER,
            compute.engine,
        )
        .map_err(rpc_error)?;
        self.objects
            .push(object(DEBUGGER, u.device, class::GT200_DEBUGGER));
        schedule(&mut self.rpc, bus, u.client, GROUP, true).map_err(rpc_error)?;
        let info = |c: &RpcChannel| ChannelInfo {
            channel: ObjectHandle(c.channel),
            engine: ObjectHandle(c.engine),
            class: c.engine_class,
            token: c.token,
        };
        let channels = Channels {
            group: ObjectHandle(GROUP),
            copy_group: ObjectHandle(GROUP),
            compute: info(&compute),
            copy: info(&copy),
            // Not asked of GSP-RM yet: a shape no chip exceeds, so shader
            // local memory covers every launch.
            gr: NULL_GR_SHAPE,
        };
        self.channels = Some(FirmwareChannels { compute, copy });
        Ok(channels)
    }

    fn destroy_channels_now(&mut self) -> Result<(), GspError> {
        let Some(gone) = self.channels.take() else {
            return Err(GspError::NoChannels);
        };
        for handle in [DEBUGGER, GROUP] {
            self.free_now(ObjectHandle(handle))?;
        }
        // GSP-RM hands the channel ids out again: what it said of the old
        // channels must not be read as news of the fresh ones.
        self.rpc
            .forget_channel_notices(&[gone.compute.token, gone.copy.token]);
        Ok(())
    }

    fn channel_fault_now(&mut self, deep: bool) -> Result<Option<ChannelFault>, GspError> {
        let Some(chans) = &self.channels else {
            return Ok(None);
        };
        if !deep && !self.notified(chans) {
            return Ok(None);
        }
        let pairs = [
            (chans.compute.channel, chans.compute.token),
            (chans.copy.channel, chans.copy.token),
        ];
        for pair in pairs {
            let found = diagnose(
                &mut self.rpc,
                &mut OverActor(&self.pci),
                USER_OBJECTS.client,
                DEBUGGER,
                pair,
            )
            .map_err(rpc_error)?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }
}

impl Rm for FirmwareRm {
    fn alloc(&mut self, parent: ObjectHandle, class: u32) -> Result<ObjectHandle, GspError> {
        self.noting(|rm| rm.alloc_now(parent, class))
    }

    fn free(&mut self, handle: ObjectHandle) -> Result<u32, GspError> {
        self.noting(|rm| rm.free_now(handle))
    }

    fn objects(&self) -> Vec<RmObject> {
        self.objects.clone()
    }

    fn alloc_video(&mut self, _bytes: u64, _va: u64) -> Result<VideoAlloc, GspError> {
        Err(GspError::NotOnThisRm {
            rm: RM_NAME,
            what: "video memory of its own (the memory actor's tables hold it)",
        })
    }

    fn alloc_pinned(&mut self, _bytes: u64, _va: u64) -> Result<PinnedAlloc, GspError> {
        Err(GspError::NotOnThisRm {
            rm: RM_NAME,
            what: "pinned host memory of its own (the memory actor maps it)",
        })
    }

    fn map_cpu(&mut self, _handle: ObjectHandle, _bytes: u64) -> Result<CpuView, GspError> {
        Err(GspError::NotOnThisRm {
            rm: RM_NAME,
            what: "CPU mappings of memory objects",
        })
    }

    fn free_memory(
        &mut self,
        _handle: ObjectHandle,
        _va: u64,
        _bytes: u64,
    ) -> Result<(), GspError> {
        Err(GspError::NotOnThisRm {
            rm: RM_NAME,
            what: "memory objects to free",
        })
    }

    fn create_channels(&mut self, setup: ChannelSetup) -> Result<Channels, GspError> {
        self.noting(|rm| rm.create_channels_now(setup))
    }

    fn destroy_channels(&mut self) -> Result<(), GspError> {
        self.noting(FirmwareRm::destroy_channels_now)
    }

    fn doorbell(&self) -> Doorbell {
        Doorbell::Pci(self.pci.clone())
    }

    fn channel_fault(&mut self, deep: bool) -> Result<Option<ChannelFault>, GspError> {
        self.noting(|rm| rm.channel_fault_now(deep))
    }

    fn teardown(&self) -> Option<RmTeardown> {
        None
    }

    fn live_objects(&self) -> Option<u64> {
        Some(self.objects.len() as u64)
    }
}
