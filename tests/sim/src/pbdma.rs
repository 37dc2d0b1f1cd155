//! The host's side of a channel (its PBDMA): a push-buffer segment's
//! method headers, of every kind, turned into method calls on their
//! subchannels; and the calls turned into what the engines do, by the
//! class bound on each subchannel (SET_OBJECT): host semaphores, the copy
//! engine's LAUNCH_DMA and its semaphore release, the compute engine's
//! inline uploads and QMD launches. Which memory the addresses name, and
//! whether the MMU lets them through, is the executor's to decide.

use macuda_hw::methods::{compute, copy, host};
use macuda_hw::push::{MethodHeader, MethodKind};
use macuda_hw::qmd::QmdVersion;
use std::collections::HashMap;

/// Methods below this go to the host itself, on any subchannel.
pub const HOST_METHODS_END: u32 = 0x100;
/// Subchannels a channel has.
pub const SUBCHANNELS: usize = 8;

/// One method as the PBDMA dispatches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodCall {
    pub subchannel: u8,
    pub method: u32,
    pub data: u32,
}

/// Why a segment could not be read to its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    #[error("word {at} ({word:#010x}) is not a method header: {why}")]
    BadHeader { at: usize, word: u32, why: String },
    #[error("the header at word {at} takes {wants} data words; the segment has {has} left")]
    Truncated { at: usize, wants: usize, has: usize },
}

/// The method calls of one segment, in order; an END_PB_SEGMENT header
/// ends it early.
///
/// # Errors
/// A word where a header must be that is none, or a header whose data
/// runs past the segment.
pub fn decode(words: &[u32]) -> Result<Vec<MethodCall>, PushError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let h = MethodHeader::decode(words[i]).map_err(|e| PushError::BadHeader {
            at: i,
            word: words[i],
            why: e.to_string(),
        })?;
        let at = i;
        i += 1;
        let sc = h.subchannel();
        match h.kind() {
            MethodKind::EndSegment => break,
            MethodKind::Immediate => {
                out.push(MethodCall {
                    subchannel: sc,
                    method: h.method(),
                    data: u32::from(h.count_or_data()),
                });
                continue;
            }
            _ => {}
        }
        let n = h.data_dwords();
        let data = words.get(i..i + n).ok_or(PushError::Truncated {
            at,
            wants: n,
            has: words.len() - i,
        })?;
        for (k, &w) in data.iter().enumerate() {
            let step = match h.kind() {
                MethodKind::Incrementing => 4 * k as u32,
                MethodKind::IncrementOnce => 4 * u32::from(k > 0),
                _ => 0,
            };
            out.push(MethodCall {
                subchannel: sc,
                method: h.method() + step,
                data: w,
            });
        }
        i += n;
    }
    Ok(out)
}

/// How a host acquire compares the semaphore with its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireOp {
    Equal,
    StrictGeq,
    /// `(sem - payload) as signed >= 0` in the payload's width.
    CircularGeq,
    And,
    Nor,
}

impl AcquireOp {
    /// Whether `sem` satisfies the acquire of `payload` (`wide`: 64-bit).
    pub fn satisfied(self, sem: u64, payload: u64, wide: bool) -> bool {
        let (sem, payload) = if wide {
            (sem, payload)
        } else {
            (sem & u64::from(u32::MAX), payload & u64::from(u32::MAX))
        };
        match self {
            AcquireOp::Equal => sem == payload,
            AcquireOp::StrictGeq => sem >= payload,
            // CAST: the two's-complement difference, in the width used.
            AcquireOp::CircularGeq if wide => (sem.wrapping_sub(payload) as i64) >= 0,
            AcquireOp::CircularGeq => ((sem as u32).wrapping_sub(payload as u32) as i32) >= 0,
            AcquireOp::And => sem & payload != 0,
            AcquireOp::Nor => !(sem | payload) != 0,
        }
    }
}

