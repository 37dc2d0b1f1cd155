//! Channel groups, GPFIFO channels over rings the caller placed, the
//! usermode doorbell page, and scheduling.

use super::client::KernelRm;
use super::error::KernelRmError;
use super::ioctl::{check, raw_ioctl, schedule_raw, RmMapping};
use super::memory::GpuVaSpace;
use macuda_hw::methods::usermode;
use macuda_hw::page;
use macuda_hw::rm::{
    self, class, control, uvm, ChannelAlloc, ChannelGroupAlloc, CtxShareAlloc, MemoryAlloc,
    WorkSubmitToken,
};

/// GPFIFO channel classes we drive, preferred first.
pub const GPFIFO_CLASSES: &[u32] = &[
    class::BLACKWELL_CHANNEL_GPFIFO_A,
    class::HOPPER_CHANNEL_GPFIFO_A,
];

/// VA reserved for each channel's context buffers (UVM maps them there).
const CHANNEL_VA_WINDOW: u64 = 64 << 20;

/// A channel group with its error notifier and, on the graphics engine,
/// its subcontext.
pub struct ChannelGroup {
    pub handle: u32,
    /// The `NV2080_ENGINE_TYPE_*` it was made on.
    pub engine_type: u32,
    /// The subcontext its channels share; only a group on the graphics
    /// engine has one (a copy engine has no subcontexts).
    pub context_share: Option<u32>,
    pub notifier: u32,
    /// The notifier as the CPU sees it (RM writes errors there).
    notifier_map: Box<dyn RmMapping>,
}

/// What RM wrote to a channel group's error notifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the channel was removed: Xid {xid} ({}) on engine type {engine}", rm::xid_name(*.xid))]
pub struct ChannelError {
    pub xid: u32,
    pub engine: u16,
}

impl ChannelGroup {
    /// The error RM reported for the group's channels, if any.
    pub fn error(&self) -> Option<ChannelError> {
        let at = rm::NOTIFIER_SLOT_ERROR * std::mem::size_of::<rm::Notification>();
        // SAFETY: slot 0 lies inside the notifier's 4 KiB mapping; volatile,
        // RM (GSP) writes it.
        let n = unsafe {
            std::ptr::read_volatile(
                self.notifier_map
                    .as_ptr()
                    .add(at)
                    .cast::<rm::Notification>(),
            )
        };
        (n.status == rm::NOTIFICATION_STATUS_ERROR).then_some(ChannelError {
            xid: n.info32,
            engine: n.info16,
        })
    }
}

/// Usermode classes we drive, preferred first.
pub const USERMODE_CLASSES: &[u32] = &[usermode::BLACKWELL_USERMODE_A, usermode::HOPPER_USERMODE_A];

/// The usermode register page of a GPU, mapped for the CPU.
pub struct Usermode {
    pub class: u32,
    pub object: u32,
    pub(super) map: Box<dyn RmMapping>,
}

impl Usermode {
    fn read32(&self, offset: u32) -> u32 {
        debug_assert!(offset as usize + 4 <= self.map.len());
        // SAFETY: inside the mapped page (the offsets are within the 64 KiB page), 4-byte aligned
        // register offsets; a volatile read because the GPU changes them.
        unsafe { std::ptr::read_volatile(self.map.as_ptr().add(offset as usize).cast::<u32>()) }
    }

    /// PTIMER in nanoseconds: TIME_1, TIME_0, TIME_1 again, retried if the
    /// high half moved in between.
    pub fn time_ns(&self) -> u64 {
        loop {
            let hi = self.read32(usermode::TIME_1::BYTE_OFFSET);
            let lo = self.read32(usermode::TIME_0::BYTE_OFFSET);
            if self.read32(usermode::TIME_1::BYTE_OFFSET) == hi {
                return u64::from(hi) << 32 | u64::from(lo);
            }
        }
    }

    /// Ring the doorbell with a channel's work-submit token, after a fence
    /// that makes every earlier store (GP entry, GP_PUT) visible first.
    pub fn ring(&self, token: u32) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        let at = usermode::NOTIFY_CHANNEL_PENDING::BYTE_OFFSET as usize;
        debug_assert!(at + 4 <= self.map.len());
        // SAFETY: inside the mapped page (the offsets are within the 64 KiB page); a volatile store is
        // the doorbell write.
        unsafe { std::ptr::write_volatile(self.map.as_ptr().add(at).cast::<u32>(), token) }
    }
}

