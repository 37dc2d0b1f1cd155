//! Decoding a captured command stream with our own format definitions:
//! each push segment's methods named by the class bound on its
//! subchannel, inline-to-memory uploads gathered with their destinations,
//! and every launch's QMD and constant bank 0 found among those uploads
//! (CUDA delivers both inline) and decoded. It is what the capture tool
//! prints for NVIDIA's stream, and it reads ours the same way, so the two
//! can be diffed when a launch misbehaves.

use macuda_hw::methods::{compute, copy, host, Method};
use macuda_hw::push::{MethodHeader, MethodKind};
use macuda_hw::qmd::{self, LaunchDescriptor, QmdVersion};
use serde::Serialize;
use std::collections::BTreeMap;

/// Uploads longer than this many words are shown by size and hash only:
/// they are code (NVIDIA's own kernels and trap handler among them), whose
/// bytes are not ours to keep.
pub const ELIDE_WORDS: usize = 640;

/// One method as the engine saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MethodLine {
    pub subchannel: u8,
    pub kind: &'static str,
    pub method: u32,
    /// NVIDIA's name for it, where our tables have it.
    pub name: Option<&'static str>,
    pub data: Vec<u32>,
}

/// An inline upload (I2M): `words` written at `dst`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Upload {
    pub dst: u64,
    pub words: Vec<u32>,
}

/// One launch: the QMD sent with SEND_PCAS, decoded if its bytes were in
/// the stream, and its bank 0.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Launch {
    pub qmd_address: u64,
    pub pcas_action: u32,
    #[serde(skip)]
    pub descriptor: Option<LaunchDescriptor>,
    /// The QMD's words as uploaded.
    pub qmd_words: Option<Vec<u32>>,
    pub bank0_address: Option<u64>,
    /// What the stream uploaded of bank 0, from its start.
    pub bank0_words: Option<Vec<u32>>,
    /// How many words the QMD binds as bank 0.
    pub bank0_bound_words: Option<usize>,
}

/// A decoded segment, and what it told us.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Decoded {
    pub methods: Vec<MethodLine>,
    pub uploads: Vec<Upload>,
    pub launches: Vec<Launch>,
    /// Words that were not a method header where one had to be.
    pub errors: Vec<String>,
}

/// The class families a subchannel can have bound, for naming methods.
fn table_for(class: Option<u32>) -> &'static [Method] {
    match class {
        Some(c) if compute::CLASSES.iter().any(|(_, v)| *v == c) => compute::ALL,
        Some(c) if copy::CLASSES.iter().any(|(_, v)| *v == c) => copy::ALL,
        _ => &[],
    }
}

/// Host (channel-class) methods live below this offset on every subchannel.
const HOST_METHOD_END: u32 = 0x100;

fn name_of(class: Option<u32>, method: u32) -> Option<&'static str> {
    let table = if method < HOST_METHOD_END {
        host::ALL
    } else {
        table_for(class)
    };
    table.iter().find(|m| m.offset == method).map(|m| m.name)
}

/// The stream's state across segments of one channel: what each
/// subchannel has bound and the inline-upload registers.
#[derive(Debug, Default, Clone)]
pub struct ChannelState {
    pub bound: [Option<u32>; 8],
    regs: BTreeMap<(u8, u32), u32>,
    /// Every upload so far, by destination, to find QMDs and banks in.
    pub uploaded: BTreeMap<u64, Vec<u32>>,
}

impl ChannelState {
    fn reg(&self, sc: u8, m: u32) -> u64 {
        u64::from(self.regs.get(&(sc, m)).copied().unwrap_or(0))
    }

    /// The words at `[address, address + words * 4)` if uploads covered
    /// them: one, or several back to back (CUDA sends bank 0's driver area
    /// and its parameters as two uploads).
    fn find(&self, address: u64, words: usize) -> Option<Vec<u32>> {
        let got = self.find_prefix(address, words);
        (got.len() == words).then_some(got)
    }

