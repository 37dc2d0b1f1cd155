//! Push buffers and the GPFIFO ring that points at them: the 32-bit method
//! headers inside a push segment, the 64-bit GP entries that name segments,
//! and the USERD words software and Host exchange GP_PUT / GP_GET through.
//!
//! Layouts are those of NVIDIA's host classes (`NVC56F_DMA_*` for headers,
//! `NVC86F_GP_ENTRY*` for GP entries; identical in C56F, C86F and C96F per
//! the oracle), described in reference/submission.md sections 2 and 3. The
//! field constants below are what `encode` and `decode` use, and
//! tests/submission_oracle.rs pins each one to the oracle.
//!
//! [`FormatError`] is shared by this module, [`crate::methods`] and
//! [`crate::qmd`]: every value that does not fit its hardware field is
//! refused with an error that names the field, never truncated.

use std::fmt;

use crate::gpfifo;
use crate::regs::Field;

// ---------------------------------------------------------------------------
// Errors

/// A hardware field, by NVIDIA's name; `index` for the `(i)` fields of a QMD
/// (constant bank, release slot, dependent slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldName {
    pub name: &'static str,
    pub index: Option<u8>,
}

impl FieldName {
    pub const fn plain(name: &'static str) -> Self {
        Self { name, index: None }
    }
}

impl fmt::Display for FieldName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "{}({i})", self.name),
            None => f.write_str(self.name),
        }
    }
}

