//! Video memory the program freed, kept with its mapping for the next
//! allocation of the same size.
//!
//! Over the kernel module every `cudaMalloc` is an RM allocation and a UVM
//! mapping, and every `cudaFree` undoes both: on the H200 118 and 82 us for
//! a 4 MiB buffer, where NVIDIA's runtime, which carves allocations out of
//! memory it keeps, took 53 and 46. llama.cpp's op suite allocates and
//! frees a few buffers for each of its thousands of cases, so those two
//! calls were most of a case. A freed buffer stays here, still RM's and
//! still mapped at its address, and the next request of its rounded size
//! takes it back; what the budget cannot hold is freed at once, and an
//! allocation RM refuses is retried once everything kept is freed. Kept
//! memory counts as free in `cudaMemGetInfo` for that reason: a program
//! that asks for what it was told is free is not refused for what is kept.

use macuda_gsp::{CpuView, ObjectHandle};
use std::collections::BTreeMap;

/// The most freed memory kept, in all.
pub const KEEP_BYTES: u64 = 256 << 20;
/// Buffers larger than this are freed at once (a model's weights are
/// freed once, at the end; a test case's buffers are small).
pub const KEEP_LARGEST: u64 = 64 << 20;

/// One freed allocation: its address, RM's object and the CPU view made of
/// it, if any.
pub(crate) struct Kept {
    pub va: u64,
    pub handle: ObjectHandle,
    pub view: Option<CpuView>,
}

/// Freed allocations by their rounded size (which decides their page
/// size too).
#[derive(Default)]
pub(crate) struct FreedVideo {
    by_size: BTreeMap<u64, Vec<Kept>>,
    bytes: u64,
}

impl FreedVideo {
    /// A kept allocation of exactly `size` bytes.
    pub fn take(&mut self, size: u64) -> Option<Kept> {
        let list = self.by_size.get_mut(&size)?;
        let k = list.pop()?;
        if list.is_empty() {
            self.by_size.remove(&size);
        }
        self.bytes -= size;
        Some(k)
    }

    /// Keep `k` of `size` bytes, or hand it back where the budget says no.
    pub fn keep(&mut self, size: u64, k: Kept) -> Result<(), Kept> {
        if size > KEEP_LARGEST || self.bytes + size > KEEP_BYTES {
            return Err(k);
        }
        self.bytes += size;
        self.by_size.entry(size).or_default().push(k);
        Ok(())
    }

    /// Everything kept, with its size, to be freed.
    pub fn drain(&mut self) -> Vec<(u64, Kept)> {
        self.bytes = 0;
        std::mem::take(&mut self.by_size)
            .into_iter()
            .flat_map(|(size, list)| list.into_iter().map(move |k| (size, k)))
            .collect()
    }

    /// Bytes kept.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(va: u64) -> Kept {
        Kept {
            va,
            handle: ObjectHandle(va as u32),
            view: None,
        }
    }

    #[test]
    fn a_freed_buffer_goes_to_the_next_request_of_its_size_only() {
        let mut f = FreedVideo::default();
        assert!(f.keep(64 << 10, kept(0x1000)).is_ok());
        assert!(f.take(128 << 10).is_none());
        assert_eq!(f.take(64 << 10).map(|k| k.va), Some(0x1000));
        assert!(f.take(64 << 10).is_none());
        assert_eq!(f.bytes(), 0);
    }

    #[test]
    fn what_the_budget_cannot_hold_is_handed_back() {
        let mut f = FreedVideo::default();
        assert!(f.keep(KEEP_LARGEST + 1, kept(1)).is_err(), "too large");
        for i in 0..KEEP_BYTES / KEEP_LARGEST {
            assert!(f.keep(KEEP_LARGEST, kept(i)).is_ok());
        }
        assert_eq!(f.bytes(), KEEP_BYTES);
        assert_eq!(f.keep(4096, kept(99)).map_err(|k| k.va), Err(99));
        let all = f.drain();
        assert_eq!(all.len(), (KEEP_BYTES / KEEP_LARGEST) as usize);
        assert_eq!(f.bytes(), 0);
        assert!(f.take(KEEP_LARGEST).is_none());
    }
}
