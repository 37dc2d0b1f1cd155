//! The RPCs a driver makes of GSP-RM after init: GSP_RM_ALLOC, FREE and
//! GSP_RM_CONTROL on the object tree, SET_PAGE_DIRECTORY and
//! UNLOADING_GUEST_DRIVER. Each answer is the request echoed with its
//! status (and a control's parameters filled), under the request's
//! function; a refused call carries RM's status in `rpc_result` too, which
//! is how tinygrad, which reads only `rpc_result`, sees the refusal
//! (inferred: RM's exact split between the two is not pinned down).
//!
//! The controls answered are those a driver asks at start (reference/gsp.md
//! section 9.5), in the layouts of NVIDIA's 570 headers; any other control
//! is NV_ERR_NOT_SUPPORTED, and a control on an object of another class
//! too.

use super::objects::{Kind, Objects};
use crate::chip::RmClasses;
use crate::mmu::{PageDirectory, Target};
use macuda_hw::gsp_rpc::set_page_directory as spd;
use macuda_hw::le::{put_u32 as put, u32_at};
use macuda_hw::rm::promote::{PromoteCtx, MAX_ENTRIES};
use macuda_hw::rm::{
    address_space, status, ChannelAlloc, MemoryDesc, MmuFaultEntry, ReadAllSmErrorStates,
    ReadMmuFaultInfo, MMU_FAULT_ENTRIES,
};
use std::collections::HashMap;
use std::mem::{offset_of, size_of};

/// Offsets of `rpc_gsp_rm_alloc_v03_00` (then the parameters).
pub(super) mod alloc_at {
    pub const CLIENT: usize = 0;
    pub const PARENT: usize = 4;
    pub const OBJECT: usize = 8;
    pub const CLASS: usize = 12;
    pub const STATUS: usize = 16;
    pub const PARAMS_SIZE: usize = 20;
    pub const BYTES: usize = 32;
}

/// Offsets of `rpc_gsp_rm_control_v03_00` (then the parameters).
pub(super) mod control_at {
    pub const CLIENT: usize = 0;
    pub const OBJECT: usize = 4;
    pub const CMD: usize = 8;
    pub const STATUS: usize = 12;
    pub const PARAMS_SIZE: usize = 16;
    pub const BYTES: usize = 24;
}

/// Offsets of `rpc_free_v03_00` (NVOS00_PARAMETERS).
mod free_at {
    pub const ROOT: usize = 0;
    pub const OBJECT_OLD: usize = 8;
    pub const STATUS: usize = 12;
    pub const BYTES: usize = 16;
}

/// Control commands answered (NVIDIA's 570 numbers).
pub mod control {
    pub const FIFO_GET_DEVICE_INFO_TABLE: u32 = 0x2080_1112;
    pub const INTERNAL_STATIC_KGR_GET_CONTEXT_BUFFERS_INFO: u32 = 0x2080_0A32;
    pub const GPU_PROMOTE_CTX: u32 = 0x2080_012B;
    pub const PERF_BOOST: u32 = 0x2080_200A;
    pub const VASPACE_COPY_SERVER_RESERVED_PDES: u32 = 0x90F1_0106;
    pub const GPFIFO_SCHEDULE: u32 = 0xA06C_0101;
    pub const GPFIFO_GET_WORK_SUBMIT_TOKEN: u32 = 0xC36F_0108;
    pub const DEBUG_READ_MMU_FAULT_INFO: u32 = macuda_hw::rm::control::DEBUG_READ_MMU_FAULT_INFO;
    pub const DEBUG_READ_ALL_SM_ERROR_STATES: u32 =
        macuda_hw::rm::control::DEBUG_READ_ALL_SM_ERROR_STATES;
}

/// Parameter sizes RM checks `paramsSize` against, by class or control.
const DEVICE_PARAMS: usize = 56;
const SUBDEVICE_PARAMS: usize = 4;
const CHANNEL_PARAMS: usize = 368;
const DEVICE_INFO_TABLE_PARAMS: usize = 3212;
const CONTEXT_BUFFERS_INFO_PARAMS: usize = 1664;
const WORK_SUBMIT_TOKEN_PARAMS: usize = 4;