/// A value that does not fit a hardware format, or words that do not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatError {
    /// A header's SEC_OP is not one of the five kinds this crate speaks:
    /// 0 and 2 are the legacy/SLI groups (their TERT_OP forms), 6 is
    /// reserved. A whole word of 0 is the NOP ([`NOP_WORD`]); test for it
    /// before decoding.
    ReservedSecOp { sec_op: u8 },
    /// Method offsets are byte offsets of 32-bit methods.
    MethodUnaligned { method: u32 },
    /// The header holds the dword address in 12 bits: offsets up to 0x3FFC.
    MethodOutOfRange { method: u32 },
    /// COUNT is 13 bits.
    CountTooLarge { count: u32 },
    /// An immediate's data is the 13-bit COUNT field.
    ImmediateTooLarge { data: u32 },
    /// Eight subchannels, 0..=7.
    SubchannelOutOfRange { subchannel: u8 },
    /// Bits the format reserves were set (`word` holds only those bits).
    ReservedBits { what: &'static str, word: u64 },
    /// GP segment addresses are dword aligned.
    GpAddressUnaligned { address: u64 },
    /// GP segment addresses are 40 bits (GET and GET_HI).
    GpAddressTooLarge { address: u64 },
    /// LENGTH is 21 bits of dwords.
    GpLengthTooLarge { dwords: u32 },
    /// LENGTH 0 makes a control entry, not a segment.
    GpLengthZero,
    /// `GpEntry::decode` was given a control entry, or `GpControl::decode` a
    /// segment.
    GpKindMismatch { control: bool },
    /// A value wider than its field; `bits` is how many bits the value may
    /// have in the units the caller gave (bytes for addresses and sizes).
    TooWide {
        field: FieldName,
        value: u64,
        bits: u32,
    },
    /// A value the field stores shifted (or in units) is not a multiple of
    /// `align`.
    Misaligned {
        field: FieldName,
        value: u64,
        align: u64,
    },
    /// A field read from hardware words holds a value no enumerant names.
    UnknownValue { field: FieldName, value: u32 },
    /// The descriptor asks for something this QMD version cannot hold.
    NotInVersion {
        field: &'static str,
        version: &'static str,
    },
    /// QMD words of another version (major, minor) than the layout used.
    WrongVersion { expected: (u8, u8), found: (u8, u8) },
    /// QMD word count differs from the layout's.
    WrongLength { expected: usize, found: usize },
    /// MIN, TARGET and MAX_SM_CONFIG_SHARED_MEM_SIZE are set together or not
    /// at all: a partly filled triple makes the H200 raise Xid 13 and remove
    /// the channel (reference/submission.md 13.1, 13.2).
    PartialSmConfig { min: u8, target: u8, max: u8 },
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::ReservedSecOp { sec_op } => {
                write!(f, "method header SEC_OP {sec_op} is reserved or legacy")
            }
            Self::MethodUnaligned { method } => {
                write!(f, "method offset {method:#x} is not a multiple of 4")
            }
            Self::MethodOutOfRange { method } => {
                write!(f, "method offset {method:#x} is beyond the 12-bit dword address")
            }
            Self::CountTooLarge { count } => write!(f, "method count {count} exceeds 13 bits"),
            Self::ImmediateTooLarge { data } => {
                write!(f, "immediate data {data:#x} exceeds 13 bits")
            }
            Self::SubchannelOutOfRange { subchannel } => {
                write!(f, "subchannel {subchannel} is not 0..=7")
            }
            Self::ReservedBits { what, word } => {
                write!(f, "reserved bits {word:#x} set in {what}")
            }
            Self::GpAddressUnaligned { address } => {
                write!(f, "push segment address {address:#x} is not 4-byte aligned")
            }
            Self::GpAddressTooLarge { address } => {
                write!(f, "push segment address {address:#x} is not below 2^40")
            }
            Self::GpLengthTooLarge { dwords } => {
                write!(f, "push segment length {dwords} dwords exceeds 21 bits")
            }
            Self::GpLengthZero => f.write_str("push segment length 0 (that is a control entry)"),
            Self::GpKindMismatch { control } => {
                if control {
                    f.write_str("GP entry is a control entry, not a segment")
                } else {
                    f.write_str("GP entry is a segment, not a control entry")
                }
            }
            Self::TooWide { field, value, bits } => {
                write!(f, "{field}: {value:#x} does not fit {bits} bits")
            }
            Self::Misaligned {
                field,
                value,
                align,
            } => write!(f, "{field}: {value:#x} is not a multiple of {align:#x}"),
            Self::UnknownValue { field, value } => {
                write!(f, "{field}: value {value:#x} has no meaning")
            }
            Self::NotInVersion { field, version } => {
                write!(f, "{field} does not exist in QMD {version}")
            }
            Self::WrongVersion { expected, found } => write!(
                f,
                "QMD version {}.{} where {}.{} was expected",
                found.0, found.1, expected.0, expected.1
            ),
            Self::WrongLength { expected, found } => {
                write!(f, "{found} QMD words where {expected} were expected")
            }
            Self::PartialSmConfig { min, target, max } => write!(
                f,
                "SM shared-memory config MIN/TARGET/MAX = {min}/{target}/{max}: set all three or none"
            ),
        }
    }
}

impl std::error::Error for FormatError {}

/// Checks that `value` fits `field` and returns it shifted into place.
pub(crate) fn checked_field(field: Field, value: u32) -> Result<u32, FormatError> {
    let width = field.hi - field.lo + 1;
    if width < 32 && value >> width != 0 {
        return Err(FormatError::TooWide {
            field: FieldName::plain(field.name),
            value: u64::from(value),
            bits: width,
        });
    }
    Ok(field.set(0, value))
}

// ---------------------------------------------------------------------------
// Method headers

/// Fields of a method header, named as in the oracle after `NVC56F_DMA_`
/// (reference/submission.md section 3).
pub mod header {
    use crate::regs::Field;

