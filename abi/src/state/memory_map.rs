//! What the runtime handed out, by address: device allocations, pinned
//! host memory and registered ranges, so a pointer is classified (device,
//! pinned host, pageable host) without asking an actor, and a copy's or a
//! fill's ends are checked before anything is queued; and the copies and
//! fills as a program asks for them (graph nodes carry these).

use crate::error::CudaError;
use crate::types::memcpy_kind;
use macuda_gsp::CpuView;
use std::alloc::Layout;
use std::collections::BTreeMap;

/// Pinned host memory: the memory actor's (a GPU address and a CPU view),
/// or, where the device executes nothing, ordinary pages of ours.
pub(crate) enum HostBacking {
    Gpu { va: u64, _view: CpuView },
    Ours { layout: Layout },
}

pub(crate) struct HostAlloc {
    pub(crate) bytes: usize,
    pub(crate) backing: HostBacking,
}

impl HostAlloc {
    /// Its address for the device: the GPU's mapping, or on the null
    /// device (where nothing reads it) the host address itself, as with
    /// unified addressing.
    pub(crate) fn va(&self, host: usize) -> u64 {
        match self.backing {
            HostBacking::Gpu { va, .. } => va,
            HostBacking::Ours { .. } => host as u64,
        }
    }
}

/// What the runtime handed out, by address.
#[derive(Default)]
pub struct MemoryMap {
    pub(crate) device: BTreeMap<u64, u64>,
    /// Loaded modules' device memory (where their variables live): device
    /// memory to copies, but not the program's to free.
    pub(crate) modules: BTreeMap<u64, u64>,
    pub(crate) host: BTreeMap<usize, HostAlloc>,
    /// `cudaHostRegister` ranges.
    pub(crate) registered: BTreeMap<usize, usize>,
}

// SAFETY: the raw host memory in the map is owned by it and only reached
// through the runtime's lock.
unsafe impl Send for MemoryMap {}

/// One side of a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Device(u64),
    /// Pinned host memory, with the GPU's address for it where it has one.
    Pinned {
        host: usize,
        va: Option<u64>,
    },
    /// Pageable host memory (or registered: we do not map it for the GPU).
    Host(usize),
}

impl End {
    /// Where the copy engine can reach it.
    pub(crate) fn gpu(self) -> Option<u64> {
        match self {
            End::Device(va) => Some(va),
            End::Pinned { va, .. } => va,
            End::Host(_) => None,
        }
    }

    pub(crate) fn host(self) -> Option<usize> {
        match self {
            End::Device(_) => None,
            End::Pinned { host, .. } | End::Host(host) => Some(host),
        }
    }

    pub(crate) fn offset(self, by: u64) -> End {
        match self {
            End::Device(va) => End::Device(va + by),
            End::Pinned { host, va } => End::Pinned {
                host: host + by as usize,
                va: va.map(|v| v + by),
            },
            End::Host(h) => End::Host(h + by as usize),
        }
    }
}

/// What a pointer is, for `cudaPointerGetAttributes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointerKind {
    Device,
    Pinned { va: Option<u64> },
    Registered,
    Unknown,
}

fn within(map: &BTreeMap<u64, u64>, p: u64, len: u64) -> Option<u64> {
    let (&base, &bytes) = map.range(..=p).next_back()?;
    (p - base < bytes.max(1) && p - base + len <= bytes).then_some(base)
}

impl MemoryMap {
    /// Device memory the loader placed a module's variables in.
    pub fn add_module_memory(&mut self, va: u64, bytes: u64) {
        self.modules.insert(va, bytes);
    }

    fn device_within(&self, p: u64, len: u64) -> Option<u64> {
        within(&self.device, p, len).or_else(|| within(&self.modules, p, len))
    }

    pub fn pointer(&self, p: usize) -> PointerKind {
        if self.device_within(p as u64, 0).is_some() {
            return PointerKind::Device;
        }
        if let Some((&base, a)) = self.host.range(..=p).next_back() {
            if p - base < a.bytes {
                return PointerKind::Pinned {
                    va: Some(a.va(base) + (p - base) as u64),
                };
            }
        }
        if let Some((&base, &bytes)) = self.registered.range(..=p).next_back() {
            if p - base < bytes {
                return PointerKind::Registered;
            }
        }
        PointerKind::Unknown
    }

