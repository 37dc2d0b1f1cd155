//! Building a launch: its QMD and bank 0 placed in the descriptor region,
//! templates reused across repeated tokens, and the QMD linked into the
//! open chain.

use super::SubmitActor;
use crate::arena::ArenaError;
use crate::encode::{Bank0Slot, KernelTemplate, LaunchShape, CBANK0_ALIGN, QMD_ALIGN};
use crate::error::SubmitError;
use crate::lane::{KernelId, StreamId};
use crate::link::NextGrid;

impl SubmitActor {
    pub(super) fn add_launch(
        &mut self,
        kernel: KernelId,
        stream: Option<StreamId>,
        grid: &[u32; 3],
        block: &[u32; 3],
        dynamic_shared_bytes: u32,
        params: &[u8],
    ) -> Result<(), SubmitError> {
        let t = self.template(kernel)?;
        check_launch(t, grid, block, params)?;
        let shape = LaunchShape {
            grid: *grid,
            block: *block,
            dynamic_shared_bytes,
        };
        let cbank0_bytes = self.format.cbank0_bytes(&t.desc);
        let cbank0_offset = self.reserve(cbank0_bytes, CBANK0_ALIGN)?;
        let qmd_offset = self.reserve(self.format.qmd_bytes(), QMD_ALIGN)?;
        let t = &self.kernels[kernel.0 as usize];
        let mut qmd = self.chain.spare_or(self.format.qmd);
        let (format, address) = (&self.format, self.descriptor_base + cbank0_offset);
        let holds_template = self.tokens.place(kernel, cbank0_offset);
        // What the launch before this one prefetches for it.
        let next = NextGrid {
            qmd: self.descriptor_base + qmd_offset,
            program: t.desc.entry,
            code_bytes: t.desc.code_bytes,
            bank0: address,
            bank0_bytes: cbank0_bytes,
        };
        self.arena
            .write_with(cbank0_offset, cbank0_bytes, |cbank0| {
                format.launch(
                    t,
                    &shape,
                    params,
                    &mut qmd,
                    Bank0Slot {
                        address,
                        bytes: cbank0,
                        holds_template,
                    },
                )
            })
            .map_err(SubmitError::Arena)?
            .map_err(SubmitError::Format)?;
        self.profile_launch(kernel, stream, *grid, *block, &mut qmd)?;
        // The previous launch now knows where to hand over to.
        let address = self.descriptor_base + qmd_offset;
        if let Some(mut prev) = self.chain.push(qmd_offset, address, qmd) {
            self.link
                .link(&mut prev.qmd, &next)
                .map_err(SubmitError::Format)?;
            self.write_qmd(prev.qmd_offset, &prev.qmd)?;
            self.chain.recycle(prev.qmd);
        }
        self.stats.launches += 1;
        self.stats.param_bytes += params.len() as u64;
        if self.depth.reached(self.chain.len()) {
            self.flush_chain()?;
        }
        Ok(())
    }

    /// The registered kernel's template.
    #[inline]
    pub(super) fn template(&self, kernel: KernelId) -> Result<&KernelTemplate, SubmitError> {
        self.kernels
            .get(kernel.0 as usize)
            .ok_or(SubmitError::NoSuchKernel(kernel))
    }

    #[inline]
    pub(super) fn reserve(&mut self, len: u64, align: u64) -> Result<u64, SubmitError> {
        match self.arena.reserve(len, align) {
            Ok(o) => Ok(o),
            Err(ArenaError::Busy { value, .. }) => {
                // The region wrapped onto work still in flight: wait for it.
                self.wait_compute(value)?;
                self.arena.retire(value);
                self.arena.reserve(len, align).map_err(SubmitError::Arena)
            }
            Err(e) => Err(SubmitError::Arena(e)),
        }
    }
}

/// What every launch must hold before it is built: no empty dimension, and
/// the parameter block the kernel takes.
pub(super) fn check_launch(
    t: &KernelTemplate,
    grid: &[u32; 3],
    block: &[u32; 3],
    params: &[u8],
) -> Result<(), SubmitError> {
    if grid.contains(&0) || block.contains(&0) {
        return Err(SubmitError::EmptyLaunch {
            grid: *grid,
            block: *block,
        });
    }
    if params.len() != t.desc.param_bytes as usize {
        return Err(SubmitError::ParamBlockSize {
            kernel: t.desc.name.clone(),
            expected: t.desc.param_bytes,
            given: params.len(),
        });
    }
    Ok(())
}