    /// Method dword address (byte offset / 4).
    pub const METHOD_ADDRESS: Field = Field {
        name: "METHOD_ADDRESS",
        hi: 11,
        lo: 0,
    };
    pub const METHOD_SUBCHANNEL: Field = Field {
        name: "METHOD_SUBCHANNEL",
        hi: 15,
        lo: 13,
    };
    /// Number of data dwords that follow the header.
    pub const METHOD_COUNT: Field = Field {
        name: "METHOD_COUNT",
        hi: 28,
        lo: 16,
    };
    /// For SEC_OP IMMD the data itself, in the COUNT bits.
    pub const IMMD_DATA: Field = Field {
        name: "IMMD_DATA",
        hi: 28,
        lo: 16,
    };
    pub const SEC_OP: Field = Field {
        name: "SEC_OP",
        hi: 31,
        lo: 29,
    };
    /// Every header field, for the oracle test.
    pub const ALL: &[Field] = &[
        METHOD_ADDRESS,
        METHOD_SUBCHANNEL,
        METHOD_COUNT,
        IMMD_DATA,
        SEC_OP,
    ];
    /// Bit 12 lies between ADDRESS and SUBCHANNEL; the format reserves it
    /// for a future wider address and it must stay 0.
    pub const RESERVED_MASK: u32 = 1 << 12;
}

/// A header word of 0: the universal no-op (reference/submission.md 3).
pub const NOP_WORD: u32 = 0;

/// Subchannel conventions on the graphics/compute runlist that tinygrad and
/// CUDA follow (reference/submission.md 3): compute object on 1, copy object
/// on 4; host methods (below 0x100) ignore the subchannel.
pub const SUBCHANNEL_COMPUTE: u8 = 1;
pub const SUBCHANNEL_COPY: u8 = 4;

/// Largest byte offset a header can address: 12-bit dword address.
pub const MAX_METHOD: u32 = 0xFFF * 4;
/// Largest COUNT (and immediate datum): 13 bits.
pub const MAX_COUNT: u16 = 0x1FFF;

/// The kinds of header, by SEC_OP value (oracle `NVC56F_DMA_SEC_OP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MethodKind {
    /// Data word i goes to method + 4i.
    Incrementing = 1,
    /// Every data word goes to the same method (inline-data streams).
    NonIncrementing = 3,
    /// One method, its data in the header's 13 COUNT bits; no data words.
    Immediate = 4,
    /// Data word 0 to method, all later words to method + 4.
    IncrementOnce = 5,
    /// Host ignores the rest of the segment.
    EndSegment = 7,
}

impl MethodKind {
    /// Every kind with NVIDIA's name for its SEC_OP value.
    pub const ALL: [(MethodKind, &'static str); 5] = [
        (Self::Incrementing, "SEC_OP_INC_METHOD"),
        (Self::NonIncrementing, "SEC_OP_NON_INC_METHOD"),
        (Self::Immediate, "SEC_OP_IMMD_DATA_METHOD"),
        (Self::IncrementOnce, "SEC_OP_ONE_INC"),
        (Self::EndSegment, "SEC_OP_END_PB_SEGMENT"),
    ];

    pub fn from_sec_op(sec_op: u8) -> Result<Self, FormatError> {
        Self::ALL
            .iter()
            .map(|(k, _)| *k)
            .find(|k| *k as u8 == sec_op)
            .ok_or(FormatError::ReservedSecOp { sec_op })
    }
}

/// One method header. Built through [`MethodHeader::new`] (or the kind
/// helpers), so every value held fits the format and `encode` cannot fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MethodHeader {
    kind: MethodKind,
    subchannel: u8,
    method: u32,
    count_or_data: u16,
}

impl MethodHeader {
    /// `method` is a byte offset; `count_or_data` is the number of data
    /// dwords, or for [`MethodKind::Immediate`] the datum itself.
    pub fn new(
        kind: MethodKind,
        subchannel: u8,
        method: u32,
        count_or_data: u16,
    ) -> Result<Self, FormatError> {
        if subchannel > 7 {
            return Err(FormatError::SubchannelOutOfRange { subchannel });
        }
        if !method.is_multiple_of(4) {
            return Err(FormatError::MethodUnaligned { method });
        }
        if method > MAX_METHOD {
            return Err(FormatError::MethodOutOfRange { method });
        }
        if count_or_data > MAX_COUNT {
            return Err(if kind == MethodKind::Immediate {
                FormatError::ImmediateTooLarge {
                    data: u32::from(count_or_data),
                }
            } else {
                FormatError::CountTooLarge {
                    count: u32::from(count_or_data),
                }
            });
        }
        Ok(Self {
            kind,
            subchannel,
            method,
            count_or_data,
        })
    }