/// What an engine does for a run of methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineStep {
    /// The channel waits until the semaphore satisfies the acquire.
    Acquire {
        address: u64,
        payload: u64,
        wide: bool,
        op: AcquireOp,
    },
    /// A semaphore write (`wide`: 64-bit payload), after the engine idles
    /// when `after_idle`, with the engine's clock at +8 when `stamped`.
    Release {
        address: u64,
        payload: u64,
        wide: bool,
        after_idle: bool,
        stamped: bool,
    },
    /// A copy-engine transfer of `lines` lines of `line_bytes`, or a fill
    /// of them with a 32-bit value.
    Copy {
        src: u64,
        dst: u64,
        line_bytes: u64,
        lines: u64,
        src_pitch: u64,
        dst_pitch: u64,
        fill: Option<u32>,
        /// Addresses are physical, not through the MMU.
        physical: bool,
    },
    /// Compute's inline-to-memory upload: `data` written at `dst`.
    InlineWrite { dst: u64, data: Vec<u8> },
    /// A QMD launched (SEND_PCAS with a signalling action).
    Launch {
        qmd_address: u64,
        version: QmdVersion,
    },
    /// The channel's shader local memory: bytes for each TPC
    /// (SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A/B).
    LocalMemory { per_tpc: u64 },
    /// A class bound on a subchannel.
    Bound { subchannel: u8, class: u32 },
    /// A method for a subchannel with nothing bound: what a real channel
    /// faults on.
    Unbound { subchannel: u8, method: u32 },
}

/// The role of a bound class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Compute(QmdVersion),
    Copy,
    Other,
}

fn role(class: u32) -> Role {
    if let Some(v) = QmdVersion::for_compute_class(class) {
        return Role::Compute(v);
    }
    if copy::CLASSES.iter().any(|(_, c)| *c == class) {
        return Role::Copy;
    }
    Role::Other
}

/// One channel's host state: the class on each subchannel and the last
/// value of every method, as the engines latch them.
#[derive(Debug, Default, Clone)]
pub struct Pbdma {
    bound: [Option<u32>; SUBCHANNELS],
    latched: HashMap<(u8, u32), u32>,
    /// An inline upload in progress: (destination, bytes left, bytes so far).
    inline: Option<(u64, usize, Vec<u8>)>,
}

impl Pbdma {
    /// A channel whose subchannels already hold these classes (a push
    /// buffer read without the prologue that bound them).
    pub fn with_bound(bindings: &[(u8, u32)]) -> Pbdma {
        let mut p = Pbdma::default();
        for &(sc, class) in bindings {
            if let Some(slot) = p.bound.get_mut(usize::from(sc)) {
                *slot = Some(class);
            }
        }
        p
    }

    fn reg(&self, sc: u8, method: u32) -> u64 {
        u64::from(self.latched.get(&(sc, method)).copied().unwrap_or(0))
    }

    fn wide(&self, sc: u8, hi: u32, lo: u32) -> u64 {
        self.reg(sc, hi) << 32 | self.reg(sc, lo)
    }

    /// The class bound on `subchannel`, if any.
    pub fn bound(&self, subchannel: u8) -> Option<u32> {
        self.bound.get(usize::from(subchannel)).copied().flatten()
    }

    /// What the engines do for `calls`, in order.
    pub fn execute(&mut self, calls: &[MethodCall]) -> Vec<EngineStep> {
        let mut out = Vec::new();
        for c in calls {
            let sc = c.subchannel;
            if c.method == host::SET_OBJECT::BYTE_OFFSET {
                let class = host::SET_OBJECT::NVCLASS.get(c.data);
                if let Some(slot) = self.bound.get_mut(usize::from(sc)) {
                    *slot = Some(class);
                }
                out.push(EngineStep::Bound {
                    subchannel: sc,
                    class,
                });
                continue;
            }
            if c.method < HOST_METHODS_END {
                // Host methods share one register file.
                self.latched.insert((0, c.method), c.data);
                if c.method == host::SEM_EXECUTE::BYTE_OFFSET {
                    out.push(self.semaphore(c.data));
                }
                continue;
            }
            self.latched.insert((sc, c.method), c.data);
            match self.bound(sc).map(role) {
                Some(Role::Compute(version)) => self.compute(sc, c, version, &mut out),
                Some(Role::Copy) => self.copy(sc, c, &mut out),
                // A class the sim does not play takes its methods unseen.
                Some(Role::Other) => {}
                None => out.push(EngineStep::Unbound {
                    subchannel: sc,
                    method: c.method,
                }),
            }
        }
        out
    }

