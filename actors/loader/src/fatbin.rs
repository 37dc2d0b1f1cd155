//! CUDA fat binaries: the wrapper a host object hands to
//! `__cudaRegisterFatBinary`, the containers (magic `0xBA55ED50`) it points
//! at, their entries (PTX text or ELF cubins, possibly zstd- or
//! LZ4-compressed), and the choice of the cubin to load on a device.
//!
//! Everything here reads untrusted bytes: every offset and size is checked
//! before it is used, arithmetic is checked, and a malformed input gives a
//! [`FatbinError`] naming the entry and the fault, never a panic.
//! Decompressed sizes are capped at [`MAX_DECOMPRESSED_LEN`] so a lying
//! header cannot exhaust memory.
//!
//! Layouts follow the project reference (cuda-binary-and-runtime-abi.md,
//! section 1): all fields little-endian.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

/// Magic of the 24-byte wrapper struct in `.nvFatBinSegment`.
pub const WRAPPER_MAGIC: u32 = 0x4662_43B1;
/// Wrapper version of whole-program objects.
pub const WRAPPER_VERSION: u32 = 1;
/// Wrapper version `nvcc -dlink` writes (`data` already points at the
/// device-linked fatbin).
pub const WRAPPER_LINK_VERSION: u32 = 2;
/// Size of the wrapper on LP64 hosts.
pub const WRAPPER_LEN: usize = 24;
/// `__fatBinC_Wrapper_t` as compiled host code lays it out in memory
/// (version 1), for Rust code that registers a fat binary the way such
/// code does.
#[repr(C)]
#[derive(Debug)]
pub struct WrapperC {
    pub magic: u32,
    pub version: u32,
    pub data: *const u8,
    pub unused: *const u8,
}

impl WrapperC {
    /// A version-1 wrapper around a fat binary.
    pub fn around(fatbin: &'static [u8]) -> WrapperC {
        WrapperC {
            magic: WRAPPER_MAGIC,
            version: WRAPPER_VERSION,
            data: fatbin.as_ptr(),
            unused: std::ptr::null(),
        }
    }
}

const _: () = assert!(std::mem::size_of::<WrapperC>() == WRAPPER_LEN);

/// Magic of HIP's wrapper ("HIPF"); not CUDA, refused.
pub const HIP_WRAPPER_MAGIC: u32 = 0x4849_5046;
/// Magic that starts every fatbin container.
pub const CONTAINER_MAGIC: u32 = 0xBA55_ED50;
/// Size of the fixed part of a container header.
pub const CONTAINER_HEADER_LEN: usize = 16;
/// Size of the fixed part of an entry header; `header_size` is never less.
pub const ENTRY_HEADER_MIN_LEN: usize = 0x40;
/// Entry kind: PTX text.
pub const KIND_PTX: u16 = 1;
/// Entry kind: ELF cubin.
pub const KIND_ELF: u16 = 2;
/// ELF `e_machine` of a cubin (`EM_CUDA`).
pub const EM_CUDA: u16 = 190;
/// Largest payload [`Fatbin::payload`] decompresses (1 GiB).
pub const MAX_DECOMPRESSED_LEN: u64 = 1 << 30;
/// Largest container [`Fatbin::container_len`] accepts (4 GiB).
pub const MAX_CONTAINER_LEN: u64 = 1 << 32;

/// Entry flag bits (u64 at entry offset 0x28).
pub mod flags {
    /// 64-bit address size (every entry seen).
    pub const ADDRESS_64: u64 = 0x1;
    /// Debug image (`-G`).
    pub const DEBUG: u64 = 0x2;
    /// Built on a Linux host.
    pub const HOST_LINUX: u64 = 0x10;
    /// A second compression scheme public parsers name; never observed, so
    /// an entry carrying it cannot be decoded.
    pub const COMPRESS_OTHER: u64 = 0x1000;
    /// Payload is an LZ4 raw block (no frame).
    pub const LZ4: u64 = 0x2000;
    /// Payload is a Zstandard frame.
    pub const ZSTD: u64 = 0x8000;
    /// Arch-specific target (`sm_XYa`, `compute_XYa`): exact CC only.
    pub const ARCH_SPECIFIC: u64 = 0x10_0000;
    /// Family-specific target (`sm_XYf`): same family, CC >= X.Y.
    pub const FAMILY_SPECIFIC: u64 = 0x20_0000;
    /// The entry header carries a copy of the cubin's `.nv.compat` records.
    pub const COMPAT_BLOB: u64 = 0x100_0000;
    /// Every bit that says how the payload is compressed.
    pub const COMPRESSION_MASK: u64 = COMPRESS_OTHER | LZ4 | ZSTD;
}

/// Everything that can be wrong with a fat binary, its wrapper or the
/// object that carries it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FatbinError {
    #[error("fat binary wrapper is {len} bytes, needs {WRAPPER_LEN}")]
    WrapperTruncated { len: usize },
    #[error("HIP fat binary (magic 0x48495046) is not a CUDA fat binary")]
    HipWrapper,
    #[error("bad fat binary wrapper magic {found:#010x}, expected {WRAPPER_MAGIC:#010x}")]
    BadWrapperMagic { found: u32 },
    #[error("unsupported fat binary wrapper version {found} (expected 1 or 2)")]
    BadWrapperVersion { found: u32 },
    #[error("fat binary wrapper has a null data pointer")]
    WrapperNullData,
    #[error(
        "fatbin container at offset {offset:#x} is truncated: {available} of {CONTAINER_HEADER_LEN} header bytes"
    )]
    ContainerTruncated { offset: usize, available: usize },
    #[error(
        "bad fatbin container magic {found:#010x} at offset {offset:#x}, expected {CONTAINER_MAGIC:#010x}"
    )]
    BadContainerMagic { offset: usize, found: u32 },
    #[error(
        "fatbin container at offset {offset:#x} has header size {header_size:#x}, less than {CONTAINER_HEADER_LEN:#x}"
    )]
    ContainerHeaderTooSmall { offset: usize, header_size: u16 },
    #[error(
        "fatbin container at offset {offset:#x} claims {header_size:#x} header + {fat_size:#x} entry bytes, more than the {available:#x} bytes there"
    )]
    ContainerPastEnd {
        offset: usize,
        header_size: u16,
        fat_size: u64,
        available: usize,
    },
    #[error(
        "fatbin container claims {header_size:#x} header + {fat_size:#x} entry bytes, over the {MAX_CONTAINER_LEN:#x}-byte limit"
    )]
    ContainerTooLong { header_size: u16, fat_size: u64 },
    #[error(
        "fatbin entry {index} at offset {offset:#x}: header truncated, {available} of {ENTRY_HEADER_MIN_LEN} bytes left in the container"
    )]
    EntryHeaderTruncated {
        index: usize,
        offset: usize,
        available: usize,
    },
    #[error(
        "fatbin entry {index}: header size {header_size:#x} is less than {ENTRY_HEADER_MIN_LEN:#x}"
    )]
    EntryHeaderTooSmall { index: usize, header_size: u32 },
    #[error(
        "fatbin entry {index}: header size {header_size:#x} runs past the container ({available:#x} bytes left)"
    )]
    EntryHeaderPastEnd {
        index: usize,
        header_size: u32,
        available: usize,
    },
    #[error(
        "fatbin entry {index}: payload of {payload_size:#x} bytes runs past the container ({available:#x} bytes left)"
    )]
    PayloadPastEnd {
        index: usize,
        payload_size: u64,
        available: usize,
    },
    #[error(
        "fatbin entry {index}: compressed size {compressed_size:#x} exceeds the stored payload of {payload_size:#x} bytes"
    )]
    CompressedSizePastPayload {
        index: usize,
        compressed_size: u32,
        payload_size: u64,
    },
    #[error(
        "fatbin entry {index}: option descriptor at {options_offset:#x} is outside the header tail {ENTRY_HEADER_MIN_LEN:#x}..{header_size:#x}"
    )]
    OptionsOutOfHeader {
        index: usize,
        options_offset: u32,
        header_size: u32,
    },
    #[error(
        "fatbin entry {index}: option blob {blob_offset:#x}+{blob_size:#x} is outside the header tail {ENTRY_HEADER_MIN_LEN:#x}..{header_size:#x}"
    )]
    OptionBlobOutOfHeader {
        index: usize,
        blob_offset: u32,
        blob_size: u32,
        header_size: u32,
    },
    #[error(
        "fatbin entry {index}: identifier {name_offset:#x}+{name_len:#x} is outside the header tail {ENTRY_HEADER_MIN_LEN:#x}..{header_size:#x}"
    )]
    IdentifierOutOfHeader {
        index: usize,
        name_offset: u32,
        name_len: u32,
        header_size: u32,
    },
    #[error("fatbin entry {index} does not exist (the fat binary has {count})")]
    NoSuchEntry { index: usize, count: usize },
    #[error("fatbin entry {index}: unknown compression (flags {flags:#x})")]
    UnknownCompression { index: usize, flags: u64 },
    #[error(
        "fatbin entry {index}: uncompressed size {uncompressed_size:#x} is over the {max:#x}-byte limit"
    )]
    DecompressedTooLarge {
        index: usize,
        uncompressed_size: u64,
        max: u64,
    },
    #[error("fatbin entry {index}: {scheme} decompression failed: {message}")]
    Decompression {
        index: usize,
        scheme: &'static str,
        message: String,
    },
    #[error("fatbin entry {index}: decompressed to {actual} bytes, the header says {expected}")]
    SizeMismatch {
        index: usize,
        expected: u64,
        actual: u64,
    },
    #[error("no ELF code for sm_{device_sm} in this fat binary; it holds {}", AvailableList(.available))]
    NoMatchingCode {
        device_sm: u32,
        available: Vec<String>,
    },
    #[error("host object could not be read: {message}")]
    HostObject { message: String },
    #[error("input is a raw cubin, not a fat binary or host object; load it as a cubin")]
    RawCubin,
    #[error("input is neither a fat binary, a cubin nor a host object (starts with {start:02x?})")]
    UnrecognisedInput { start: Vec<u8> },
}

