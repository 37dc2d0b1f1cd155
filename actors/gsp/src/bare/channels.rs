//! Channels over GSP-RM (reference gsp.md 6.6 step 7, 6.7 steps 7 to 14,
//! 6.8): a channel group and its subcontext, GPFIFO channels whose ring,
//! USERD, instance block and method buffer the driver placed itself and
//! describes by address (on bare metal no RM memory object stands behind
//! them), an engine object on each, the token the doorbell takes, and the
//! schedule switch. Everything goes as `GSP_RM_ALLOC` / `GSP_RM_CONTROL`
//! with the parameter structures the kernel path sends as ioctls.

use super::{CardBus, GspRpc, RmAlloc, RpcError};
use macuda_hw::class;
use macuda_hw::rm::{
    address_space, control, ChannelAlloc, ChannelGroupAlloc, CtxShareAlloc, GpfifoSchedule,
    MemoryDesc, WorkSubmitToken, CTXSHARE_SUBCONTEXT_ASYNC,
};

/// The instance block each channel needs (one page; its RAMFC is the
/// first [`RAMFC_BYTES`]).
pub const INSTANCE_BYTES: u64 = 0x1000;
pub const RAMFC_BYTES: u64 = 0x200;
/// The method buffer a channel's faulted methods are saved to.
pub const METHOD_BUFFER_BYTES: u64 = 0x5000;

/// `NVOS04_FLAGS_*` a driver-placed channel carries: a privileged channel
/// (bit 5, the oracle's PRIVILEGED_CHANNEL), USERD index 3 in a fixed
/// page (bits 10:8 and 21; from the reference, not in the oracle).
pub mod flags {
    pub const PRIVILEGED_CHANNEL: u32 = 1 << 5;
    pub const USERD_INDEX_SHIFT: u32 = 8;
    pub const USERD_INDEX: u32 = 3;
    pub const USERD_INDEX_PAGE_FIXED: u32 = 1 << 21;
    pub const DRIVER_PLACED: u32 =
        PRIVILEGED_CHANNEL | (USERD_INDEX << USERD_INDEX_SHIFT) | USERD_INDEX_PAGE_FIXED;
}

/// `NV_KERNELCHANNEL_ALLOC_INTERNALFLAGS_*` (reference 6.8, inferred in
/// part): kernel privilege (1:0 = 2), a context-DMA error notifier (3:2 =
/// 2), and bit 4, which tinygrad sets with them.
pub mod internal_flags {
    pub const PRIVILEGE_KERNEL: u32 = 2;
    pub const ERROR_NOTIFIER_CTXDMA: u32 = 2 << 2;
    pub const ECC_NOTIFIER_BIT: u32 = 1 << 4;
    pub const DRIVER_PLACED: u32 = PRIVILEGE_KERNEL | ERROR_NOTIFIER_CTXDMA | ECC_NOTIFIER_BIT;
}

/// `NV2080_ENGINE_TYPE_GRAPHICS`: what a channel names to run compute.
pub use macuda_hw::gsp_rpc::engine_type::GRAPHICS as ENGINE_TYPE_GRAPHICS;

/// Where a piece of memory lies, by the address the card uses for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// Video memory at this physical address.
    Video(u64),
    /// Host memory at this bus address.
    System(u64),
}

impl Placed {
    fn desc(self, size: u64) -> MemoryDesc {
        let (base, space) = match self {
            Placed::Video(a) => (a, address_space::FBMEM),
            Placed::System(a) => (a, address_space::SYSMEM),
        };
        MemoryDesc {
            base,
            size,
            address_space: space,
            cache_attrib: 0,
        }
    }
}

/// The memory of one channel, placed by the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelMemory {
    /// The GPFIFO ring's GPU VA and its entries.
    pub ring_va: u64,
    pub entries: u32,
    /// The channel's USERD (GP_PUT and GP_GET live here).
    pub userd: Placed,
    pub userd_bytes: u64,
    /// [`INSTANCE_BYTES`] of video memory for the instance block.
    pub instance: u64,
    /// [`METHOD_BUFFER_BYTES`] of video memory.
    pub method_buffer: u64,
    /// Where RM writes the channel's error, if anywhere.
    pub error_notifier: Option<(Placed, u64)>,
}