    pub fn incrementing(subchannel: u8, method: u32, count: u16) -> Result<Self, FormatError> {
        Self::new(MethodKind::Incrementing, subchannel, method, count)
    }

    pub fn non_incrementing(subchannel: u8, method: u32, count: u16) -> Result<Self, FormatError> {
        Self::new(MethodKind::NonIncrementing, subchannel, method, count)
    }

    pub fn increment_once(subchannel: u8, method: u32, count: u16) -> Result<Self, FormatError> {
        Self::new(MethodKind::IncrementOnce, subchannel, method, count)
    }

    pub fn immediate(subchannel: u8, method: u32, data: u16) -> Result<Self, FormatError> {
        Self::new(MethodKind::Immediate, subchannel, method, data)
    }

    pub fn end_segment() -> Self {
        Self {
            kind: MethodKind::EndSegment,
            subchannel: 0,
            method: 0,
            count_or_data: 0,
        }
    }

    /// One method with one value: an immediate header when the value fits
    /// the 13 data bits, else an incrementing header with one data word
    /// (returned alongside, to follow the header).
    pub fn single(
        subchannel: u8,
        method: u32,
        value: u32,
    ) -> Result<(Self, Option<u32>), FormatError> {
        match u16::try_from(value) {
            Ok(data) if data <= MAX_COUNT => Ok((Self::immediate(subchannel, method, data)?, None)),
            _ => Ok((Self::incrementing(subchannel, method, 1)?, Some(value))),
        }
    }

    pub fn kind(&self) -> MethodKind {
        self.kind
    }

    pub fn subchannel(&self) -> u8 {
        self.subchannel
    }

    /// Byte offset of the (first) method.
    pub fn method(&self) -> u32 {
        self.method
    }

    /// Data dwords that follow, or the immediate datum.
    pub fn count_or_data(&self) -> u16 {
        self.count_or_data
    }

    /// Data dwords that follow this header in the segment (0 for immediate
    /// and end-segment headers).
    pub fn data_dwords(&self) -> usize {
        match self.kind {
            MethodKind::Immediate | MethodKind::EndSegment => 0,
            _ => usize::from(self.count_or_data),
        }
    }

    pub fn encode(&self) -> u32 {
        let mut w = 0;
        w = header::SEC_OP.set(w, self.kind as u32);
        w = header::METHOD_SUBCHANNEL.set(w, u32::from(self.subchannel));
        w = header::METHOD_ADDRESS.set(w, self.method / 4);
        // COUNT and IMMD_DATA are the same bits.
        header::METHOD_COUNT.set(w, u32::from(self.count_or_data))
    }

    pub fn decode(word: u32) -> Result<Self, FormatError> {
        let sec_op = header::SEC_OP.get(word) as u8;
        let kind = MethodKind::from_sec_op(sec_op)?;
        if word & header::RESERVED_MASK != 0 {
            return Err(FormatError::ReservedBits {
                what: "method header",
                word: u64::from(word & header::RESERVED_MASK),
            });
        }
        Ok(Self {
            kind,
            subchannel: header::METHOD_SUBCHANNEL.get(word) as u8,
            method: header::METHOD_ADDRESS.get(word) * 4,
            count_or_data: header::METHOD_COUNT.get(word) as u16,
        })
    }
}

// ---------------------------------------------------------------------------
// GP entries