/// Formats `available` for [`FatbinError::NoMatchingCode`].
struct AvailableList<'a>(&'a [String]);

impl fmt::Display for AvailableList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("no entries");
        }
        f.write_str(&self.0.join(", "))?;
        if self.0.iter().any(|a| a.ends_with(" PTX")) {
            f.write_str(" (PTX needs a JIT compiler, which this loader does not have)")?;
        }
        Ok(())
    }
}

/// Little-endian field readers over a slice; `None` when out of range.
fn le_u16(bytes: &[u8], at: usize) -> Option<u16> {
    let end = at.checked_add(2)?;
    let b = bytes.get(at..end)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

fn le_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let end = at.checked_add(4)?;
    let b: [u8; 4] = bytes.get(at..end)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

fn le_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let end = at.checked_add(8)?;
    let b: [u8; 8] = bytes.get(at..end)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// The `__fatBinC_Wrapper_t` struct handed to `__cudaRegisterFatBinary`
/// (24 bytes on LP64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FatbinWrapper {
    /// 1 ([`WRAPPER_VERSION`]) or 2 ([`WRAPPER_LINK_VERSION`]).
    pub version: u32,
    /// Address of the fatbin (or, from clang, possibly a raw cubin).
    pub data: u64,
    /// Version 1: unused (null). Version 2: address of a null-terminated
    /// array of pointers to the per-unit relocatable fatbins; `data`
    /// already points at the linked one, so a loader can ignore it.
    pub filename_or_fatbins: u64,
}

impl FatbinWrapper {
    /// Decodes the wrapper from its 24 bytes (extra bytes are ignored).
    pub fn parse(bytes: &[u8]) -> Result<FatbinWrapper, FatbinError> {
        let truncated = || FatbinError::WrapperTruncated { len: bytes.len() };
        if bytes.len() < WRAPPER_LEN {
            return Err(truncated());
        }
        let magic = le_u32(bytes, 0).ok_or_else(truncated)?;
        if magic == HIP_WRAPPER_MAGIC {
            return Err(FatbinError::HipWrapper);
        }
        if magic != WRAPPER_MAGIC {
            return Err(FatbinError::BadWrapperMagic { found: magic });
        }
        let version = le_u32(bytes, 4).ok_or_else(truncated)?;
        if version != WRAPPER_VERSION && version != WRAPPER_LINK_VERSION {
            return Err(FatbinError::BadWrapperVersion { found: version });
        }
        let data = le_u64(bytes, 8).ok_or_else(truncated)?;
        if data == 0 {
            return Err(FatbinError::WrapperNullData);
        }
        let filename_or_fatbins = le_u64(bytes, 16).ok_or_else(truncated)?;
        Ok(FatbinWrapper {
            version,
            data,
            filename_or_fatbins,
        })
    }
}

/// What an entry's payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    Ptx,
    Elf,
    /// Any other kind value (e.g. 4, old-style cubins per public parsers).
    Unknown(u16),
}

impl EntryKind {
    fn from_raw(kind: u16) -> EntryKind {
        match kind {
            KIND_PTX => EntryKind::Ptx,
            KIND_ELF => EntryKind::Elf,
            other => EntryKind::Unknown(other),
        }
    }
}

/// How an entry's payload is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    Zstd,
    Lz4,
    /// Flags name no scheme this decoder knows (several scheme bits, the
    /// unobserved 0x1000 scheme, or a non-zero compressed size with no
    /// scheme bit); holds the entry's whole flags word.
    Unknown(u64),
}

impl Compression {
    fn from_entry(flags: u64, compressed_size: u32) -> Compression {
        match flags & flags::COMPRESSION_MASK {
            0 if compressed_size == 0 => Compression::None,
            flags::ZSTD => Compression::Zstd,
            flags::LZ4 => Compression::Lz4,
            _ => Compression::Unknown(flags),
        }
    }
}

/// One container header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// Offset of the container's magic within the parsed bytes.
    pub offset: usize,
    pub version: u16,
    pub header_size: u16,
    /// Bytes of entries after the header.
    pub fat_size: u64,
    /// Indices into [`Fatbin::entries`] of this container's entries.
    pub entries: Range<usize>,
}

/// One entry of a fat binary, decoded from its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FatbinEntry {
    /// Position in [`Fatbin::entries`] (across containers).
    pub index: usize,
    /// Index of the container holding it.
    pub container: usize,
    /// Offset of the entry header within the parsed bytes.
    pub offset: usize,
    pub kind: EntryKind,
    pub header_size: u32,
    /// Target SM number: 90, 100, 120 … (also for `a`/`f` targets).
    pub sm: u32,
    /// Header version pair (ELF entries: 1.8; PTX entries: the PTX ISA).
    pub major: u16,
    pub minor: u16,
    pub flags: u64,
    pub arch_specific: bool,
    pub family_specific: bool,
    pub compression: Compression,
    /// The stored payload (including its padding) within the parsed bytes.
    pub payload: Range<usize>,
    /// Exact compressed byte count (0 when not compressed).
    pub compressed_size: u32,
    /// Decompressed length (0 when not compressed).
    pub uncompressed_size: u64,
    /// `fatbinary --ident` string, if any.
    pub identifier: Option<String>,
    /// Option blob (ptxas options for PTX, `.nv.compat` copy for sm_100+
    /// ELF), if the header has a descriptor; may be empty.
    pub options: Option<Vec<u8>>,
    /// The copy of the cubin's `.nv.compat` records that entries flagged
    /// [`flags::COMPAT_BLOB`] carry. nvcc 13.2 writes it one byte past the
    /// descriptor's blob offset (the byte at the offset is 0), with the
    /// descriptor's size, so `options` holds a 0 byte and all but the last
    /// byte of the records; this is the full copy. `None` when the entry is
    /// not flagged or the shifted range does not fit in the header.
    pub compat: Option<Vec<u8>>,
}

impl FatbinEntry {
    /// Bytes of the parsed input holding the (possibly compressed) data:
    /// the whole payload when not compressed, exactly `compressed_size`
    /// bytes otherwise.
    pub fn stored_data(&self) -> Range<usize> {
        match self.compression {
            Compression::Zstd | Compression::Lz4 => {
                // Parsing checked compressed_size <= payload length.
                let len = self.compressed_size as usize;
                self.payload.start..self.payload.start.saturating_add(len)
            }
            Compression::None | Compression::Unknown(_) => self.payload.clone(),
        }
    }

