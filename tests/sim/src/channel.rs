//! A channel run as the GPU runs it: GP_PUT read from USERD, GPFIFO
//! entries and their push-buffer segments fetched through the MMU, the
//! PBDMA's engine steps executed on the card's memory (semaphores
//! acquired and released, copies moving real bytes, inline uploads), and
//! every launched QMD chain walked: each QMD decoded in the version its
//! class takes, its constant bank 0 read, its releases written, its
//! dependent QMD followed. Kernels themselves do not run; each launch is
//! recorded with the bank 0 it would have read, and where its code is one
//! of our own test kernels, that kernel's host-side model computes its
//! effect (`crate::kernel_models`).

use crate::kernel_models::{KernelMemory, KernelModels, ModelError, ModelLaunch, ModelOutcome};
use crate::mmu::{Access, MmuFault, PageDirectory, PhysicalMemory, Target, Tlb, Walked};
use crate::pbdma::{decode, EngineStep, Pbdma, PushError};
use macuda_hw::cbank0::DriverArea;
use macuda_hw::push::{GpEntry, USERD_GP_GET, USERD_GP_PUT};
use macuda_hw::qmd::{self, LaunchDescriptor, QmdVersion, StructureSize};
use macuda_hw::rm;
use std::collections::VecDeque;
use std::sync::Arc;

/// A GPFIFO entry's size in bytes.
const GP_ENTRY_BYTES: u64 = 8;
/// Where a stamped release puts the clock, after the payload.
const STAMP_CLOCK_OFFSET: u64 = 8;
/// A chain longer than this is taken to be a loop.
const CHAIN_LIMIT: usize = 1 << 16;

/// Physical memory the channel's engines also write.
pub trait CardMemory: PhysicalMemory {
    fn write_physical(&mut self, target: Target, address: u64, data: &[u8]) -> Result<(), String>;
}

/// Why a channel stopped: what RM would report for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelFault {
    #[error("the {engine} faulted on a {access:?}: {fault}")]
    Mmu {
        engine: &'static str,
        fault: MmuFault,
        access: Access,
    },
    #[error("USERD at {address:#x} could not be read or written: {why}")]
    Userd { address: u64, why: String },
    #[error("GP entry {index} ({raw:#018x}) is not a segment entry: {why}")]
    GpEntry { index: u32, raw: u64, why: String },
    #[error("the push buffer at {address:#x}: {error}")]
    Push { address: u64, error: PushError },
    #[error("a method on subchannel {subchannel}, which has no class bound (method {method:#x})")]
    Unbound { subchannel: u8, method: u32 },
    #[error("the QMD at {address:#x} does not decode: {why}")]
    Qmd { address: u64, why: String },
    #[error("the QMD chain from {head:#x} does not end")]
    EndlessChain { head: u64 },
    #[error(
        "the QMD at {address:#x} asks {need} bytes of local memory a TPC; the channel has {have}"
    )]
    LocalMemory { address: u64, need: u64, have: u64 },
    #[error("a copy of {lines} lines of {line_bytes} bytes is more than the sim moves ({COPY_LIMIT} bytes)")]
    CopyTooLarge { line_bytes: u64, lines: u64 },
    #[error("the QMD at {address:#x} launches {kernel}, whose model could not run it: {why}")]
    Model {
        address: u64,
        kernel: &'static str,
        why: String,
    },
}

/// The most one copy-engine launch may move in the sim: a push buffer
/// asking for more is taken as broken rather than allocated for.
pub const COPY_LIMIT: u64 = 1 << 30;

impl ChannelFault {
    /// The robust-channel error (Xid) RM reports for it, and for an MMU
    /// fault the address and `NV_PFAULT_FAULT_TYPE_*`.
    pub fn xid(&self) -> (u32, Option<(u64, u32)>) {
        match self {
            ChannelFault::Mmu { fault, .. } => {
                (rm::XID_MMU_FAULT, Some((fault.va(), fault.fault_type())))
            }
            ChannelFault::Qmd { .. }
            | ChannelFault::Model { .. }
            | ChannelFault::EndlessChain { .. }
            | ChannelFault::LocalMemory { .. } => (rm::XID_GR_EXCEPTION, None),
            ChannelFault::Userd { .. }
            | ChannelFault::GpEntry { .. }
            | ChannelFault::Push { .. }
            | ChannelFault::Unbound { .. }
            | ChannelFault::CopyTooLarge { .. } => (rm::XID_PBDMA_ERROR, None),
        }
    }
}

/// A kernel launch as the compute engine took it.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchRecord {
    pub qmd_address: u64,
    pub descriptor: LaunchDescriptor,
    /// Constant bank 0 as the kernel would read it.
    pub bank0: Vec<u8>,
    /// Whether a host-side model computed the kernel's effect: a result
    /// checked on the sim is checked against that model, not a GPU.
    pub model: ModelOutcome,
}