/// FIFO_GET_DEVICE_INFO_TABLE: entries of 100 bytes from offset 12; in
/// each, engineData[2] is RM's engine type and [3] its runlist (RM's
/// ENGINE_INFO_TYPE order; tinygrad reads those two), then the name.
const DEVICE_ENTRY_AT: usize = 12;
const DEVICE_ENTRY_BYTES: usize = 100;
const ENGINE_DATA_RM_ENGINE_TYPE: usize = 2;
const ENGINE_DATA_RUNLIST: usize = 3;
const ENGINE_NAME_AT: usize = 84;
/// NV2080_ENGINE_TYPE_GRAPHICS, _COPY0, _COPY1.
const ENGINES: [(u32, u32, &str); 3] = [(0x1, 0, "GRAPHICS"), (0x9, 1, "COPY0"), (0xA, 2, "COPY1")];
/// GET_CONTEXT_BUFFERS_INFO: engine 0's 26 (size, alignment) pairs.
const CONTEXT_BUFFER_IDS: usize = 26;
const CONTEXT_BUFFER_BYTES: u32 = 0x4_0000;
const CONTEXT_BUFFER_ALIGN: u32 = 0x1000;

/// What the calls recorded, beyond the tree.
#[derive(Default)]
pub struct Calls {
    pub objects: Objects,
    /// Page directories set: (client, VA space handle, root), the latest
    /// last; the engines walk a channel's VA space from its root.
    pub page_directories: Vec<(u32, u32, PageDirectory)>,
    /// Channels by (client, handle): their channel ids, in order.
    pub channels: Vec<((u32, u32), u32)>,
    /// What each channel id was allocated with, for the engines.
    pub channel_params: HashMap<u32, ChannelParams>,
    /// Channels allocated so far (what [`ChannelParams::serial`] counts).
    pub channel_serial: u64,
    /// MMU faults of each client's channels not yet read through a
    /// debugger, oldest first, as many as RM keeps.
    pub mmu_faults: HashMap<u32, Vec<MmuFaultEntry>>,
    /// Context promotions taken, in order.
    pub promotions: Vec<Promotion>,
    pub unloaded: bool,
}

/// One GPU_PROMOTE_CTX as GSP-RM took it: who asked, for which channel,
/// and each buffer's entry (its id, its size, and which of its addresses
/// the driver gave; the addresses themselves are each driver's choice).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Promotion {
    pub client: u32,
    /// The subdevice the control was sent to.
    pub object: u32,
    /// The channel's client and handle.
    pub channel: (u32, u32),
    /// The channel hangs straight under its device (a golden channel) and
    /// not in a channel group.
    pub under_device: bool,
    pub entries: Vec<PromotedBuffer>,
}

/// One entry of a promotion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PromotedBuffer {
    pub buffer_id: u16,
    pub size: u64,
    pub physical: bool,
    pub virtual_: bool,
    pub phys_attr: u32,
    pub initialize: u8,
    pub nonmapped: u8,
}

/// A channel as its allocation described it: what the engines need to run
/// it (`NV_CHANNEL_ALLOC_PARAMS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelParams {
    /// Which allocation this is: a channel id freed and handed out again
    /// names a fresh channel, whose engine state starts anew.
    pub serial: u64,
    pub client: u32,
    /// The ring's VA and its entries.
    pub ring: u64,
    pub entries: u32,
    pub va_space: u32,
    /// USERD, where `userdMem` put it (`None`: not described that way).
    pub userd: Option<(Target, u64)>,
    /// Where RM writes the channel's error (`errorNotifierMem`).
    pub error_notifier: Option<(Target, u64)>,
}