    /// Length of the payload once decompressed.
    pub fn data_len(&self) -> u64 {
        match self.compression {
            Compression::Zstd | Compression::Lz4 => self.uncompressed_size,
            Compression::None | Compression::Unknown(_) => self.payload.len() as u64,
        }
    }

    /// What cuobjdump would call it: `sm_90 ELF`, `sm_120a ELF`,
    /// `compute_120 PTX`, or `kind 4 (sm_75)`.
    pub fn label(&self) -> String {
        let suffix = if self.arch_specific {
            "a"
        } else if self.family_specific {
            "f"
        } else {
            ""
        };
        match self.kind {
            EntryKind::Elf => format!("sm_{}{suffix} ELF", self.sm),
            EntryKind::Ptx => format!("compute_{}{suffix} PTX", self.sm),
            EntryKind::Unknown(k) => format!("kind {k} (sm_{}{suffix})", self.sm),
        }
    }
}

/// A parsed fat binary: one or more containers back to back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fatbin {
    containers: Vec<Container>,
    entries: Vec<FatbinEntry>,
    byte_len: usize,
}

impl Fatbin {
    /// Parses every container at the start of `bytes`: the first must be
    /// there; more are read while the next four bytes are the container
    /// magic. Anything after the last container (section padding) is left
    /// alone.
    pub fn parse(bytes: &[u8]) -> Result<Fatbin, FatbinError> {
        let mut containers = Vec::new();
        let mut entries = Vec::new();
        let mut offset = 0usize;
        loop {
            let (container, end) = parse_container(bytes, offset, containers.len(), &mut entries)?;
            containers.push(container);
            offset = end;
            if le_u32(bytes, offset) != Some(CONTAINER_MAGIC) {
                break;
            }
        }
        Ok(Fatbin {
            containers,
            entries,
            byte_len: offset,
        })
    }

    /// Length in bytes of the container whose header starts `first_16`
    /// (header plus entries), for a runtime that only has a pointer.
    pub fn container_len(first_16: &[u8]) -> Result<usize, FatbinError> {
        let header = read_container_header(first_16, 0)?;
        let total = u64::from(header.header_size)
            .checked_add(header.fat_size)
            .filter(|t| *t <= MAX_CONTAINER_LEN)
            .and_then(|t| usize::try_from(t).ok())
            .ok_or(FatbinError::ContainerTooLong {
                header_size: header.header_size,
                fat_size: header.fat_size,
            })?;
        Ok(total)
    }

    pub fn containers(&self) -> &[Container] {
        &self.containers
    }

    pub fn entries(&self) -> &[FatbinEntry] {
        &self.entries
    }

    /// Bytes covered by the containers (trailing bytes excluded).
    pub fn byte_len(&self) -> usize {
        self.byte_len
    }

    /// Labels of every entry in order, e.g. `["sm_90 ELF", "compute_120 PTX"]`.
    pub fn available(&self) -> Vec<String> {
        self.entries.iter().map(FatbinEntry::label).collect()
    }

    /// The payload of entry `index`, decompressed. `bytes` must be the
    /// slice this fatbin was parsed from. Uncompressed payloads are
    /// borrowed (with their padding); compressed ones are decoded from
    /// exactly `compressed_size` bytes and must come out at exactly
    /// `uncompressed_size` bytes.
    pub fn payload<'a>(&self, bytes: &'a [u8], index: usize) -> Result<Cow<'a, [u8]>, FatbinError> {
        let entry = self.entries.get(index).ok_or(FatbinError::NoSuchEntry {
            index,
            count: self.entries.len(),
        })?;
        let range = entry.stored_data();
        let stored = bytes
            .get(range.clone())
            .ok_or(FatbinError::PayloadPastEnd {
                index,
                payload_size: range.len() as u64,
                available: bytes.len().saturating_sub(range.start),
            })?;
        match entry.compression {
            Compression::None => Ok(Cow::Borrowed(stored)),
            Compression::Unknown(flags) => Err(FatbinError::UnknownCompression { index, flags }),
            Compression::Zstd => decompress(index, entry.uncompressed_size, "zstd", |out| {
                zstd_decode(stored, out)
            }),
            Compression::Lz4 => decompress(index, entry.uncompressed_size, "LZ4", |out| {
                lz4_flex::block::decompress_into(stored, out).map_err(|e| e.to_string())
            }),
        }
    }

    /// The ELF entry to load on a device of compute capability `device_sm`
    /// (major * 10 + minor: 90, 120, 121 …). In order of preference: the
    /// exact SM built arch-specific (`a`), exact plain, exact
    /// family-specific (`f`), an `f` entry of the same major with a lower
    /// minor, then a plain entry of the same major with the highest minor
    /// not above the device's. An `a` entry never runs on another minor;
    /// PTX is never chosen (there is no JIT). Ties go to the first entry.
    pub fn select(&self, device_sm: u32) -> Result<usize, FatbinError> {
        let best = self
            .entries
            .iter()
            .filter(|e| e.kind == EntryKind::Elf)
            .filter_map(|e| rank(e, device_sm).map(|r| (r, e.index)))
            .min_by_key(|(r, index)| (*r, *index));
        match best {
            Some((_, index)) => Ok(index),
            None => Err(FatbinError::NoMatchingCode {
                device_sm,
                available: self.available(),
            }),
        }
    }
}

/// Preference of an ELF entry on a device: lower is better; `None` when it
/// cannot run there.
fn rank(entry: &FatbinEntry, device_sm: u32) -> Option<(u8, u32)> {
    let (device_major, device_minor) = (device_sm / 10, device_sm % 10);
    let (major, minor) = (entry.sm / 10, entry.sm % 10);
    if entry.sm == device_sm {
        let tier = if entry.arch_specific {
            0
        } else if !entry.family_specific {
            1
        } else {
            2
        };
        return Some((tier, 0));
    }
    if entry.arch_specific || major != device_major || minor > device_minor {
        return None;
    }
    // Same major, lower minor: the higher the minor the better.
    let closeness = device_minor - minor;
    if entry.family_specific {
        Some((3, closeness))
    } else {
        Some((4, closeness))
    }
}

struct ContainerHeader {
    version: u16,
    header_size: u16,
    fat_size: u64,
}

fn read_container_header(bytes: &[u8], offset: usize) -> Result<ContainerHeader, FatbinError> {
    let available = bytes.len().saturating_sub(offset);
    let truncated = || FatbinError::ContainerTruncated { offset, available };
    if available < CONTAINER_HEADER_LEN {
        return Err(truncated());
    }
    let magic = le_u32(bytes, offset).ok_or_else(truncated)?;
    if magic == HIP_WRAPPER_MAGIC {
        return Err(FatbinError::HipWrapper);
    }
    if magic != CONTAINER_MAGIC {
        return Err(FatbinError::BadContainerMagic {
            offset,
            found: magic,
        });
    }
    let field = |at: usize| offset.checked_add(at).ok_or_else(truncated);
    let version = le_u16(bytes, field(4)?).ok_or_else(truncated)?;
    let header_size = le_u16(bytes, field(6)?).ok_or_else(truncated)?;
    let fat_size = le_u64(bytes, field(8)?).ok_or_else(truncated)?;
    if usize::from(header_size) < CONTAINER_HEADER_LEN {
        return Err(FatbinError::ContainerHeaderTooSmall {
            offset,
            header_size,
        });
    }
    Ok(ContainerHeader {
        version,
        header_size,
        fat_size,
    })
}

