//! The classes a launcher binds and the methods it pushes to them, one
//! module per class family, with NVIDIA's names: class numbers, method byte
//! offsets, the `hi:lo` fields of each method's data word and the named
//! values of those fields.
//!
//! Each method is a unit type: `host::SEM_EXECUTE::BYTE_OFFSET` is its byte
//! offset, `host::SEM_EXECUTE::OPERATION` a [`Field`] and
//! `host::SEM_EXECUTE::OPERATION_RELEASE` a value for it. [`pack`] builds a
//! data word from fields and refuses values wider than their field. Every
//! module lists its methods in `ALL` and its classes in `CLASSES`;
//! tests/submission_oracle.rs pins each offset, field and value to the
//! oracle (nv580.json) and, where the oracle lacks the Hopper/Blackwell
//! class, to NVIDIA/open-gpu-doc's class headers transcribed in tests/data.
//!
//! Sources: reference/submission.md sections 1.1 (classes), 2.5 (usermode),
//! 4 and 6.1 (host), 5 and 6.2 (compute), 9 (copy engine).
#![allow(non_camel_case_types)]

use crate::push::{FieldName, FormatError};
use crate::regs::Field;

/// One method of a class, as the oracle test walks it.
#[derive(Debug, Clone, Copy)]
pub struct Method {
    pub name: &'static str,
    /// Byte offset in the class (a header stores offset / 4).
    pub offset: u32,
    pub fields: &'static [Field],
    /// Named values, as `FIELD_VALUE` (NVIDIA's name without the class and
    /// method prefix).
    pub values: &'static [(&'static str, u32)],
}

/// Packs fields into one data word, refusing a value wider than its field.
pub fn pack(parts: &[(Field, u32)]) -> Result<u32, FormatError> {
    parts.iter().try_fold(0u32, |word, &(field, value)| {
        Ok(word | crate::push::checked_field(field, value)?)
    })
}

/// Splits a GPU address over an `..._UPPER` / `..._LOWER` method pair:
/// returns (upper word, lower word), refusing an address wider than 32 bits
/// plus the upper field.
pub fn split_address(upper: Field, address: u64) -> Result<(u32, u32), FormatError> {
    let width = upper.hi - upper.lo + 1;
    let high = address >> 32;
    if high >> width != 0 {
        return Err(FormatError::TooWide {
            field: FieldName::plain(upper.name),
            value: address,
            bits: 32 + width,
        });
    }
    Ok((upper.set(0, high as u32), address as u32))
}

