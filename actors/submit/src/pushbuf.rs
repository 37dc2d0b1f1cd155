//! Push buffers: method headers and data words as the host engine reads
//! them, built from the declarations in `macuda_hw::push` and
//! `macuda_hw::methods`.

use macuda_hw::methods::{compute, copy, host, pack, split_address};
use macuda_hw::push::{FormatError, MethodHeader, MAX_COUNT, SUBCHANNEL_COMPUTE, SUBCHANNEL_COPY};

/// Inline-to-memory moves whole 32-bit words.
pub const INLINE_WORD_BYTES: u64 = 4;

/// Host (channel-class) methods go on subchannel 0 whatever engine runs.
pub const SUBCHANNEL_HOST: u8 = 0;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushBuffer {
    words: Vec<u32>,
}

impl PushBuffer {
    pub fn new() -> PushBuffer {
        PushBuffer::default()
    }

    pub fn words(&self) -> &[u32] {
        &self.words
    }

    pub fn bytes(&self) -> u64 {
        self.words.len() as u64 * 4
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    pub fn clear(&mut self) {
        self.words.clear();
    }

    /// Consecutive methods starting at `method`, one data word each.
    ///
    /// # Errors
    /// An offset or count the header cannot hold.
    pub fn methods(
        &mut self,
        subchannel: u8,
        method: u32,
        data: &[u32],
    ) -> Result<(), FormatError> {
        // CAST: callers pass a handful of words; the header checks the limit.
        let h = MethodHeader::incrementing(
            subchannel,
            method,
            data.len().min(u16::MAX as usize) as u16,
        )?;
        self.words.push(h.encode());
        self.words.extend_from_slice(data);
        Ok(())
    }

    /// Data words all sent to one method (an inline-data stream such as
    /// LOAD_INLINE_DATA after an I2M LAUNCH_DMA).
    ///
    /// # Errors
    /// An offset or count the header cannot hold.
    pub fn inline_data(
        &mut self,
        subchannel: u8,
        method: u32,
        data: &[u32],
    ) -> Result<(), FormatError> {
        let count = u16::try_from(data.len()).map_err(|_| FormatError::TooWide {
            field: macuda_hw::push::FieldName::plain("COUNT"),
            value: data.len() as u64,
            bits: 13,
        })?;
        let h = MethodHeader::non_incrementing(subchannel, method, count)?;
        self.words.push(h.encode());
        self.words.extend_from_slice(data);
        Ok(())
    }

    /// One method, immediate when the value fits the header.
    ///
    /// # Errors
    /// An offset the header cannot hold.
    pub fn method(&mut self, subchannel: u8, method: u32, value: u32) -> Result<(), FormatError> {
        let (h, data) = MethodHeader::single(subchannel, method, value)?;
        self.words.push(h.encode());
        self.words.extend(data);
        Ok(())
    }

    /// Host semaphore: acquire until the 64-bit value at `address` is at
    /// least `value`, or release `value` there after the engine idles.
    ///
    /// # Errors
    /// An address beyond the field.
    pub fn host_semaphore(
        &mut self,
        address: u64,
        value: u64,
        acquire: bool,
    ) -> Result<(), FormatError> {
        let (hi, lo) = split_address(host::SEM_ADDR_HI::OFFSET, address)?;
        let op = if acquire {
            host::SEM_EXECUTE::OPERATION_ACQ_CIRC_GEQ
        } else {
            host::SEM_EXECUTE::OPERATION_RELEASE
        };
        let mut parts = vec![
            (host::SEM_EXECUTE::OPERATION, op),
            (
                host::SEM_EXECUTE::PAYLOAD_SIZE,
                host::SEM_EXECUTE::PAYLOAD_SIZE_64BIT,
            ),
        ];
        if acquire {
            parts.push((
                host::SEM_EXECUTE::ACQUIRE_SWITCH_TSG,
                host::SEM_EXECUTE::ACQUIRE_SWITCH_TSG_EN,
            ));
        } else {
            parts.push((
                host::SEM_EXECUTE::RELEASE_WFI,
                host::SEM_EXECUTE::RELEASE_WFI_EN,
            ));
        }
        let execute = pack(&parts)?;
        // CAST: the two halves of a 64-bit payload.
        self.methods(
            SUBCHANNEL_HOST,
            host::SEM_ADDR_LO::BYTE_OFFSET,
            &[lo, hi, value as u32, (value >> 32) as u32, execute],
        )
    }

    /// Release `value` at `address` with the engine's clock: the engine
    /// writes the 64-bit payload, then its nanosecond timestamp at +8, once
    /// the work before it is idle (what a timed event records).
    ///
    /// # Errors
    /// An address beyond the field.
    pub fn stamped_release(&mut self, address: u64, value: u64) -> Result<(), FormatError> {
        self.stamp(address, value, true)
    }

    /// As [`PushBuffer::stamped_release`], but written as soon as the queue
    /// reaches it, not after the engine idles: when a queue got somewhere
    /// (a chain's head about to launch), not when work ended.
    ///
    /// # Errors
    /// An address beyond the field.
    pub fn reached_stamp(&mut self, address: u64, value: u64) -> Result<(), FormatError> {
        self.stamp(address, value, false)
    }

    fn stamp(&mut self, address: u64, value: u64, after_idle: bool) -> Result<(), FormatError> {
        let (hi, lo) = split_address(host::SEM_ADDR_HI::OFFSET, address)?;
        let wfi = if after_idle {
            host::SEM_EXECUTE::RELEASE_WFI_EN
        } else {
            host::SEM_EXECUTE::RELEASE_WFI_DIS
        };
        let execute = pack(&[
            (
                host::SEM_EXECUTE::OPERATION,
                host::SEM_EXECUTE::OPERATION_RELEASE,
            ),
            (
                host::SEM_EXECUTE::PAYLOAD_SIZE,
                host::SEM_EXECUTE::PAYLOAD_SIZE_64BIT,
            ),
            (host::SEM_EXECUTE::RELEASE_WFI, wfi),
            (
                host::SEM_EXECUTE::RELEASE_TIMESTAMP,
                host::SEM_EXECUTE::RELEASE_TIMESTAMP_EN,
            ),
        ])?;
        // CAST: the two halves of a 64-bit payload.
        self.methods(
            SUBCHANNEL_HOST,
            host::SEM_ADDR_LO::BYTE_OFFSET,
            &[lo, hi, value as u32, (value >> 32) as u32, execute],
        )
    }

    /// Launch the QMD at `qmd_address` (256-byte aligned): SEND_PCAS_A then
    /// the signalling action that invalidates, prefetches and schedules it.
    ///
    /// # Errors
    /// An address beyond the field.
    pub fn launch_qmd(&mut self, qmd_address: u64) -> Result<(), FormatError> {
        // CAST: QMD addresses are below 2^40, so >> 8 fits 32 bits.
        self.method(
            SUBCHANNEL_COMPUTE,
            compute::SEND_PCAS_A::BYTE_OFFSET,
            (qmd_address >> 8) as u32,
        )?;
        self.method(
            SUBCHANNEL_COMPUTE,
            compute::SEND_SIGNALING_PCAS2_B::BYTE_OFFSET,
            compute::SEND_SIGNALING_PCAS2_B::PCAS_ACTION_INVALIDATE_PREFETCH_COPY_SCHEDULE,
        )
    }

    /// Bind the compute class on its subchannel and set the shared and
    /// local windows (where generic addresses map to shared and local
    /// memory): what a compute channel needs before its first launch.
    ///
    /// # Errors
    /// A window address wider than its field.
    pub fn bind_compute(
        &mut self,
        class: u32,
        shared_window: u64,
        local_window: u64,
    ) -> Result<(), FormatError> {
        self.method(
            SUBCHANNEL_COMPUTE,
            host::SET_OBJECT::BYTE_OFFSET,
            host::SET_OBJECT::NVCLASS.set(0, class),
        )?;
        let shared = split_address(
            compute::SET_SHADER_SHARED_MEMORY_WINDOW_A::BASE_ADDRESS_UPPER,
            shared_window,
        )?;
        let local = split_address(
            compute::SET_SHADER_LOCAL_MEMORY_WINDOW_A::BASE_ADDRESS_UPPER,
            local_window,
        )?;
        for (hi, lo, (upper, lower)) in [
            (
                compute::SET_SHADER_SHARED_MEMORY_WINDOW_A::BYTE_OFFSET,
                compute::SET_SHADER_SHARED_MEMORY_WINDOW_B::BYTE_OFFSET,
                shared,
            ),
            (
                compute::SET_SHADER_LOCAL_MEMORY_WINDOW_A::BYTE_OFFSET,
                compute::SET_SHADER_LOCAL_MEMORY_WINDOW_B::BYTE_OFFSET,
                local,
            ),
        ] {
            self.method(SUBCHANNEL_COMPUTE, hi, upper)?;
            self.method(SUBCHANNEL_COMPUTE, lo, lower)?;
        }
        Ok(())
    }

    /// Write `data` at `dst` from the push buffer itself, in the compute
    /// engine's order (inline-to-memory): a small upload that needs no copy
    /// engine, no staging memory and no wait between two queues. The data
    /// travels as whole words, so both the address and the length are
    /// multiples of four; the stream of words is cut into as many
    /// LOAD_INLINE_DATA headers as their 13-bit count needs.
    ///
    /// # Errors
    /// An unaligned address or length, or an address beyond the field.
    pub fn inline_to_memory(&mut self, dst: u64, data: &[u8]) -> Result<(), FormatError> {
        let misaligned = |field: &'static str, value: u64| FormatError::Misaligned {
            field: macuda_hw::push::FieldName::plain(field),
            value,
            align: INLINE_WORD_BYTES,
        };
        if !dst.is_multiple_of(INLINE_WORD_BYTES) {
            return Err(misaligned("OFFSET_OUT", dst));
        }
        let len = data.len() as u64;
        if !len.is_multiple_of(INLINE_WORD_BYTES) {
            return Err(misaligned("LINE_LENGTH_IN", len));
        }
        let line = u32::try_from(len).map_err(|_| FormatError::TooWide {
            field: macuda_hw::push::FieldName::plain("LINE_LENGTH_IN"),
            value: len,
            bits: 32,
        })?;
        let (hi, lo) = split_address(compute::OFFSET_OUT_UPPER::VALUE, dst)?;
        self.methods(
            SUBCHANNEL_COMPUTE,
            compute::LINE_LENGTH_IN::BYTE_OFFSET,
            &[line, 1, hi, lo],
        )?;
        // Pitch layout; no flush or system barrier of its own: the release
        // that follows an upload waits for the engine to idle.
        let launch = pack(&[
            (
                compute::LAUNCH_DMA::DST_MEMORY_LAYOUT,
                compute::LAUNCH_DMA::DST_MEMORY_LAYOUT_PITCH,
            ),
            (
                compute::LAUNCH_DMA::SYSMEMBAR_DISABLE,
                compute::LAUNCH_DMA::SYSMEMBAR_DISABLE_TRUE,
            ),
        ])?;
        self.method(SUBCHANNEL_COMPUTE, compute::LAUNCH_DMA::BYTE_OFFSET, launch)?;
        let words: Vec<u32> = data
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        for part in words.chunks(usize::from(MAX_COUNT)) {
            self.inline_data(
                SUBCHANNEL_COMPUTE,
                compute::LOAD_INLINE_DATA::BYTE_OFFSET,
                part,
            )?;
        }
        Ok(())
    }