/// Parses the container at `offset`, appending its entries; returns the
/// container and the offset just past it.
fn parse_container(
    bytes: &[u8],
    offset: usize,
    container_index: usize,
    entries: &mut Vec<FatbinEntry>,
) -> Result<(Container, usize), FatbinError> {
    let header = read_container_header(bytes, offset)?;
    let available = bytes.len().saturating_sub(offset);
    let past_end = || FatbinError::ContainerPastEnd {
        offset,
        header_size: header.header_size,
        fat_size: header.fat_size,
        available,
    };
    let start = offset
        .checked_add(usize::from(header.header_size))
        .ok_or_else(past_end)?;
    let end = usize::try_from(header.fat_size)
        .ok()
        .and_then(|size| start.checked_add(size))
        .filter(|end| *end <= bytes.len())
        .ok_or_else(past_end)?;
    // Bounded by `end`, checked against `bytes.len()` above.
    let region = &bytes[..end];
    let first_entry = entries.len();
    let mut pos = start;
    while pos < end {
        let index = entries.len();
        let (entry, next) = parse_entry(region, pos, index, container_index)?;
        entries.push(entry);
        pos = next;
    }
    Ok((
        Container {
            offset,
            version: header.version,
            header_size: header.header_size,
            fat_size: header.fat_size,
            entries: first_entry..entries.len(),
        },
        end,
    ))
}

/// Parses the entry at `pos`; `region` ends where the container ends.
/// Returns the entry and the offset of the next one.
fn parse_entry(
    region: &[u8],
    pos: usize,
    index: usize,
    container: usize,
) -> Result<(FatbinEntry, usize), FatbinError> {
    let available = region.len().saturating_sub(pos);
    let truncated = FatbinError::EntryHeaderTruncated {
        index,
        offset: pos,
        available,
    };
    let Some(head) = pos
        .checked_add(ENTRY_HEADER_MIN_LEN)
        .and_then(|end| region.get(pos..end))
    else {
        return Err(truncated);
    };
    // `head` is exactly ENTRY_HEADER_MIN_LEN bytes, so these reads succeed;
    // unwrap_or keeps the code panic-free regardless.
    let u16_at = |at| le_u16(head, at).unwrap_or(0);
    let u32_at = |at| le_u32(head, at).unwrap_or(0);
    let u64_at = |at| le_u64(head, at).unwrap_or(0);
    let kind = EntryKind::from_raw(u16_at(0x00));
    let header_size = u32_at(0x04);
    let payload_size = u64_at(0x08);
    let compressed_size = u32_at(0x10);
    let options_offset = u32_at(0x14);
    let minor = u16_at(0x18);
    let major = u16_at(0x1a);
    let sm = u32_at(0x1c);
    let name_offset = u32_at(0x20);
    let name_len = u32_at(0x24);
    let flags = u64_at(0x28);
    let uncompressed_size = u64_at(0x38);

    if (header_size as usize) < ENTRY_HEADER_MIN_LEN {
        return Err(FatbinError::EntryHeaderTooSmall { index, header_size });
    }
    let header_end = pos
        .checked_add(header_size as usize)
        .filter(|e| *e <= region.len())
        .ok_or(FatbinError::EntryHeaderPastEnd {
            index,
            header_size,
            available,
        })?;
    // Checked just above.
    let header = &region[pos..header_end];
    let payload_end = usize::try_from(payload_size)
        .ok()
        .and_then(|size| header_end.checked_add(size))
        .filter(|e| *e <= region.len())
        .ok_or(FatbinError::PayloadPastEnd {
            index,
            payload_size,
            available: region.len() - header_end,
        })?;

    let compression = Compression::from_entry(flags, compressed_size);
    if matches!(compression, Compression::Zstd | Compression::Lz4)
        && u64::from(compressed_size) > payload_size
    {
        return Err(FatbinError::CompressedSizePastPayload {
            index,
            compressed_size,
            payload_size,
        });
    }

    // A range inside the header tail (never overlapping the fixed 0x40
    // bytes), or None.
    let tail = |off: u32, len: u32| -> Option<Range<usize>> {
        let start = off as usize;
        let end = start.checked_add(len as usize)?;
        (start >= ENTRY_HEADER_MIN_LEN && end <= header.len()).then_some(start..end)
    };

    let identifier = if name_offset == 0 {
        None
    } else {
        let range = tail(name_offset, name_len).ok_or(FatbinError::IdentifierOutOfHeader {
            index,
            name_offset,
            name_len,
            header_size,
        })?;
        let raw = header.get(range).unwrap_or_default();
        // The string is NUL-padded; stop at the first NUL if any.
        let raw = raw.split(|b| *b == 0).next().unwrap_or_default();
        Some(String::from_utf8_lossy(raw).into_owned())
    };

    let mut compat = None;
    let options = if options_offset == 0 {
        None
    } else {
        let descriptor = tail(options_offset, 8).ok_or(FatbinError::OptionsOutOfHeader {
            index,
            options_offset,
            header_size,
        })?;
        let blob_offset = le_u32(header, descriptor.start).unwrap_or(0);
        let blob_size = le_u32(header, descriptor.start + 4).unwrap_or(0);
        let blob_error = FatbinError::OptionBlobOutOfHeader {
            index,
            blob_offset,
            blob_size,
            header_size,
        };
        let range = tail(blob_offset, blob_size).ok_or(blob_error)?;
        if flags & flags::COMPAT_BLOB != 0 {
            compat = blob_offset
                .checked_add(1)
                .and_then(|shifted| tail(shifted, blob_size))
                .and_then(|r| header.get(r))
                .map(<[u8]>::to_vec);
        }
        Some(header.get(range).unwrap_or_default().to_vec())
    };

    Ok((
        FatbinEntry {
            index,
            container,
            offset: pos,
            kind,
            header_size,
            sm,
            major,
            minor,
            flags,
            arch_specific: flags & flags::ARCH_SPECIFIC != 0,
            family_specific: flags & flags::FAMILY_SPECIFIC != 0,
            compression,
            payload: header_end..payload_end,
            compressed_size,
            uncompressed_size,
            identifier,
            options,
            compat,
        },
        payload_end,
    ))
}

/// Runs `decode` into a buffer of exactly `expected` bytes (capped) and
/// checks it filled the buffer.
fn decompress<'a>(
    index: usize,
    expected: u64,
    scheme: &'static str,
    decode: impl FnOnce(&mut [u8]) -> Result<usize, String>,
) -> Result<Cow<'a, [u8]>, FatbinError> {
    if expected > MAX_DECOMPRESSED_LEN {
        return Err(FatbinError::DecompressedTooLarge {
            index,
            uncompressed_size: expected,
            max: MAX_DECOMPRESSED_LEN,
        });
    }
    let len = usize::try_from(expected).map_err(|_| FatbinError::DecompressedTooLarge {
        index,
        uncompressed_size: expected,
        max: MAX_DECOMPRESSED_LEN,
    })?;
    // Zeroed allocation: pages a lying size never fills stay untouched.
    let mut out = vec![0u8; len];
    let written = decode(&mut out).map_err(|message| FatbinError::Decompression {
        index,
        scheme,
        message,
    })?;
    if written != len {
        return Err(FatbinError::SizeMismatch {
            index,
            expected,
            actual: written as u64,
        });
    }
    Ok(Cow::Owned(out))
}

/// Decodes zstd frames from exactly `input` into `out`; verifies the frame
/// checksum when there is one.
fn zstd_decode(input: &[u8], out: &mut [u8]) -> Result<usize, String> {
    use ruzstd::decoding::FrameDecoder;
    let mut decoder = FrameDecoder::new();
    // The window never needs to exceed the output (rounded to the next
    // power of two, at least 1 MiB); this bounds what a lying frame header
    // can make the decoder reserve.
    let window = (out.len() as u64)
        .checked_next_power_of_two()
        .unwrap_or(u64::MAX)
        .max(1 << 20);
    decoder.set_max_window_size(window);
    if input.is_empty() {
        return Err("no compressed bytes".to_string());
    }
    let written = decoder.decode_all(input, out).map_err(|e| {
        // A full buffer with bytes left to write means the data is longer
        // than the header says.
        match e {
            ruzstd::decoding::errors::FrameDecoderError::TargetTooSmall => {
                format!("output is longer than {} bytes", out.len())
            }
            other => other.to_string(),
        }
    })?;
    if let (Some(stored), Some(computed)) = (
        decoder.get_checksum_from_data(),
        decoder.get_calculated_checksum(),
    ) {
        if stored != computed {
            return Err(format!(
                "content checksum {stored:#010x} does not match the data ({computed:#010x})"
            ));
        }
    }
    Ok(written)
}

/// What a blob of bytes handed to the loader is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputKind {
    /// Starts with the container magic.
    Fatbin,
    /// An ELF file with `e_machine` = [`EM_CUDA`].
    Cubin,
    /// Another ELF file, or a (thin) Mach-O file.
    HostObject,
    Unknown,
}

