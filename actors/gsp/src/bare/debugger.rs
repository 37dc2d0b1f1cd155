//! Fault diagnosis over RPC (reference gsp.md 7), as on the kernel path:
//! the Xid GSP-RM sent unprompted, then the debugger object on the compute
//! object: every SM's error state first, the MMU faults RM kept only if
//! it flags one; the same `ChannelFault` report the kernel path gives.

use super::channels::alloc;
use super::{CardBus, GspRpc, Notice, RpcError};
use crate::fault::{ChannelFault, FaultState};
use macuda_hw::class;
use macuda_hw::rm::{
    control, DebuggerAlloc, MmuFaultEntry, ReadAllSmErrorStates, ReadMmuFaultInfo,
    MMU_FAULT_ENTRIES, SM_ERROR_STATES_PER_CALL,
};

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
    let got = rpc.rm_control_struct(
        bus,
        (client, debugger),
        (
            control::DEBUG_READ_MMU_FAULT_INFO,
            "DEBUG_READ_MMU_FAULT_INFO",
        ),
        &ReadMmuFaultInfo::default(),
    )?;
    let n = usize::try_from(got.count)
        .unwrap_or(MMU_FAULT_ENTRIES)
        .min(MMU_FAULT_ENTRIES);
    Ok(got.entries[..n].to_vec())
}

/// What the debugger says of `channel` (reference 7.3): every SM's error
/// state first, and the MMU faults RM kept only if it flags one.
///
/// # Errors
/// RM refusing, a short reply, or the conversation.
pub fn read_fault_state(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    client: u32,
    debugger: u32,
    channel: u32,
) -> Result<FaultState, RpcError> {
    let ask = ReadAllSmErrorStates {
        h_target_channel: channel,
        // CAST: 100.
        num_sms_to_read: SM_ERROR_STATES_PER_CALL as u32,
        ..ReadAllSmErrorStates::default()
    };
    let all = rpc.rm_control_struct(
        bus,
        (client, debugger),
        (
            control::DEBUG_READ_ALL_SM_ERROR_STATES,
            "DEBUG_READ_ALL_SM_ERROR_STATES",
        ),
        &ask,
    )?;
    let sm_errors = all
        .sm_error_states
        .iter()
        .zip(all.starting_sm..)
        .filter(|(e, _)| e.hww_global_esr != 0 || e.hww_warp_esr != 0)
        .map(|(e, sm)| (sm, *e))
        .collect();
    let mmu_fault = all.mmu_fault.valid != 0;
    let mmu_faults = if mmu_fault {
        read_mmu_faults(rpc, bus, client, debugger)?
    } else {
        Vec::new()
    };
    Ok(FaultState {
        sm_errors,
        mmu_fault,
        mmu_fault_info: all.mmu_fault.fault_info,
        mmu_faults,
    })
}

/// The fault report of the channel with id `chid` (handle `channel`):
/// the Xid GSP-RM sent for it unprompted (RC_TRIGGERED), then what the
/// debugger reads; `None` when neither says anything went wrong.
///
/// # Errors
/// The conversation's; RM refusing the debugger's controls is part of the
/// report, not an error.
pub fn diagnose(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    client: u32,
    debugger: u32,
    (channel, chid): (u32, u32),
) -> Result<Option<ChannelFault>, RpcError> {
    // The controls first: reading their replies takes in what GSP-RM
    // posted before them.
    let state = match read_fault_state(rpc, bus, client, debugger, channel) {
        Ok(s) => Ok(s),
        Err(e @ RpcError::Rm { .. }) => Err(e.to_string()),
        Err(e) => return Err(e),
    };
    let notified = rpc.notices().find_map(|n| match n {
        // CAST: RM's engine types fit 16 bits.
        Notice::RcTriggered {
            chid: c,
            xid,
            engine_type,
            ..
        } if *c == chid => Some((*xid, *engine_type as u16)),
        _ => None,
    });
    Ok(ChannelFault::from_reports(notified, Some(state)))
}