impl ChannelParams {
    fn from_alloc(client: u32, p: &[u8]) -> ChannelParams {
        let u64_at = |at: usize| {
            p.get(at..at + 8)
                .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        // A memory descriptor: where its base lies, if it names memory.
        let described = |at: usize| {
            let base = u64_at(at + offset_of!(MemoryDesc, base));
            match u32_at(p, at + offset_of!(MemoryDesc, address_space)) {
                address_space::FBMEM => Some((Target::Video, base)),
                address_space::SYSMEM => Some((Target::SystemCoherent, base)),
                _ => None,
            }
        };
        let userd = described(offset_of!(ChannelAlloc, userd_mem));
        let error_notifier = described(offset_of!(ChannelAlloc, error_notifier_mem));
        ChannelParams {
            serial: 0,
            client,
            ring: u64_at(offset_of!(ChannelAlloc, gp_fifo_offset)),
            entries: u32_at(p, offset_of!(ChannelAlloc, gp_fifo_entries)),
            va_space: u32_at(p, offset_of!(ChannelAlloc, h_va_space)),
            userd,
            error_notifier,
        }
    }
}

impl Calls {
    /// An MMU fault on one of `client`'s channels, for its debugger to
    /// read; RM keeps the first few.
    pub fn record_mmu_fault(&mut self, client: u32, entry: MmuFaultEntry) {
        let kept = self.mmu_faults.entry(client).or_default();
        if kept.len() < MMU_FAULT_ENTRIES {
            kept.push(entry);
        }
    }

    /// The root of the VA space `va_space` of `client`, as last set.
    pub fn root_of(&self, client: u32, va_space: u32) -> Option<PageDirectory> {
        self.page_directories
            .iter()
            .rev()
            .find(|(c, v, _)| *c == client && *v == va_space)
            .map(|(_, _, r)| *r)
    }

    /// GSP_RM_ALLOC: the reply's result and payload.
    pub fn alloc(&mut self, classes: &RmClasses, payload: &[u8]) -> (u32, Vec<u8>) {
        let mut reply = payload.to_vec();
        let st = if payload.len() < alloc_at::BYTES {
            status::INVALID_PARAM_STRUCT
        } else {
            let f = |at| u32_at(payload, at);
            let (client, parent, object, class) = (
                f(alloc_at::CLIENT),
                f(alloc_at::PARENT),
                f(alloc_at::OBJECT),
                f(alloc_at::CLASS),
            );
            let params = payload.len() - alloc_at::BYTES;
            let expected = match classes.kind_of(class) {
                Some(Kind::Device) => Some(DEVICE_PARAMS),
                Some(Kind::Subdevice) => Some(SUBDEVICE_PARAMS),
                Some(Kind::Channel) => Some(CHANNEL_PARAMS),
                _ => None,
            };
            if f(alloc_at::PARAMS_SIZE) as usize != params || expected.is_some_and(|e| e != params)
            {
                status::INVALID_PARAM_STRUCT
            } else {
                match self.objects.alloc(classes, client, parent, object, class) {
                    Ok(()) => {
                        if classes.kind_of(class) == Some(Kind::Channel) {
                            // The lowest id no live channel holds, as RM
                            // hands channel ids out again once freed.
                            let chid = (0..)
                                .find(|id| self.channels.iter().all(|(_, c)| c != id))
                                .expect("a free channel id");
                            self.channels.push(((client, object), chid));
                            let p = &payload[alloc_at::BYTES..];
                            self.channel_serial += 1;
                            let mut params = ChannelParams::from_alloc(client, p);
                            params.serial = self.channel_serial;
                            self.channel_params.insert(chid, params);
                        }
                        0
                    }
                    Err(e) => e,
                }
            }
        };
        if reply.len() >= alloc_at::BYTES {
            put(&mut reply, alloc_at::STATUS, st);
        }
        (st, reply)
    }

    /// FREE.
    pub fn free(&mut self, payload: &[u8]) -> (u32, Vec<u8>) {
        let mut reply = payload.to_vec();
        let st = if payload.len() < free_at::BYTES {
            status::INVALID_PARAM_STRUCT
        } else {
            let (client, object) = (
                u32_at(payload, free_at::ROOT),
                u32_at(payload, free_at::OBJECT_OLD),
            );
            match self.objects.free(client, object) {
                Ok(gone) => {
                    let freed = |c: &u32, h: &u32| *c == client && gone.iter().any(|(g, _)| g == h);
                    for ((c, h), chid) in &self.channels {
                        if freed(c, h) {
                            self.channel_params.remove(chid);
                        }
                    }
                    self.channels.retain(|((c, h), _)| !freed(c, h));
                    0
                }
                Err(e) => e,
            }
        };
        if reply.len() >= free_at::BYTES {
            put(&mut reply, free_at::STATUS, st);
        }
        (st, reply)
    }

