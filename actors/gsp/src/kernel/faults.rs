//! What the debugger object recorded of a channel's fault: SM error
//! states and MMU fault info.

use super::client::KernelRm;
use super::error::KernelRmError;
use crate::fault::FaultState;
use macuda_hw::rm::{self, class, control, DebuggerAlloc};

impl KernelRm {
    /// A debugger object on this client's compute object `compute`: what
    /// RM recorded against the channel can be read after a fault.
    ///
    /// # Errors
    /// RM refusing.
    pub fn debugger(&self, compute: u32) -> Result<u32, KernelRmError> {
        let mut params = DebuggerAlloc {
            h_app_client: self.client,
            h_class3d_object: compute,
            ..DebuggerAlloc::default()
        };
        self.alloc(self.device, class::GT200_DEBUGGER, Some(&mut params))
    }

    /// What the debugger says of `channel` after a fault: the SMs that
    /// recorded an error (the first [`rm::SM_ERROR_STATES_PER_CALL`]), and
    /// whether RM saw an MMU fault, with the faulting addresses when it did.
    ///
    /// # Errors
    /// RM refusing either control.
    pub fn fault_state(&self, debugger: u32, channel: u32) -> Result<FaultState, KernelRmError> {
        let mut all = Box::new(rm::ReadAllSmErrorStates {
            h_target_channel: channel,
            // CAST: 100 records.
            num_sms_to_read: rm::SM_ERROR_STATES_PER_CALL as u32,
            ..rm::ReadAllSmErrorStates::default()
        });
        self.control(
            debugger,
            control::DEBUG_READ_ALL_SM_ERROR_STATES,
            all.as_mut(),
        )?;
        let sm_errors: Vec<(u32, rm::SmErrorState)> = all
            .sm_error_states
            .iter()
            .enumerate()
            .filter(|(_, e)| e.hww_global_esr != 0 || e.hww_warp_esr != 0)
            // CAST: an index below 100.
            .map(|(i, e)| (all.starting_sm + i as u32, *e))
            .collect();
        let mmu_fault = all.mmu_fault.valid != 0;
        let mut mmu_faults = Vec::new();
        if mmu_fault {
            let mut info = rm::ReadMmuFaultInfo::default();
            self.control(debugger, control::DEBUG_READ_MMU_FAULT_INFO, &mut info)?;
            let n = (info.count as usize).min(rm::MMU_FAULT_ENTRIES);
            mmu_faults.extend_from_slice(&info.entries[..n]);
        }
        Ok(FaultState {
            sm_errors,
            mmu_fault,
            mmu_fault_info: all.mmu_fault.fault_info,
            mmu_faults,
        })
    }
}