/// Where a channel's ring and USERD live: video memory its owner
/// allocated and mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingPlacement {
    pub ring_memory: u32,
    pub ring_va: u64,
    pub entries: u32,
    /// The memory object holding USERD, and its offset inside it.
    pub userd_memory: u32,
    pub userd_offset: u64,
}

/// The RM objects of one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelObjects {
    pub channel: u32,
    pub gpfifo_class: u32,
    /// The compute or copy object bound to it.
    pub engine: u32,
    /// What the doorbell takes to run it.
    pub token: u32,
    /// Registered with UVM (which must be told before it is freed).
    pub registered: bool,
}

impl KernelRm {
    /// The usermode register page: PTIMER and the doorbell.
    ///
    /// # Errors
    /// No usermode class, or RM refusing its allocation or mapping.
    pub fn usermode(&self) -> Result<Usermode, KernelRmError> {
        let class = self.pick_class("usermode", USERMODE_CLASSES)?;
        let object = self.alloc(self.subdevice, class, None::<&mut ()>)?;
        // CAST: the page is 64 KiB.
        let map = self.map(object, usermode::SIZE as usize)?;
        Ok(Usermode { class, object, map })
    }

    /// A channel group on the compute engine with one subcontext in
    /// `space`, and its error notifier.
    ///
    /// # Errors
    /// RM refusing an allocation.
    pub fn channel_group(&self, space: &GpuVaSpace) -> Result<ChannelGroup, KernelRmError> {
        self.channel_group_on(space, rm::ENGINE_TYPE_GR0)
    }

    /// A channel group on engine `engine_type` (`NV2080_ENGINE_TYPE_*`) in
    /// `space`, and its error notifier. On the graphics engine its channels
    /// share one subcontext; on a copy engine the group names the VA space
    /// itself, as CUDA's copy groups do, and has no subcontext.
    ///
    /// # Errors
    /// RM refusing an allocation.
    pub fn channel_group_on(
        &self,
        space: &GpuVaSpace,
        engine_type: u32,
    ) -> Result<ChannelGroup, KernelRmError> {
        let mut notifier = MemoryAlloc {
            owner: self.client,
            kind: rm::memory::TYPE_NOTIFIER,
            flags: rm::memory::FLAG_IGNORE_BANK_PLACEMENT
                | rm::memory::FLAG_ALIGNMENT_FORCE
                | rm::memory::FLAG_MEMORY_HANDLE_PROVIDED
                | rm::memory::FLAG_MAP_NOT_REQUIRED,
            attr: rm::memory::ATTR_ALLOW_NONCONTIGUOUS | rm::memory::ATTR_LOCATION_PCI,
            attr2: rm::memory::ATTR2_PREFER_NO_ZBC | rm::memory::ATTR2_GPU_UNCACHED,
            size: page::SMALL,
            alignment: page::SMALL,
            limit: page::SMALL - 1,
            ..MemoryAlloc::default()
        };
        let notifier = self.alloc(self.device, class::NV1_MEMORY_SYSTEM, Some(&mut notifier))?;
        // CAST: one page.
        let notifier_map = self.map_sysmem(notifier, page::SMALL as usize)?;
        // SAFETY: the whole mapping; RM reads it only after an error.
        unsafe { std::ptr::write_bytes(notifier_map.as_ptr(), 0, notifier_map.len()) };
        let graphics = engine_type == rm::ENGINE_TYPE_GR0;
        let mut tsg = ChannelGroupAlloc {
            engine_type,
            h_va_space: if graphics { 0 } else { space.handle },
            ..ChannelGroupAlloc::default()
        };
        let group = self.alloc(self.device, class::KEPLER_CHANNEL_GROUP_A, Some(&mut tsg))?;
        let context_share = if graphics {
            let mut ctx = CtxShareAlloc {
                h_va_space: space.handle,
                flags: rm::CTXSHARE_SUBCONTEXT_ASYNC,
                subctx_id: 0,
            };
            Some(self.alloc(group, class::FERMI_CONTEXT_SHARE_A, Some(&mut ctx))?)
        } else {
            None
        };
        Ok(ChannelGroup {
            handle: group,
            engine_type,
            context_share,
            notifier,
            notifier_map,
        })
    }