    /// As many of those words, from the first, as uploads covered (CUDA
    /// binds bank 0 larger than what it uploads of it).
    fn find_prefix(&self, address: u64, words: usize) -> Vec<u32> {
        let mut out = Vec::with_capacity(words);
        let mut at = address;
        while out.len() < words {
            let Some((&base, data)) = self.uploaded.range(..=at).next_back() else {
                break;
            };
            let Ok(skip) = usize::try_from((at - base) / 4) else {
                break;
            };
            if skip >= data.len() {
                break;
            }
            let take = (words - out.len()).min(data.len() - skip);
            out.extend_from_slice(&data[skip..skip + take]);
            at += take as u64 * 4;
        }
        out
    }
}

/// Decode one push segment.
pub fn decode_segment(state: &mut ChannelState, words: &[u32]) -> Decoded {
    let mut out = Decoded::default();
    let mut i = 0;
    while i < words.len() {
        let h = match MethodHeader::decode(words[i]) {
            Ok(h) => h,
            Err(e) => {
                out.errors.push(format!(
                    "word {i} ({:#010x}) is not a method header: {e}",
                    words[i]
                ));
                break;
            }
        };
        i += 1;
        let sc = h.subchannel();
        let (kind, data): (&'static str, Vec<u32>) = match h.kind() {
            MethodKind::Immediate => ("IMMD", vec![u32::from(h.count_or_data())]),
            MethodKind::EndSegment => {
                out.methods.push(MethodLine {
                    subchannel: sc,
                    kind: "END",
                    method: h.method(),
                    name: None,
                    data: Vec::new(),
                });
                break;
            }
            k => {
                let n = h.data_dwords().min(words.len() - i);
                let d = words[i..i + n].to_vec();
                i += n;
                let name = match k {
                    MethodKind::Incrementing => "INC",
                    MethodKind::NonIncrementing => "NONINC",
                    _ => "INC1",
                };
                (name, d)
            }
        };
        let class = state.bound[usize::from(sc & 7)];
        out.methods.push(MethodLine {
            subchannel: sc,
            kind,
            method: h.method(),
            name: name_of(class, h.method()),
            data: data.clone(),
        });
        // Which method each word goes to.
        let targets: Vec<(u32, u32)> = data
            .iter()
            .enumerate()
            .map(|(k, &w)| {
                let step = match h.kind() {
                    MethodKind::Incrementing => 4 * k as u32,
                    MethodKind::IncrementOnce if k > 0 => 4,
                    _ => 0,
                };
                (h.method() + step, w)
            })
            .collect();
        if h.method() == compute::LOAD_INLINE_DATA::BYTE_OFFSET
            && h.kind() == MethodKind::NonIncrementing
        {
            let dst = state.reg(sc, compute::OFFSET_OUT_UPPER::BYTE_OFFSET) << 32
                | state.reg(sc, compute::OFFSET_OUT::BYTE_OFFSET);
            state.uploaded.insert(dst, data.clone());
            out.uploads.push(Upload { dst, words: data });
            continue;
        }
        for (m, w) in targets {
            state.regs.insert((sc, m), w);
            if m == host::SET_OBJECT::BYTE_OFFSET {
                state.bound[usize::from(sc & 7)] = Some(host::SET_OBJECT::NVCLASS.get(w));
            }
            if m == compute::SEND_SIGNALING_PCAS2_B::BYTE_OFFSET
                && class.is_some_and(|c| QmdVersion::for_compute_class(c).is_some())
            {
                let qmd_address = state.reg(sc, compute::SEND_PCAS_A::BYTE_OFFSET) << 8;
                out.launches.push(launch_at(state, class, qmd_address, w));
            }
        }
    }
    out
}

