//! The record format of `.nv.info`, `.nv.info.<kernel>` and `.nv.compat`
//! sections, and the attribute codes the loader reads. Codes and layouts
//! follow reference/cuda-binary-and-runtime-abi.md section 2.4 (checked
//! there against cuobjdump's decoding); attributes the loader does not know
//! are kept, with their raw bytes, and reported.

/// `u8 format, u8 attribute` then a value whose size the format decides.
pub const EIFMT_NVAL: u8 = 1;
pub const EIFMT_BVAL: u8 = 2;
pub const EIFMT_HVAL: u8 = 3;
pub const EIFMT_SVAL: u8 = 4;

pub const EIATTR_MAX_THREADS: u8 = 0x05;
pub const EIATTR_PARAM_CBANK: u8 = 0x0a;
pub const EIATTR_EXTERNS: u8 = 0x0f;
pub const EIATTR_REQNTID: u8 = 0x10;
pub const EIATTR_FRAME_SIZE: u8 = 0x11;
pub const EIATTR_MIN_STACK_SIZE: u8 = 0x12;
pub const EIATTR_KPARAM_INFO: u8 = 0x17;
pub const EIATTR_CBANK_PARAM_SIZE: u8 = 0x19;
pub const EIATTR_MAXREG_COUNT: u8 = 0x1b;
pub const EIATTR_EXIT_INSTR_OFFSETS: u8 = 0x1c;
pub const EIATTR_CRS_STACK_SIZE: u8 = 0x1e;
pub const EIATTR_NEED_CNP_WRAPPER: u8 = 0x1f;
pub const EIATTR_NEED_CNP_PATCH: u8 = 0x20;
pub const EIATTR_MAX_STACK_SIZE: u8 = 0x23;
pub const EIATTR_COOP_GROUP_INSTR_OFFSETS: u8 = 0x28;
pub const EIATTR_REGCOUNT: u8 = 0x2f;
pub const EIATTR_CTA_PER_CLUSTER: u8 = 0x3d;
pub const EIATTR_KPARAM_INFO_V2: u8 = 0x45;
pub const EIATTR_NUM_BARRIERS: u8 = 0x4c;
pub const EIATTR_PREEXIT_USED: u8 = 0x6d;

/// `.nv.compat`: 1 on `sm_XXa` cubins, the only reliable in-cubin marker.
pub const EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET: u8 = 0x09;

/// KPARAM_INFO's size field: bits 18..31 of the third word.
pub const KPARAM_INFO_SIZE_SHIFT: u32 = 18;
/// KPARAM_INFO's pointee state space: bits 8..11 of the third word.
pub const KPARAM_INFO_SPACE_SHIFT: u32 = 8;
pub const KPARAM_INFO_SPACE_MASK: u32 = 0xf;
/// KPARAM_INFO's log2 pointee alignment: bits 0..7 of the third word.
pub const KPARAM_INFO_ALIGN_MASK: u32 = 0xff;

/// Names for the attribute codes cuobjdump decodes, for reports.
pub fn name(code: u8) -> Option<&'static str> {
    Some(match code {
        0x04 => "CTAIDZ_USED",
        EIATTR_MAX_THREADS => "MAX_THREADS",
        EIATTR_PARAM_CBANK => "PARAM_CBANK",
        EIATTR_EXTERNS => "EXTERNS",
        EIATTR_REQNTID => "REQNTID",
        EIATTR_FRAME_SIZE => "FRAME_SIZE",
        EIATTR_MIN_STACK_SIZE => "MIN_STACK_SIZE",
        0x15 => "BINDLESS_TEXTURE_BANK",
        0x16 => "BINDLESS_SURFACE_BANK",
        EIATTR_KPARAM_INFO => "KPARAM_INFO",
        EIATTR_CBANK_PARAM_SIZE => "CBANK_PARAM_SIZE",
        EIATTR_MAXREG_COUNT => "MAXREG_COUNT",
        EIATTR_EXIT_INSTR_OFFSETS => "EXIT_INSTR_OFFSETS",
        0x1d => "S2RCTAID_INSTR_OFFSETS",
        EIATTR_CRS_STACK_SIZE => "CRS_STACK_SIZE",
        EIATTR_NEED_CNP_WRAPPER => "NEED_CNP_WRAPPER",
        EIATTR_NEED_CNP_PATCH => "NEED_CNP_PATCH",
        0x21 => "EXPLICIT_CACHING",
        EIATTR_MAX_STACK_SIZE => "MAX_STACK_SIZE",
        0x25 => "LD_CACHEMOD_INSTR_OFFSETS",
        0x27 => "ATOM_SYS_INSTR_OFFSETS",
        EIATTR_COOP_GROUP_INSTR_OFFSETS => "COOP_GROUP_INSTR_OFFSETS",
        0x29 => "COOP_GROUP_MASK_REGIDS",
        0x2b => "WMMA_USED",
        EIATTR_REGCOUNT => "REGCOUNT",
        0x31 => "INT_WARP_WIDE_INSTR_OFFSETS",
        0x34 => "INDIRECT_BRANCH_TARGETS",
        0x36 => "SW_WAR",
        0x37 => "CUDA_API_VERSION",
        EIATTR_CTA_PER_CLUSTER => "CTA_PER_CLUSTER",
        0x3e => "EXPLICIT_CLUSTER",
        EIATTR_KPARAM_INFO_V2 => "KPARAM_INFO_V2",
        0x46 => "SYSCALL_OFFSETS",
        0x4a => "VRC_CTA_INIT_COUNT",
        EIATTR_NUM_BARRIERS => "NUM_BARRIERS",
        0x50 => "SPARSE_MMA_MASK",
        0x66 => "LANGUAGE",
        0x6b => "NVSAL_SW_WAR",
        EIATTR_PREEXIT_USED => "PREEXIT_USED",
        _ => return None,
    })
}