    /// A GPFIFO channel in `group` over a ring and USERD the caller
    /// placed in video memory it allocated, with an object of
    /// `engine_class` on it, its work-submit token, and, in a group with a
    /// subcontext, its context buffers mapped through UVM (a copy engine's
    /// channel has none to map).
    ///
    /// # Errors
    /// RM or UVM refusing a step.
    pub fn channel_on(
        &self,
        space: &mut GpuVaSpace,
        group: &ChannelGroup,
        engine_class: u32,
        placement: &RingPlacement,
    ) -> Result<ChannelObjects, KernelRmError> {
        let gpfifo_class = self.pick_class("GPFIFO channel", GPFIFO_CLASSES)?;
        let on_copy_engine = group.engine_type != rm::ENGINE_TYPE_GR0;
        let mut params = ChannelAlloc {
            h_object_error: group.notifier,
            h_object_buffer: placement.ring_memory,
            gp_fifo_offset: placement.ring_va,
            gp_fifo_entries: placement.entries,
            h_context_share: group.context_share.unwrap_or(0),
            // A copy-engine group's channel names its engine, which must
            // match the group's (UVM makes its own copy channels so).
            engine_type: if on_copy_engine { group.engine_type } else { 0 },
            ..ChannelAlloc::default()
        };
        params.h_userd_memory[0] = placement.userd_memory;
        params.userd_offset[0] = placement.userd_offset;
        let channel = self.alloc(group.handle, gpfifo_class, Some(&mut params))?;
        // On a copy engine's group the copy object names that engine:
        // without it RM makes the object for the first copy engine of its
        // class list, a graphics copy engine on GH100, and moves the
        // channel onto the graphics runlist, where a channel UVM did not
        // bind cannot be scheduled (RM answers NV_ERR_INVALID_STATE).
        let engine = if on_copy_engine {
            let mut copy = rm::CopyObjectAlloc {
                version: rm::COPY_OBJECT_ALLOC_VERSION_ENGINE_TYPE,
                engine_type: group.engine_type,
            };
            self.alloc(channel, engine_class, Some(&mut copy))?
        } else {
            self.alloc(channel, engine_class, None::<&mut ()>)?
        };
        let mut token = WorkSubmitToken { token: u32::MAX };
        self.control(channel, control::GPFIFO_GET_WORK_SUBMIT_TOKEN, &mut token)?;
        let registered = group.context_share.is_some();
        if registered {
            let window = space.take_va(CHANNEL_VA_WINDOW, page::HUGE)?;
            let mut reg = [uvm::RegisterChannel {
                uuid: space.uuid,
                rm_ctrl_fd: self.ctl.fd(),
                h_client: self.client,
                h_channel: channel,
                base: window,
                length: CHANNEL_VA_WINDOW,
                ..uvm::RegisterChannel::default()
            }];
            raw_ioctl(
                space.uvm.as_ref(),
                uvm::REGISTER_CHANNEL,
                &mut reg,
                "UVM_REGISTER_CHANNEL",
            )?;
            check(reg[0].status, "registering the channel with UVM")?;
        }
        Ok(ChannelObjects {
            channel,
            gpfifo_class,
            engine,
            token: token.token,
            registered,
        })
    }

    /// Tell UVM a channel is going: it resets the channel and unmaps its
    /// context buffers (what must come before the channel is freed).
    ///
    /// # Errors
    /// UVM refusing.
    pub fn unregister_channel(
        &self,
        space: &GpuVaSpace,
        channel: u32,
    ) -> Result<(), KernelRmError> {
        let mut p = [uvm::UnregisterChannel {
            uuid: space.uuid,
            h_client: self.client,
            h_channel: channel,
            ..uvm::UnregisterChannel::default()
        }];
        raw_ioctl(
            space.uvm.as_ref(),
            uvm::UNREGISTER_CHANNEL,
            &mut p,
            "UVM_UNREGISTER_CHANNEL",
        )?;
        check(p[0].status, "unregistering a channel from UVM")
    }

    /// Take the group's channels off the scheduler.
    ///
    /// # Errors
    /// RM refusing.
    pub fn unschedule(&self, group: &ChannelGroup) -> Result<(), KernelRmError> {
        schedule_raw(self.ctl.as_ref(), self.client, group.handle, false)
    }

    /// Let the group's channels run.
    ///
    /// # Errors
    /// RM refusing.
    pub fn schedule(&self, group: &ChannelGroup) -> Result<(), KernelRmError> {
        schedule_raw(self.ctl.as_ref(), self.client, group.handle, true)
    }
}