/// Fields of the two GP-entry dwords, named as in the oracle after
/// `NVC86F_GP_` (reference/submission.md 2.1). ENTRY0 is the low dword of
/// the little-endian u64 in the ring.
pub mod gp {
    use crate::regs::Field;

    /// 0 UNCONDITIONAL, 1 CONDITIONAL (fetch only if the subdevice mask is
    /// active; SLI only).
    pub const ENTRY0_FETCH: Field = Field {
        name: "ENTRY0_FETCH",
        hi: 0,
        lo: 0,
    };
    /// Segment address bits 31:2.
    pub const ENTRY0_GET: Field = Field {
        name: "ENTRY0_GET",
        hi: 31,
        lo: 2,
    };
    /// A control entry's operand.
    pub const ENTRY0_OPERAND: Field = Field {
        name: "ENTRY0_OPERAND",
        hi: 31,
        lo: 0,
    };
    /// VA bits 56:40 carried by a SET_PB_SEGMENT_EXTENDED_BASE control entry
    /// (Hopper and later host classes).
    pub const ENTRY0_PB_EXTENDED_BASE_OPERAND: Field = Field {
        name: "ENTRY0_PB_EXTENDED_BASE_OPERAND",
        hi: 24,
        lo: 8,
    };
    /// Segment address bits 39:32.
    pub const ENTRY1_GET_HI: Field = Field {
        name: "ENTRY1_GET_HI",
        hi: 7,
        lo: 0,
    };
    /// 0 MAIN (progress shown in USERD TOP_LEVEL_GET), 1 SUBROUTINE.
    pub const ENTRY1_LEVEL: Field = Field {
        name: "ENTRY1_LEVEL",
        hi: 9,
        lo: 9,
    };
    /// Segment length in dwords; 0 makes a control entry.
    pub const ENTRY1_LENGTH: Field = Field {
        name: "ENTRY1_LENGTH",
        hi: 30,
        lo: 10,
    };
    /// 0 PROCEED, 1 WAIT (fetch only after Host parsed the previous segment;
    /// does not wait for engines).
    pub const ENTRY1_SYNC: Field = Field {
        name: "ENTRY1_SYNC",
        hi: 31,
        lo: 31,
    };
    /// A control entry's opcode (LENGTH = 0).
    pub const ENTRY1_OPCODE: Field = Field {
        name: "ENTRY1_OPCODE",
        hi: 7,
        lo: 0,
    };
    pub const ENTRY0: &[Field] = &[
        ENTRY0_FETCH,
        ENTRY0_GET,
        ENTRY0_OPERAND,
        ENTRY0_PB_EXTENDED_BASE_OPERAND,
    ];
    pub const ENTRY1: &[Field] = &[
        ENTRY1_GET_HI,
        ENTRY1_LEVEL,
        ENTRY1_LENGTH,
        ENTRY1_SYNC,
        ENTRY1_OPCODE,
    ];
    /// ENTRY0 bit 1 was NO_CONTEXT_SWITCH up to Fermi and ENTRY1 bit 8 PRIV
    /// up to C36F; both are reserved in the classes this stack uses.
    pub const ENTRY0_RESERVED_MASK: u32 = 1 << 1;
    pub const ENTRY1_RESERVED_MASK: u32 = 1 << 8;
}

/// One ring slot is one u64 (ENTRY0 low, ENTRY1 high).
const _: () = assert!(gpfifo::ENTRY_BYTES == 8);

/// Segment addresses are 40 bits; above that a SET_PB_SEGMENT_EXTENDED_BASE
/// control entry must precede (tinygrad and CUDA stay below).
pub const GP_ADDRESS_LIMIT: u64 = 1 << 40;
/// LENGTH is 21 bits of dwords.
pub const GP_MAX_DWORDS: u32 = (1 << 21) - 1;

