//! The null RM: an object tree kept in software, with the parent and
//! class rules RM has, for the null device (nothing executes) and the
//! tests that play a card.

use crate::error::GspError;
use crate::fault::ChannelFault;
use crate::handle::ObjectHandle;
use crate::info::NULL_GR_SHAPE;
use crate::kernel::RmTeardown;
use crate::objects::{ObjectTree, RmObject};
use crate::resources::{
    ChannelInfo, ChannelSetup, Channels, CopyPlacement, Doorbell, PinnedAlloc, VideoAlloc,
};
use crate::rm::Rm;
use crate::view::CpuView;
use macuda_hw::methods::{compute, copy};
use macuda_hw::Chip;
use macuda_pci::PciHandle;

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

pub(crate) struct NullRm {
    pci: PciHandle,
    tree: ObjectTree,
    chip: Chip,
    device: ObjectHandle,
    /// The channel group, once made.
    /// The channel groups: compute's, and the copy channel's own where it
    /// has one.
    channels: Option<Vec<ObjectHandle>>,
}

/// The base objects every later allocation hangs under.
pub(crate) struct BaseObjects {
    pub(crate) client: ObjectHandle,
    pub(crate) device: ObjectHandle,
    pub(crate) subdevice: ObjectHandle,
}

impl NullRm {
    /// The tree with its client, device and subdevice.
    pub(crate) fn open(pci: PciHandle, chip: Chip) -> Result<(NullRm, BaseObjects), GspError> {
        let mut tree = ObjectTree::default();
        let client = tree.alloc(ObjectHandle::NONE, macuda_hw::class::NV01_ROOT_CLIENT)?;
        let device = tree.alloc(client, macuda_hw::class::NV01_DEVICE_0)?;
        let subdevice = tree.alloc(device, macuda_hw::class::NV20_SUBDEVICE_0)?;
        let rm = NullRm {
            pci,
            tree,
            chip,
            device,
            channels: None,
        };
        Ok((
            rm,
            BaseObjects {
                client,
                device,
                subdevice,
            },
        ))
    }

    fn refuse(what: &'static str) -> GspError {
        GspError::NotOnThisRm { rm: "null", what }
    }
}

impl Rm for NullRm {
    fn alloc(&mut self, parent: ObjectHandle, class: u32) -> Result<ObjectHandle, GspError> {
        self.tree.alloc(parent, class)
    }

    fn free(&mut self, handle: ObjectHandle) -> Result<u32, GspError> {
        self.tree.free(handle)
    }

    fn objects(&self) -> Vec<RmObject> {
        self.tree.all()
    }

    fn alloc_video(&mut self, _bytes: u64, _va: u64) -> Result<VideoAlloc, GspError> {
        Err(Self::refuse("memory and channels through RM"))
    }

    fn alloc_pinned(&mut self, _bytes: u64, _va: u64) -> Result<PinnedAlloc, GspError> {
        Err(Self::refuse("memory and channels through RM"))
    }

    fn map_cpu(&mut self, _handle: ObjectHandle, _bytes: u64) -> Result<CpuView, GspError> {
        Err(Self::refuse("memory and channels through RM"))
    }

    fn free_memory(
        &mut self,
        _handle: ObjectHandle,
        _va: u64,
        _bytes: u64,
    ) -> Result<(), GspError> {
        Err(Self::refuse("memory and channels through RM"))
    }

    fn create_channels(&mut self, setup: ChannelSetup) -> Result<Channels, GspError> {
        if self.channels.is_some() {
            return Err(GspError::ChannelsExist);
        }
        let (gpfifo_class, compute_class, copy_class) = null_classes(self.chip);
        let group_class = macuda_hw::class::KEPLER_CHANNEL_GROUP_A;
        let group = self.alloc(self.device, group_class)?;
        let copy_group = match setup.copy_placement {
            CopyPlacement::ComputeGroup => group,
            CopyPlacement::CopyEngine(_) => self.alloc(self.device, group_class)?,
        };
        let mut channel = |group, class: u32, token: u32| -> Result<ChannelInfo, GspError> {
            let channel = self.alloc(group, gpfifo_class)?;
            let engine = self.alloc(channel, class)?;
            Ok(ChannelInfo {
                channel,
                engine,
                class,
                token,
            })
        };
        let compute = channel(group, compute_class, NULL_COMPUTE_TOKEN)?;
        let copy = channel(copy_group, copy_class, NULL_COPY_TOKEN)?;
        let mut groups = vec![group];
        if copy_group != group {
            groups.push(copy_group);
        }
        self.channels = Some(groups);
        Ok(Channels {
            group,
            copy_group,
            compute,
            copy,
            gr: NULL_GR_SHAPE,
        })
    }

    fn destroy_channels(&mut self) -> Result<(), GspError> {
        let groups = self.channels.take().ok_or(GspError::NoChannels)?;
        for g in groups {
            self.tree.free(g)?;
        }
        Ok(())
    }

    fn doorbell(&self) -> Doorbell {
        Doorbell::Pci(self.pci.clone())
    }

    fn channel_fault(&mut self, _deep: bool) -> Result<Option<ChannelFault>, GspError> {
        Ok(None)
    }

    fn teardown(&self) -> Option<RmTeardown> {
        None
    }

    fn live_objects(&self) -> Option<u64> {
        Some(self.tree.len() as u64)
    }
}