/// One record as stored: the format, the code, and the value bytes (for
/// NVAL empty, BVAL one byte, HVAL two bytes, SVAL the payload).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    pub format: u8,
    pub code: u8,
    pub value: Vec<u8>,
}

impl Record {
    pub fn name(&self) -> Option<&'static str> {
        name(self.code)
    }

    /// The `i`th little-endian u32 of the value.
    pub fn u32_at(&self, i: usize) -> Option<u32> {
        let b = self.value.get(i * 4..i * 4 + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The value of a BVAL or HVAL record.
    pub fn small(&self) -> Option<u32> {
        match (self.format, self.value.as_slice()) {
            (EIFMT_BVAL, [b]) => Some(u32::from(*b)),
            (EIFMT_HVAL, [a, b]) => Some(u32::from(u16::from_le_bytes([*a, *b]))),
            _ => None,
        }
    }
}

/// Why a record list could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    pub offset: usize,
    pub why: &'static str,
}

/// Split a section's bytes into records; records are packed back to back
/// with no terminator.
pub fn parse_records(bytes: &[u8]) -> Result<Vec<Record>, RecordError> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let head = bytes.get(at..at + 2).ok_or(RecordError {
            offset: at,
            why: "record header cut short",
        })?;
        let (format, code) = (head[0], head[1]);
        let (value_at, len) = match format {
            EIFMT_NVAL => (at + 2, 0usize),
            EIFMT_BVAL => (at + 2, 1),
            EIFMT_HVAL => (at + 2, 2),
            EIFMT_SVAL => {
                let n = bytes.get(at + 2..at + 4).ok_or(RecordError {
                    offset: at,
                    why: "SVAL size cut short",
                })?;
                (at + 4, usize::from(u16::from_le_bytes([n[0], n[1]])))
            }
            _ => {
                return Err(RecordError {
                    offset: at,
                    why: "unknown record format",
                })
            }
        };
        let value = bytes.get(value_at..value_at + len).ok_or(RecordError {
            offset: at,
            why: "record value runs past the section",
        })?;
        out.push(Record {
            format,
            code,
            value: value.to_vec(),
        });
        // NVAL, BVAL and HVAL records are 4 bytes in all.
        at = if format == EIFMT_SVAL {
            value_at + len
        } else {
            at + 4
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_every_format() {
        let bytes = [
            EIFMT_NVAL,
            0x2b,
            0,
            0, // WMMA_USED
            EIFMT_BVAL,
            EIATTR_NUM_BARRIERS,
            1,
            0, // NUM_BARRIERS 1
            EIFMT_HVAL,
            EIATTR_MAXREG_COUNT,
            0xff,
            0, // MAXREG 255
            EIFMT_SVAL,
            EIATTR_REGCOUNT,
            8,
            0,
            10,
            0,
            0,
            0,
            24,
            0,
            0,
            0, // sym 10: 24 regs
        ];
        let r = parse_records(&bytes).unwrap();
        assert_eq!(r.len(), 4);
        assert_eq!(r[0].value, Vec::<u8>::new());
        assert_eq!(r[1].small(), Some(1));
        assert_eq!(r[2].small(), Some(0xff));
        assert_eq!((r[3].u32_at(0), r[3].u32_at(1)), (Some(10), Some(24)));
        assert_eq!(r[3].name(), Some("REGCOUNT"));
    }

    #[test]
    fn truncation_and_bad_formats_are_errors() {
        assert!(parse_records(&[EIFMT_SVAL, 0x2f, 8, 0, 1, 2]).is_err());
        assert!(parse_records(&[EIFMT_SVAL, 0x2f]).is_err());
        assert!(parse_records(&[9, 0x2f, 0, 0]).is_err());
        assert!(parse_records(&[EIFMT_BVAL]).is_err());
    }
}