/// The parameters of a channel over `memory`, in `va_space` (and
/// `context_share`, 0 for none), on `engine_type` (0: the group's).
pub fn channel_params(
    memory: &ChannelMemory,
    va_space: u32,
    context_share: u32,
    engine_type: u32,
) -> ChannelAlloc {
    let mut p = ChannelAlloc {
        gp_fifo_offset: memory.ring_va,
        gp_fifo_entries: memory.entries,
        flags: flags::DRIVER_PLACED,
        h_context_share: context_share,
        h_va_space: va_space,
        engine_type,
        instance_mem: Placed::Video(memory.instance).desc(INSTANCE_BYTES),
        ramfc_mem: Placed::Video(memory.instance).desc(RAMFC_BYTES),
        mthdbuf_mem: Placed::Video(memory.method_buffer).desc(METHOD_BUFFER_BYTES),
        userd_mem: memory.userd.desc(memory.userd_bytes),
        internal_flags: internal_flags::DRIVER_PLACED,
        ..ChannelAlloc::default()
    };
    if let Some((at, bytes)) = memory.error_notifier {
        p.error_notifier_mem = at.desc(bytes);
    }
    p
}

/// The objects of one client a channel hangs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelParent {
    pub client: u32,
    /// The channel group, or the device for a channel of its own.
    pub parent: u32,
    pub va_space: u32,
    /// The group's subcontext, 0 for none.
    pub context_share: u32,
}

/// One channel as made: its handle and class, the engine object on it
/// and its class, and the token the doorbell takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcChannel {
    pub channel: u32,
    pub channel_class: u32,
    pub engine: u32,
    pub engine_class: u32,
    pub token: u32,
}

pub(super) fn alloc(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    client: u32,
    parent: u32,
    object: u32,
    class: u32,
    params: &[u8],
) -> Result<Vec<u8>, RpcError> {
    rpc.rm_alloc(
        bus,
        &RmAlloc {
            client,
            parent,
            object,
            class,
            params,
        },
    )
}

/// A channel group on the graphics engine under `device`, with one
/// asynchronous subcontext in `va_space`.
///
/// # Errors
/// RM refusing either object, or the conversation.
pub fn alloc_group(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    client: u32,
    device: u32,
    va_space: u32,
    (group, context_share): (u32, u32),
) -> Result<ChannelParent, RpcError> {
    let tsg = ChannelGroupAlloc {
        h_va_space: va_space,
        engine_type: ENGINE_TYPE_GRAPHICS,
        ..ChannelGroupAlloc::default()
    };
    alloc(
        rpc,
        bus,
        client,
        device,
        group,
        class::KEPLER_CHANNEL_GROUP_A,
        bytemuck::bytes_of(&tsg),
    )?;
    let ctx = CtxShareAlloc {
        h_va_space: va_space,
        flags: CTXSHARE_SUBCONTEXT_ASYNC,
        subctx_id: 0,
    };
    alloc(
        rpc,
        bus,
        client,
        group,
        context_share,
        class::FERMI_CONTEXT_SHARE_A,
        bytemuck::bytes_of(&ctx),
    )?;
    Ok(ChannelParent {
        client,
        parent: group,
        va_space,
        context_share,
    })
}

/// A GPFIFO channel of `channel_class` over `memory`. Its engine object
/// comes after ([`alloc_engine`]): a graphics channel's context buffers
/// must be promoted before RM makes the compute object.
///
/// # Errors
/// RM refusing, or the conversation.
pub fn alloc_channel(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    under: &ChannelParent,
    (channel, channel_class): (u32, u32),
    memory: &ChannelMemory,
    engine_type: u32,
) -> Result<(), RpcError> {
    let params = channel_params(memory, under.va_space, under.context_share, engine_type);
    alloc(
        rpc,
        bus,
        under.client,
        under.parent,
        channel,
        channel_class,
        bytemuck::bytes_of(&params),
    )?;
    Ok(())
}