fn launch_at(state: &ChannelState, class: Option<u32>, qmd_address: u64, action: u32) -> Launch {
    let version = class.and_then(QmdVersion::for_compute_class);
    let qmd_words = version.and_then(|v| state.find(qmd_address, v.dwords()));
    let descriptor = match (version, &qmd_words) {
        (Some(v), Some(w)) => qmd::decode(v, w).ok(),
        _ => None,
    };
    let bank0 = descriptor
        .as_ref()
        .map(|d| d.constant_banks[0])
        .filter(|b| b.valid);
    Launch {
        qmd_address,
        pcas_action: compute::SEND_SIGNALING_PCAS2_B::PCAS_ACTION.get(action),
        descriptor,
        qmd_words,
        bank0_address: bank0.map(|b| b.address),
        bank0_words: bank0
            .map(|b| state.find_prefix(b.address, (b.size as usize).div_ceil(4)))
            .filter(|w| !w.is_empty()),
        bank0_bound_words: bank0.map(|b| (b.size as usize).div_ceil(4)),
    }
}

/// A stable 64-bit FNV-1a hash, to name an elided payload.
pub fn fnv1a64(words: &[u32]) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for w in words {
        for b in w.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01B3);
        }
    }
    h
}

/// Text for one decoded segment.
pub fn render(d: &Decoded) -> String {
    let mut s = String::new();
    for m in &d.methods {
        let name = m.name.unwrap_or("?");
        if m.data.len() > ELIDE_WORDS {
            s += &format!(
                "  {} sc={} {}({:#x}) n={}: <{} bytes, fnv1a64 {:016x}, payload omitted>\n",
                m.kind,
                m.subchannel,
                name,
                m.method,
                m.data.len(),
                m.data.len() * 4,
                fnv1a64(&m.data)
            );
            continue;
        }
        let words: Vec<String> = m.data.iter().map(|w| format!("{w:08x}")).collect();
        s += &format!(
            "  {} sc={} {}({:#x}) n={}: {}\n",
            m.kind,
            m.subchannel,
            name,
            m.method,
            m.data.len(),
            words.join(" ")
        );
    }
    for l in &d.launches {
        s += &format!(
            "  LAUNCH qmd {:#x} (PCAS action {:#x})\n",
            l.qmd_address, l.pcas_action
        );
        match &l.descriptor {
            Some(q) => s += &format!("    QMD: {q:?}\n"),
            None => s += "    QMD: not in the stream (written another way)\n",
        }
        if let (Some(a), Some(w)) = (l.bank0_address, &l.bank0_words) {
            let words: Vec<String> = w.iter().map(|x| format!("{x:08x}")).collect();
            s += &format!(
                "    bank 0 at {a:#x}, {} of {} bound words uploaded: {}\n",
                w.len(),
                l.bank0_bound_words.unwrap_or(w.len()),
                words.join(" ")
            );
        }
    }
    for e in &d.errors {
        s += &format!("  ERROR {e}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_hw::push::SUBCHANNEL_COMPUTE;
    use macuda_submit::encode::{qmd_bytes, Bank0Slot};
    use macuda_submit::pushbuf::PushBuffer;
    use macuda_submit::{DeviceFormat, KernelDesc, LaunchShape};

    /// A stream in CUDA's manner, built with our encoders: bind, upload
    /// bank 0 and the QMD inline, then SEND_PCAS. The decoder must find
    /// the QMD and bank among the uploads and give back what went in.
    #[test]
    fn an_inline_launch_decodes_back_to_what_was_encoded() {
        let f =
            DeviceFormat::for_device(90, macuda_hw::methods::compute::HOPPER_COMPUTE_A).unwrap();
        let k = KernelDesc {
            name: "k".into(),
            entry: 0x20_0000_0000,
            code_bytes: 512,
            registers: 16,
            barriers: 1,
            shared_bytes: 0,
            local_bytes: 0,
            param_base: 0x210,
            param_bytes: 8,
            banks: Vec::new(),
        };
        let t = f.template(k.clone()).unwrap();
        let shape = LaunchShape {
            grid: [5, 1, 1],
            block: [64, 1, 1],
            dynamic_shared_bytes: 0,
        };
        let (qmd_va, bank_va) = (0x30_0000_0100u64, 0x30_0000_0800u64);
        let mut bank = vec![0u8; f.cbank0_bytes(&k) as usize];
        let mut q = macuda_hw::qmd::Qmd::new(f.qmd);
        f.launch(
            &t,
            &shape,
            &0xDEAD_BEEF_u64.to_le_bytes(),
            &mut q,
            Bank0Slot {
                address: bank_va,
                bytes: &mut bank,
                holds_template: false,
            },
        )
        .unwrap();
        let mut raw = vec![0u8; f.qmd_bytes() as usize];
        qmd_bytes(&q, &mut raw);
        let words = |b: &[u8]| -> Vec<u32> {
            b.chunks(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        let mut pb = PushBuffer::new();
        let sc = SUBCHANNEL_COMPUTE;
        pb.method(sc, host::SET_OBJECT::BYTE_OFFSET, compute::HOPPER_COMPUTE_A)
            .unwrap();
        // Bank 0 in two uploads, driver area then parameters, as CUDA
        // sends it.
        let bw = words(&bank);
        let split = 0x210 / 4;
        for (dst, data) in [
            (bank_va, bw[..split].to_vec()),
            (bank_va + 0x210, bw[split..].to_vec()),
            (qmd_va, words(&raw)),
        ] {
            pb.methods(
                sc,
                compute::OFFSET_OUT_UPPER::BYTE_OFFSET,
                &[(dst >> 32) as u32, dst as u32],
            )
            .unwrap();
            pb.method(sc, compute::LAUNCH_DMA::BYTE_OFFSET, 0x41)
                .unwrap();
            pb.inline_data(sc, compute::LOAD_INLINE_DATA::BYTE_OFFSET, &data)
                .unwrap();
        }
        pb.launch_qmd(qmd_va).unwrap();
        let mut state = ChannelState::default();
        let d = decode_segment(&mut state, pb.words());
        assert!(d.errors.is_empty(), "{:?}", d.errors);
        assert_eq!(d.uploads.len(), 3);
        assert_eq!(d.methods[0].name, Some("SET_OBJECT"));
        assert_eq!(d.launches.len(), 1);
        let l = &d.launches[0];
        assert_eq!(l.qmd_address, qmd_va);
        let q = l
            .descriptor
            .as_ref()
            .expect("the QMD was found and decoded");
        assert_eq!(
            (q.grid, q.block, q.program_address),
            ([5, 1, 1], [64, 1, 1], k.entry)
        );
        assert_eq!(l.bank0_address, Some(bank_va));
        let b0 = l.bank0_words.as_ref().unwrap();
        assert_eq!(b0[0], 64, "blockDim.x in the bank");
        assert_eq!(b0[0x210 / 4], 0xDEAD_BEEF, "the parameter in the bank");
        assert_eq!(l.bank0_bound_words, Some(b0.len()), "all of it uploaded");
        let text = render(&d);
        assert!(
            text.contains("LOAD_INLINE_DATA") && text.contains("LAUNCH qmd 0x3000000100"),
            "{text}"
        );
    }

    #[test]
    fn a_long_upload_is_named_by_hash_not_kept() {
        let d = Decoded {
            methods: vec![MethodLine {
                subchannel: 1,
                kind: "NONINC",
                method: 0x1B4,
                name: Some("LOAD_INLINE_DATA"),
                data: vec![7; ELIDE_WORDS + 1],
            }],
            ..Decoded::default()
        };
        let text = render(&d);
        assert!(
            text.contains("payload omitted") && !text.contains("00000007"),
            "{text}"
        );
        assert_ne!(fnv1a64(&[1]), fnv1a64(&[2]));
    }

    #[test]
    fn garbage_is_an_error_line_not_a_panic() {
        let mut state = ChannelState::default();
        let d = decode_segment(&mut state, &[0xFFFF_FFFF, 1, 2]);
        assert_eq!(d.errors.len(), 1);
    }
}
