//! The golden context (reference gsp.md 6.6): before any user channel
//! runs compute, GSP-RM must have seen one graphics context whose buffers
//! the driver placed and promoted, on a private client's channel. On
//! bare metal nobody else places them: we take video memory for each
//! buffer from the caller, map the ones RM wants virtual into a 512 MiB
//! window of our tables that the private client's VA space shares
//! (COPY_SERVER_RESERVED_PDES), and hand RM their addresses
//! (GPU_PROMOTE_CTX). The same promotion serves a user channel later.
//!
//! [`build_golden_context`] runs the steps as one straight function; each
//! step's postcondition is checked before the next.

use super::channels::{
    alloc_channel, alloc_engine, ChannelMemory, ChannelParent, Placed, ENGINE_TYPE_GRAPHICS,
    INSTANCE_BYTES, METHOD_BUFFER_BYTES,
};
use super::device_info::{read_device_info, DeviceInfoError, DeviceInfoTable};
use super::reserved_pdes::{copy_server_reserved_pdes, ReservedPdesError, WINDOW_BYTES};
use super::va_space::{alloc_client_objects, ClientObjects, TablesOwner};
use super::{CardBus, GspRpc, RpcError};
use crate::firmware::FirmwareChip;
use bytemuck::Zeroable;
use macuda_hw::page;
use macuda_hw::rm::control;
use macuda_hw::rm::promote::{
    buffer_id, info_index, BufferInfo, ContextBuffersInfo, Entry, PromoteCtx, MAX_ENTRIES,
    PHYS_ATTR_VIDEO,
};

/// What the golden context needs of whoever owns the card's memory.
pub trait ContextMemory {
    /// `bytes` of video memory aligned to `align`: its physical address.
    ///
    /// # Errors
    /// No room; the words say why.
    fn video(&mut self, bytes: u64, align: u64) -> Result<u64, String>;
    /// Map `bytes` of video memory at `phys` to `va` in our tables, and
    /// make the MMU see it.
    ///
    /// # Errors
    /// The tables refused; the words say why.
    fn map(&mut self, va: u64, phys: u64, bytes: u64) -> Result<(), String>;
    /// The directory tables on the walk to `va`, root first.
    fn directories_of(&self, va: u64) -> Vec<u64>;
}

/// Why the golden context could not be built: the step and the cause.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    #[error("golden context, {step}: {source}")]
    Rpc {
        step: &'static str,
        #[source]
        source: RpcError,
    },
    #[error("golden context, reading the device-info table: {0:?}")]
    DeviceInfo(DeviceInfoError),
    #[error("golden context: the device-info table names no graphics engine ({engines} engines)")]
    NoGraphicsEngine { engines: usize },
    #[error("golden context, placing {what}: {why}")]
    Memory { what: &'static str, why: String },
    #[error("golden context: the window at {window:#x} is walked by {found} directory tables, not the 4 down to PD1")]
    WindowTables { window: u64, found: usize },
    #[error("golden context, sharing the window: {0:?}")]
    ReservedPdes(ReservedPdesError),
    #[error("golden context: {what} needs {bytes:#x} bytes, more than the window has left")]
    WindowFull { what: &'static str, bytes: u64 },
    #[error("context buffer {id}: RM gave size {size:#x} with alignment {alignment:#x}")]
    BadBufferInfo { id: u16, size: u32, alignment: u32 },
}

/// The objects the golden client holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoldenHandles {
    pub objects: ClientObjects,
    pub channel: u32,
    pub compute: u32,
    pub copy: u32,
}

/// The golden client's handles: tinygrad's private client number
/// (reference 6.6) and its objects numbered after it. Any handles no
/// other client of ours uses would do; these make a transcript easy to
/// set beside tinygrad's.
pub const GOLDEN_HANDLES: GoldenHandles = GoldenHandles {
    objects: ClientObjects {
        client: 0xC1E0_0004,
        device: 0xC1E0_0005,
        subdevice: 0xC1E0_0006,
        va_space: 0xC1E0_0007,
    },
    channel: 0xC1E0_0008,
    compute: 0xC1E0_0009,
    copy: 0xC1E0_000A,
};