/// ENTRY1 LEVEL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Level {
    /// Progress is reported in USERD TOP_LEVEL_GET.
    Main = 0,
    /// Not reported; what tinygrad and CUDA write.
    Subroutine = 1,
}

/// A GP entry naming a push segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GpEntry {
    address: u64,
    dwords: u32,
    level: Level,
    sync: bool,
    fetch_conditional: bool,
}

impl GpEntry {
    /// `address` is the segment's GPU VA (4-byte aligned, below 2^40),
    /// `dwords` its length (1 ..= 2^21 - 1). `sync` is SYNC_WAIT.
    pub fn new(
        address: u64,
        dwords: u32,
        level: Level,
        sync: bool,
        fetch_conditional: bool,
    ) -> Result<Self, FormatError> {
        if !address.is_multiple_of(4) {
            return Err(FormatError::GpAddressUnaligned { address });
        }
        if address >= GP_ADDRESS_LIMIT {
            return Err(FormatError::GpAddressTooLarge { address });
        }
        if dwords == 0 {
            return Err(FormatError::GpLengthZero);
        }
        if dwords > GP_MAX_DWORDS {
            return Err(FormatError::GpLengthTooLarge { dwords });
        }
        Ok(Self {
            address,
            dwords,
            level,
            sync,
            fetch_conditional,
        })
    }

    /// The entry tinygrad and CUDA write: LEVEL SUBROUTINE, SYNC PROCEED,
    /// FETCH UNCONDITIONAL (reference/submission.md 2.1).
    pub fn subroutine(address: u64, dwords: u32) -> Result<Self, FormatError> {
        Self::new(address, dwords, Level::Subroutine, false, false)
    }

    pub fn address(&self) -> u64 {
        self.address
    }

    pub fn dwords(&self) -> u32 {
        self.dwords
    }

    pub fn level(&self) -> Level {
        self.level
    }

    pub fn sync(&self) -> bool {
        self.sync
    }

    pub fn fetch_conditional(&self) -> bool {
        self.fetch_conditional
    }

    pub fn encode(&self) -> u64 {
        let mut e0 = gp::ENTRY0_GET.set(0, (self.address as u32) >> 2);
        e0 = gp::ENTRY0_FETCH.set(e0, u32::from(self.fetch_conditional));
        let mut e1 = gp::ENTRY1_GET_HI.set(0, (self.address >> 32) as u32);
        e1 = gp::ENTRY1_LEVEL.set(e1, self.level as u32);
        e1 = gp::ENTRY1_LENGTH.set(e1, self.dwords);
        e1 = gp::ENTRY1_SYNC.set(e1, u32::from(self.sync));
        join(e0, e1)
    }

    pub fn decode(entry: u64) -> Result<Self, FormatError> {
        let (e0, e1) = split(entry);
        let dwords = gp::ENTRY1_LENGTH.get(e1);
        if dwords == 0 {
            return Err(FormatError::GpKindMismatch { control: true });
        }
        let reserved = join(e0 & gp::ENTRY0_RESERVED_MASK, e1 & gp::ENTRY1_RESERVED_MASK);
        if reserved != 0 {
            return Err(FormatError::ReservedBits {
                what: "GP entry",
                word: reserved,
            });
        }
        let address =
            (u64::from(gp::ENTRY1_GET_HI.get(e1)) << 32) | u64::from(gp::ENTRY0_GET.get(e0) << 2);
        let level = if gp::ENTRY1_LEVEL.get(e1) == 1 {
            Level::Subroutine
        } else {
            Level::Main
        };
        Self::new(
            address,
            dwords,
            level,
            gp::ENTRY1_SYNC.get(e1) == 1,
            gp::ENTRY0_FETCH.get(e0) == 1,
        )
    }
}

