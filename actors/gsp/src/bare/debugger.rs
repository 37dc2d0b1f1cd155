//! Fault diagnosis over RPC (reference gsp.md 7): the debugger object on
//! a compute object, and what it reads back after a channel stopped: the
//! MMU faults RM kept for the client's channels.

use super::channels::alloc;
use super::{CardBus, GspRpc, RpcError};
use macuda_hw::class;
use macuda_hw::rm::{control, DebuggerAlloc, MmuFaultEntry, ReadMmuFaultInfo, MMU_FAULT_ENTRIES};

/// The debugger object on `compute` (reference 7.1), made under `device`.
///
/// # Errors
/// RM refusing, or the conversation.
pub fn alloc_debugger(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    client: u32,
    device: u32,
    debugger: u32,
    compute: u32,
) -> Result<(), RpcError> {
    let p = DebuggerAlloc {
        h_debugger_client_obsolete: 0,
        h_app_client: client,
        h_class3d_object: compute,
    };
    alloc(
        rpc,
        bus,
        client,
        device,
        debugger,
        class::GT200_DEBUGGER,
        bytemuck::bytes_of(&p),
    )?;
    Ok(())
}

/// The MMU faults RM kept since the last read (at most
/// [`MMU_FAULT_ENTRIES`]); a count beyond the list is cut to it.
///
/// # Errors
/// RM refusing, a short reply, or the conversation.
pub fn read_mmu_faults(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    client: u32,
    debugger: u32,
) -> Result<Vec<MmuFaultEntry>, RpcError> {
    let ask = ReadMmuFaultInfo::default();
    let reply = rpc.rm_control(
        bus,
        client,
        debugger,
        control::DEBUG_READ_MMU_FAULT_INFO,
        bytemuck::bytes_of(&ask),
    )?;
    let need = std::mem::size_of::<ReadMmuFaultInfo>();
    let got: ReadMmuFaultInfo =
        reply
            .get(..need)
            .map(bytemuck::pod_read_unaligned)
            .ok_or(RpcError::ShortReply {
                call: "DEBUG_READ_MMU_FAULT_INFO",
                len: reply.len(),
                need,
            })?;
    let n = usize::try_from(got.count)
        .unwrap_or(MMU_FAULT_ENTRIES)
        .min(MMU_FAULT_ENTRIES);
    Ok(got.entries[..n].to_vec())
}