/// Declares methods as unit types with their offset, fields and values, and
/// the module's `ALL` list. Compile-time checks: fields within 32 bits and in
/// order, offsets dword aligned, each value fits its field.
macro_rules! methods {
    (
        $(
            $(#[$meta:meta])*
            $name:ident @ $offset:literal {
                $(
                    $(#[$fmeta:meta])*
                    $field:ident : $hi:literal : $lo:literal
                    $( = { $( $value:ident = $v:literal ),* $(,)? } )?
                ),* $(,)?
            }
        )+
    ) => {
        $(
            $(#[$meta])*
            #[derive(Debug, Clone, Copy, PartialEq, Eq)]
            pub struct $name;

            impl $name {
                pub const BYTE_OFFSET: u32 = $offset;
                $(
                    $(#[$fmeta])*
                    pub const $field: Field = Field { name: stringify!($field), hi: $hi, lo: $lo };
                    $( $( pub const $value: u32 = $v; )* )?
                )*
                pub const METHOD: Method = Method {
                    name: stringify!($name),
                    offset: $offset,
                    fields: &[ $( Field { name: stringify!($field), hi: $hi, lo: $lo }, )* ],
                    values: &[ $( $( $( (stringify!($value), $v), )* )? )* ],
                };
            }

            const _: () = {
                assert!($offset % 4 == 0, "method offset not dword aligned");
                $(
                    assert!($hi >= $lo && $hi < 32, "field range out of order or too wide");
                    $( $( assert!(($v as u64) < (1u64 << ($hi - $lo + 1)), "value wider than its field"); )* )?
                )*
            };
        )+

        /// Every method declared in this module.
        pub const ALL: &[Method] = &[ $( $name::METHOD, )+ ];
    };
}

/// The usermode object: a 64 KiB page mapped per process whose
/// NOTIFY_CHANNEL_PENDING word is the channel doorbell. Offsets are the same
/// for every usermode class (only 0xC361's header defines them); they come
/// from dev_usermode.ref.txt (NV_USERMODE at 0x810000) and
/// reference/submission.md 2.5. The oracle holds the class numbers only.
pub mod usermode {
    use super::{Field, Method};

    pub const VOLTA_USERMODE_A: u32 = 0xC361;
    pub const HOPPER_USERMODE_A: u32 = 0xC661;
    pub const BLACKWELL_USERMODE_A: u32 = 0xC761;
    pub const CLASSES: &[(&str, u32)] = &[
        ("VOLTA_USERMODE_A", VOLTA_USERMODE_A),
        ("HOPPER_USERMODE_A", HOPPER_USERMODE_A),
        ("BLACKWELL_USERMODE_A", BLACKWELL_USERMODE_A),
    ];

    /// Bytes to map (NVC361_NV_USERMODE__SIZE).
    pub const SIZE: u64 = 0x1_0000;

    methods! {
        /// PTIMER nanoseconds, low part. Read TIME_1, TIME_0, TIME_1 and
        /// retry if TIME_1 moved.
        TIME_0 @ 0x80 { NSEC: 31:5 }
        /// PTIMER nanoseconds bits 60:32.
        TIME_1 @ 0x84 { NSEC: 28:0 }
        /// Write-only doorbell: the channel's work-submit token from
        /// GET_WORK_SUBMIT_TOKEN. Its layout is the kernel driver's business
        /// (GB20x sets an extra bit), so the stack never builds one.
        NOTIFY_CHANNEL_PENDING @ 0x90 {}
    }
}

/// Host methods, executed by the PBDMA on any subchannel: channel (GPFIFO)
/// classes C56F, C86F, C96F and CA6F share these offsets; the fields are
/// C86F's (SEM_ADDR_HI grew from 8 bits in C56F to 25 in C86F and later).
pub mod host {
    use super::{Field, Method};

    pub const AMPERE_CHANNEL_GPFIFO_A: u32 = 0xC56F;
    pub const HOPPER_CHANNEL_GPFIFO_A: u32 = 0xC86F;
    pub const BLACKWELL_CHANNEL_GPFIFO_A: u32 = 0xC96F;
    pub const BLACKWELL_CHANNEL_GPFIFO_B: u32 = 0xCA6F;
    pub const CLASSES: &[(&str, u32)] = &[
        ("AMPERE_CHANNEL_GPFIFO_A", AMPERE_CHANNEL_GPFIFO_A),
        ("HOPPER_CHANNEL_GPFIFO_A", HOPPER_CHANNEL_GPFIFO_A),
        ("BLACKWELL_CHANNEL_GPFIFO_A", BLACKWELL_CHANNEL_GPFIFO_A),
        ("BLACKWELL_CHANNEL_GPFIFO_B", BLACKWELL_CHANNEL_GPFIFO_B),
    ];

    methods! {
        /// Binds a class to the subchannel's engine. It checks the engine
        /// supports the class; it does not select one.
        SET_OBJECT @ 0x000 {
            NVCLASS: 15:0,
            ENGINE: 20:16,
        }
        NOP @ 0x008 { HANDLE: 31:0 }
        /// Raises the non-stall interrupt (an OS event) without stalling.
        NON_STALL_INTERRUPT @ 0x020 { HANDLE: 31:0 }
        /// MEM_OP_A..C set up the operation MEM_OP_D starts; D must be
        /// preceded by A..C.
        MEM_OP_A @ 0x028 {
            TLB_INVALIDATE_SYSMEMBAR: 11:11 = {
                TLB_INVALIDATE_SYSMEMBAR_DIS = 0,
                TLB_INVALIDATE_SYSMEMBAR_EN = 1,
            },
        }
        MEM_OP_B @ 0x02C {}
        MEM_OP_C @ 0x030 {
            MEMBAR_TYPE: 2:0 = {
                MEMBAR_TYPE_SYS_MEMBAR = 0,
                MEMBAR_TYPE_MEMBAR = 1,
            },
        }
        MEM_OP_D @ 0x034 {
            OPERATION: 31:27 = {
                OPERATION_MEMBAR = 5,
                OPERATION_MMU_TLB_INVALIDATE = 9,
                OPERATION_L2_PEERMEM_INVALIDATE = 0xD,
                OPERATION_L2_SYSMEM_INVALIDATE = 0xE,
                OPERATION_L2_FLUSH_DIRTY = 0x10,
            },
        }
        /// Shows up in USERD Reference once Host has processed it.
        SET_REFERENCE @ 0x050 { COUNT: 31:0 }
        /// Semaphore address bits 31:2 (bits 1:0 are ignored, so the whole
        /// low address may be written).
        SEM_ADDR_LO @ 0x05C { OFFSET: 31:2 }
        /// Semaphore address bits 56:32.
        SEM_ADDR_HI @ 0x060 { OFFSET: 24:0 }
        SEM_PAYLOAD_LO @ 0x064 { PAYLOAD: 31:0 }
        SEM_PAYLOAD_HI @ 0x068 { PAYLOAD: 31:0 }
        /// Runs the semaphore operation on SEM_ADDR with SEM_PAYLOAD
        /// (reference/submission.md 6.1). RELEASE_WFI EN waits for the engine
        /// that last received methods to idle and sysmembars before writing;
        /// a release with timestamp writes 16 bytes (payload, then PTIMER ns
        /// at +8).
        SEM_EXECUTE @ 0x06C {
            OPERATION: 2:0 = {
                OPERATION_ACQUIRE = 0,
                OPERATION_RELEASE = 1,
                OPERATION_ACQ_STRICT_GEQ = 2,
                OPERATION_ACQ_CIRC_GEQ = 3,
                OPERATION_ACQ_AND = 4,
                OPERATION_ACQ_NOR = 5,
                OPERATION_REDUCTION = 6,
            },
            ACQUIRE_SWITCH_TSG: 12:12 = {
                ACQUIRE_SWITCH_TSG_DIS = 0,
                ACQUIRE_SWITCH_TSG_EN = 1,
            },
            RELEASE_WFI: 20:20 = {
                RELEASE_WFI_DIS = 0,
                RELEASE_WFI_EN = 1,
            },
            PAYLOAD_SIZE: 24:24 = {
                PAYLOAD_SIZE_32BIT = 0,
                PAYLOAD_SIZE_64BIT = 1,
            },
            RELEASE_TIMESTAMP: 25:25 = {
                RELEASE_TIMESTAMP_DIS = 0,
                RELEASE_TIMESTAMP_EN = 1,
            },
            REDUCTION: 30:27 = {
                REDUCTION_IMIN = 0,
                REDUCTION_IMAX = 1,
                REDUCTION_IXOR = 2,
                REDUCTION_IAND = 3,
                REDUCTION_IOR = 4,
                REDUCTION_IADD = 5,
                REDUCTION_INC = 6,
                REDUCTION_DEC = 7,
            },
            REDUCTION_FORMAT: 31:31 = {
                REDUCTION_FORMAT_SIGNED = 0,
                REDUCTION_FORMAT_UNSIGNED = 1,
            },
        }
        /// Waits for the engine to idle.
        WFI @ 0x078 {
            SCOPE: 0:0 = {
                SCOPE_CURRENT_VEID = 0,
                SCOPE_ALL = 1,
            },
        }
    }
}

/// Compute-class methods. Offsets and fields are HOPPER_COMPUTE_A's (CBC0);
/// BLACKWELL_COMPUTE_A/B (CDC0/CEC0) declare the same for every method here
/// (open-gpu-doc clcdc0.h, clcec0.h). Against Ampere's C6C0 (the oracle's
/// compute class) the offsets are equal and five fields grew: the 57-bit
/// address uppers of SET_SHADER_LOCAL_MEMORY_A, OFFSET_OUT_UPPER and
/// SET_REPORT_SEMAPHORE_A, SET_INLINE_QMD_ADDRESS_A (9-bit upper plus
/// INLINE_SIZE), and NON_THROTTLED_C's TPC-GPC counts; the 64-bit report
/// semaphore (0x158..0x168) and PCAS2_B's SELECT / OFFSET_MINUS_ONE exist
/// from C7C0 on.
pub mod compute {
    use super::{Field, Method};

    pub const AMPERE_COMPUTE_A: u32 = 0xC6C0;
    pub const AMPERE_COMPUTE_B: u32 = 0xC7C0;
    pub const ADA_COMPUTE_A: u32 = 0xC9C0;
    pub const HOPPER_COMPUTE_A: u32 = 0xCBC0;
    pub const BLACKWELL_COMPUTE_A: u32 = 0xCDC0;
    pub const BLACKWELL_COMPUTE_B: u32 = 0xCEC0;
    pub const CLASSES: &[(&str, u32)] = &[
        ("AMPERE_COMPUTE_A", AMPERE_COMPUTE_A),
        ("AMPERE_COMPUTE_B", AMPERE_COMPUTE_B),
        ("ADA_COMPUTE_A", ADA_COMPUTE_A),
        ("HOPPER_COMPUTE_A", HOPPER_COMPUTE_A),
        ("BLACKWELL_COMPUTE_A", BLACKWELL_COMPUTE_A),
        ("BLACKWELL_COMPUTE_B", BLACKWELL_COMPUTE_B),
    ];

    /// LOAD_INLINE_QMD_DATA(i): the i-th QMD dword of an inline QMD.
    pub const fn load_inline_qmd_data(i: u32) -> u32 {
        LOAD_INLINE_QMD_DATA::BYTE_OFFSET + 4 * i
    }

    methods! {
        SET_OBJECT @ 0x000 {
            CLASS_ID: 15:0,
            ENGINE_ID: 20:16,
        }
        NO_OPERATION @ 0x100 { V: 31:0 }
        WAIT_FOR_IDLE @ 0x110 { V: 31:0 }
        /// 64-bit report semaphore (C7C0 and later), reference 6.2.
        SET_REPORT_SEMAPHORE_PAYLOAD_LOWER @ 0x158 { PAYLOAD_LOWER: 31:0 }
        SET_REPORT_SEMAPHORE_PAYLOAD_UPPER @ 0x15C { PAYLOAD_UPPER: 31:0 }
        SET_REPORT_SEMAPHORE_ADDRESS_LOWER @ 0x160 { LOWER: 31:0 }
        SET_REPORT_SEMAPHORE_ADDRESS_UPPER @ 0x164 { UPPER: 24:0 }
        REPORT_SEMAPHORE_EXECUTE @ 0x168 {
            OPERATION: 1:0 = {
                OPERATION_RELEASE = 0,
                OPERATION_ACQUIRE = 1,
                OPERATION_REPORT_ONLY = 2,
                OPERATION_TRAP = 3,
            },
            AWAKEN_ENABLE: 2:2,
            STRUCTURE_SIZE: 4:3 = {
                STRUCTURE_SIZE_SEMAPHORE_FOUR_WORDS = 0,
                STRUCTURE_SIZE_SEMAPHORE_ONE_WORD = 1,
                STRUCTURE_SIZE_SEMAPHORE_TWO_WORDS = 2,
            },
            FLUSH_DISABLE: 5:5,
            REDUCTION_ENABLE: 6:6,
            REDUCTION_OP: 9:7,
            REDUCTION_FORMAT: 11:10 = {
                REDUCTION_FORMAT_UNSIGNED = 0,
                REDUCTION_FORMAT_SIGNED = 1,
            },
            PAYLOAD_SIZE64: 12:12,
            TRAP_TYPE: 14:13,
        }
        /// Inline-to-memory (I2M): LINE_LENGTH_IN bytes per line.
        LINE_LENGTH_IN @ 0x180 { VALUE: 31:0 }
        LINE_COUNT @ 0x184 { VALUE: 31:0 }
        /// I2M destination VA bits 56:32.
        OFFSET_OUT_UPPER @ 0x188 { VALUE: 24:0 }
        OFFSET_OUT @ 0x18C { VALUE: 31:0 }
        PITCH_OUT @ 0x190 { VALUE: 31:0 }
        /// Starts an I2M transfer; the data follows as a non-incrementing
        /// LOAD_INLINE_DATA stream. CUDA writes 0x41 (pitch, no sysmembar).
        LAUNCH_DMA @ 0x1B0 {
            DST_MEMORY_LAYOUT: 0:0 = {
                DST_MEMORY_LAYOUT_BLOCKLINEAR = 0,
                DST_MEMORY_LAYOUT_PITCH = 1,
            },
            REDUCTION_ENABLE: 1:1,
            REDUCTION_FORMAT: 3:2,
            COMPLETION_TYPE: 5:4 = {
                COMPLETION_TYPE_FLUSH_DISABLE = 0,
                COMPLETION_TYPE_FLUSH_ONLY = 1,
                COMPLETION_TYPE_RELEASE_SEMAPHORE = 2,
            },
            SYSMEMBAR_DISABLE: 6:6 = {
                SYSMEMBAR_DISABLE_FALSE = 0,
                SYSMEMBAR_DISABLE_TRUE = 1,
            },
            INTERRUPT_TYPE: 9:8,
            SEMAPHORE_STRUCT_SIZE: 12:12 = {
                SEMAPHORE_STRUCT_SIZE_FOUR_WORDS = 0,
                SEMAPHORE_STRUCT_SIZE_ONE_WORD = 1,
            },
            REDUCTION_OP: 15:13,
        }
        LOAD_INLINE_DATA @ 0x1B4 { V: 31:0 }
        /// Waits for idle, then invalidates.
        INVALIDATE_SHADER_CACHES @ 0x21C {
            INSTRUCTION: 0:0,
            LOCKS: 1:1,
            FLUSH_DATA: 2:2,
            DATA: 4:4,
            CONSTANT: 12:12,
        }
        /// Shared-memory window: 4 GiB aligned on Hopper and later.
        SET_SHADER_SHARED_MEMORY_WINDOW_A @ 0x2A0 { BASE_ADDRESS_UPPER: 16:0 }
        SET_SHADER_SHARED_MEMORY_WINDOW_B @ 0x2A4 { BASE_ADDRESS: 31:0 }
        /// QMD VA >> 8: the QMD is 256-byte aligned and below 2^40.
        SEND_PCAS_A @ 0x2B4 { QMD_ADDRESS_SHIFTED8: 31:0 }
        /// The Ampere-and-later launch trigger for the QMD named by
        /// SEND_PCAS_A. tinygrad sends PREFETCH_SCHEDULE, CUDA
        /// INVALIDATE_PREFETCH_COPY_SCHEDULE; both launch on the H200
        /// (reference/submission.md 5.1, 13.1).
        SEND_SIGNALING_PCAS2_B @ 0x2C0 {
            PCAS_ACTION: 3:0 = {
                PCAS_ACTION_NOP = 0,
                PCAS_ACTION_INVALIDATE = 1,
                PCAS_ACTION_SCHEDULE = 2,
                PCAS_ACTION_INVALIDATE_COPY_SCHEDULE = 3,
                PCAS_ACTION_INCREMENT_PUT = 6,
                PCAS_ACTION_DECREMENT_DEPENDENCE = 7,
                PCAS_ACTION_PREFETCH = 8,
                PCAS_ACTION_PREFETCH_SCHEDULE = 9,
                PCAS_ACTION_INVALIDATE_PREFETCH_COPY_SCHEDULE = 0xA,
                PCAS_ACTION_INVALIDATE_PREFETCH_COPY_FORCE_REQUIRE_SCHEDULING = 0xB,
                PCAS_ACTION_INCREMENT_DEPENDENCE = 0xC,
                PCAS_ACTION_INCREMENT_CWD_REF_COUNTER = 0xD,
            },
            SELECT: 13:8,
            OFFSET_MINUS_ONE: 23:14,
        }
        /// Per-TPC local-memory bytes (a 32 KiB multiple). It must cover the
        /// QMD's per-thread local size or the H200 raises Xid 13 SKEDCHECK05
        /// (reference/submission.md 13.1).
        SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A @ 0x2E4 { SIZE_UPPER: 7:0 }
        SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B @ 0x2E8 { SIZE_LOWER: 31:0 }
        /// May be left unset on the H200; tinygrad writes 0xFF, CUDA 0x42.
        SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C @ 0x2EC {
            MAX_SM_COUNT: 8:0,
            MAX_PLURAL_TPC_GPC_COUNT: 23:16,
            MAX_SINGLETON_TPC_GPC_COUNT: 31:24,
        }
        SET_INLINE_QMD_ADDRESS_A @ 0x318 {
            QMD_ADDRESS_SHIFTED8_UPPER: 8:0,
            INLINE_SIZE: 30:30 = {
                INLINE_SIZE_INLINE_256 = 0,
                INLINE_SIZE_INLINE_384 = 1,
            },
        }
        SET_INLINE_QMD_ADDRESS_B @ 0x31C { QMD_ADDRESS_SHIFTED8_LOWER: 31:0 }
        /// Indexed: dword i at [`load_inline_qmd_data`]`(i)`.
        LOAD_INLINE_QMD_DATA @ 0x320 { V: 31:0 }
        /// Local-memory backing store base.
        SET_SHADER_LOCAL_MEMORY_A @ 0x790 { ADDRESS_UPPER: 24:0 }
        SET_SHADER_LOCAL_MEMORY_B @ 0x794 { ADDRESS_LOWER: 31:0 }
        SET_SHADER_LOCAL_MEMORY_WINDOW_A @ 0x7B0 { BASE_ADDRESS_UPPER: 16:0 }
        SET_SHADER_LOCAL_MEMORY_WINDOW_B @ 0x7B4 { BASE_ADDRESS: 31:0 }
        /// Before launching code or reading constants just written:
        /// tinygrad sends INSTRUCTION | GLOBAL_DATA | CONSTANT (0x1011).
        INVALIDATE_SHADER_CACHES_NO_WFI @ 0x1698 {
            INSTRUCTION: 0:0,
            GLOBAL_DATA: 4:4,
            CONSTANT: 12:12,
        }
        /// Report semaphore, written when the compute pipe reaches it; CUDA
        /// ends every segment with one as its channel fence.
        SET_REPORT_SEMAPHORE_A @ 0x1B00 { OFFSET_UPPER: 24:0 }
        SET_REPORT_SEMAPHORE_B @ 0x1B04 { OFFSET_LOWER: 31:0 }
        SET_REPORT_SEMAPHORE_C @ 0x1B08 { PAYLOAD: 31:0 }
        SET_REPORT_SEMAPHORE_D @ 0x1B0C {
            OPERATION: 1:0 = {
                OPERATION_RELEASE = 0,
                OPERATION_TRAP = 3,
            },
            FLUSH_DISABLE: 2:2,
            REDUCTION_ENABLE: 3:3,
            REDUCTION_OP: 11:9,
            REDUCTION_FORMAT: 18:17 = {
                REDUCTION_FORMAT_UNSIGNED_32 = 0,
                REDUCTION_FORMAT_SIGNED_32 = 1,
            },
            CONDITIONAL_TRAP: 19:19,
            AWAKEN_ENABLE: 20:20,
            STRUCTURE_SIZE: 28:28 = {
                STRUCTURE_SIZE_FOUR_WORDS = 0,
                STRUCTURE_SIZE_ONE_WORD = 1,
            },
        }
    }
}

/// Copy-engine methods. Offsets and fields are HOPPER_DMA_COPY_A's (C8B5)
/// and hold unchanged for BLACKWELL_DMA_COPY_A/B (C9B5/CAB5, open-gpu-doc
/// clc9b5.h, clcab5.h). Left out on purpose: LAUNCH_DMA FORCE_RMWDISABLE
/// (gone in C9B5/CAB5), VPRMODE (one bit here, two in C6B5) and CAB5's
/// DATA_TRANSFER_TYPE PREFETCH. Against Ampere's C6B5 (the oracle's copy
/// class) the three address uppers grew from 17 to 25 bits, and
/// SET_SEMAPHORE_PAYLOAD_UPPER, COPY_TYPE, MEMORY_SCRUB_ENABLE and
/// SEMAPHORE_PAYLOAD_SIZE are new.
pub mod copy {
    use super::{Field, Method};

    pub const HOPPER_DMA_COPY_A: u32 = 0xC8B5;
    pub const BLACKWELL_DMA_COPY_A: u32 = 0xC9B5;
    pub const BLACKWELL_DMA_COPY_B: u32 = 0xCAB5;
    pub const CLASSES: &[(&str, u32)] = &[
        ("HOPPER_DMA_COPY_A", HOPPER_DMA_COPY_A),
        ("BLACKWELL_DMA_COPY_A", BLACKWELL_DMA_COPY_A),
        ("BLACKWELL_DMA_COPY_B", BLACKWELL_DMA_COPY_B),
    ];

    methods! {
        NOP @ 0x100 { PARAMETER: 31:0 }
        /// Semaphore VA bits 56:32.
        SET_SEMAPHORE_A @ 0x240 { UPPER: 24:0 }
        SET_SEMAPHORE_B @ 0x244 { LOWER: 31:0 }
        SET_SEMAPHORE_PAYLOAD @ 0x248 { PAYLOAD: 31:0 }
        /// Payload bits 63:32, used with SEMAPHORE_PAYLOAD_SIZE TWO_WORD.
        SET_SEMAPHORE_PAYLOAD_UPPER @ 0x24C { PAYLOAD: 31:0 }
        /// Only for physical addressing (SRC_TYPE / DST_TYPE PHYSICAL).
        SET_SRC_PHYS_MODE @ 0x260 {
            TARGET: 1:0 = {
                TARGET_LOCAL_FB = 0,
                TARGET_COHERENT_SYSMEM = 1,
                TARGET_NONCOHERENT_SYSMEM = 2,
                TARGET_PEERMEM = 3,
            },
            BASIC_KIND: 5:2,
            PEER_ID: 8:6,
            FLA: 9:9,
        }
        SET_DST_PHYS_MODE @ 0x264 {
            TARGET: 1:0 = {
                TARGET_LOCAL_FB = 0,
                TARGET_COHERENT_SYSMEM = 1,
                TARGET_NONCOHERENT_SYSMEM = 2,
                TARGET_PEERMEM = 3,
            },
            BASIC_KIND: 5:2,
            PEER_ID: 8:6,
            FLA: 9:9,
        }
        /// Starts a transfer and/or a semaphore release (reference 9.2):
        /// tinygrad's 1-D copy is 0x182, its CE release 0x14.
        LAUNCH_DMA @ 0x300 {
            DATA_TRANSFER_TYPE: 1:0 = {
                DATA_TRANSFER_TYPE_NONE = 0,
                DATA_TRANSFER_TYPE_PIPELINED = 1,
                DATA_TRANSFER_TYPE_NON_PIPELINED = 2,
            },
            FLUSH_ENABLE: 2:2 = {
                FLUSH_ENABLE_FALSE = 0,
                FLUSH_ENABLE_TRUE = 1,
            },
            SEMAPHORE_TYPE: 4:3 = {
                SEMAPHORE_TYPE_NONE = 0,
                SEMAPHORE_TYPE_RELEASE_ONE_WORD_SEMAPHORE = 1,
                SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE = 2,
                SEMAPHORE_TYPE_RELEASE_CONDITIONAL_INTR_SEMAPHORE = 3,
            },
            INTERRUPT_TYPE: 6:5 = {
                INTERRUPT_TYPE_NONE = 0,
                INTERRUPT_TYPE_BLOCKING = 1,
                INTERRUPT_TYPE_NON_BLOCKING = 2,
            },
            SRC_MEMORY_LAYOUT: 7:7 = {
                SRC_MEMORY_LAYOUT_BLOCKLINEAR = 0,
                SRC_MEMORY_LAYOUT_PITCH = 1,
            },
            DST_MEMORY_LAYOUT: 8:8 = {
                DST_MEMORY_LAYOUT_BLOCKLINEAR = 0,
                DST_MEMORY_LAYOUT_PITCH = 1,
            },
            MULTI_LINE_ENABLE: 9:9 = {
                MULTI_LINE_ENABLE_FALSE = 0,
                MULTI_LINE_ENABLE_TRUE = 1,
            },
            REMAP_ENABLE: 10:10 = {
                REMAP_ENABLE_FALSE = 0,
                REMAP_ENABLE_TRUE = 1,
            },
            SRC_TYPE: 12:12 = {
                SRC_TYPE_VIRTUAL = 0,
                SRC_TYPE_PHYSICAL = 1,
            },
            DST_TYPE: 13:13 = {
                DST_TYPE_VIRTUAL = 0,
                DST_TYPE_PHYSICAL = 1,
            },
            SEMAPHORE_REDUCTION: 17:14 = {
                SEMAPHORE_REDUCTION_IMIN = 0,
                SEMAPHORE_REDUCTION_IMAX = 1,
                SEMAPHORE_REDUCTION_IXOR = 2,
                SEMAPHORE_REDUCTION_IAND = 3,
                SEMAPHORE_REDUCTION_IOR = 4,
                SEMAPHORE_REDUCTION_IADD = 5,
                SEMAPHORE_REDUCTION_INC = 6,
                SEMAPHORE_REDUCTION_DEC = 7,
                SEMAPHORE_REDUCTION_FADD = 0xA,
                SEMAPHORE_REDUCTION_FMIN = 0xB,
                SEMAPHORE_REDUCTION_FMAX = 0xC,
            },
            SEMAPHORE_REDUCTION_SIGN: 18:18 = {
                SEMAPHORE_REDUCTION_SIGN_SIGNED = 0,
                SEMAPHORE_REDUCTION_SIGN_UNSIGNED = 1,
            },
            SEMAPHORE_REDUCTION_ENABLE: 19:19,
            COPY_TYPE: 21:20 = {
                COPY_TYPE_DEFAULT = 0,
                COPY_TYPE_SECURE = 1,
                COPY_TYPE_NONPROT2NONPROT = 2,
            },
            /// Fast scrubber: physical vidmem only.
            MEMORY_SCRUB_ENABLE: 23:23,
            FLUSH_TYPE: 25:25 = {
                FLUSH_TYPE_SYS = 0,
                FLUSH_TYPE_GL = 1,
            },
            DISABLE_PLC: 26:26,
            SEMAPHORE_PAYLOAD_SIZE: 27:27 = {
                SEMAPHORE_PAYLOAD_SIZE_ONE_WORD = 0,
                SEMAPHORE_PAYLOAD_SIZE_TWO_WORD = 1,
            },
        }
        /// Source VA bits 56:32.
        OFFSET_IN_UPPER @ 0x400 { UPPER: 24:0 }
        OFFSET_IN_LOWER @ 0x404 { VALUE: 31:0 }
        OFFSET_OUT_UPPER @ 0x408 { UPPER: 24:0 }
        OFFSET_OUT_LOWER @ 0x40C { VALUE: 31:0 }
        PITCH_IN @ 0x410 { VALUE: 31:0 }
        PITCH_OUT @ 0x414 { VALUE: 31:0 }
        /// Bytes per line; elements per line when REMAP_ENABLE (fills).
        LINE_LENGTH_IN @ 0x418 { VALUE: 31:0 }
        /// Lines, with MULTI_LINE_ENABLE.
        LINE_COUNT @ 0x41C { VALUE: 31:0 }
        /// Fill constants: an 8-byte fill puts the low word in A and the high
        /// word in B; 4- and 1-byte fills use B (UVM's memsets, reference 9.3).
        SET_REMAP_CONST_A @ 0x700 { V: 31:0 }
        SET_REMAP_CONST_B @ 0x704 { V: 31:0 }
        SET_REMAP_COMPONENTS @ 0x708 {
            DST_X: 2:0 = {
                DST_X_SRC_X = 0,
                DST_X_SRC_Y = 1,
                DST_X_SRC_Z = 2,
                DST_X_SRC_W = 3,
                DST_X_CONST_A = 4,
                DST_X_CONST_B = 5,
                DST_X_NO_WRITE = 6,
            },
            DST_Y: 6:4 = {
                DST_Y_SRC_X = 0,
                DST_Y_SRC_Y = 1,
                DST_Y_SRC_Z = 2,
                DST_Y_SRC_W = 3,
                DST_Y_CONST_A = 4,
                DST_Y_CONST_B = 5,
                DST_Y_NO_WRITE = 6,
            },
            DST_Z: 10:8 = {
                DST_Z_SRC_X = 0,
                DST_Z_SRC_Y = 1,
                DST_Z_SRC_Z = 2,
                DST_Z_SRC_W = 3,
                DST_Z_CONST_A = 4,
                DST_Z_CONST_B = 5,
                DST_Z_NO_WRITE = 6,
            },
            DST_W: 14:12 = {
                DST_W_SRC_X = 0,
                DST_W_SRC_Y = 1,
                DST_W_SRC_Z = 2,
                DST_W_SRC_W = 3,
                DST_W_CONST_A = 4,
                DST_W_CONST_B = 5,
                DST_W_NO_WRITE = 6,
            },
            COMPONENT_SIZE: 17:16 = {
                COMPONENT_SIZE_ONE = 0,
                COMPONENT_SIZE_TWO = 1,
                COMPONENT_SIZE_THREE = 2,
                COMPONENT_SIZE_FOUR = 3,
            },
            NUM_SRC_COMPONENTS: 21:20 = {
                NUM_SRC_COMPONENTS_ONE = 0,
                NUM_SRC_COMPONENTS_TWO = 1,
                NUM_SRC_COMPONENTS_THREE = 2,
                NUM_SRC_COMPONENTS_FOUR = 3,
            },
            NUM_DST_COMPONENTS: 25:24 = {
                NUM_DST_COMPONENTS_ONE = 0,
                NUM_DST_COMPONENTS_TWO = 1,
                NUM_DST_COMPONENTS_THREE = 2,
                NUM_DST_COMPONENTS_FOUR = 3,
            },
        }
    }
}