/// One GPFIFO channel of the card.
#[derive(Debug)]
pub struct Channel {
    /// The ring's VA and its entries.
    pub ring: u64,
    pub entries: u32,
    /// USERD in physical memory.
    pub userd: (Target, u64),
    /// The VA space the channel's engines translate through.
    pub root: PageDirectory,
    get: u32,
    /// Threads a TPC runs at once: a QMD's local memory per thread times
    /// this must fit what the channel set up.
    pub threads_per_tpc: u64,
    /// The channel's local memory a TPC (its setup methods).
    local_per_tpc: u64,
    /// The doorbell rang since the channel last ran dry: it fetches up to
    /// GP_PUT. Without it only work already fetched goes on (a blocked
    /// acquire), as on the card, where new entries wait for a doorbell.
    rung: bool,
    pbdma: Pbdma,
    pending: VecDeque<EngineStep>,
    /// Every launch, in order.
    pub launches: Vec<LaunchRecord>,
    /// The kernels whose effect the sim computes, and where their bank 0
    /// keeps the driver's words on this card (none: every launch is only
    /// recorded).
    pub models: Option<(Arc<KernelModels>, DriverArea)>,
    /// The RM allocation it was made for ([`crate::gsp_rm::ChannelParams`]'s
    /// serial).
    pub rm_serial: u64,
}

/// What a run ended at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Everything up to GP_PUT was run.
    Idle,
    /// An acquire waits for a semaphore.
    Blocked,
}

impl Channel {
    pub fn new(ring: u64, entries: u32, userd: (Target, u64), root: PageDirectory) -> Channel {
        Channel {
            ring,
            entries,
            userd,
            root,
            get: 0,
            threads_per_tpc: 0,
            local_per_tpc: 0,
            rung: false,
            pbdma: Pbdma::default(),
            pending: VecDeque::new(),
            launches: Vec::new(),
            models: None,
            rm_serial: 0,
        }
    }

    /// The doorbell: fetch up to GP_PUT at the next run.
    pub fn ring(&mut self) {
        self.rung = true;
    }

    /// Run what the channel fetched, and what the host queued if the
    /// doorbell rang, until it blocks or runs dry; `clock_ns` is what
    /// stamped releases write.
    ///
    /// # Errors
    /// The fault that stops the channel.
    pub fn run(
        &mut self,
        mem: &mut impl CardMemory,
        tlb: &mut Tlb,
        clock_ns: u64,
    ) -> Result<Progress, ChannelFault> {
        loop {
            while let Some(step) = self.pending.pop_front() {
                if !self.step(&step, mem, tlb, clock_ns)? {
                    self.pending.push_front(step);
                    return Ok(Progress::Blocked);
                }
            }
            if !self.rung {
                return Ok(Progress::Idle);
            }
            let put = self.userd_word(mem, USERD_GP_PUT)?;
            if put == self.get || put >= self.entries {
                self.rung = false;
                return Ok(Progress::Idle);
            }
            let mut raw = [0u8; GP_ENTRY_BYTES as usize];
            let at = self.ring + u64::from(self.get) * GP_ENTRY_BYTES;
            read_va(mem, tlb, self.root, at, &mut raw).map_err(AccessFault::of("host (GPFIFO)"))?;
            let raw = u64::from_le_bytes(raw);
            let entry = GpEntry::decode(raw).map_err(|e| ChannelFault::GpEntry {
                index: self.get,
                raw,
                why: e.to_string(),
            })?;
            let mut bytes = vec![0u8; entry.dwords() as usize * 4];
            read_va(mem, tlb, self.root, entry.address(), &mut bytes)
                .map_err(AccessFault::of("host (push buffer)"))?;
            let words: Vec<u32> = bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let calls = decode(&words).map_err(|error| ChannelFault::Push {
                address: entry.address(),
                error,
            })?;
            self.pending.extend(self.pbdma.execute(&calls));
            self.get = (self.get + 1) % self.entries;
            let get = self.get;
            self.write_userd_word(mem, USERD_GP_GET, get)?;
        }
    }

    fn userd_word(&self, mem: &impl CardMemory, offset: u64) -> Result<u32, ChannelFault> {
        let (target, base) = self.userd;
        let mut w = [0u8; 4];
        mem.read_physical(target, base + offset, &mut w)
            .map_err(|why| ChannelFault::Userd {
                address: base + offset,
                why,
            })?;
        Ok(u32::from_le_bytes(w))
    }

    fn write_userd_word(
        &self,
        mem: &mut impl CardMemory,
        offset: u64,
        v: u32,
    ) -> Result<(), ChannelFault> {
        let (target, base) = self.userd;
        mem.write_physical(target, base + offset, &v.to_le_bytes())
            .map_err(|why| ChannelFault::Userd {
                address: base + offset,
                why,
            })
    }

