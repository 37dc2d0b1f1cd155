//! CPU views of memory RM mapped for us: video memory through BAR1, and
//! pinned host memory. The gsp actor owns the RM objects behind them and
//! hands a view out on purpose, so the actor that owns the allocation
//! (memory) and the one that streams commands into it (submit) can write
//! without a round trip per store.

use crate::kernel::RmMapping;
use std::fmt;
use std::sync::Arc;

/// A bounds-checked window onto one CPU mapping. Cloning shares the
/// mapping, which stays mapped until the last clone goes.
#[derive(Clone)]
pub struct CpuView {
    map: Arc<dyn RmMapping>,
}

impl fmt::Debug for CpuView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuView({} bytes)", self.map.len())
    }
}

/// An access outside the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{len} bytes at offset {offset:#x} are outside a {size}-byte CPU view")]
pub struct OutsideView {
    pub offset: u64,
    pub len: u64,
    pub size: u64,
}

/// The process's own view of host memory the transport shares with it
/// (TinyGPU's shared mappings), as one of ours.
struct SharedDma(macuda_pci::DmaView);

impl RmMapping for SharedDma {
    fn as_ptr(&self) -> *mut u8 {
        self.0.as_ptr()
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

impl CpuView {
    pub fn new(map: Arc<dyn RmMapping>) -> CpuView {
        CpuView { map }
    }

    /// A view of host memory the transport shares with this process.
    pub fn of_shared_dma(view: macuda_pci::DmaView) -> CpuView {
        CpuView::new(Arc::new(SharedDma(view)))
    }

    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The start of the mapping, for callers that stream into it (the
    /// descriptor mirror); every access through it must stay below `len`.
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_ptr()
    }

    fn at(&self, offset: u64, len: usize) -> Result<*mut u8, OutsideView> {
        let outside = OutsideView {
            offset,
            len: len as u64,
            size: self.len(),
        };
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.len() => {
                // SAFETY: offset + len is inside the mapping (checked).
                // CAST: offset < len() which is a usize.
                Ok(unsafe { self.map.as_ptr().add(offset as usize) })
            }
            _ => Err(outside),
        }
    }

    /// Copy `out.len()` bytes from `offset`.
    ///
    /// # Errors
    /// The span is outside the view.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), OutsideView> {
        let p = self.at(offset, out.len())?;
        // SAFETY: the span is inside the mapping; the device may change
        // the bytes while they are copied, which only affects their values.
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Copy `data` to `offset`.
    ///
    /// # Errors
    /// The span is outside the view.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), OutsideView> {
        let p = self.at(offset, data.len())?;
        // SAFETY: the span is inside the mapping, which nothing in this
        // process borrows as a Rust reference.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(())
    }

    /// One 64-bit load, as the device wrote it (a timeline semaphore).
    ///
    /// # Errors
    /// Outside the view, or not 8-byte aligned.
    pub fn read_u64(&self, offset: u64) -> Result<u64, OutsideView> {
        let p = self.aligned(offset, 8)?;
        // SAFETY: inside the mapping and aligned (checked); volatile, the
        // device writes it.
        Ok(unsafe { std::ptr::read_volatile(p.cast::<u64>()) })
    }

    /// One 32-bit load, as the device (or the path to it) holds it now.
    ///
    /// # Errors
    /// Outside the view, or not 4-byte aligned.
    pub fn read_u32(&self, offset: u64) -> Result<u32, OutsideView> {
        let p = self.aligned(offset, 4)?;
        // SAFETY: inside the mapping and aligned (checked); volatile, the
        // device may write it and the read itself is the point.
        Ok(unsafe { std::ptr::read_volatile(p.cast::<u32>()) })
    }

    /// One 32-bit store the device will read (GP_PUT).
    ///
    /// # Errors
    /// Outside the view, or not 4-byte aligned.
    pub fn write_u32(&self, offset: u64, value: u32) -> Result<(), OutsideView> {
        let p = self.aligned(offset, 4)?;
        // SAFETY: inside the mapping and aligned (checked); volatile, the
        // device reads it.
        unsafe { std::ptr::write_volatile(p.cast::<u32>(), value) };
        Ok(())
    }

    /// One 64-bit store the device will read (a GP entry, a timeline).
    ///
    /// # Errors
    /// Outside the view, or not 8-byte aligned.
    pub fn write_u64(&self, offset: u64, value: u64) -> Result<(), OutsideView> {
        let p = self.aligned(offset, 8)?;
        // SAFETY: as in write_u32.
        unsafe { std::ptr::write_volatile(p.cast::<u64>(), value) };
        Ok(())
    }

    fn aligned(&self, offset: u64, width: usize) -> Result<*mut u8, OutsideView> {
        let p = self.at(offset, width)?;
        if !(p as usize).is_multiple_of(width) {
            return Err(OutsideView {
                offset,
                len: width as u64,
                size: self.len(),
            });
        }
        Ok(p)
    }
}

/// Plain process memory as a mapping, 8-byte aligned: for tests and for
/// fakes whose "device" memory is host memory.
pub struct HostMemory {
    words: Box<[std::cell::UnsafeCell<u64>]>,
    len: usize,
}

// SAFETY: the bytes are only reached through raw pointers, as device
// memory is; nothing hands out references to them.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    pub fn zeroed(len: usize) -> HostMemory {
        HostMemory {
            words: (0..len.div_ceil(8))
                .map(|_| std::cell::UnsafeCell::new(0))
                .collect(),
            len,
        }
    }
}

impl RmMapping for HostMemory {
    fn as_ptr(&self) -> *mut u8 {
        self.words.as_ptr().cast::<u8>().cast_mut()
    }

    fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_are_bounded_and_aligned() {
        let v = CpuView::new(Arc::new(HostMemory::zeroed(64)));
        v.write(60, &[1, 2, 3, 4]).unwrap();
        let mut out = [0u8; 4];
        v.read(60, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4]);
        assert!(v.write(61, &[0; 4]).is_err(), "past the end");
        assert!(v.read(u64::MAX, &mut out).is_err(), "overflowing offset");
        v.write_u64(8, 0x1122_3344_5566_7788).unwrap();
        assert_eq!(v.read_u64(8).unwrap(), 0x1122_3344_5566_7788);
        assert!(v.read_u64(4).is_err(), "misaligned");
        v.write_u32(4, 7).unwrap();
        assert!(v.write_u32(62, 7).is_err(), "misaligned and past the end");
        assert_eq!(format!("{v:?}"), "CpuView(64 bytes)");
    }
}
