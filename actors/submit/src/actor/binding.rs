//! Binding the compute engine once per channel (the prologue) and covering
//! shader local memory as kernels ask for more.

use super::SubmitActor;
use crate::error::SubmitError;
use crate::local::LocalSize;
use crate::pushbuf::PushBuffer;
use macuda_hw::methods::{compute, host};
use macuda_hw::push::{SUBCHANNEL_COMPUTE, SUBCHANNEL_COPY};

impl SubmitActor {
    /// What a fresh channel needs before its first work: the engine
    /// objects bound on their subchannels, and the compute channel's
    /// shared and local windows.
    pub(super) fn prologue(&mut self) -> Result<(), SubmitError> {
        let (shared, local) = self.format.windows;
        self.compute
            .pending
            .bind_compute(self.channels.compute.class, shared, local)
            .map_err(SubmitError::Format)?;
        self.copy
            .pending
            .method(
                SUBCHANNEL_COPY,
                host::SET_OBJECT::BYTE_OFFSET,
                host::SET_OBJECT::NVCLASS.set(0, self.channels.copy.class),
            )
            .map_err(SubmitError::Format)?;
        if !self.local.buffers.is_empty() {
            // A reopened channel gets the local memory the old one had.
            let per_thread = std::mem::take(&mut self.local.per_thread);
            self.cover_local(per_thread)?;
        }
        self.caches_stale = true;
        Ok(())
    }

    /// Make the channel's shader local memory cover `per_thread` bytes a
    /// thread: a buffer for every TPC slot the engine has, then the
    /// methods naming it, ahead of the next launch.
    pub(super) fn cover_local(&mut self, per_thread: u32) -> Result<(), SubmitError> {
        if per_thread <= self.local.per_thread {
            return Ok(());
        }
        let LocalSize {
            per_thread,
            per_tpc,
            total,
        } = LocalSize::for_threads(per_thread, self.channels.gr);
        let buffer = self
            .memory
            .alloc_device(total)
            .map_err(SubmitError::Memory)?;
        let pb = &mut self.compute.pending;
        let m = |pb: &mut PushBuffer, method: u32, value: u32| {
            pb.method(SUBCHANNEL_COMPUTE, method, value)
                .map_err(SubmitError::Format)
        };
        // CAST: the two halves of an address and of a size.
        m(
            pb,
            compute::SET_SHADER_LOCAL_MEMORY_A::BYTE_OFFSET,
            (buffer.va >> 32) as u32,
        )?;
        m(
            pb,
            compute::SET_SHADER_LOCAL_MEMORY_B::BYTE_OFFSET,
            buffer.va as u32,
        )?;
        m(
            pb,
            compute::SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A::BYTE_OFFSET,
            (per_tpc >> 32) as u32,
        )?;
        m(
            pb,
            compute::SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B::BYTE_OFFSET,
            per_tpc as u32,
        )?;
        tracing::debug!(per_thread, per_tpc, total, "shader local memory");
        self.local.per_thread = per_thread;
        self.local.buffers.push(buffer);
        Ok(())
    }
}