    /// One engine step; `false` when it must wait.
    fn step(
        &mut self,
        step: &EngineStep,
        mem: &mut impl CardMemory,
        tlb: &mut Tlb,
        clock_ns: u64,
    ) -> Result<bool, ChannelFault> {
        let root = self.root;
        let host = AccessFault::of("host (semaphore)");
        match step {
            EngineStep::Acquire {
                address,
                payload,
                wide,
                op,
            } => {
                let mut v = [0u8; 8];
                let n = if *wide { 8 } else { 4 };
                read_va(mem, tlb, root, *address, &mut v[..n]).map_err(host)?;
                Ok(op.satisfied(u64::from_le_bytes(v), *payload, *wide))
            }
            EngineStep::Release {
                address,
                payload,
                wide,
                stamped,
                ..
            } => {
                let n = if *wide { 8 } else { 4 };
                write_va(mem, tlb, root, *address, &payload.to_le_bytes()[..n]).map_err(host)?;
                if *stamped {
                    write_va(
                        mem,
                        tlb,
                        root,
                        address + STAMP_CLOCK_OFFSET,
                        &clock_ns.to_le_bytes(),
                    )
                    .map_err(host)?;
                }
                Ok(true)
            }
            EngineStep::Copy { .. } => {
                copy(step, mem, tlb, root)?;
                Ok(true)
            }
            EngineStep::InlineWrite { dst, data } => {
                write_va(mem, tlb, root, *dst, data)
                    .map_err(AccessFault::of("compute (inline upload)"))?;
                Ok(true)
            }
            EngineStep::Launch {
                qmd_address,
                version,
            } => {
                self.walk_chain(*qmd_address, *version, mem, tlb, clock_ns)?;
                Ok(true)
            }
            EngineStep::LocalMemory { per_tpc } => {
                self.local_per_tpc = *per_tpc;
                Ok(true)
            }
            EngineStep::Bound { .. } => Ok(true),
            EngineStep::Unbound { subchannel, method } => Err(ChannelFault::Unbound {
                subchannel: *subchannel,
                method: *method,
            }),
        }
    }

    fn walk_chain(
        &mut self,
        head: u64,
        version: QmdVersion,
        mem: &mut impl CardMemory,
        tlb: &mut Tlb,
        clock_ns: u64,
    ) -> Result<(), ChannelFault> {
        let root = self.root;
        let compute = AccessFault::of("compute");
        let mut at = head;
        for _ in 0..CHAIN_LIMIT {
            let mut raw = vec![0u8; version.dwords() * 4];
            read_va(mem, tlb, root, at, &mut raw).map_err(compute)?;
            let words: Vec<u32> = raw
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let d = qmd::decode(version, &words).map_err(|e| ChannelFault::Qmd {
                address: at,
                why: e.to_string(),
            })?;
            // SKED's checks: bank 0 bound (the driver's words and the
            // parameters live there) and the local memory the threads of a
            // TPC need within what the channel set up.
            let b0 = d.constant_banks[0];
            if !b0.valid {
                return Err(ChannelFault::Qmd {
                    address: at,
                    why: "constant bank 0 is not bound".into(),
                });
            }
            let per_thread = u64::from(d.local_memory_high_size.max(d.local_memory_low_size));
            let need = per_thread * self.threads_per_tpc;
            if need > self.local_per_tpc {
                return Err(ChannelFault::LocalMemory {
                    address: at,
                    need,
                    have: self.local_per_tpc,
                });
            }
            let mut bank0 = vec![0u8; b0.size as usize];
            read_va(mem, tlb, root, b0.address, &mut bank0).map_err(compute)?;
            // The kernel's effect lands before its releases, as the
            // grid's writes do before its barrier and release.
            let model = match &self.models {
                None => ModelOutcome::NotModelled,
                Some((models, area)) => {
                    let launch = ModelLaunch {
                        grid: d.grid,
                        block: d.block,
                        bank0: &bank0,
                        area: *area,
                    };
                    let mut port = ComputePort { mem, tlb, root };
                    models
                        .run(d.program_address, &launch, &mut port)
                        .map_err(|e| model_fault(at, models, d.program_address, &mut port, e))?
                }
            };
            for r in d.releases.iter().filter(|r| r.enable) {
                let n = match (r.structure_size, r.payload64b) {
                    (StructureSize::OneWord, false) => 4,
                    _ => 8,
                };
                write_va(mem, tlb, root, r.address, &r.payload.to_le_bytes()[..n])
                    .map_err(compute)?;
                if r.structure_size == StructureSize::FourWords {
                    write_va(
                        mem,
                        tlb,
                        root,
                        r.address + STAMP_CLOCK_OFFSET,
                        &clock_ns.to_le_bytes(),
                    )
                    .map_err(compute)?;
                }
            }
            let next = d.dependents[0];
            self.launches.push(LaunchRecord {
                qmd_address: at,
                descriptor: d,
                bank0,
                model,
            });
            if !next.enable {
                return Ok(());
            }
            at = next.qmd_address;
        }
        Err(ChannelFault::EndlessChain { head })
    }
}