/// The classes the golden channel is made of, for the chip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoldenClasses {
    pub channel: u32,
    pub compute: u32,
    pub copy: u32,
}

impl GoldenClasses {
    /// What GSP-RM 570.144 offers each chip it boots on: the classes
    /// tinygrad makes its channels of (reference 6.6 steps 7, 10, 11).
    pub fn for_chip(chip: FirmwareChip) -> GoldenClasses {
        use macuda_hw::methods::{compute, copy, host};
        match chip {
            FirmwareChip::Gb202 => GoldenClasses {
                channel: host::BLACKWELL_CHANNEL_GPFIFO_A,
                compute: compute::BLACKWELL_COMPUTE_B,
                copy: copy::BLACKWELL_DMA_COPY_B,
            },
            FirmwareChip::Gh100 => GoldenClasses {
                channel: host::HOPPER_CHANNEL_GPFIFO_A,
                compute: compute::HOPPER_COMPUTE_A,
                copy: copy::HOPPER_DMA_COPY_A,
            },
        }
    }
}

/// One context buffer as the rules ask for it: which, how large, and
/// whether RM is told its physical address, its VA, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferNeed {
    pub id: u16,
    pub bytes: u64,
    pub align: u64,
    pub physical: bool,
    pub virtual_: bool,
}

/// A buffer placed: where it lies and where it is mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacedBuffer {
    pub need: BufferNeed,
    pub phys: u64,
    pub va: Option<u64>,
}

/// What the golden context left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoldenContext {
    pub handles: GoldenHandles,
    pub device_info: DeviceInfoTable,
    /// The window of our VA space the private client shares.
    pub window: u64,
    pub buffers: Vec<PlacedBuffer>,
    /// What RM reported for the graphics engine's buffers.
    pub info: ContextBuffersInfo,
}

/// MAIN carries this much beyond the size RM reports (tinygrad's margin).
const MAIN_EXTRA: u64 = 0x4_0000;
/// The attribute circular buffer wants a huge-page-aligned VA.
const ATTRIBUTE_CB_ALIGN: u64 = page::HUGE;
/// The golden channel's ring: one page, its USERD inside it.
const GOLDEN_RING_BYTES: u64 = page::SMALL;
const GOLDEN_RING_ENTRIES: u32 = 32;
const GOLDEN_USERD_OFFSET: u64 = 0x100;
const GOLDEN_USERD_BYTES: u64 = 0x20;

/// The buffers a graphics context needs, by the rules of reference 6.6
/// step 9, from the graphics engine's (size, alignment) list. PM is
/// left out of the golden context, as tinygrad leaves it.
///
/// # Errors
/// A zero or non-power-of-two alignment from RM.
pub fn golden_buffers(info: &ContextBuffersInfo) -> Result<Vec<BufferNeed>, GoldenError> {
    use buffer_id as b;
    use info_index as i;
    let gr = &info.engines[0];
    let rule = |id: u16, index: usize, extra: u64, physical: bool, virtual_: bool| {
        let BufferInfo { size, alignment } = gr[index];
        if alignment == 0 || !alignment.is_power_of_two() {
            return Err(GoldenError::BadBufferInfo {
                id,
                size,
                alignment,
            });
        }
        let align = u64::from(alignment).max(page::SMALL);
        let align = if id == b::ATTRIBUTE_CB {
            align.max(ATTRIBUTE_CB_ALIGN)
        } else {
            align
        };
        let bytes = (u64::from(size) + extra).next_multiple_of(align);
        Ok(BufferNeed {
            id,
            bytes,
            align,
            physical,
            virtual_,
        })
    };
    [
        rule(b::MAIN, i::GRAPHICS, MAIN_EXTRA, true, true),
        rule(b::PATCH, i::PATCH, 0, true, true),
        rule(b::BUFFER_BUNDLE_CB, i::BUNDLE_CB, 0, false, true),
        rule(b::PAGEPOOL, i::PAGEPOOL_GLOBAL, 0, false, true),
        rule(b::ATTRIBUTE_CB, i::ATTRIBUTE_CB, 0, false, true),
        rule(b::RTV_CB_GLOBAL, i::RTV_CB_GLOBAL, 0, false, true),
        rule(b::FECS_EVENT, i::FECS_EVENT, 0, true, true),
        rule(b::PRIV_ACCESS_MAP, i::PRIV_ACCESS_MAP, 0, true, false),
        rule(
            b::UNRESTRICTED_PRIV_ACCESS_MAP,
            i::PRIV_ACCESS_MAP,
            0,
            true,
            true,
        ),
    ]
    .into_iter()
    .collect()
}

