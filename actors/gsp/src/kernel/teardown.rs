//! The handle the supervisor keeps to stop our channels and free our
//! client when an actor that held them is gone.

use super::client::KernelRm;
use super::error::KernelRmError;
use super::ioctl::{free_raw, schedule_raw, RmNode};
use std::sync::Arc;

/// The supervisor's way to our RM objects on the kernel path, for
/// recovery: it shares the control node with the [`KernelRm`] that owns
/// the client, so it works when that owner is stuck or gone.
#[derive(Clone)]
pub struct RmTeardown {
    pub(super) ctl: Arc<dyn RmNode>,
    pub(super) client: u32,
    pub(super) groups: Arc<parking_lot::Mutex<Vec<u32>>>,
    pub(super) freed: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for RmTeardown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RmTeardown(client {:#x})", self.client)
    }
}

impl RmTeardown {
    /// Stop scheduling every channel group of ours: the GPU runs none of
    /// our work after this. Returns how many groups were stopped. A group
    /// stopped leaves the list: asking again later would be refused (once
    /// UVM has stopped the graphics group's channel, RM answers
    /// NV_ERR_INVALID_STATE to any schedule control on it).
    ///
    /// # Errors
    /// The first group RM refused to stop (the others are still tried).
    pub fn stop_channels(&self) -> Result<usize, KernelRmError> {
        if self.is_freed() {
            return Ok(0);
        }
        let groups = self.groups.lock().clone();
        let mut first_err = None;
        let mut stopped = 0;
        for g in groups {
            match schedule_raw(self.ctl.as_ref(), self.client, g, false) {
                Ok(()) => {
                    stopped += 1;
                    self.groups.lock().retain(|k| *k != g);
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(stopped), Err)
    }

    /// Free the client and every object under it. Returns false when its
    /// owner had already freed it.
    ///
    /// # Errors
    /// RM refusing.
    pub fn free_client(&self) -> Result<bool, KernelRmError> {
        if self.freed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return Ok(false);
        }
        free_raw(self.ctl.as_ref(), self.client, 0, self.client)?;
        self.groups.lock().clear();
        Ok(true)
    }

    /// The client is gone (its owner dropped it, or [`RmTeardown::free_client`] ran).
    pub fn is_freed(&self) -> bool {
        self.freed.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn client(&self) -> u32 {
        self.client
    }
}

impl KernelRm {
    /// A handle the supervisor keeps: it can stop our channel groups and
    /// free the client even when the actor that owns this RM is stuck.
    pub fn teardown(&self) -> RmTeardown {
        RmTeardown {
            ctl: Arc::clone(&self.ctl),
            client: self.client,
            groups: Arc::clone(&self.groups),
            freed: Arc::clone(&self.freed),
        }
    }

    /// Note a channel group the teardown handle must stop.
    pub fn track_group(&self, group: u32) {
        self.groups.lock().push(group);
    }

    /// Forget a channel group freed on purpose.
    pub fn untrack_group(&self, group: u32) {
        self.groups.lock().retain(|g| *g != group);
    }
}