/// An engine object of `class` (compute or copy, no parameters) on
/// `channel`.
///
/// # Errors
/// RM refusing, or the conversation.
pub fn alloc_engine(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    client: u32,
    channel: u32,
    (engine, class): (u32, u32),
) -> Result<(), RpcError> {
    alloc(rpc, bus, client, channel, engine, class, &[])?;
    Ok(())
}

/// A channel with its engine object and token: what a user channel is
/// (a graphics channel's promotion, where wanted, follows).
///
/// # Errors
/// RM refusing a step, a short token reply, or the conversation.
pub fn open_channel(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    under: &ChannelParent,
    channel: (u32, u32),
    engine: (u32, u32),
    memory: &ChannelMemory,
    engine_type: u32,
) -> Result<RpcChannel, RpcError> {
    alloc_channel(rpc, bus, under, channel, memory, engine_type)?;
    alloc_engine(rpc, bus, under.client, channel.0, engine)?;
    let token = work_submit_token(rpc, bus, under.client, channel.0)?;
    Ok(RpcChannel {
        channel: channel.0,
        channel_class: channel.1,
        engine: engine.0,
        engine_class: engine.1,
        token,
    })
}

/// What the doorbell takes for `channel` (GSP-RM answers the channel id).
///
/// # Errors
/// RM refusing, a short reply, or the conversation.
pub fn work_submit_token(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    client: u32,
    channel: u32,
) -> Result<u32, RpcError> {
    let got = rpc.rm_control_struct(
        bus,
        (client, channel),
        (
            control::GPFIFO_GET_WORK_SUBMIT_TOKEN,
            "GPFIFO_GET_WORK_SUBMIT_TOKEN",
        ),
        &WorkSubmitToken { token: u32::MAX },
    )?;
    Ok(got.token)
}

/// Let the group's channels run (or stop them).
///
/// # Errors
/// RM refusing, or the conversation.
pub fn schedule(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    client: u32,
    group: u32,
    enable: bool,
) -> Result<(), RpcError> {
    let p = GpfifoSchedule {
        enable: u8::from(enable),
        ..GpfifoSchedule::default()
    };
    rpc.rm_control(
        bus,
        client,
        group,
        control::GPFIFO_SCHEDULE,
        bytemuck::bytes_of(&p),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn a_driver_placed_channel_describes_its_memory_as_tinygrad_does() {
        // Reference 6.6 step 7: flags 0x200320, internalFlags 0x1A.
        assert_eq!(flags::DRIVER_PLACED, 0x0020_0320);
        assert_eq!(internal_flags::DRIVER_PLACED, 0x1A);
        let m = ChannelMemory {
            ring_va: 0x2_0000_0000,
            entries: 32,
            userd: Placed::Video(0x40_0100),
            userd_bytes: 0x20,
            instance: 0x41_0000,
            method_buffer: 0x42_0000,
            error_notifier: Some((Placed::System(0x9000), 0xECC)),
        };
        let p = channel_params(&m, 7, 9, ENGINE_TYPE_GRAPHICS);
        let bytes = bytemuck::bytes_of(&p);
        assert_eq!(bytes.len(), 368);
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        assert_eq!(u64_at(8), 0x2_0000_0000);
        assert_eq!(u32_at(16), 32);
        assert_eq!(u32_at(24), 9);
        assert_eq!(u32_at(28), 7);
        assert_eq!(u32_at(128), ENGINE_TYPE_GRAPHICS);
        // instanceMem, userdMem, ramfcMem, mthdbufMem, errorNotifierMem.
        assert_eq!(
            (u64_at(144), u64_at(152), u32_at(160)),
            (0x41_0000, 0x1000, 2)
        );
        assert_eq!(
            (u64_at(168), u64_at(176), u32_at(184)),
            (0x40_0100, 0x20, 2)
        );
        assert_eq!((u64_at(192), u64_at(200)), (0x41_0000, 0x200));
        assert_eq!((u64_at(216), u64_at(224)), (0x42_0000, 0x5000));
        assert_eq!(u32_at(244), 0x1A);
        assert_eq!((u64_at(248), u64_at(256), u32_at(264)), (0x9000, 0xECC, 1));
        assert_eq!(offset_of!(ChannelAlloc, error_notifier_mem), 248);
    }
}