fn copy(
    step: &EngineStep,
    mem: &mut impl CardMemory,
    tlb: &mut Tlb,
    root: PageDirectory,
) -> Result<(), ChannelFault> {
    let EngineStep::Copy {
        src,
        dst,
        line_bytes,
        lines,
        src_pitch,
        dst_pitch,
        fill,
        physical,
    } = *step
    else {
        return Ok(());
    };
    let engine = AccessFault::of("copy engine");
    // A physical copy's address that is not in memory.
    let missing = |address: u64, access: Access, why: String| {
        engine(AccessFault {
            fault: MmuFault::Unreadable {
                va: address,
                level: "physical",
                address,
                why,
            },
            access,
        })
    };
    if line_bytes
        .checked_mul(lines.max(1))
        .is_none_or(|n| n > COPY_LIMIT)
    {
        return Err(ChannelFault::CopyTooLarge { line_bytes, lines });
    }
    // CAST: one line of a copy fits in memory.
    let mut line = vec![0u8; line_bytes as usize];
    for l in 0..lines.max(1) {
        let (s, d) = (src + l * src_pitch, dst + l * dst_pitch);
        match fill {
            Some(v) => {
                for w in line.chunks_mut(4) {
                    w.copy_from_slice(&v.to_le_bytes()[..w.len()]);
                }
            }
            None if physical => mem
                .read_physical(Target::Video, s, &mut line)
                .map_err(|why| missing(s, Access::Read, why))?,
            None => read_va(mem, tlb, root, s, &mut line).map_err(engine)?,
        }
        if physical {
            mem.write_physical(Target::Video, d, &line)
                .map_err(|why| missing(d, Access::Write, why))?;
        } else {
            write_va(mem, tlb, root, d, &line).map_err(engine)?;
        }
    }
    Ok(())
}

/// Each page a range of `len` bytes from `va` touches: (va, bytes in it).
fn pieces(
    va: u64,
    len: usize,
    mut each: impl FnMut(u64, usize, usize) -> Result<(), MmuFault>,
) -> Result<(), MmuFault> {
    let mut done = 0usize;
    while done < len {
        let at = va + done as u64;
        // Translations are kept per 4 KiB: never cross one in a piece.
        let room = (macuda_hw::page::SMALL - (at % macuda_hw::page::SMALL)) as usize;
        let n = room.min(len - done);
        each(at, done, n)?;
        done += n;
    }
    Ok(())
}

/// The channel's VA space as a modelled kernel reaches it.
struct ComputePort<'a, M: CardMemory> {
    mem: &'a mut M,
    tlb: &'a mut Tlb,
    root: PageDirectory,
}

impl<M: CardMemory> KernelMemory for ComputePort<'_, M> {
    fn read(&mut self, va: u64, out: &mut [u8]) -> Result<(), ModelError> {
        read_va(&*self.mem, self.tlb, self.root, va, out).map_err(AccessFault::into_model)
    }

    fn write(&mut self, va: u64, data: &[u8]) -> Result<(), ModelError> {
        write_va(self.mem, self.tlb, self.root, va, data).map_err(AccessFault::into_model)
    }
}

/// The channel fault a modelled kernel's error stops the channel with: an
/// MMU fault as the compute engine's, anything else naming the kernel.
fn model_fault(
    address: u64,
    models: &KernelModels,
    program: u64,
    port: &mut dyn KernelMemory,
    e: ModelError,
) -> ChannelFault {
    match e {
        ModelError::Memory { fault, access } => ChannelFault::Mmu {
            engine: "compute (a modelled kernel)",
            fault,
            access,
        },
        other => ChannelFault::Model {
            address,
            kernel: models
                .identify(port, program)
                .map_or("a kernel", |k| k.name),
            why: other.to_string(),
        },
    }
}

/// An MMU fault, and the access that met it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessFault {
    pub fault: MmuFault,
    pub access: Access,
}

impl AccessFault {
    /// The channel fault of `engine` meeting it.
    fn of(engine: &'static str) -> impl Fn(AccessFault) -> ChannelFault + Copy {
        move |f| ChannelFault::Mmu {
            engine,
            fault: f.fault,
            access: f.access,
        }
    }

    fn into_model(self) -> ModelError {
        ModelError::Memory {
            fault: self.fault,
            access: self.access,
        }
    }
}

/// Read `out.len()` bytes at `va` through the MMU (sparse reads zeros).
pub fn read_va(
    mem: &impl CardMemory,
    tlb: &mut Tlb,
    root: PageDirectory,
    va: u64,
    out: &mut [u8],
) -> Result<(), AccessFault> {
    let access = Access::Read;
    pieces(va, out.len(), |at, from, n| {
        match tlb.translate(mem, root, at, access)? {
            Walked::Sparse => out[from..from + n].fill(0),
            Walked::Page(p) => mem
                .read_physical(p.target, p.physical(at), &mut out[from..from + n])
                .map_err(|why| MmuFault::Unreadable {
                    va: at,
                    level: "page",
                    address: p.physical(at),
                    why,
                })?,
        }
        Ok(())
    })
    .map_err(|fault| AccessFault { fault, access })
}

