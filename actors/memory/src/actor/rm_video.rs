//! Video and pinned memory from RM (the kernel module's backing): VA
//! taken first, RM asked to put memory there, and freed video memory kept
//! for the next allocation of its size.

use super::{Allocation, Kind, MemoryActor};
use crate::buffers::DeviceBuffer;
use crate::error::MemoryError;
use macuda_gsp::RmMemoryRules;

impl MemoryActor {
    /// Take VA for `bytes` rounded to `page`, and have RM put memory there
    /// with `alloc(size, va)`; the VA goes back if RM refuses.
    pub(super) fn at_new_va<T>(
        &mut self,
        bytes: u64,
        page: u64,
        alloc: impl FnOnce(u64, u64) -> Result<T, macuda_gsp::GspError>,
    ) -> Result<(u64, T), MemoryError> {
        let size = bytes
            .checked_next_multiple_of(page)
            .ok_or(MemoryError::TooLarge { bytes })?;
        let va = self
            .va
            .alloc(size, page)
            .map_err(MemoryError::VirtualAddress)?;
        match alloc(size, va) {
            Ok(t) => Ok((va, t)),
            Err(e) => {
                let _ = self.va.free(va);
                Err(MemoryError::Gsp(e))
            }
        }
    }

    /// Video memory from RM: a freed buffer of the rounded size where one
    /// is kept, else a new allocation at new VA; one RM refuses is asked
    /// again once everything kept is freed.
    pub(super) fn alloc_rm_video(
        &mut self,
        bytes: u64,
        rules: RmMemoryRules,
    ) -> Result<DeviceBuffer, MemoryError> {
        let page = rules.video_page(bytes);
        let size = bytes
            .checked_next_multiple_of(page)
            .ok_or(MemoryError::TooLarge { bytes })?;
        let (va, handle, view) = match self.freed.take(size) {
            Some(k) => {
                self.stats.device_reuses += 1;
                (k.va, k.handle, k.view)
            }
            None => {
                let gsp = self.gsp.clone();
                let fresh = |a: &mut Self| a.at_new_va(bytes, page, |n, va| gsp.alloc_video(n, va));
                let (va, video) = match fresh(self) {
                    Err(MemoryError::Gsp(_)) if self.freed.bytes() > 0 => {
                        self.release_freed()?;
                        fresh(self)?
                    }
                    r => r?,
                };
                (va, video.handle, None)
            }
        };
        self.stats.vram_kept = self.freed.bytes();
        self.live.insert(
            va,
            Allocation {
                bytes: size,
                kind: Kind::RmVideo { handle, view },
            },
        );
        self.note_device_alloc(size);
        Ok(DeviceBuffer {
            va,
            bytes,
            vram_offset: 0,
            rm_handle: Some(handle),
        })
    }

    /// Free everything kept for reuse, back to RM, and its VA.
    pub(super) fn release_freed(&mut self) -> Result<(), MemoryError> {
        for (size, k) in self.freed.drain() {
            self.gsp
                .free_memory(k.handle, k.va, size)
                .map_err(MemoryError::Gsp)?;
            self.va.free(k.va).map_err(MemoryError::VirtualAddress)?;
        }
        self.stats.vram_kept = 0;
        Ok(())
    }
}