    fn semaphore(&self, execute: u32) -> EngineStep {
        let address = self.wide(
            0,
            host::SEM_ADDR_HI::BYTE_OFFSET,
            host::SEM_ADDR_LO::BYTE_OFFSET,
        );
        let payload = self.wide(
            0,
            host::SEM_PAYLOAD_HI::BYTE_OFFSET,
            host::SEM_PAYLOAD_LO::BYTE_OFFSET,
        );
        let wide =
            host::SEM_EXECUTE::PAYLOAD_SIZE.get(execute) == host::SEM_EXECUTE::PAYLOAD_SIZE_64BIT;
        let payload = if wide {
            payload
        } else {
            payload & u64::from(u32::MAX)
        };
        let op = match host::SEM_EXECUTE::OPERATION.get(execute) {
            host::SEM_EXECUTE::OPERATION_RELEASE => {
                return EngineStep::Release {
                    address,
                    payload,
                    wide,
                    after_idle: host::SEM_EXECUTE::RELEASE_WFI.get(execute)
                        == host::SEM_EXECUTE::RELEASE_WFI_EN,
                    stamped: host::SEM_EXECUTE::RELEASE_TIMESTAMP.get(execute)
                        == host::SEM_EXECUTE::RELEASE_TIMESTAMP_EN,
                }
            }
            host::SEM_EXECUTE::OPERATION_ACQUIRE => AcquireOp::Equal,
            host::SEM_EXECUTE::OPERATION_ACQ_STRICT_GEQ => AcquireOp::StrictGeq,
            host::SEM_EXECUTE::OPERATION_ACQ_AND => AcquireOp::And,
            host::SEM_EXECUTE::OPERATION_ACQ_NOR => AcquireOp::Nor,
            _ => AcquireOp::CircularGeq,
        };
        EngineStep::Acquire {
            address,
            payload,
            wide,
            op,
        }
    }

    fn compute(&mut self, sc: u8, c: &MethodCall, version: QmdVersion, out: &mut Vec<EngineStep>) {
        match c.method {
            m if m == compute::LAUNCH_DMA::BYTE_OFFSET => {
                let dst = self.wide(
                    sc,
                    compute::OFFSET_OUT_UPPER::BYTE_OFFSET,
                    compute::OFFSET_OUT::BYTE_OFFSET,
                );
                let lines = self.reg(sc, compute::LINE_COUNT::BYTE_OFFSET).max(1);
                // CAST: an inline upload is far below 4 GiB.
                let len = (self.reg(sc, compute::LINE_LENGTH_IN::BYTE_OFFSET) * lines) as usize;
                // Capacity grows with the data that arrives, not with what a
                // header claims.
                self.inline = Some((dst, len, Vec::new()));
                if len == 0 {
                    self.inline = None;
                }
            }
            m if m == compute::LOAD_INLINE_DATA::BYTE_OFFSET => {
                let Some((dst, left, mut data)) = self.inline.take() else {
                    return;
                };
                let n = left.min(4);
                data.extend_from_slice(&c.data.to_le_bytes()[..n]);
                if left > n {
                    self.inline = Some((dst, left - n, data));
                } else {
                    out.push(EngineStep::InlineWrite { dst, data });
                }
            }
            m if m == compute::SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B::BYTE_OFFSET => {
                out.push(EngineStep::LocalMemory {
                    per_tpc: self.wide(
                        sc,
                        compute::SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A::BYTE_OFFSET,
                        compute::SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B::BYTE_OFFSET,
                    ),
                });
            }
            m if m == compute::SEND_SIGNALING_PCAS2_B::BYTE_OFFSET => {
                out.push(EngineStep::Launch {
                    qmd_address: self.reg(sc, compute::SEND_PCAS_A::BYTE_OFFSET) << 8,
                    version,
                });
            }
            _ => {}
        }
    }