/// Write `data` at `va` through the MMU (sparse drops it).
pub fn write_va(
    mem: &mut impl CardMemory,
    tlb: &mut Tlb,
    root: PageDirectory,
    va: u64,
    data: &[u8],
) -> Result<(), AccessFault> {
    let access = Access::Write;
    pieces(va, data.len(), |at, from, n| {
        if let Walked::Page(p) = tlb.translate(&*mem, root, at, access)? {
            mem.write_physical(p.target, p.physical(at), &data[from..from + n])
                .map_err(|why| MmuFault::Unreadable {
                    va: at,
                    level: "page",
                    address: p.physical(at),
                    why,
                })?;
        }
        Ok(())
    })
    .map_err(|fault| AccessFault { fault, access })
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_hw::methods::{compute, copy, host};
    use macuda_hw::mmu::{dual_pde, pde, pte, PdeAperture};
    use macuda_hw::push::{
        MethodHeader, SUBCHANNEL_COMPUTE as SC_COMPUTE, SUBCHANNEL_COPY as SC_COPY,
    };
    use macuda_hw::qmd::{ConstantBank, DependentAction, DependentSlot, ReleaseSlot};

    /// Video memory only: 8 MiB, zeroed.
    struct Vram(Vec<u8>);

    impl PhysicalMemory for Vram {
        fn read_physical(
            &self,
            target: Target,
            address: u64,
            out: &mut [u8],
        ) -> Result<(), String> {
            let a = address as usize;
            match (target, self.0.get(a..a + out.len())) {
                (Target::Video, Some(b)) => {
                    out.copy_from_slice(b);
                    Ok(())
                }
                _ => Err(format!("{target:?} {address:#x} is not here")),
            }
        }
    }

    impl CardMemory for Vram {
        fn write_physical(
            &mut self,
            target: Target,
            address: u64,
            data: &[u8],
        ) -> Result<(), String> {
            let a = address as usize;
            match (target, self.0.get_mut(a..a + data.len())) {
                (Target::Video, Some(b)) => {
                    b.copy_from_slice(data);
                    Ok(())
                }
                _ => Err(format!("{target:?} {address:#x} is not here")),
            }
        }
    }

    const ROOT: PageDirectory = PageDirectory {
        target: Target::Video,
        address: 0x1000,
    };
    /// Two 2 MiB pages: VA 0x2000_0000 -> PA 0x20_0000, and the next.
    const VA: u64 = 0x2000_0000;
    const PA: u64 = 0x20_0000;
    const USERD: u64 = 0x8000;

    fn card() -> Vram {
        let mut m = Vram(vec![0; 8 << 20]);
        let table = |at: u64| {
            let e = pde::APERTURE.set(0, PdeAperture::Video.encode());
            (pde::ADDRESS.set(e, at >> pde::ADDRESS_SHIFT)) as u64
        };
        m.write_physical(Target::Video, 0x1000, &table(0x2000).to_le_bytes())
            .unwrap();
        m.write_physical(Target::Video, 0x2000, &table(0x3000).to_le_bytes())
            .unwrap();
        m.write_physical(Target::Video, 0x3000, &table(0x4000).to_le_bytes())
            .unwrap();
        // PD1 index of VA 0x2000_0000 is 1.
        m.write_physical(Target::Video, 0x4008, &table(0x5000).to_le_bytes())
            .unwrap();
        for (i, pa) in [(0u64, PA), (1, PA + (2 << 20))] {
            let e = pte::KIND.set(pte::VALID.set(0, 1), pte::KIND_GENERIC_MEMORY);
            let e = pte::ADDRESS.set(e, pa >> pte::ADDRESS_SHIFT);
            let at = 0x5000 + i * dual_pde::SIZE;
            m.write_physical(Target::Video, at, &(e as u64).to_le_bytes())
                .unwrap();
        }
        m
    }

    fn put(m: &mut Vram, va: u64, data: &[u8]) {
        m.write_physical(Target::Video, va - VA + PA, data).unwrap();
    }

    fn get(m: &Vram, va: u64, n: usize) -> Vec<u8> {
        let mut out = vec![0; n];
        m.read_physical(Target::Video, va - VA + PA, &mut out)
            .unwrap();
        out
    }

    fn inc(sc: u8, method: u32, data: &[u32]) -> Vec<u32> {
        let mut w = vec![MethodHeader::incrementing(sc, method, data.len() as u16)
            .unwrap()
            .encode()];
        w.extend_from_slice(data);
        w
    }

    /// Queue `words` as segment number `n` at VA + 0x1000 * (n + 1), and
    /// move GP_PUT past it.
    fn submit(m: &mut Vram, n: u32, words: &[u32]) {
        let seg = VA + 0x1000 * u64::from(n + 1);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        put(m, seg, &bytes);
        let entry = GpEntry::subroutine(seg, words.len() as u32)
            .unwrap()
            .encode();
        put(m, VA + u64::from(n) * GP_ENTRY_BYTES, &entry.to_le_bytes());
        m.write_physical(Target::Video, USERD + USERD_GP_PUT, &(n + 1).to_le_bytes())
            .unwrap();
    }

    fn binding() -> Vec<u32> {
        let mut w = inc(
            SC_COMPUTE,
            host::SET_OBJECT::BYTE_OFFSET,
            &[compute::HOPPER_COMPUTE_A],
        );
        w.extend(inc(
            SC_COPY,
            host::SET_OBJECT::BYTE_OFFSET,
            &[copy::HOPPER_DMA_COPY_A],
        ));
        w
    }

    fn qmd(bank0: u64, release: Option<(u64, u64)>, next: Option<u64>) -> Vec<u8> {
        let mut d = LaunchDescriptor {
            grid: [4, 1, 1],
            block: [128, 1, 1],
            ..LaunchDescriptor::default()
        };
        d.constant_banks[0] = ConstantBank {
            valid: true,
            address: bank0,
            size: 0x40,
            ..ConstantBank::default()
        };
        if let Some((address, payload)) = release {
            d.releases[0] = ReleaseSlot {
                enable: true,
                address,
                payload,
                structure_size: StructureSize::OneWord,
                ..ReleaseSlot::default()
            };
        }
        if let Some(q) = next {
            d.dependents[0] = DependentSlot {
                enable: true,
                action: DependentAction::Schedule,
                prefetch: true,
                qmd_address: q,
            };
        }
        qmd::encode(QmdVersion::V04_00, &d)
            .unwrap()
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect()
    }

    #[test]
    fn a_channel_copies_releases_acquires_and_walks_a_qmd_chain() {
        let mut m = card();
        let mut tlb = Tlb::default();
        let (src, dst, sem, sem2) = (VA + 0x10_0000, VA + 0x21_0000, VA + 0x3_0000, VA + 0x3_0100);
        let data: Vec<u8> = (0..=255).collect();
        put(&mut m, src, &data);
        // Two QMDs, the first scheduling the second, which releases 99.
        let (q1, q2, b0) = (VA + 0x8000, VA + 0x8100, VA + 0x9000);
        put(&mut m, b0, &[0xAB; 0x40]);
        put(&mut m, q1, &qmd(b0, None, Some(q2)));
        put(&mut m, q2, &qmd(b0, Some((sem2, 99)), None));
        let mut w = binding();
        w.extend(inc(
            SC_COPY,
            copy::OFFSET_IN_UPPER::BYTE_OFFSET,
            &[0, src as u32, 0, dst as u32],
        ));
        w.extend(inc(SC_COPY, copy::LINE_LENGTH_IN::BYTE_OFFSET, &[256]));
        w.extend(inc(
            SC_COPY,
            copy::SET_SEMAPHORE_A::BYTE_OFFSET,
            &[0, sem as u32, 7],
        ));
        w.extend(inc(
            SC_COPY,
            copy::LAUNCH_DMA::BYTE_OFFSET,
            &[copy::LAUNCH_DMA::DATA_TRANSFER_TYPE_NON_PIPELINED
                | copy::LAUNCH_DMA::SEMAPHORE_TYPE_RELEASE_ONE_WORD_SEMAPHORE << 3],
        ));
        // The compute side waits for the copy's release, then launches.
        let acquire = host::SEM_EXECUTE::OPERATION_ACQ_CIRC_GEQ;
        w.extend(inc(
            0,
            host::SEM_ADDR_LO::BYTE_OFFSET,
            &[sem as u32, 0, 7, 0, acquire],
        ));
        w.extend(inc(
            SC_COMPUTE,
            compute::SEND_PCAS_A::BYTE_OFFSET,
            &[(q1 >> 8) as u32],
        ));
        w.extend(inc(
            SC_COMPUTE,
            compute::SEND_SIGNALING_PCAS2_B::BYTE_OFFSET,
            &[0xA],
        ));
        let mut ch = Channel::new(VA, 16, (Target::Video, USERD), ROOT);
        submit(&mut m, 0, &w);
        assert_eq!(ch.run(&mut m, &mut tlb, 1234), Ok(Progress::Idle));
        assert!(
            ch.launches.is_empty(),
            "nothing fetched before the doorbell"
        );
        ch.ring();
        assert_eq!(ch.run(&mut m, &mut tlb, 1234), Ok(Progress::Idle));
        assert_eq!(get(&m, dst, 256), data, "the copy moved real bytes");
        assert_eq!(get(&m, sem, 4), 7u32.to_le_bytes());
        assert_eq!(
            get(&m, sem2, 4),
            99u32.to_le_bytes(),
            "the chain's tail released"
        );
        assert_eq!(ch.launches.len(), 2);
        assert_eq!(
            ch.launches
                .iter()
                .map(|l| l.qmd_address)
                .collect::<Vec<_>>(),
            [q1, q2]
        );
        assert_eq!(ch.launches[1].bank0, vec![0xAB; 0x40]);
        assert_eq!(ch.launches[0].descriptor.grid, [4, 1, 1]);
        let mut gp_get = [0u8; 4];
        m.read_physical(Target::Video, USERD + USERD_GP_GET, &mut gp_get)
            .unwrap();
        assert_eq!(u32::from_le_bytes(gp_get), 1, "GP_GET past the entry");
    }

    #[test]
    fn a_launch_of_a_modelled_kernel_computes_before_its_release() {
        use crate::kernel_models::KernelModels;
        let mut m = card();
        let mut tlb = Tlb::default();
        let area = macuda_hw::cbank0::HOPPER;
        // vector_add's sm_90 code, as a loader would have placed it.
        let cubin = include_bytes!("../../cuda/fixtures/vector_add.sm_90.cubin");
        let mut code = Vec::new();
        {
            use object::{Object, ObjectSection};
            let f = object::File::parse(&cubin[..]).unwrap();
            let s = f.section_by_name(".text.vector_add").unwrap();
            code.extend_from_slice(s.data().unwrap());
        }
        let (program, a, b, c, sem) = (
            VA + 0x1_0000,
            VA + 0x2_0000,
            VA + 0x2_1000,
            VA + 0x2_2000,
            VA + 0x3_0000,
        );
        put(&mut m, program, &code);
        let n = 600u32;
        let floats = |f: &dyn Fn(u32) -> f32| -> Vec<u8> {
            (0..1024).flat_map(|i| f(i).to_le_bytes()).collect()
        };
        put(&mut m, a, &floats(&|i| i as f32));
        put(&mut m, b, &floats(&|_| 2.0));
        // Bank 0: blockDim (128, 1, 1), then a, b, c and n as parameters.
        let b0 = VA + 0x9000;
        let mut bank = vec![0u8; area.param_base as usize + 28];
        bank[area.block_dim as usize..][..4].copy_from_slice(&128u32.to_le_bytes());
        let mut params: Vec<u8> = [a, b, c].iter().flat_map(|p| p.to_le_bytes()).collect();
        params.extend(n.to_le_bytes());
        bank[area.param_base as usize..].copy_from_slice(&params);
        put(&mut m, b0, &bank);
        let mut d = qmd::decode(
            QmdVersion::V04_00,
            &qmd(b0, Some((sem, 5)), None)
                .chunks(4)
                .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
                .collect::<Vec<_>>(),
        )
        .unwrap();
        d.program_address = program;
        // CAST: bank 0 is small.
        d.constant_banks[0].size = (bank.len() as u32).next_multiple_of(0x10);
        let q = VA + 0x8000;
        let words = qmd::encode(QmdVersion::V04_00, &d).unwrap();
        put(
            &mut m,
            q,
            &words
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect::<Vec<_>>(),
        );
        let mut w = binding();
        w.extend(inc(
            SC_COMPUTE,
            compute::SEND_PCAS_A::BYTE_OFFSET,
            &[(q >> 8) as u32],
        ));
        w.extend(inc(
            SC_COMPUTE,
            compute::SEND_SIGNALING_PCAS2_B::BYTE_OFFSET,
            &[0xA],
        ));
        let mut ch = Channel::new(VA, 16, (Target::Video, USERD), ROOT);
        ch.models = Some((Arc::new(KernelModels::ours()), area));
        submit(&mut m, 0, &w);
        ch.ring();
        assert_eq!(ch.run(&mut m, &mut tlb, 0), Ok(Progress::Idle));
        assert_eq!(ch.launches[0].model, ModelOutcome::Ran("vector_add"));
        assert_eq!(get(&m, sem, 4), 5u32.to_le_bytes());
        let out = get(&m, c, 4096);
        for i in 0..1024usize {
            let v = f32::from_le_bytes(out[4 * i..4 * i + 4].try_into().unwrap());
            // Four blocks of 128 threads reach 512 of the 600 elements.
            let want = if i < 512 { i as f32 + 2.0 } else { 0.0 };
            assert_eq!(v, want, "c[{i}]");
        }
        // Without models the same launch is only recorded.
        let mut m2 = card();
        put(&mut m2, program, &code);
        put(&mut m2, b0, &bank);
        put(
            &mut m2,
            q,
            &words
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect::<Vec<_>>(),
        );
        let mut ch = Channel::new(VA, 16, (Target::Video, USERD), ROOT);
        submit(&mut m2, 0, &w);
        ch.ring();
        assert_eq!(ch.run(&mut m2, &mut Tlb::default(), 0), Ok(Progress::Idle));
        assert_eq!(ch.launches[0].model, ModelOutcome::NotModelled);
        assert!(get(&m2, c, 16).iter().all(|&b| b == 0));
    }

    #[test]
    fn an_acquire_blocks_until_its_semaphore_arrives() {
        let mut m = card();
        let mut tlb = Tlb::default();
        let (sem, out) = (VA + 0x4_0000, VA + 0x4_0100);
        let mut w = binding();
        let wide = host::SEM_EXECUTE::OPERATION_ACQ_STRICT_GEQ
            | host::SEM_EXECUTE::PAYLOAD_SIZE_64BIT << 24;
        w.extend(inc(
            0,
            host::SEM_ADDR_LO::BYTE_OFFSET,
            &[sem as u32, 0, 5, 1, wide],
        ));
        let release =
            host::SEM_EXECUTE::OPERATION_RELEASE | host::SEM_EXECUTE::PAYLOAD_SIZE_64BIT << 24;
        w.extend(inc(
            0,
            host::SEM_ADDR_LO::BYTE_OFFSET,
            &[out as u32, 0, 8, 0, release],
        ));
        let mut ch = Channel::new(VA, 16, (Target::Video, USERD), ROOT);
        submit(&mut m, 0, &w);
        ch.ring();
        assert_eq!(ch.run(&mut m, &mut tlb, 0), Ok(Progress::Blocked));
        assert_eq!(get(&m, out, 8), [0; 8]);
        // 0x1_0000_0004 is short of 0x1_0000_0005; 0x1_0000_0005 is not.
        put(&mut m, sem, &0x1_0000_0004u64.to_le_bytes());
        assert_eq!(ch.run(&mut m, &mut tlb, 0), Ok(Progress::Blocked));
        put(&mut m, sem, &0x1_0000_0005u64.to_le_bytes());
        assert_eq!(ch.run(&mut m, &mut tlb, 0), Ok(Progress::Idle));
        assert_eq!(get(&m, out, 8), 8u64.to_le_bytes());
    }

    #[test]
    fn sked_checks_bank_0_and_the_local_memory_a_tpc_needs() {
        let (q, b0) = (VA + 0x8000, VA + 0x9000);
        let launch = |m: &mut Vram, qmd_bytes: Vec<u8>, setup: &[u32], threads: u64| {
            put(m, q, &qmd_bytes);
            let mut w = binding();
            w.extend_from_slice(setup);
            w.extend(inc(
                SC_COMPUTE,
                compute::SEND_PCAS_A::BYTE_OFFSET,
                &[(q >> 8) as u32],
            ));
            w.extend(inc(
                SC_COMPUTE,
                compute::SEND_SIGNALING_PCAS2_B::BYTE_OFFSET,
                &[0xA],
            ));
            let mut ch = Channel::new(VA, 16, (Target::Video, USERD), ROOT);
            ch.threads_per_tpc = threads;
            submit(m, 0, &w);
            ch.ring();
            ch.run(m, &mut Tlb::default(), 0)
        };
        // No bank 0 bound.
        let mut m = card();
        let mut unbound = qmd(b0, None, None);
        let d = qmd::decode(QmdVersion::V04_00, &words(&unbound)).unwrap();
        let mut d2 = d;
        d2.constant_banks[0].valid = false;
        unbound = bytes(&qmd::encode(QmdVersion::V04_00, &d2).unwrap());
        assert!(matches!(
            launch(&mut m, unbound, &[], 0),
            Err(ChannelFault::Qmd { .. })
        ));
        // 0x100 bytes a thread, 4,096 threads a TPC: 1 MiB the channel
        // must have set up.
        let mut d3 = d;
        d3.local_memory_high_size = 0x100;
        let with_local = bytes(&qmd::encode(QmdVersion::V04_00, &d3).unwrap());
        let mut m = card();
        assert_eq!(
            launch(&mut m, with_local.clone(), &[], 4096),
            Err(ChannelFault::LocalMemory {
                address: q,
                need: 1 << 20,
                have: 0
            })
        );
        let setup = inc(
            SC_COMPUTE,
            compute::SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A::BYTE_OFFSET,
            &[0, 1 << 20],
        );
        let mut m = card();
        assert_eq!(launch(&mut m, with_local, &setup, 4096), Ok(Progress::Idle));
    }

    fn words(b: &[u8]) -> Vec<u32> {
        b.chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    fn bytes(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn a_copy_past_the_sims_limit_faults_instead_of_allocating() {
        let mut m = card();
        let mut w = binding();
        w.extend(inc(
            SC_COPY,
            copy::LINE_LENGTH_IN::BYTE_OFFSET,
            &[u32::MAX, 100],
        ));
        let launch = copy::LAUNCH_DMA::DATA_TRANSFER_TYPE_NON_PIPELINED
            | copy::LAUNCH_DMA::MULTI_LINE_ENABLE_TRUE << 9;
        w.extend(inc(SC_COPY, copy::LAUNCH_DMA::BYTE_OFFSET, &[launch]));
        let mut ch = Channel::new(VA, 16, (Target::Video, USERD), ROOT);
        submit(&mut m, 0, &w);
        ch.ring();
        assert_eq!(
            ch.run(&mut m, &mut Tlb::default(), 0),
            Err(ChannelFault::CopyTooLarge {
                line_bytes: u64::from(u32::MAX),
                lines: 100
            })
        );
    }

    #[test]
    fn unmapped_push_buffers_and_unbound_subchannels_fault_the_channel() {
        let mut m = card();
        let mut tlb = Tlb::default();
        // A GP entry whose segment lies where nothing is mapped.
        let entry = GpEntry::subroutine(0x7000_0000, 4).unwrap().encode();
        put(&mut m, VA, &entry.to_le_bytes());
        m.write_physical(Target::Video, USERD + USERD_GP_PUT, &1u32.to_le_bytes())
            .unwrap();
        let mut ch = Channel::new(VA, 16, (Target::Video, USERD), ROOT);
        ch.ring();
        let e = ch.run(&mut m, &mut tlb, 0).unwrap_err();
        assert!(
            matches!(&e, ChannelFault::Mmu { engine: "host (push buffer)", fault, .. } if fault.fault_type() == 0),
            "{e}"
        );
        let mut m = card();
        let mut ch = Channel::new(VA, 16, (Target::Video, USERD), ROOT);
        submit(&mut m, 0, &inc(2, 0x200, &[1]));
        ch.ring();
        assert_eq!(
            ch.run(&mut m, &mut Tlb::default(), 0),
            Err(ChannelFault::Unbound {
                subchannel: 2,
                method: 0x200
            })
        );
    }
}