    /// GSP_RM_CONTROL: the object must be of the class the command is for.
    pub fn control(&mut self, payload: &[u8]) -> (u32, Vec<u8>) {
        let mut reply = payload.to_vec();
        let st = if payload.len() < control_at::BYTES {
            status::INVALID_PARAM_STRUCT
        } else {
            let (client, object, cmd) = (
                u32_at(payload, control_at::CLIENT),
                u32_at(payload, control_at::OBJECT),
                u32_at(payload, control_at::CMD),
            );
            let params_size = u32_at(payload, control_at::PARAMS_SIZE) as usize;
            if params_size != payload.len() - control_at::BYTES {
                status::INVALID_PARAM_STRUCT
            } else {
                let params = &mut reply[control_at::BYTES..];
                self.answer(client, object, cmd, params).err().unwrap_or(0)
            }
        };
        if reply.len() >= control_at::BYTES {
            put(&mut reply, control_at::STATUS, st);
        }
        (st, reply)
    }

    fn answer(&mut self, client: u32, object: u32, cmd: u32, p: &mut [u8]) -> Result<(), u32> {
        if !self.objects.has_client(client) {
            return Err(status::INVALID_CLIENT);
        }
        let target = self
            .objects
            .get(client, object)
            .ok_or(status::OBJECT_NOT_FOUND)?;
        let on = |kinds: &[Kind]| {
            if kinds.contains(&target.kind) {
                Ok(())
            } else {
                Err(status::NOT_SUPPORTED)
            }
        };
        let sized = |n: usize| {
            if p.len() == n {
                Ok(())
            } else {
                Err(status::INVALID_PARAM_STRUCT)
            }
        };
        match cmd {
            control::FIFO_GET_DEVICE_INFO_TABLE => {
                on(&[Kind::Subdevice])?;
                sized(DEVICE_INFO_TABLE_PARAMS)?;
                p.fill(0);
                put(p, 4, ENGINES.len() as u32);
                for (i, (engine, runlist, name)) in ENGINES.iter().enumerate() {
                    let e = DEVICE_ENTRY_AT + i * DEVICE_ENTRY_BYTES;
                    put(p, e + 4 * ENGINE_DATA_RM_ENGINE_TYPE, *engine);
                    put(p, e + 4 * ENGINE_DATA_RUNLIST, *runlist);
                    p[e + ENGINE_NAME_AT..][..name.len()].copy_from_slice(name.as_bytes());
                }
            }
            control::INTERNAL_STATIC_KGR_GET_CONTEXT_BUFFERS_INFO => {
                on(&[Kind::Subdevice])?;
                sized(CONTEXT_BUFFERS_INFO_PARAMS)?;
                p.fill(0);
                for id in 0..CONTEXT_BUFFER_IDS {
                    put(p, id * 8, CONTEXT_BUFFER_BYTES);
                    put(p, id * 8 + 4, CONTEXT_BUFFER_ALIGN);
                }
            }
            control::GPU_PROMOTE_CTX => {
                on(&[Kind::Subdevice])?;
                sized(size_of::<PromoteCtx>())?;
                let ctx: PromoteCtx = bytemuck::pod_read_unaligned(p);
                let n = usize::try_from(ctx.entry_count)
                    .ok()
                    .filter(|n| *n <= MAX_ENTRIES)
                    .ok_or(status::INVALID_ARGUMENT)?;
                let channel = (ctx.h_chan_client, ctx.h_object);
                let under_device = self
                    .objects
                    .get(channel.0, channel.1)
                    .and_then(|c| self.objects.get(channel.0, c.parent))
                    .is_some_and(|parent| parent.kind == Kind::Device);
                let entries = ctx.entries[..n]
                    .iter()
                    .map(|e| PromotedBuffer {
                        buffer_id: e.buffer_id,
                        size: e.size,
                        physical: e.gpu_phys_addr != 0,
                        virtual_: e.gpu_virt_addr != 0,
                        phys_attr: e.phys_attr,
                        initialize: e.initialize,
                        nonmapped: e.nonmapped,
                    })
                    .collect();
                self.promotions.push(Promotion {
                    client,
                    object,
                    channel,
                    under_device,
                    entries,
                });
            }
            control::PERF_BOOST => on(&[Kind::Subdevice])?,
            control::VASPACE_COPY_SERVER_RESERVED_PDES => on(&[Kind::VaSpace])?,
            control::GPFIFO_SCHEDULE => on(&[Kind::ChannelGroup, Kind::Channel])?,
            control::DEBUG_READ_MMU_FAULT_INFO => {
                on(&[Kind::Debugger])?;
                sized(size_of::<ReadMmuFaultInfo>())?;
                p.fill(0);
                let faults = self.mmu_faults.remove(&client).unwrap_or_default();
                let entries = offset_of!(ReadMmuFaultInfo, entries);
                for (i, e) in faults.iter().enumerate() {
                    let at = entries + i * size_of::<MmuFaultEntry>();
                    let address = at + offset_of!(MmuFaultEntry, fault_address);
                    p[address..address + 8].copy_from_slice(&e.fault_address.to_le_bytes());
                    put(p, at + offset_of!(MmuFaultEntry, fault_type), e.fault_type);
                    put(
                        p,
                        at + offset_of!(MmuFaultEntry, access_type),
                        e.access_type,
                    );
                }
                // CAST: at most MMU_FAULT_ENTRIES.
                put(p, offset_of!(ReadMmuFaultInfo, count), faults.len() as u32);
            }
            control::DEBUG_READ_ALL_SM_ERROR_STATES => {
                // The sim's SMs run no code, so none records an error; an
                // MMU fault RM still keeps for the client is flagged, its
                // details left for READ_MMU_FAULT_INFO.
                on(&[Kind::Debugger])?;
                sized(size_of::<ReadAllSmErrorStates>())?;
                let asked: ReadAllSmErrorStates = bytemuck::pod_read_unaligned(p);
                let mut all = ReadAllSmErrorStates {
                    h_target_channel: asked.h_target_channel,
                    num_sms_to_read: asked.num_sms_to_read,
                    starting_sm: asked.starting_sm,
                    ..ReadAllSmErrorStates::default()
                };
                all.mmu_fault.valid =
                    u8::from(self.mmu_faults.get(&client).is_some_and(|f| !f.is_empty()));
                p.copy_from_slice(bytemuck::bytes_of(&all));
            }
            control::GPFIFO_GET_WORK_SUBMIT_TOKEN => {
                on(&[Kind::Channel])?;
                sized(WORK_SUBMIT_TOKEN_PARAMS)?;
                let chid = self
                    .channels
                    .iter()
                    .find(|(k, _)| *k == (client, object))
                    .map(|(_, c)| *c)
                    .ok_or(status::OBJECT_NOT_FOUND)?;
                put(p, 0, chid);
            }
            _ => return Err(status::NOT_SUPPORTED),
        }
        Ok(())
    }
}

impl Calls {
    /// SET_PAGE_DIRECTORY: the VA space's root, in the memory its flags
    /// name. A payload too short, or an aperture RM does not define, is
    /// not taken (RM's answer for both is an invalid argument).
    pub fn set_page_directory(&mut self, payload: &[u8]) -> Result<(), u32> {
        if payload.len() < spd::BYTES {
            return Err(status::INVALID_ARGUMENT);
        }
        let address = u64::from_le_bytes(
            payload[spd::PHYS_ADDRESS..spd::PHYS_ADDRESS + 8]
                .try_into()
                .expect("8 bytes"),
        );
        let target = match u32_at(payload, spd::FLAGS) & spd::FLAGS_APERTURE_MASK {
            spd::APERTURE_VIDMEM => Target::Video,
            spd::APERTURE_SYSMEM_COH => Target::SystemCoherent,
            spd::APERTURE_SYSMEM_NONCOH => Target::SystemNonCoherent,
            _ => return Err(status::INVALID_ARGUMENT),
        };
        self.page_directories.push((
            u32_at(payload, spd::H_CLIENT),
            u32_at(payload, spd::H_VA_SPACE),
            PageDirectory { target, address },
        ));
        Ok(())
    }
}
