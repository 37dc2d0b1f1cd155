//! What the driver asked of the transport, before any answer: the request
//! half of a [`TraceOp`]. It prints as the op's text without the recorded
//! result (`cfg_read 0x004 u16`, `mmio_read 0x000a00 4`, `bars`,
//! `dma_alloc 16384`, `dma_read 1 0x40 4`; writes, doorbells and resets print whole), which is how
//! a divergence names the driver's op and how a failed op is commented.
//! A DMA write prints whole too, its bytes as their hash.

use super::format::{width_name, CfgOffset, CfgValue, Hex, MmioOffset, TraceOp};
use crate::transport::DmaId;
use macuda_hw::pci::Width;
use std::fmt;

#[derive(Debug, Clone, Copy)]
pub(crate) enum Access<'a> {
    ConfigRead {
        offset: u16,
        width: Width,
    },
    ConfigWrite {
        offset: u16,
        width: Width,
        value: u32,
    },
    Bars,
    MmioRead {
        offset: u64,
        len: usize,
    },
    MmioWrite {
        offset: u64,
        data: &'a [u8],
    },
    Doorbell {
        token: u32,
    },
    DmaAlloc {
        requested: u64,
    },
    /// One piece of a DMA read (see `dma_read_pieces`).
    DmaRead {
        id: DmaId,
        offset: u64,
        len: usize,
    },
    /// A DMA write, its bytes already hashed: a replay compares hashes, and
    /// hashing once spares the search past forgivable reads.
    DmaWrite {
        id: DmaId,
        offset: u64,
        len: u64,
        sha256: [u8; 32],
    },
    Reset,
}

/// The address and width of a read: what "the value the driver holds" is
/// kept under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ReadKey {
    Config {
        offset: u16,
        bytes: usize,
    },
    Mmio {
        offset: u64,
        bytes: usize,
    },
    Dma {
        id: DmaId,
        offset: u64,
        bytes: usize,
    },
}

/// The value a read returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadValue {
    Word(u32),
    Bytes(Vec<u8>),
}

impl Access<'_> {
    /// True when `op` is exactly this request: same kind, address, width and
    /// (for writes, doorbells) value; reads and queries match whatever they
    /// returned.
    pub(crate) fn matches(&self, op: &TraceOp) -> bool {
        match (*self, op) {
            (
                Access::ConfigRead { offset, width },
                TraceOp::ConfigRead {
                    offset: o,
                    width: w,
                    ..
                },
            ) => offset == *o && width == *w,
            (
                Access::ConfigWrite {
                    offset,
                    width,
                    value,
                },
                TraceOp::ConfigWrite {
                    offset: o,
                    width: w,
                    value: v,
                },
            ) => offset == *o && width == *w && value == *v,
            (Access::Bars, TraceOp::Bars(_)) | (Access::Reset, TraceOp::Reset) => true,
            (Access::MmioRead { offset, len }, TraceOp::MmioRead { offset: o, data }) => {
                offset == *o && len == data.len()
            }
            (Access::MmioWrite { offset, data }, TraceOp::MmioWrite { offset: o, data: d }) => {
                offset == *o && data == d.as_slice()
            }
            (Access::Doorbell { token }, TraceOp::Doorbell { token: t }) => token == *t,
            (Access::DmaAlloc { requested }, TraceOp::DmaAlloc { requested: r, .. }) => {
                requested == *r
            }
            (
                Access::DmaRead { id, offset, len },
                TraceOp::DmaRead {
                    id: i,
                    offset: o,
                    data,
                },
            ) => id == *i && offset == *o && len == data.len(),
            (
                Access::DmaWrite {
                    id,
                    offset,
                    len,
                    sha256,
                },
                TraceOp::DmaWrite {
                    id: i,
                    offset: o,
                    len: l,
                    sha256: h,
                },
            ) => id == *i && offset == *o && len == *l && sha256 == *h,
            _ => false,
        }
    }

    /// Where a read's value is held; `None` for everything that is not a
    /// config or register read.
    pub(crate) fn read_key(&self) -> Option<ReadKey> {
        match *self {
            Access::ConfigRead { offset, width } => Some(ReadKey::Config {
                offset,
                bytes: width.bytes(),
            }),
            Access::MmioRead { offset, len } => Some(ReadKey::Mmio { offset, bytes: len }),
            Access::DmaRead { id, offset, len } => Some(ReadKey::Dma {
                id,
                offset,
                bytes: len,
            }),
            _ => None,
        }
    }
}

/// A recorded read's address and value; `None` for ops that are not reads.
pub(crate) fn recorded_read(op: &TraceOp) -> Option<(ReadKey, ReadValue)> {
    match op {
        TraceOp::ConfigRead {
            offset,
            width,
            value,
        } => Some((
            ReadKey::Config {
                offset: *offset,
                bytes: width.bytes(),
            },
            ReadValue::Word(*value),
        )),
        TraceOp::MmioRead { offset, data } => Some((
            ReadKey::Mmio {
                offset: *offset,
                bytes: data.len(),
            },
            ReadValue::Bytes(data.clone()),
        )),
        TraceOp::DmaRead { id, offset, data } => Some((
            ReadKey::Dma {
                id: *id,
                offset: *offset,
                bytes: data.len(),
            },
            ReadValue::Bytes(data.clone()),
        )),
        _ => None,
    }
}

impl fmt::Display for Access<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Access::ConfigRead { offset, width } => {
                write!(f, "cfg_read {} {}", CfgOffset(offset), width_name(width))
            }
            Access::ConfigWrite {
                offset,
                width,
                value,
            } => write!(
                f,
                "cfg_write {} {} {}",
                CfgOffset(offset),
                width_name(width),
                CfgValue(value, width)
            ),
            Access::Bars => f.write_str("bars"),
            Access::MmioRead { offset, len } => {
                write!(f, "mmio_read {} {len}", MmioOffset(offset))
            }
            Access::MmioWrite { offset, data } => write!(
                f,
                "mmio_write {} {} {}",
                MmioOffset(offset),
                data.len(),
                Hex(data)
            ),
            Access::Doorbell { token } => write!(f, "doorbell {token:#010x}"),
            Access::DmaAlloc { requested } => write!(f, "dma_alloc {requested}"),
            Access::DmaRead { id, offset, len } => {
                write!(f, "dma_read {} {offset:#x} {len}", id.0)
            }
            Access::DmaWrite {
                id,
                offset,
                len,
                sha256,
            } => write!(
                f,
                "dma_write {} {offset:#x} {len} sha256 {}",
                id.0,
                Hex(&sha256)
            ),
            Access::Reset => f.write_str("reset"),
        }
    }
}