/// The promotion entry for a placed buffer: the physical address and
/// size where RM is told them (and then RM initializes it), the VA where
/// RM is told it; a buffer with an address but no VA is marked unmapped.
pub fn promote_entry(b: &PlacedBuffer) -> Entry {
    let n = &b.need;
    Entry {
        gpu_phys_addr: if n.physical { b.phys } else { 0 },
        gpu_virt_addr: b.va.filter(|_| n.virtual_).unwrap_or(0),
        size: if n.physical { n.bytes } else { 0 },
        phys_attr: if n.physical { PHYS_ATTR_VIDEO } else { 0 },
        buffer_id: n.id,
        initialize: u8::from(n.physical),
        nonmapped: u8::from(n.physical && !n.virtual_),
    }
}

/// The graphics engine's context-buffer sizes, from the subdevice.
///
/// # Errors
/// RM refusing, a short reply, or the conversation.
pub fn context_buffers_info(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    client: u32,
    subdevice: u32,
) -> Result<ContextBuffersInfo, RpcError> {
    rpc.rm_control_struct(
        bus,
        (client, subdevice),
        (
            control::INTERNAL_STATIC_KGR_GET_CONTEXT_BUFFERS_INFO,
            "INTERNAL_STATIC_KGR_GET_CONTEXT_BUFFERS_INFO",
        ),
        &ContextBuffersInfo::zeroed(),
    )
}

/// Promote `entries` (at most [`MAX_ENTRIES`]) for `channel` of
/// `chan_client`, asked on the subdevice of `client`.
///
/// # Errors
/// RM refusing, or the conversation.
pub fn promote_context(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    (client, subdevice): (u32, u32),
    (chan_client, channel): (u32, u32),
    entries: &[Entry],
) -> Result<(), RpcError> {
    let mut p = PromoteCtx {
        engine_type: ENGINE_TYPE_GRAPHICS,
        h_client: client,
        h_chan_client: chan_client,
        h_object: channel,
        ..PromoteCtx::default()
    };
    let n = entries.len().min(MAX_ENTRIES);
    p.entries[..n].copy_from_slice(&entries[..n]);
    // CAST: at most MAX_ENTRIES.
    p.entry_count = n as u32;
    rpc.rm_control(
        bus,
        client,
        subdevice,
        control::GPU_PROMOTE_CTX,
        bytemuck::bytes_of(&p),
    )?;
    Ok(())
}

/// VAs handed out upward inside the window, each aligned.
struct WindowVa {
    next: u64,
    end: u64,
}

impl WindowVa {
    fn take(&mut self, what: &'static str, bytes: u64, align: u64) -> Result<u64, GoldenError> {
        let at = self.next.next_multiple_of(align);
        match at.checked_add(bytes) {
            Some(end) if end <= self.end => {
                self.next = end;
                Ok(at)
            }
            _ => Err(GoldenError::WindowFull { what, bytes }),
        }
    }
}