/// Control-entry opcodes (ENTRY1 OPCODE when LENGTH = 0; oracle
/// `NVC86F_GP_ENTRY1_OPCODE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum GpOpcode {
    Nop = 0,
    Illegal = 1,
    GpCrc = 2,
    PbCrc = 3,
    /// Hopper and later: the operand's PB_EXTENDED_BASE_OPERAND gives VA
    /// bits 56:40 for the segments that follow.
    SetPbSegmentExtendedBase = 4,
}

impl GpOpcode {
    pub const ALL: [(GpOpcode, &'static str); 5] = [
        (Self::Nop, "OPCODE_NOP"),
        (Self::Illegal, "OPCODE_ILLEGAL"),
        (Self::GpCrc, "OPCODE_GP_CRC"),
        (Self::PbCrc, "OPCODE_PB_CRC"),
        (
            Self::SetPbSegmentExtendedBase,
            "OPCODE_SET_PB_SEGMENT_EXTENDED_BASE",
        ),
    ];
}

/// A control entry: LENGTH 0, an opcode and a 32-bit operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GpControl {
    pub opcode: GpOpcode,
    pub operand: u32,
}

impl GpControl {
    /// SET_PB_SEGMENT_EXTENDED_BASE for segments at or above 2^40:
    /// `va_bits_56_40` is the segment VA >> 40 (17 bits).
    pub fn extended_base(va_bits_56_40: u32) -> Result<Self, FormatError> {
        let operand = checked_field(gp::ENTRY0_PB_EXTENDED_BASE_OPERAND, va_bits_56_40)?;
        Ok(Self {
            opcode: GpOpcode::SetPbSegmentExtendedBase,
            operand,
        })
    }

    pub fn encode(&self) -> u64 {
        join(self.operand, gp::ENTRY1_OPCODE.set(0, self.opcode as u32))
    }

    pub fn decode(entry: u64) -> Result<Self, FormatError> {
        let (e0, e1) = split(entry);
        if gp::ENTRY1_LENGTH.get(e1) != 0 {
            return Err(FormatError::GpKindMismatch { control: false });
        }
        let extra = e1 & !gp::ENTRY1_OPCODE.mask();
        if extra != 0 {
            return Err(FormatError::ReservedBits {
                what: "GP control entry",
                word: u64::from(extra) << 32,
            });
        }
        let value = gp::ENTRY1_OPCODE.get(e1);
        let opcode = GpOpcode::ALL
            .iter()
            .map(|(o, _)| *o)
            .find(|o| *o as u32 == value)
            .ok_or(FormatError::UnknownValue {
                field: FieldName::plain("GP_ENTRY1_OPCODE"),
                value,
            })?;
        Ok(Self {
            opcode,
            operand: e0,
        })
    }
}

/// Any GP entry, as read from a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpWord {
    Segment(GpEntry),
    Control(GpControl),
}

impl GpWord {
    pub fn encode(&self) -> u64 {
        match self {
            Self::Segment(e) => e.encode(),
            Self::Control(c) => c.encode(),
        }
    }

    pub fn decode(entry: u64) -> Result<Self, FormatError> {
        if gp::ENTRY1_LENGTH.get(split(entry).1) == 0 {
            GpControl::decode(entry).map(Self::Control)
        } else {
            GpEntry::decode(entry).map(Self::Segment)
        }
    }
}

fn join(entry0: u32, entry1: u32) -> u64 {
    u64::from(entry0) | (u64::from(entry1) << 32)
}

fn split(entry: u64) -> (u32, u32) {
    (entry as u32, (entry >> 32) as u32)
}

// ---------------------------------------------------------------------------
// USERD

/// USERD block size and alignment (RAMUSERD; oracle struct Nvc86fControl is
/// 512 bytes).
pub const USERD_BYTES: u64 = 512;
/// Byte offset of GPGet (read-only: next entry Host will process).
pub const USERD_GP_GET: u64 = 0x88;
/// Byte offset of GPPut (software writes the index one past its last
/// entry). Both are entry indices, not byte offsets.
pub const USERD_GP_PUT: u64 = 0x8C;