/// Tells a fatbin, a cubin and a host object apart by their first bytes.
pub fn classify(bytes: &[u8]) -> InputKind {
    if le_u32(bytes, 0) == Some(CONTAINER_MAGIC) {
        return InputKind::Fatbin;
    }
    if bytes.starts_with(b"\x7fELF") {
        let machine = match bytes.get(5) {
            Some(2) => bytes.get(18..20).map(|b| u16::from_be_bytes([b[0], b[1]])),
            _ => le_u16(bytes, 18),
        };
        return match machine {
            Some(EM_CUDA) => InputKind::Cubin,
            Some(_) => InputKind::HostObject,
            None => InputKind::Unknown,
        };
    }
    match bytes.get(..4) {
        // 32- and 64-bit Mach-O, either byte order.
        Some([0xfe, 0xed, 0xfa, 0xce | 0xcf]) | Some([0xce | 0xcf, 0xfa, 0xed, 0xfe]) => {
            InputKind::HostObject
        }
        _ => InputKind::Unknown,
    }
}

/// Finds the fat binaries a host object carries: ELF `.nv_fatbin` and
/// `__nv_relfatbin` (`-rdc`) sections, Mach-O `__NV_CUDA,__nv_fatbin` and
/// `__NV_CUDA,__nv_relfatbin`. Returns each section's bytes in section
/// order (a section may hold several containers; clang embeds whatever
/// file it was given, so [`classify`] each before parsing). Input that is
/// itself a fatbin comes back whole. A raw cubin is refused with
/// [`FatbinError::RawCubin`]: it is loaded as a cubin, not searched.
pub fn fatbins_in_host_object(bytes: &[u8]) -> Result<Vec<Vec<u8>>, FatbinError> {
    use object::{Object, ObjectSection};
    match classify(bytes) {
        InputKind::Fatbin => return Ok(vec![bytes.to_vec()]),
        InputKind::Cubin => return Err(FatbinError::RawCubin),
        InputKind::Unknown => {
            return Err(FatbinError::UnrecognisedInput {
                start: bytes.iter().take(8).copied().collect(),
            })
        }
        InputKind::HostObject => {}
    }
    let host_error = |e: object::Error| FatbinError::HostObject {
        message: e.to_string(),
    };
    let file = object::File::parse(bytes).map_err(host_error)?;
    let is_macho = matches!(file.format(), object::BinaryFormat::MachO);
    let mut found = Vec::new();
    for section in file.sections() {
        let Ok(name) = section.name_bytes() else {
            continue;
        };
        let wanted = if is_macho {
            let segment = section.segment_name_bytes().ok().flatten();
            segment == Some(b"__NV_CUDA".as_slice())
                && (name == b"__nv_fatbin" || name == b"__nv_relfatbin")
        } else {
            name == b".nv_fatbin" || name == b"__nv_relfatbin"
        };
        if wanted {
            found.push(section.data().map_err(host_error)?.to_vec());
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds one entry: base header, optional tail, payload.
    #[derive(Clone)]
    struct EntrySpec {
        kind: u16,
        sm: u32,
        flags: u64,
        payload: Vec<u8>,
        compressed_size: u32,
        uncompressed_size: u64,
        tail: Vec<u8>,
        name: Option<(u32, u32)>,
        options_offset: u32,
        header_size: Option<u32>,
        payload_size: Option<u64>,
    }

    fn spec(kind: u16, sm: u32, flags: u64, payload: &[u8]) -> EntrySpec {
        EntrySpec {
            kind,
            sm,
            flags,
            payload: payload.to_vec(),
            compressed_size: 0,
            uncompressed_size: 0,
            tail: Vec::new(),
            name: None,
            options_offset: 0,
            header_size: None,
            payload_size: None,
        }
    }

    fn entry_bytes(s: &EntrySpec) -> Vec<u8> {
        let header_size = s
            .header_size
            .unwrap_or((ENTRY_HEADER_MIN_LEN + s.tail.len()) as u32);
        let payload_size = s.payload_size.unwrap_or(s.payload.len() as u64);
        let mut b = Vec::new();
        b.extend_from_slice(&s.kind.to_le_bytes());
        b.extend_from_slice(&0x0101u16.to_le_bytes());
        b.extend_from_slice(&header_size.to_le_bytes());
        b.extend_from_slice(&payload_size.to_le_bytes());
        b.extend_from_slice(&s.compressed_size.to_le_bytes());
        b.extend_from_slice(&s.options_offset.to_le_bytes());
        b.extend_from_slice(&8u16.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&s.sm.to_le_bytes());
        let (name_offset, name_len) = s.name.unwrap_or((0, 0));
        b.extend_from_slice(&name_offset.to_le_bytes());
        b.extend_from_slice(&name_len.to_le_bytes());
        b.extend_from_slice(&s.flags.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&s.uncompressed_size.to_le_bytes());
        assert_eq!(b.len(), ENTRY_HEADER_MIN_LEN);
        b.extend_from_slice(&s.tail);
        b.extend_from_slice(&s.payload);
        b
    }

    fn container(entries: &[EntrySpec]) -> Vec<u8> {
        let body: Vec<u8> = entries.iter().flat_map(entry_bytes).collect();
        container_raw(0x10, body.len() as u64, &body)
    }

    fn container_raw(header_size: u16, fat_size: u64, body: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&CONTAINER_MAGIC.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&header_size.to_le_bytes());
        b.extend_from_slice(&fat_size.to_le_bytes());
        b.resize(usize::from(header_size.max(16)), 0);
        b.extend_from_slice(body);
        b
    }

    const ELF: u64 = flags::ADDRESS_64 | flags::HOST_LINUX;

    fn wrapper(magic: u32, version: u32, data: u64, second: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&magic.to_le_bytes());
        b.extend_from_slice(&version.to_le_bytes());
        b.extend_from_slice(&data.to_le_bytes());
        b.extend_from_slice(&second.to_le_bytes());
        b
    }

    #[test]
    fn wrapper_decodes_both_versions() {
        let w = FatbinWrapper::parse(&wrapper(WRAPPER_MAGIC, 1, 0x1000, 0)).unwrap();
        assert_eq!(
            w,
            FatbinWrapper {
                version: 1,
                data: 0x1000,
                filename_or_fatbins: 0
            }
        );
        let w = FatbinWrapper::parse(&wrapper(WRAPPER_MAGIC, 2, 0x2000, 0x3000)).unwrap();
        assert_eq!(
            (w.version, w.data, w.filename_or_fatbins),
            (2, 0x2000, 0x3000)
        );
    }

    #[test]
    fn wrapper_errors() {
        assert_eq!(
            FatbinWrapper::parse(&wrapper(WRAPPER_MAGIC, 1, 1, 0)[..23]),
            Err(FatbinError::WrapperTruncated { len: 23 })
        );
        assert_eq!(
            FatbinWrapper::parse(&wrapper(HIP_WRAPPER_MAGIC, 1, 1, 0)),
            Err(FatbinError::HipWrapper)
        );
        assert_eq!(
            FatbinWrapper::parse(&wrapper(CONTAINER_MAGIC, 1, 1, 0)),
            Err(FatbinError::BadWrapperMagic {
                found: CONTAINER_MAGIC
            })
        );
        assert_eq!(
            FatbinWrapper::parse(&wrapper(WRAPPER_MAGIC, 3, 1, 0)),
            Err(FatbinError::BadWrapperVersion { found: 3 })
        );
        assert_eq!(
            FatbinWrapper::parse(&wrapper(WRAPPER_MAGIC, 1, 0, 0)),
            Err(FatbinError::WrapperNullData)
        );
    }

    #[test]
    fn entry_header_fields_decode() {
        // Tail: identifier "k.cu" at 0x40 (padded to 8), option descriptor
        // at 0x48 pointing at a 5-byte blob at 0x50.
        let mut tail = b"k.cu\0\0\0\0".to_vec();
        tail.extend_from_slice(&0x50u32.to_le_bytes());
        tail.extend_from_slice(&5u32.to_le_bytes());
        tail.extend_from_slice(b"-O3\0\0\0\0\0");
        let mut ptx = spec(
            KIND_PTX,
            120,
            ELF | flags::ARCH_SPECIFIC,
            b".version 9.2\0\0\0\0",
        );
        ptx.tail = tail;
        ptx.name = Some((0x40, 4));
        ptx.options_offset = 0x48;
        let elf = spec(KIND_ELF, 90, ELF, &[0x7f, b'E', b'L', b'F', 0, 0, 0, 0]);
        let bytes = container(&[elf, ptx]);
        let fatbin = Fatbin::parse(&bytes).unwrap();
        assert_eq!(fatbin.byte_len(), bytes.len());
        assert_eq!(fatbin.containers().len(), 1);
        assert_eq!(fatbin.containers()[0].entries, 0..2);
        let e = &fatbin.entries()[0];
        assert_eq!((e.kind, e.sm, e.major, e.minor), (EntryKind::Elf, 90, 1, 8));
        assert_eq!(e.compression, Compression::None);
        assert_eq!(e.payload, 0x50..0x58);
        assert_eq!(
            (e.identifier.as_deref(), e.options.as_deref()),
            (None, None)
        );
        let p = &fatbin.entries()[1];
        assert_eq!(p.kind, EntryKind::Ptx);
        assert!(p.arch_specific && !p.family_specific);
        assert_eq!(p.offset, 0x58);
        assert_eq!(p.header_size, 0x58);
        assert_eq!(p.identifier.as_deref(), Some("k.cu"));
        assert_eq!(p.options.as_deref(), Some(&b"-O3\0\0"[..]));
        assert_eq!(p.label(), "compute_120a PTX");
        assert_eq!(
            &*fatbin.payload(&bytes, 1).unwrap(),
            b".version 9.2\0\0\0\0"
        );
        assert!(matches!(fatbin.payload(&bytes, 0), Ok(Cow::Borrowed(_))));
        assert_eq!(fatbin.available(), ["sm_90 ELF", "compute_120a PTX"]);
    }

    #[test]
    fn compat_copy_is_read_one_byte_past_the_blob_offset() {
        // Descriptor {0x48, 4}; nvcc puts a 0 byte at 0x48 and the records
        // at 0x49.
        let mut tail = Vec::new();
        tail.extend_from_slice(&0x48u32.to_le_bytes());
        tail.extend_from_slice(&4u32.to_le_bytes());
        tail.extend_from_slice(&[0, 2, 9, 1, 0, 0, 0, 0]);
        let mut s = spec(KIND_ELF, 120, ELF | flags::COMPAT_BLOB, &[0; 8]);
        s.tail = tail.clone();
        s.options_offset = 0x40;
        let mut plain = s.clone();
        plain.flags = ELF;
        let fatbin = Fatbin::parse(&container(&[s, plain])).unwrap();
        let e = &fatbin.entries()[0];
        assert_eq!(e.options.as_deref(), Some(&[0, 2, 9, 1][..]));
        assert_eq!(e.compat.as_deref(), Some(&[2, 9, 1, 0][..]));
        // Without the flag there is no compat copy.
        assert_eq!(fatbin.entries()[1].compat, None);
        // A blob that ends at the header end leaves no room for the shift.
        let mut tight = spec(KIND_ELF, 120, ELF | flags::COMPAT_BLOB, &[0; 8]);
        tight.tail = tail;
        tight.tail[4..8].copy_from_slice(&8u32.to_le_bytes());
        tight.options_offset = 0x40;
        let fatbin = Fatbin::parse(&container(&[tight])).unwrap();
        assert_eq!(fatbin.entries()[0].options.as_ref().map(Vec::len), Some(8));
        assert_eq!(fatbin.entries()[0].compat, None);
    }

    #[test]
    fn unknown_kind_is_kept() {
        let bytes = container(&[spec(4, 75, ELF, &[0; 8])]);
        let fatbin = Fatbin::parse(&bytes).unwrap();
        assert_eq!(fatbin.entries()[0].kind, EntryKind::Unknown(4));
        assert_eq!(fatbin.available(), ["kind 4 (sm_75)"]);
    }

    #[test]
    fn several_containers_are_walked_and_trailing_bytes_left() {
        let mut bytes = container(&[spec(KIND_ELF, 90, ELF, &[1; 8])]);
        let first_len = bytes.len();
        bytes.extend(container(&[spec(KIND_ELF, 120, ELF, &[2; 8])]));
        let both_len = bytes.len();
        bytes.extend_from_slice(&[0; 8]);
        let fatbin = Fatbin::parse(&bytes).unwrap();
        assert_eq!(fatbin.containers().len(), 2);
        assert_eq!(fatbin.containers()[1].offset, first_len);
        assert_eq!(fatbin.entries()[1].container, 1);
        assert_eq!(fatbin.entries()[1].index, 1);
        assert_eq!(fatbin.byte_len(), both_len);
        assert_eq!(&*fatbin.payload(&bytes, 1).unwrap(), &[2; 8]);
        assert_eq!(Fatbin::container_len(&bytes).unwrap(), first_len);
    }

    #[test]
    fn empty_container_parses_and_selects_nothing() {
        let bytes = container(&[]);
        let fatbin = Fatbin::parse(&bytes).unwrap();
        assert!(fatbin.entries().is_empty());
        let err = fatbin.select(90).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no ELF code for sm_90 in this fat binary; it holds no entries"
        );
    }

    #[test]
    fn container_errors() {
        assert_eq!(
            Fatbin::parse(&[0x50, 0xed, 0x55]),
            Err(FatbinError::ContainerTruncated {
                offset: 0,
                available: 3
            })
        );
        let mut bad = container(&[]);
        bad[0] = 0;
        assert_eq!(
            Fatbin::parse(&bad),
            Err(FatbinError::BadContainerMagic {
                offset: 0,
                found: 0xBA55_ED00
            })
        );
        let mut hip = container(&[]);
        hip[..4].copy_from_slice(&HIP_WRAPPER_MAGIC.to_le_bytes());
        assert_eq!(Fatbin::parse(&hip), Err(FatbinError::HipWrapper));
        assert_eq!(
            Fatbin::parse(&container_raw(8, 0, &[])),
            Err(FatbinError::ContainerHeaderTooSmall {
                offset: 0,
                header_size: 8
            })
        );
        assert_eq!(
            Fatbin::parse(&container_raw(0x10, 0x40, &[0; 0x20])),
            Err(FatbinError::ContainerPastEnd {
                offset: 0,
                header_size: 0x10,
                fat_size: 0x40,
                available: 0x30
            })
        );
        assert_eq!(
            Fatbin::parse(&container_raw(0x10, u64::MAX, &[])),
            Err(FatbinError::ContainerPastEnd {
                offset: 0,
                header_size: 0x10,
                fat_size: u64::MAX,
                available: 0x10
            })
        );
        assert_eq!(
            Fatbin::container_len(&container_raw(0x10, u64::MAX, &[])),
            Err(FatbinError::ContainerTooLong {
                header_size: 0x10,
                fat_size: u64::MAX
            })
        );
        assert_eq!(
            Fatbin::container_len(&container_raw(0x18, 0x100, &[])),
            Ok(0x118)
        );
        assert!(matches!(
            Fatbin::container_len(&[0x50, 0xed, 0x55, 0xba]),
            Err(FatbinError::ContainerTruncated { .. })
        ));
        // A second container that is broken is reported, not skipped.
        let mut two = container(&[]);
        two.extend_from_slice(&container_raw(0x10, 0x40, &[]));
        assert!(matches!(
            Fatbin::parse(&two),
            Err(FatbinError::ContainerPastEnd { offset: 0x10, .. })
        ));
    }

    #[test]
    fn entry_errors() {
        // Fewer than 0x40 bytes left for the entry header.
        assert_eq!(
            Fatbin::parse(&container_raw(0x10, 0x20, &[0; 0x20])),
            Err(FatbinError::EntryHeaderTruncated {
                index: 0,
                offset: 0x10,
                available: 0x20
            })
        );
        let mut small = spec(KIND_ELF, 90, ELF, &[0; 8]);
        small.header_size = Some(0x38);
        assert_eq!(
            Fatbin::parse(&container(&[small])),
            Err(FatbinError::EntryHeaderTooSmall {
                index: 0,
                header_size: 0x38
            })
        );
        let mut long = spec(KIND_ELF, 90, ELF, &[0; 8]);
        long.header_size = Some(0x100);
        assert_eq!(
            Fatbin::parse(&container(&[long])),
            Err(FatbinError::EntryHeaderPastEnd {
                index: 0,
                header_size: 0x100,
                available: 0x48
            })
        );
        let mut huge = spec(KIND_ELF, 90, ELF, &[0; 8]);
        huge.header_size = Some(u32::MAX);
        assert!(matches!(
            Fatbin::parse(&container(&[huge])),
            Err(FatbinError::EntryHeaderPastEnd { index: 0, .. })
        ));
        // Second entry's payload claims more than is there.
        let mut past = spec(KIND_ELF, 120, ELF, &[0; 8]);
        past.payload_size = Some(0x10);
        assert_eq!(
            Fatbin::parse(&container(&[spec(KIND_ELF, 90, ELF, &[0; 8]), past])),
            Err(FatbinError::PayloadPastEnd {
                index: 1,
                payload_size: 0x10,
                available: 8
            })
        );
        let mut overflow = spec(KIND_ELF, 90, ELF, &[0; 8]);
        overflow.payload_size = Some(u64::MAX);
        assert!(matches!(
            Fatbin::parse(&container(&[overflow])),
            Err(FatbinError::PayloadPastEnd {
                index: 0,
                payload_size: u64::MAX,
                ..
            })
        ));
        let mut lying = spec(KIND_ELF, 90, ELF | flags::ZSTD, &[0; 8]);
        lying.compressed_size = 9;
        lying.uncompressed_size = 100;
        assert_eq!(
            Fatbin::parse(&container(&[lying])),
            Err(FatbinError::CompressedSizePastPayload {
                index: 0,
                compressed_size: 9,
                payload_size: 8
            })
        );
    }

    #[test]
    fn header_tail_errors() {
        let mut tail = vec![0u8; 16];
        tail[..4].copy_from_slice(&0x48u32.to_le_bytes());
        tail[4..8].copy_from_slice(&8u32.to_le_bytes());
        let with_tail = |name: Option<(u32, u32)>, options_offset: u32, tail: &[u8]| {
            let mut s = spec(KIND_PTX, 90, ELF, &[0; 8]);
            s.tail = tail.to_vec();
            s.name = name;
            s.options_offset = options_offset;
            Fatbin::parse(&container(&[s]))
        };
        // Sanity: descriptor at 0x40 -> blob 0x48..0x50 is fine.
        assert_eq!(
            with_tail(None, 0x40, &tail).unwrap().entries()[0].options,
            Some(vec![0; 8])
        );
        // Descriptor overlapping the fixed header.
        assert_eq!(
            with_tail(None, 0x20, &tail),
            Err(FatbinError::OptionsOutOfHeader {
                index: 0,
                options_offset: 0x20,
                header_size: 0x50
            })
        );
        // Descriptor past the header end.
        assert_eq!(
            with_tail(None, 0x4c, &tail),
            Err(FatbinError::OptionsOutOfHeader {
                index: 0,
                options_offset: 0x4c,
                header_size: 0x50
            })
        );
        // Blob past the header end.
        let mut long_blob = tail.clone();
        long_blob[4..8].copy_from_slice(&9u32.to_le_bytes());
        assert_eq!(
            with_tail(None, 0x40, &long_blob),
            Err(FatbinError::OptionBlobOutOfHeader {
                index: 0,
                blob_offset: 0x48,
                blob_size: 9,
                header_size: 0x50
            })
        );
        // Blob overlapping the fixed header.
        let mut low_blob = tail.clone();
        low_blob[..4].copy_from_slice(&0x28u32.to_le_bytes());
        assert!(matches!(
            with_tail(None, 0x40, &low_blob),
            Err(FatbinError::OptionBlobOutOfHeader {
                blob_offset: 0x28,
                ..
            })
        ));
        // Blob size that would overflow.
        let mut wrap_blob = tail.clone();
        wrap_blob[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            with_tail(None, 0x40, &wrap_blob),
            Err(FatbinError::OptionBlobOutOfHeader { .. })
        ));
        assert_eq!(
            with_tail(Some((0x48, 0x10)), 0, &tail),
            Err(FatbinError::IdentifierOutOfHeader {
                index: 0,
                name_offset: 0x48,
                name_len: 0x10,
                header_size: 0x50
            })
        );
        assert!(matches!(
            with_tail(Some((0x10, 4)), 0, &tail),
            Err(FatbinError::IdentifierOutOfHeader {
                name_offset: 0x10,
                ..
            })
        ));
    }

    /// A one-entry fatbin whose ELF payload is `packed` (padded to 8),
    /// flagged `scheme`, claiming `claimed` bytes once decompressed.
    fn compressed(scheme: u64, packed: &[u8], claimed: u64) -> Vec<u8> {
        let mut payload = packed.to_vec();
        payload.resize(packed.len().next_multiple_of(8), 0);
        let mut s = spec(KIND_ELF, 90, ELF | scheme, &payload);
        s.compressed_size = packed.len() as u32;
        s.uncompressed_size = claimed;
        container(&[s])
    }

    fn sample() -> Vec<u8> {
        (0..4000u32)
            .map(|i| (i % 251) as u8 ^ (i / 97) as u8)
            .collect()
    }

    #[test]
    fn zstd_and_lz4_payloads_decode() {
        let data = sample();
        let z = ruzstd::encoding::compress_to_vec(
            &data[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        let bytes = compressed(flags::ZSTD, &z, data.len() as u64);
        let fatbin = Fatbin::parse(&bytes).unwrap();
        assert_eq!(fatbin.entries()[0].compression, Compression::Zstd);
        assert_eq!(fatbin.entries()[0].stored_data().len(), z.len());
        let out = fatbin.payload(&bytes, 0).unwrap();
        assert!(matches!(out, Cow::Owned(_)));
        assert_eq!(&*out, &data[..]);

        let l = lz4_flex::block::compress(&data);
        let bytes = compressed(flags::LZ4, &l, data.len() as u64);
        let fatbin = Fatbin::parse(&bytes).unwrap();
        assert_eq!(fatbin.entries()[0].compression, Compression::Lz4);
        assert_eq!(&*fatbin.payload(&bytes, 0).unwrap(), &data[..]);
    }

    #[test]
    fn payload_errors() {
        let data = sample();
        let n = data.len() as u64;
        let z = ruzstd::encoding::compress_to_vec(
            &data[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        let l = lz4_flex::block::compress(&data);
        for (flag, packed) in [(flags::ZSTD, &z), (flags::LZ4, &l)] {
            for claimed in [n - 1, n + 1] {
                let bytes = compressed(flag, packed, claimed);
                let fatbin = Fatbin::parse(&bytes).unwrap();
                let err = fatbin.payload(&bytes, 0).unwrap_err();
                // Too small a buffer fails inside the decoder; too large
                // a one is a size mismatch.
                if claimed > n {
                    assert_eq!(
                        err,
                        FatbinError::SizeMismatch {
                            index: 0,
                            expected: claimed,
                            actual: n
                        }
                    );
                } else {
                    assert!(
                        matches!(err, FatbinError::Decompression { index: 0, .. }),
                        "{err:?}"
                    );
                }
            }
            // Garbage in place of the compressed data.
            let garbage = vec![0xffu8; 64];
            let bytes = compressed(flag, &garbage, n);
            let fatbin = Fatbin::parse(&bytes).unwrap();
            assert!(matches!(
                fatbin.payload(&bytes, 0),
                Err(FatbinError::Decompression { index: 0, .. })
            ));
            let bytes = compressed(flag, packed, MAX_DECOMPRESSED_LEN + 1);
            let fatbin = Fatbin::parse(&bytes).unwrap();
            assert_eq!(
                fatbin.payload(&bytes, 0),
                Err(FatbinError::DecompressedTooLarge {
                    index: 0,
                    uncompressed_size: MAX_DECOMPRESSED_LEN + 1,
                    max: MAX_DECOMPRESSED_LEN
                })
            );
        }
        // A zstd frame cut short.
        let bytes = compressed(flags::ZSTD, &z[..z.len() / 2], n);
        let fatbin = Fatbin::parse(&bytes).unwrap();
        assert!(matches!(
            fatbin.payload(&bytes, 0),
            Err(FatbinError::Decompression { scheme: "zstd", .. })
        ));
        // Both scheme bits, the unobserved 0x1000 scheme, or a compressed
        // size without a scheme bit: unknown compression.
        for flag in [flags::ZSTD | flags::LZ4, flags::COMPRESS_OTHER, 0] {
            let bytes = compressed(flag, &z, n);
            let fatbin = Fatbin::parse(&bytes).unwrap();
            let f = ELF | flag;
            assert_eq!(fatbin.entries()[0].compression, Compression::Unknown(f));
            assert_eq!(
                fatbin.payload(&bytes, 0),
                Err(FatbinError::UnknownCompression { index: 0, flags: f })
            );
        }
        let bytes = container(&[spec(KIND_ELF, 90, ELF, &[0; 8])]);
        let fatbin = Fatbin::parse(&bytes).unwrap();
        assert_eq!(
            fatbin.payload(&bytes, 1),
            Err(FatbinError::NoSuchEntry { index: 1, count: 1 })
        );
        // A slice other than the parsed one, too short for the payload.
        assert!(matches!(
            fatbin.payload(&bytes[..0x20], 0),
            Err(FatbinError::PayloadPastEnd { index: 0, .. })
        ));
    }

    /// A fatbin from (kind, sm, flags) triples.
    fn synthetic(list: &[(u16, u32, u64)]) -> Fatbin {
        let specs: Vec<EntrySpec> = list
            .iter()
            .map(|&(kind, sm, f)| spec(kind, sm, ELF | f, &[0; 8]))
            .collect();
        Fatbin::parse(&container(&specs)).unwrap()
    }

    const A: u64 = flags::ARCH_SPECIFIC;
    const F: u64 = flags::FAMILY_SPECIFIC;

    #[test]
    fn select_exact_a_beats_plain_beats_f() {
        let fb = synthetic(&[(KIND_ELF, 120, F), (KIND_ELF, 120, 0), (KIND_ELF, 120, A)]);
        assert_eq!(fb.select(120), Ok(2));
        let fb = synthetic(&[(KIND_ELF, 120, F), (KIND_ELF, 120, 0)]);
        assert_eq!(fb.select(120), Ok(1));
        let fb = synthetic(&[(KIND_ELF, 120, F)]);
        assert_eq!(fb.select(120), Ok(0));
    }

    #[test]
    fn select_a_only_on_its_exact_minor() {
        let fb = synthetic(&[(KIND_ELF, 120, A)]);
        assert_eq!(fb.select(120), Ok(0));
        assert!(matches!(
            fb.select(121),
            Err(FatbinError::NoMatchingCode { .. })
        ));
        let fb = synthetic(&[(KIND_ELF, 120, A), (KIND_ELF, 120, 0)]);
        assert_eq!(fb.select(121), Ok(1));
    }

    #[test]
    fn select_family_f_on_higher_minor_beats_plain() {
        let fb = synthetic(&[(KIND_ELF, 100, 0), (KIND_ELF, 100, F)]);
        assert_eq!(fb.select(103), Ok(1));
        // An exact plain entry still beats a lower-minor f entry.
        let fb = synthetic(&[(KIND_ELF, 100, F), (KIND_ELF, 103, 0)]);
        assert_eq!(fb.select(103), Ok(1));
        // f never runs on a lower minor.
        let fb = synthetic(&[(KIND_ELF, 121, F)]);
        assert!(fb.select(120).is_err());
    }

    #[test]
    fn select_same_major_highest_lower_minor() {
        let fb = synthetic(&[(KIND_ELF, 80, 0), (KIND_ELF, 86, 0), (KIND_ELF, 89, 0)]);
        assert_eq!(fb.select(80), Ok(0));
        assert_eq!(fb.select(87), Ok(1));
        assert_eq!(fb.select(89), Ok(2));
        // Higher-minor code never runs on a lower minor.
        let fb = synthetic(&[(KIND_ELF, 86, 0)]);
        assert!(fb.select(80).is_err());
        // Closer f beats a farther f.
        let fb = synthetic(&[(KIND_ELF, 100, F), (KIND_ELF, 101, F)]);
        assert_eq!(fb.select(103), Ok(1));
    }

    #[test]
    fn select_refuses_other_majors_and_ptx() {
        let fb = synthetic(&[
            (KIND_ELF, 90, 0),
            (KIND_PTX, 89, 0),
            (KIND_PTX, 120, 0),
            (4, 120, 0),
        ]);
        assert_eq!(fb.select(90), Ok(0));
        for device in [89, 100, 120, 121, 75] {
            match fb.select(device) {
                Err(FatbinError::NoMatchingCode {
                    device_sm,
                    available,
                }) => {
                    assert_eq!(device_sm, device);
                    assert_eq!(
                        available,
                        [
                            "sm_90 ELF",
                            "compute_89 PTX",
                            "compute_120 PTX",
                            "kind 4 (sm_120)"
                        ]
                    );
                }
                other => panic!("sm_{device}: {other:?}"),
            }
        }
        let msg = fb.select(100).unwrap_err().to_string();
        assert_eq!(
            msg,
            "no ELF code for sm_100 in this fat binary; it holds sm_90 ELF, compute_89 PTX, \
             compute_120 PTX, kind 4 (sm_120) (PTX needs a JIT compiler, which this loader does not have)"
        );
    }

    #[test]
    fn select_tie_goes_to_first_entry() {
        let fb = synthetic(&[(KIND_ELF, 90, 0), (KIND_ELF, 90, 0)]);
        assert_eq!(fb.select(90), Ok(0));
    }

    #[test]
    fn labels_name_suffixes() {
        let fb = synthetic(&[(KIND_ELF, 90, A), (KIND_ELF, 120, F), (KIND_PTX, 120, F)]);
        assert_eq!(
            fb.available(),
            ["sm_90a ELF", "sm_120f ELF", "compute_120f PTX"]
        );
    }

    #[test]
    fn classify_by_first_bytes() {
        assert_eq!(classify(&container(&[])), InputKind::Fatbin);
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[5] = 1;
        elf[18..20].copy_from_slice(&EM_CUDA.to_le_bytes());
        assert_eq!(classify(&elf), InputKind::Cubin);
        elf[18..20].copy_from_slice(&62u16.to_le_bytes());
        assert_eq!(classify(&elf), InputKind::HostObject);
        elf[5] = 2;
        elf[18..20].copy_from_slice(&EM_CUDA.to_be_bytes());
        assert_eq!(classify(&elf), InputKind::Cubin);
        assert_eq!(classify(&elf[..10]), InputKind::Unknown);
        assert_eq!(
            classify(&[0xcf, 0xfa, 0xed, 0xfe, 0, 0]),
            InputKind::HostObject
        );
        assert_eq!(classify(&[0xfe, 0xed, 0xfa, 0xce]), InputKind::HostObject);
        assert_eq!(
            classify(&wrapper(WRAPPER_MAGIC, 1, 1, 0)),
            InputKind::Unknown
        );
        assert_eq!(classify(&[]), InputKind::Unknown);
    }

    #[test]
    fn host_object_input_errors() {
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[5] = 1;
        elf[18..20].copy_from_slice(&EM_CUDA.to_le_bytes());
        assert_eq!(fatbins_in_host_object(&elf), Err(FatbinError::RawCubin));
        assert_eq!(
            fatbins_in_host_object(b"hello world"),
            Err(FatbinError::UnrecognisedInput {
                start: b"hello wo".to_vec()
            })
        );
        // An x86-64 ELF header with nothing valid behind it.
        elf[18..20].copy_from_slice(&62u16.to_le_bytes());
        elf[4] = 7; // bad class
        assert!(matches!(
            fatbins_in_host_object(&elf),
            Err(FatbinError::HostObject { .. })
        ));
        let fat = container(&[spec(KIND_ELF, 90, ELF, &[0; 8])]);
        assert_eq!(fatbins_in_host_object(&fat), Ok(vec![fat.clone()]));
    }
}