    /// One side of a copy of `len` bytes at `p`, which the copy's kind says
    /// is on the device (`device: Some(true)`), on the host (`Some(false)`)
    /// or either (`None`, cudaMemcpyDefault).
    pub fn end(&self, p: usize, len: u64, device: Option<bool>) -> Result<End, CudaError> {
        if p == 0 {
            return Err(CudaError::INVALID_VALUE);
        }
        let kind = self.pointer(p);
        let on_device = kind == PointerKind::Device;
        if device.is_some_and(|d| d != on_device) {
            return Err(CudaError::INVALID_VALUE);
        }
        match kind {
            PointerKind::Device => {
                self.device_within(p as u64, len)
                    .ok_or(CudaError::INVALID_VALUE)?;
                Ok(End::Device(p as u64))
            }
            PointerKind::Pinned { va } => Ok(End::Pinned { host: p, va }),
            PointerKind::Registered | PointerKind::Unknown => Ok(End::Host(p)),
        }
    }

    /// The base of the cudaMalloc allocation holding `p`.
    pub fn device_allocation(&self, p: u64) -> Option<u64> {
        within(&self.device, p, 0)
    }

    /// The allocation a device pointer starts, if it starts one.
    pub fn device_base(&self, p: u64) -> Option<u64> {
        self.device.get(&p).copied()
    }

    /// `len` bytes at `p` lie inside one device allocation.
    pub fn device_range(&self, p: u64, len: u64) -> Result<(), CudaError> {
        self.device_within(p, len)
            .map(|_| ())
            .ok_or(CudaError::INVALID_VALUE)
    }
}

/// Where a copy's ends are, by its kind.
pub(crate) fn sides(kind: i32) -> Result<(Option<bool>, Option<bool>), CudaError> {
    // (dst on device, src on device)
    Ok(match kind {
        memcpy_kind::HOST_TO_HOST => (Some(false), Some(false)),
        memcpy_kind::HOST_TO_DEVICE => (Some(true), Some(false)),
        memcpy_kind::DEVICE_TO_HOST => (Some(false), Some(true)),
        memcpy_kind::DEVICE_TO_DEVICE => (Some(true), Some(true)),
        memcpy_kind::DEFAULT => (None, None),
        _ => return Err(CudaError::INVALID_MEMCPY_DIRECTION),
    })
}

/// A 1-D copy as the program asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyOp {
    pub dst: usize,
    pub src: usize,
    pub bytes: u64,
    pub kind: i32,
}

/// A 2-D copy: `height` rows of `width` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copy2dOp {
    pub dst: usize,
    pub dpitch: u64,
    pub src: usize,
    pub spitch: u64,
    pub width: u64,
    pub height: u64,
    pub kind: i32,
}

/// A fill of device memory with one byte value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FillOp {
    pub dst: u64,
    pub value: u8,
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> MemoryMap {
        let mut m = MemoryMap::default();
        m.device.insert(0x10_0000, 0x1000);
        m.registered.insert(0x7000_0000, 0x100);
        m
    }

    #[test]
    fn pointers_are_classified_by_what_was_handed_out() {
        let m = map();
        assert_eq!(m.pointer(0x10_0800), PointerKind::Device);
        assert_eq!(
            m.pointer(0x10_1000),
            PointerKind::Unknown,
            "one past the end"
        );
        assert_eq!(m.pointer(0x7000_0010), PointerKind::Registered);
        assert_eq!(
            m.end(0x10_0000, 0x1000, Some(true)),
            Ok(End::Device(0x10_0000))
        );
        assert_eq!(
            m.end(0x10_0800, 0x1000, Some(true)),
            Err(CudaError::INVALID_VALUE),
            "runs past the allocation"
        );
        assert_eq!(
            m.end(0x5555_0000, 16, Some(true)),
            Err(CudaError::INVALID_VALUE),
            "a host pointer where the kind says device"
        );
        assert_eq!(
            m.end(0x10_0000, 16, Some(false)),
            Err(CudaError::INVALID_VALUE),
            "a device pointer where the kind says host"
        );
        assert_eq!(m.end(0x5555_0000, 16, None), Ok(End::Host(0x5555_0000)));
        assert_eq!(m.end(0, 16, None), Err(CudaError::INVALID_VALUE));
        assert_eq!(sides(7), Err(CudaError::INVALID_MEMCPY_DIRECTION));
    }
}