    /// Invalidate the instruction, global-data and constant caches without
    /// waiting for idle: code or constants the CPU just wrote are read
    /// fresh by the launches that follow.
    ///
    /// # Errors
    /// Never for this method; the header check is shared.
    pub fn invalidate_shader_caches(&mut self) -> Result<(), FormatError> {
        use compute::INVALIDATE_SHADER_CACHES_NO_WFI as I;
        let word = pack(&[(I::INSTRUCTION, 1), (I::GLOBAL_DATA, 1), (I::CONSTANT, 1)])?;
        self.method(SUBCHANNEL_COMPUTE, I::BYTE_OFFSET, word)
    }

    /// Invalidate the constant caches without waiting for idle: the banks
    /// 0 the CPU wrote for the launches that follow are read fresh, where
    /// their slots held other values before.
    ///
    /// # Errors
    /// Never for this method; the header check is shared.
    pub fn invalidate_constant_caches(&mut self) -> Result<(), FormatError> {
        use compute::INVALIDATE_SHADER_CACHES_NO_WFI as I;
        let word = pack(&[(I::CONSTANT, 1)])?;
        self.method(SUBCHANNEL_COMPUTE, I::BYTE_OFFSET, word)
    }

    /// A copy-engine transfer: `lines` lines of `line_bytes`, each line
    /// `src_pitch`/`dst_pitch` apart (1-D when `lines` is 1), or with
    /// `fill` set, writes of that 32-bit value instead of reading `src`.
    ///
    /// # Errors
    /// Addresses or sizes beyond their fields.
    #[allow(clippy::too_many_arguments)]
    pub fn copy(
        &mut self,
        src: u64,
        src_pitch: u64,
        dst: u64,
        dst_pitch: u64,
        line_bytes: u64,
        lines: u64,
        fill: Option<u32>,
    ) -> Result<(), FormatError> {
        let (src_hi, src_lo) = split_address(copy::OFFSET_IN_UPPER::UPPER, src)?;
        let (dst_hi, dst_lo) = split_address(copy::OFFSET_OUT_UPPER::UPPER, dst)?;
        let word = |v: u64, field: &'static str| -> Result<u32, FormatError> {
            u32::try_from(v).map_err(|_| FormatError::TooWide {
                field: macuda_hw::push::FieldName::plain(field),
                value: v,
                bits: 32,
            })
        };
        let multi = lines > 1;
        if fill.is_none() {
            self.methods(
                SUBCHANNEL_COPY,
                copy::OFFSET_IN_UPPER::BYTE_OFFSET,
                &[src_hi, src_lo],
            )?;
        }
        self.methods(
            SUBCHANNEL_COPY,
            copy::OFFSET_OUT_UPPER::BYTE_OFFSET,
            &[dst_hi, dst_lo],
        )?;
        self.methods(
            SUBCHANNEL_COPY,
            copy::PITCH_IN::BYTE_OFFSET,
            &[word(src_pitch, "PITCH_IN")?, word(dst_pitch, "PITCH_OUT")?],
        )?;
        let (length, remap) = match fill {
            Some(value) => {
                // Four-byte components: the line length counts components.
                self.method(SUBCHANNEL_COPY, copy::SET_REMAP_CONST_A::BYTE_OFFSET, value)?;
                let components = pack(&[
                    (
                        copy::SET_REMAP_COMPONENTS::DST_X,
                        copy::SET_REMAP_COMPONENTS::DST_X_CONST_A,
                    ),
                    (
                        copy::SET_REMAP_COMPONENTS::COMPONENT_SIZE,
                        copy::SET_REMAP_COMPONENTS::COMPONENT_SIZE_FOUR,
                    ),
                    (
                        copy::SET_REMAP_COMPONENTS::NUM_SRC_COMPONENTS,
                        copy::SET_REMAP_COMPONENTS::NUM_SRC_COMPONENTS_ONE,
                    ),
                    (
                        copy::SET_REMAP_COMPONENTS::NUM_DST_COMPONENTS,
                        copy::SET_REMAP_COMPONENTS::NUM_DST_COMPONENTS_ONE,
                    ),
                ])?;
                self.method(
                    SUBCHANNEL_COPY,
                    copy::SET_REMAP_COMPONENTS::BYTE_OFFSET,
                    components,
                )?;
                (line_bytes / 4, copy::LAUNCH_DMA::REMAP_ENABLE_TRUE)
            }
            None => (line_bytes, copy::LAUNCH_DMA::REMAP_ENABLE_FALSE),
        };
        self.methods(
            SUBCHANNEL_COPY,
            copy::LINE_LENGTH_IN::BYTE_OFFSET,
            &[word(length, "LINE_LENGTH_IN")?, word(lines, "LINE_COUNT")?],
        )?;
        let launch = pack(&[
            (
                copy::LAUNCH_DMA::DATA_TRANSFER_TYPE,
                copy::LAUNCH_DMA::DATA_TRANSFER_TYPE_NON_PIPELINED,
            ),
            (
                copy::LAUNCH_DMA::FLUSH_ENABLE,
                copy::LAUNCH_DMA::FLUSH_ENABLE_TRUE,
            ),
            (
                copy::LAUNCH_DMA::SRC_MEMORY_LAYOUT,
                copy::LAUNCH_DMA::SRC_MEMORY_LAYOUT_PITCH,
            ),
            (
                copy::LAUNCH_DMA::DST_MEMORY_LAYOUT,
                copy::LAUNCH_DMA::DST_MEMORY_LAYOUT_PITCH,
            ),
            (
                copy::LAUNCH_DMA::MULTI_LINE_ENABLE,
                if multi {
                    copy::LAUNCH_DMA::MULTI_LINE_ENABLE_TRUE
                } else {
                    copy::LAUNCH_DMA::MULTI_LINE_ENABLE_FALSE
                },
            ),
            (copy::LAUNCH_DMA::REMAP_ENABLE, remap),
        ])?;
        self.method(SUBCHANNEL_COPY, copy::LAUNCH_DMA::BYTE_OFFSET, launch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_compute_is_set_object_then_both_windows_in_halves() {
        let mut pb = PushBuffer::new();
        pb.bind_compute(0xCBC0, 0x7F8A_0000_0000, 0x7F8B_0000_0000)
            .unwrap();
        let mut want = PushBuffer::new();
        for (m, v) in [
            (host::SET_OBJECT::BYTE_OFFSET, 0xCBC0),
            (
                compute::SET_SHADER_SHARED_MEMORY_WINDOW_A::BYTE_OFFSET,
                0x7F8A,
            ),
            (compute::SET_SHADER_SHARED_MEMORY_WINDOW_B::BYTE_OFFSET, 0),
            (
                compute::SET_SHADER_LOCAL_MEMORY_WINDOW_A::BYTE_OFFSET,
                0x7F8B,
            ),
            (compute::SET_SHADER_LOCAL_MEMORY_WINDOW_B::BYTE_OFFSET, 0),
        ] {
            want.method(SUBCHANNEL_COMPUTE, m, v).unwrap();
        }
        assert_eq!(pb.words(), want.words());
        assert!(
            PushBuffer::new().bind_compute(0xCBC0, 1 << 50, 0).is_err(),
            "a window past the field"
        );
    }
    use macuda_hw::push::MethodKind;

    fn decode_all(words: &[u32]) -> Vec<(u32, Vec<u32>)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let h = MethodHeader::decode(words[i]).unwrap();
            i += 1;
            if h.kind() == MethodKind::Immediate {
                out.push((h.method(), vec![u32::from(h.count_or_data())]));
            } else {
                let n = h.data_dwords();
                out.push((h.method(), words[i..i + n].to_vec()));
                i += n;
            }
        }
        out
    }

    #[test]
    fn semaphores_write_address_payload_and_operation_in_order() {
        let mut pb = PushBuffer::new();
        pb.host_semaphore(0x12_3456_7890, 0x1_0000_0002, false)
            .unwrap();
        let d = decode_all(pb.words());
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].0, host::SEM_ADDR_LO::BYTE_OFFSET);
        assert_eq!(&d[0].1[..4], &[0x3456_7890, 0x12, 2, 1]);
        let exec = d[0].1[4];
        assert_eq!(
            host::SEM_EXECUTE::OPERATION.get(exec),
            host::SEM_EXECUTE::OPERATION_RELEASE
        );
        assert_eq!(
            host::SEM_EXECUTE::RELEASE_WFI.get(exec),
            host::SEM_EXECUTE::RELEASE_WFI_EN
        );
        assert_eq!(
            host::SEM_EXECUTE::PAYLOAD_SIZE.get(exec),
            host::SEM_EXECUTE::PAYLOAD_SIZE_64BIT
        );
    }

    #[test]
    fn a_stamped_release_asks_for_the_timestamp_and_only_then() {
        let mut pb = PushBuffer::new();
        pb.stamped_release(0x40_0000_1000, 7).unwrap();
        pb.host_semaphore(0x40_0000_1000, 8, false).unwrap();
        let d = decode_all(pb.words());
        assert_eq!(d.len(), 2);
        assert_eq!(&d[0].1[..4], &[0x1000, 0x40, 7, 0]);
        let stamped = d[0].1[4];
        let plain = d[1].1[4];
        for exec in [stamped, plain] {
            assert_eq!(
                host::SEM_EXECUTE::OPERATION.get(exec),
                host::SEM_EXECUTE::OPERATION_RELEASE
            );
        }
        assert_eq!(
            host::SEM_EXECUTE::RELEASE_TIMESTAMP.get(stamped),
            host::SEM_EXECUTE::RELEASE_TIMESTAMP_EN
        );
        assert_eq!(
            host::SEM_EXECUTE::RELEASE_TIMESTAMP.get(plain),
            host::SEM_EXECUTE::RELEASE_TIMESTAMP_DIS
        );
    }

    #[test]
    fn an_inline_upload_sets_the_line_then_streams_its_words_in_headers_of_at_most_8191() {
        let data: Vec<u8> = (0..(9000u32 * 4)).map(|i| (i % 251) as u8).collect();
        let mut pb = PushBuffer::new();
        pb.inline_to_memory(0x12_3456_7800, &data).unwrap();
        let d = decode_all(pb.words());
        assert_eq!(
            d[0],
            (
                compute::LINE_LENGTH_IN::BYTE_OFFSET,
                vec![9000 * 4, 1, 0x12, 0x3456_7800]
            )
        );
        assert_eq!(d[1].0, compute::LAUNCH_DMA::BYTE_OFFSET);
        let launch = d[1].1[0];
        assert_eq!(
            compute::LAUNCH_DMA::DST_MEMORY_LAYOUT.get(launch),
            compute::LAUNCH_DMA::DST_MEMORY_LAYOUT_PITCH
        );
        let streams: Vec<_> = d[2..].iter().collect();
        assert_eq!(streams.len(), 2);
        assert!(streams
            .iter()
            .all(|(m, _)| *m == compute::LOAD_INLINE_DATA::BYTE_OFFSET));
        assert_eq!(streams[0].1.len(), 8191);
        let back: Vec<u8> = streams
            .iter()
            .flat_map(|(_, w)| w.iter().flat_map(|x| x.to_le_bytes()))
            .collect();
        assert_eq!(back, data);
        for (dst, len) in [(0x1002, 8), (0x1000, 6)] {
            assert!(matches!(
                PushBuffer::new().inline_to_memory(dst, &vec![0; len]),
                Err(FormatError::Misaligned { .. })
            ));
        }
    }

    #[test]
    fn a_qmd_launch_is_pcas_then_the_signalling_action() {
        let mut pb = PushBuffer::new();
        pb.launch_qmd(0x10_0000_2300).unwrap();
        let d = decode_all(pb.words());
        assert_eq!(d[0], (compute::SEND_PCAS_A::BYTE_OFFSET, vec![0x1000_0023]));
        assert_eq!(d[1].0, compute::SEND_SIGNALING_PCAS2_B::BYTE_OFFSET);
    }

    #[test]
    fn copies_and_fills_end_in_launch_dma() {
        let mut pb = PushBuffer::new();
        pb.copy(0x1000, 0, 0x2000, 0, 4096, 1, None).unwrap();
        let d = decode_all(pb.words());
        assert_eq!(d.last().unwrap().0, copy::LAUNCH_DMA::BYTE_OFFSET);
        assert!(d
            .iter()
            .any(|(m, v)| *m == copy::LINE_LENGTH_IN::BYTE_OFFSET && v == &vec![4096, 1]));
        let mut fill = PushBuffer::new();
        fill.copy(0, 0, 0x2000, 0, 64, 1, Some(0xAB)).unwrap();
        let d = decode_all(fill.words());
        assert!(
            d.iter()
                .all(|(m, _)| *m != copy::OFFSET_IN_UPPER::BYTE_OFFSET),
            "a fill reads nothing"
        );
        assert!(d
            .iter()
            .any(|(m, v)| *m == copy::LINE_LENGTH_IN::BYTE_OFFSET && v[0] == 16));
        let launch = d.last().unwrap().1[0];
        assert_eq!(
            copy::LAUNCH_DMA::REMAP_ENABLE.get(launch),
            copy::LAUNCH_DMA::REMAP_ENABLE_TRUE
        );
        let mut pitched = PushBuffer::new();
        pitched
            .copy(0x1000, 256, 0x9000, 512, 100, 8, None)
            .unwrap();
        let launch = *decode_all(pitched.words())
            .last()
            .unwrap()
            .1
            .first()
            .unwrap();
        assert_eq!(
            copy::LAUNCH_DMA::MULTI_LINE_ENABLE.get(launch),
            copy::LAUNCH_DMA::MULTI_LINE_ENABLE_TRUE
        );
        assert!(pb.copy(1 << 60, 0, 0, 0, 4, 1, None).is_err());
    }
}