/// Build the golden context in the private client `h` on a booted card:
/// its objects (the VA space RM's own), the device-info table (a
/// graphics engine must be there), the golden channel's ring mapped at
/// the start of `window` (512 MiB aligned, reserved in our VA space for
/// this), the window's directory tables shared with RM, the channel, the
/// context buffers placed and promoted, then the compute and copy
/// objects on the channel.
///
/// # Errors
/// The step that failed, with RM's or the memory's reason.
pub fn build_golden_context(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    memory: &mut dyn ContextMemory,
    h: GoldenHandles,
    classes: GoldenClasses,
    window: u64,
) -> Result<GoldenContext, GoldenError> {
    let o = h.objects;
    let rpc_step = |step| move |source| GoldenError::Rpc { step, source };
    let placed = |what| move |why| GoldenError::Memory { what, why };

    // 1. The private client's objects.
    alloc_client_objects(rpc, bus, o, TablesOwner::Rm).map_err(rpc_step("its objects"))?;

    // 2. The engines: graphics must be among them.
    let device_info =
        read_device_info(rpc, bus, o.client, o.subdevice).map_err(GoldenError::DeviceInfo)?;
    if device_info.graphics_runlist().is_none() {
        return Err(GoldenError::NoGraphicsEngine {
            engines: device_info.entries.len(),
        });
    }

    // 3. The ring, mapped first so the window's tables exist.
    let mut va = WindowVa {
        next: window,
        end: window + WINDOW_BYTES,
    };
    let ring_phys = memory
        .video(GOLDEN_RING_BYTES, page::SMALL)
        .map_err(placed("the golden ring"))?;
    let ring_va = va.take("the golden ring", GOLDEN_RING_BYTES, page::SMALL)?;
    memory
        .map(ring_va, ring_phys, GOLDEN_RING_BYTES)
        .map_err(placed("the golden ring"))?;

    // 4. The window shared: PD4 down to PD1 must all exist now.
    let tables = memory.directories_of(window);
    let levels = super::reserved_pdes::LEVELS_COUNTED as usize + 1;
    if tables.len() < levels {
        return Err(GoldenError::WindowTables {
            window,
            found: tables.len(),
        });
    }
    copy_server_reserved_pdes(
        rpc,
        bus,
        o.client,
        o.subdevice,
        o.va_space,
        window,
        &tables[..levels],
    )
    .map_err(GoldenError::ReservedPdes)?;

    // 5. The channel, straight under the device.
    let instance = memory
        .video(INSTANCE_BYTES, page::SMALL)
        .map_err(placed("the instance block"))?;
    let method_buffer = memory
        .video(METHOD_BUFFER_BYTES, page::SMALL)
        .map_err(placed("the method buffer"))?;
    let channel_memory = ChannelMemory {
        ring_va,
        entries: GOLDEN_RING_ENTRIES,
        userd: Placed::Video(ring_phys + GOLDEN_USERD_OFFSET),
        userd_bytes: GOLDEN_USERD_BYTES,
        instance,
        method_buffer,
        error_notifier: None,
    };
    let under = ChannelParent {
        client: o.client,
        parent: o.device,
        va_space: o.va_space,
        context_share: 0,
    };
    alloc_channel(
        rpc,
        bus,
        &under,
        (h.channel, classes.channel),
        &channel_memory,
        ENGINE_TYPE_GRAPHICS,
    )
    .map_err(rpc_step("the golden channel"))?;

    // 6. The context buffers: sizes from RM, placed, mapped, promoted.
    let info = context_buffers_info(rpc, bus, o.client, o.subdevice)
        .map_err(rpc_step("the context buffers' sizes"))?;
    let mut buffers = Vec::new();
    for need in golden_buffers(&info)? {
        let phys = memory
            .video(need.bytes, need.align)
            .map_err(placed("a context buffer"))?;
        let at = if need.virtual_ {
            let at = va.take("a context buffer", need.bytes, need.align)?;
            memory
                .map(at, phys, need.bytes)
                .map_err(placed("a context buffer"))?;
            Some(at)
        } else {
            None
        };
        buffers.push(PlacedBuffer { need, phys, va: at });
    }
    let entries: Vec<Entry> = buffers.iter().map(promote_entry).collect();
    promote_context(
        rpc,
        bus,
        (o.client, o.subdevice),
        (o.client, h.channel),
        &entries,
    )
    .map_err(rpc_step("promoting the context"))?;

    // 7. The engine objects, now that the context exists.
    alloc_engine(rpc, bus, o.client, h.channel, (h.compute, classes.compute))
        .map_err(rpc_step("the compute object"))?;
    alloc_engine(rpc, bus, o.client, h.channel, (h.copy, classes.copy))
        .map_err(rpc_step("the copy object"))?;

    Ok(GoldenContext {
        handles: h,
        device_info,
        window,
        buffers,
        info,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_hw::rm::promote::BUFFERS_PER_ENGINE;

    fn info(size: u32, alignment: u32) -> ContextBuffersInfo {
        let mut i = ContextBuffersInfo::zeroed();
        i.engines[0] = [BufferInfo { size, alignment }; BUFFERS_PER_ENGINE];
        i
    }

    #[test]
    fn the_rules_give_nine_buffers_main_with_its_margin_and_the_attribute_cb_huge_aligned() {
        let needs = golden_buffers(&info(0x3000, 0x1000)).unwrap();
        assert_eq!(needs.len(), 9);
        let main = needs.iter().find(|n| n.id == buffer_id::MAIN).unwrap();
        assert_eq!(main.bytes, 0x4_3000);
        let attr = needs
            .iter()
            .find(|n| n.id == buffer_id::ATTRIBUTE_CB)
            .unwrap();
        assert_eq!((attr.align, attr.bytes), (page::HUGE, page::HUGE));
        assert!(!needs.iter().any(|n| n.id == buffer_id::PM));
        let pam = needs
            .iter()
            .find(|n| n.id == buffer_id::PRIV_ACCESS_MAP)
            .unwrap();
        assert!(pam.physical && !pam.virtual_);
    }

    #[test]
    fn an_alignment_rm_should_never_give_is_refused_typed() {
        assert!(matches!(
            golden_buffers(&info(0x1000, 0x3000)),
            Err(GoldenError::BadBufferInfo {
                alignment: 0x3000,
                ..
            })
        ));
        assert!(matches!(
            golden_buffers(&info(0x1000, 0)),
            Err(GoldenError::BadBufferInfo { .. })
        ));
    }

    #[test]
    fn entries_say_physical_virtual_or_both_as_the_rules_do() {
        let need = |physical, virtual_| BufferNeed {
            id: 7,
            bytes: 0x2000,
            align: 0x1000,
            physical,
            virtual_,
        };
        let e = promote_entry(&PlacedBuffer {
            need: need(true, false),
            phys: 0x10_0000,
            va: None,
        });
        assert_eq!(
            (
                e.gpu_phys_addr,
                e.gpu_virt_addr,
                e.size,
                e.initialize,
                e.nonmapped
            ),
            (0x10_0000, 0, 0x2000, 1, 1)
        );
        let e = promote_entry(&PlacedBuffer {
            need: need(false, true),
            phys: 0x10_0000,
            va: Some(0x4000_0000),
        });
        assert_eq!(
            (
                e.gpu_phys_addr,
                e.gpu_virt_addr,
                e.size,
                e.phys_attr,
                e.initialize
            ),
            (0, 0x4000_0000, 0, 0, 0)
        );
        let e = promote_entry(&PlacedBuffer {
            need: need(true, true),
            phys: 0x10_0000,
            va: Some(0x4000_0000),
        });
        assert_eq!((e.phys_attr, e.nonmapped), (PHYS_ATTR_VIDEO, 0));
    }

    #[test]
    fn window_vas_stay_inside_the_window() {
        let mut w = WindowVa {
            next: 0x2000_0000,
            end: 0x2000_0000 + 0x10_0000,
        };
        assert_eq!(w.take("a", 0x1000, 0x1000).unwrap(), 0x2000_0000);
        assert_eq!(w.take("b", 0x1000, 0x8000).unwrap(), 0x2000_8000);
        assert!(matches!(
            w.take("c", 0x10_0000, 0x1000),
            Err(GoldenError::WindowFull { what: "c", .. })
        ));
    }
}