    fn copy(&mut self, sc: u8, c: &MethodCall, out: &mut Vec<EngineStep>) {
        if c.method != copy::LAUNCH_DMA::BYTE_OFFSET {
            return;
        }
        let v = c.data;
        let multi =
            copy::LAUNCH_DMA::MULTI_LINE_ENABLE.get(v) == copy::LAUNCH_DMA::MULTI_LINE_ENABLE_TRUE;
        let remap = copy::LAUNCH_DMA::REMAP_ENABLE.get(v) == copy::LAUNCH_DMA::REMAP_ENABLE_TRUE;
        let len = self.reg(sc, copy::LINE_LENGTH_IN::BYTE_OFFSET);
        let physical = copy::LAUNCH_DMA::SRC_TYPE.get(v) == copy::LAUNCH_DMA::SRC_TYPE_PHYSICAL
            || copy::LAUNCH_DMA::DST_TYPE.get(v) == copy::LAUNCH_DMA::DST_TYPE_PHYSICAL;
        if copy::LAUNCH_DMA::DATA_TRANSFER_TYPE.get(v) != copy::LAUNCH_DMA::DATA_TRANSFER_TYPE_NONE
        {
            out.push(EngineStep::Copy {
                src: self.wide(
                    sc,
                    copy::OFFSET_IN_UPPER::BYTE_OFFSET,
                    copy::OFFSET_IN_LOWER::BYTE_OFFSET,
                ),
                dst: self.wide(
                    sc,
                    copy::OFFSET_OUT_UPPER::BYTE_OFFSET,
                    copy::OFFSET_OUT_LOWER::BYTE_OFFSET,
                ),
                // A fill counts 4-byte components.
                line_bytes: if remap { 4 * len } else { len },
                lines: if multi {
                    self.reg(sc, copy::LINE_COUNT::BYTE_OFFSET)
                } else {
                    1
                },
                src_pitch: self.reg(sc, copy::PITCH_IN::BYTE_OFFSET),
                dst_pitch: self.reg(sc, copy::PITCH_OUT::BYTE_OFFSET),
                // CAST: the remap constant is one 32-bit method.
                fill: remap.then(|| self.reg(sc, copy::SET_REMAP_CONST_A::BYTE_OFFSET) as u32),
                physical,
            });
        }
        let sem = copy::LAUNCH_DMA::SEMAPHORE_TYPE.get(v);
        if sem != copy::LAUNCH_DMA::SEMAPHORE_TYPE_NONE {
            let wide = copy::LAUNCH_DMA::SEMAPHORE_PAYLOAD_SIZE.get(v)
                == copy::LAUNCH_DMA::SEMAPHORE_PAYLOAD_SIZE_TWO_WORD;
            let payload = if wide {
                self.wide(
                    sc,
                    copy::SET_SEMAPHORE_PAYLOAD_UPPER::BYTE_OFFSET,
                    copy::SET_SEMAPHORE_PAYLOAD::BYTE_OFFSET,
                )
            } else {
                self.reg(sc, copy::SET_SEMAPHORE_PAYLOAD::BYTE_OFFSET)
            };
            out.push(EngineStep::Release {
                address: self.wide(
                    sc,
                    copy::SET_SEMAPHORE_A::BYTE_OFFSET,
                    copy::SET_SEMAPHORE_B::BYTE_OFFSET,
                ),
                payload,
                wide,
                // The copy engine releases once its transfer is done.
                after_idle: true,
                stamped: sem == copy::LAUNCH_DMA::SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_hw::push::{SUBCHANNEL_COMPUTE as SC_COMPUTE, SUBCHANNEL_COPY as SC_COPY};

    fn inc(sc: u8, method: u32, data: &[u32]) -> Vec<u32> {
        let mut w = vec![MethodHeader::incrementing(sc, method, data.len() as u16)
            .unwrap()
            .encode()];
        w.extend_from_slice(data);
        w
    }

    #[test]
    fn every_header_kind_decodes_and_a_short_or_bad_segment_is_an_error() {
        let mut w = inc(1, 0x200, &[1, 2]);
        w.push(
            MethodHeader::non_incrementing(2, 0x1B4, 2)
                .unwrap()
                .encode(),
        );
        w.extend([3, 4]);
        w.push(MethodHeader::increment_once(3, 0x300, 3).unwrap().encode());
        w.extend([5, 6, 7]);
        w.push(MethodHeader::immediate(4, 0x400, 0x1234).unwrap().encode());
        w.push(MethodHeader::end_segment().encode());
        w.extend([0xFFFF_FFFF, 0xDEAD]);
        let calls: Vec<(u8, u32, u32)> = decode(&w)
            .unwrap()
            .iter()
            .map(|c| (c.subchannel, c.method, c.data))
            .collect();
        assert_eq!(
            calls,
            [
                (1, 0x200, 1),
                (1, 0x204, 2),
                (2, 0x1B4, 3),
                (2, 0x1B4, 4),
                (3, 0x300, 5),
                (3, 0x304, 6),
                (3, 0x304, 7),
                (4, 0x400, 0x1234),
            ],
            "nothing after END_PB_SEGMENT"
        );
        let short = inc(1, 0x200, &[1, 2, 3]);
        assert_eq!(
            decode(&short[..3]),
            Err(PushError::Truncated {
                at: 0,
                wants: 3,
                has: 2
            })
        );
        assert!(matches!(
            decode(&[0xC000_0000]),
            Err(PushError::BadHeader { at: 0, .. })
        ));
    }

    fn bound() -> (Pbdma, Vec<u32>) {
        let mut w = inc(SC_COMPUTE, 0, &[compute::HOPPER_COMPUTE_A]);
        w.extend(inc(SC_COPY, 0, &[copy::HOPPER_DMA_COPY_A]));
        (Pbdma::default(), w)
    }

    #[test]
    fn host_semaphores_copies_inline_uploads_and_launches_come_out_in_order() {
        let (mut p, mut w) = bound();
        // A 64-bit acquire (circular >=) of 0x1_0000_0005 at 0x7000_1000.
        let exec =
            host::SEM_EXECUTE::OPERATION_ACQ_CIRC_GEQ | host::SEM_EXECUTE::PAYLOAD_SIZE_64BIT << 24;
        w.extend(inc(
            0,
            host::SEM_ADDR_LO::BYTE_OFFSET,
            &[0x7000_1000, 0, 5, 1, exec],
        ));
        // A pitched copy of 3 lines of 64 bytes, then a one-word release.
        w.extend(inc(
            SC_COPY,
            copy::OFFSET_IN_UPPER::BYTE_OFFSET,
            &[0x1, 0x2000, 0x1, 0x8000, 256, 512, 64, 3],
        ));
        w.extend(inc(
            SC_COPY,
            copy::SET_SEMAPHORE_A::BYTE_OFFSET,
            &[0, 0x9000, 42],
        ));
        let launch = copy::LAUNCH_DMA::DATA_TRANSFER_TYPE_NON_PIPELINED
            | copy::LAUNCH_DMA::SEMAPHORE_TYPE_RELEASE_ONE_WORD_SEMAPHORE << 3
            | copy::LAUNCH_DMA::MULTI_LINE_ENABLE_TRUE << 9;
        w.extend(inc(SC_COPY, copy::LAUNCH_DMA::BYTE_OFFSET, &[launch]));
        // Six bytes uploaded inline by compute, then a QMD launched.
        w.extend(inc(
            SC_COMPUTE,
            compute::LINE_LENGTH_IN::BYTE_OFFSET,
            &[6, 1],
        ));
        w.extend(inc(
            SC_COMPUTE,
            compute::OFFSET_OUT_UPPER::BYTE_OFFSET,
            &[0, 0x4000],
        ));
        w.extend(inc(SC_COMPUTE, compute::LAUNCH_DMA::BYTE_OFFSET, &[0x41]));
        w.push(
            MethodHeader::non_incrementing(SC_COMPUTE, compute::LOAD_INLINE_DATA::BYTE_OFFSET, 2)
                .unwrap()
                .encode(),
        );
        w.extend([0x4433_2211, 0x6655]);
        w.extend(inc(
            SC_COMPUTE,
            compute::SEND_PCAS_A::BYTE_OFFSET,
            &[0x30_0000],
        ));
        w.extend(inc(
            SC_COMPUTE,
            compute::SEND_SIGNALING_PCAS2_B::BYTE_OFFSET,
            &[0xA],
        ));
        // A release with WFI, 32-bit.
        let exec = host::SEM_EXECUTE::OPERATION_RELEASE | host::SEM_EXECUTE::RELEASE_WFI_EN << 20;
        w.extend(inc(
            0,
            host::SEM_ADDR_LO::BYTE_OFFSET,
            &[0x7000_2000, 0, 9, 0, exec],
        ));
        // A method on a subchannel nothing is bound on.
        w.extend(inc(2, 0x200, &[1]));
        let steps = p.execute(&decode(&w).unwrap());
        assert_eq!(
            steps,
            [
                EngineStep::Bound {
                    subchannel: SC_COMPUTE,
                    class: compute::HOPPER_COMPUTE_A
                },
                EngineStep::Bound {
                    subchannel: SC_COPY,
                    class: copy::HOPPER_DMA_COPY_A
                },
                EngineStep::Acquire {
                    address: 0x7000_1000,
                    payload: 0x1_0000_0005,
                    wide: true,
                    op: AcquireOp::CircularGeq
                },
                EngineStep::Copy {
                    src: 0x1_0000_2000,
                    dst: 0x1_0000_8000,
                    line_bytes: 64,
                    lines: 3,
                    src_pitch: 256,
                    dst_pitch: 512,
                    fill: None,
                    physical: false,
                },
                EngineStep::Release {
                    address: 0x9000,
                    payload: 42,
                    wide: false,
                    after_idle: true,
                    stamped: false
                },
                EngineStep::InlineWrite {
                    dst: 0x4000,
                    data: vec![0x11, 0x22, 0x33, 0x44, 0x55, 0x66]
                },
                EngineStep::Launch {
                    qmd_address: 0x3000_0000,
                    version: QmdVersion::V04_00
                },
                EngineStep::Release {
                    address: 0x7000_2000,
                    payload: 9,
                    wide: false,
                    after_idle: true,
                    stamped: false
                },
                EngineStep::Unbound {
                    subchannel: 2,
                    method: 0x200
                },
            ]
        );
    }

    #[test]
    fn a_fill_counts_four_byte_components() {
        let (mut p, mut w) = bound();
        w.extend(inc(
            SC_COPY,
            copy::SET_REMAP_CONST_A::BYTE_OFFSET,
            &[0xABCD_EF01],
        ));
        w.extend(inc(
            SC_COPY,
            copy::OFFSET_OUT_UPPER::BYTE_OFFSET,
            &[0, 0x5000],
        ));
        w.extend(inc(SC_COPY, copy::LINE_LENGTH_IN::BYTE_OFFSET, &[16]));
        let launch = copy::LAUNCH_DMA::DATA_TRANSFER_TYPE_NON_PIPELINED
            | copy::LAUNCH_DMA::REMAP_ENABLE_TRUE << 10;
        w.extend(inc(SC_COPY, copy::LAUNCH_DMA::BYTE_OFFSET, &[launch]));
        let steps = p.execute(&decode(&w).unwrap());
        assert!(matches!(
            steps[2],
            EngineStep::Copy {
                dst: 0x5000,
                line_bytes: 64,
                lines: 1,
                fill: Some(0xABCD_EF01),
                ..
            }
        ));
    }

    #[test]
    fn acquires_compare_as_their_operation_says() {
        use AcquireOp::*;
        assert!(CircularGeq.satisfied(5, 5, true) && !CircularGeq.satisfied(4, 5, true));
        // Wrapped: 2 is past 0xFFFF_FFFE in 32 bits.
        assert!(CircularGeq.satisfied(2, 0xFFFF_FFFE, false));
        assert!(!StrictGeq.satisfied(2, 0xFFFF_FFFE, false));
        assert!(
            Equal.satisfied(0x1_0000_0007, 7, false),
            "32-bit compares the low word"
        );
        assert!(!Equal.satisfied(0x1_0000_0007, 7, true));
        assert!(And.satisfied(0b0110, 0b0100, true) && !And.satisfied(0b0010, 0b0100, true));
        assert!(Nor.satisfied(0, 0, true) && !Nor.satisfied(u64::MAX, 0, true));
    }
}
