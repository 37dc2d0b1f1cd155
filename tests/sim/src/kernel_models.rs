//! Host-side models of a few of our own test kernels, so that a workload
//! run on the simulated card can have its results checked. The sim does
//! not execute GPU code: a launch whose code is byte for byte one of the
//! kernels below (read through the MMU at the QMD's program address, and
//! compared with the `.text.NAME` section of our fixture cubins, compiled
//! from tests/cuda by nvcc) has that kernel's effect computed here in
//! Rust; any other launch is only recorded. Whatever checks results on
//! the sim must say they were computed by these models
//! (`LaunchRecord::model` tells which launches were).
//!
//! A model reads what the kernel itself reads: its parameters and the
//! driver's words (blockDim, gridDim) from constant bank 0 as the launch
//! bound it, the block and thread indices from the QMD's grid and block.
//! So a bank 0 built wrong gives the wrong result here too.

use crate::mmu::{Access, MmuFault};
use macuda_hw::cbank0::DriverArea;
use object::{Object, ObjectSection};

/// Our fixture cubins whose kernels the table models, for sm_120 (GB202)
/// and sm_90 (GH100).
const FIXTURES: &[(&str, &[u8])] = &[
    (
        "empty.sm_120",
        include_bytes!("../../cuda/fixtures/empty.sm_120.cubin"),
    ),
    (
        "empty.sm_90",
        include_bytes!("../../cuda/fixtures/empty.sm_90.cubin"),
    ),
    (
        "vector_add.sm_120",
        include_bytes!("../../cuda/fixtures/vector_add.sm_120.cubin"),
    ),
    (
        "vector_add.sm_90",
        include_bytes!("../../cuda/fixtures/vector_add.sm_90.cubin"),
    ),
    (
        "dims.sm_120",
        include_bytes!("../../cuda/fixtures/dims.sm_120.cubin"),
    ),
    (
        "dims.sm_90",
        include_bytes!("../../cuda/fixtures/dims.sm_90.cubin"),
    ),
];

/// The most threads one modelled launch may have; a larger one is
/// recorded as not modelled rather than computed for minutes.
pub const MODEL_THREAD_LIMIT: u64 = 1 << 22;
/// The section a cubin keeps a kernel's code in: this prefix, then its
/// name.
const TEXT_PREFIX: &str = ".text.";
/// Words of `dims`'s output a thread writes.
const DIMS_WORDS: u64 = 8;

/// Why a model could not run a launch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("the modelled kernel faulted on a {access:?}: {fault}")]
    Memory { fault: MmuFault, access: Access },
    #[error("constant bank 0 of {bytes} bytes ends before byte {need}, which the kernel reads")]
    ShortBank0 { bytes: usize, need: usize },
    #[error("cubin {cubin}: {why}")]
    Cubin { cubin: String, why: String },
}

/// The card's memory as a modelled kernel reaches it: by GPU virtual
/// address, through the launch's VA space.
pub trait KernelMemory {
    /// # Errors
    /// The MMU's fault.
    fn read(&mut self, va: u64, out: &mut [u8]) -> Result<(), ModelError>;
    /// # Errors
    /// The MMU's fault.
    fn write(&mut self, va: u64, data: &[u8]) -> Result<(), ModelError>;
}

/// What a modelled kernel sees of its launch.
#[derive(Debug, Clone, Copy)]
pub struct ModelLaunch<'a> {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Constant bank 0 as the launch bound it.
    pub bank0: &'a [u8],
    /// Where the driver's words and the parameters lie in bank 0 on the
    /// card's architecture.
    pub area: DriverArea,
}

impl ModelLaunch<'_> {
    fn word(&self, at: usize) -> Result<u32, ModelError> {
        self.bank0
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or(ModelError::ShortBank0 {
                bytes: self.bank0.len(),
                need: at + 4,
            })
    }

    fn param_u64(&self, at: usize) -> Result<u64, ModelError> {
        let base = self.area.param_base as usize + at;
        Ok(u64::from(self.word(base)?) | (u64::from(self.word(base + 4)?) << 32))
    }

    fn param_u32(&self, at: usize) -> Result<u32, ModelError> {
        self.word(self.area.param_base as usize + at)
    }

    /// blockDim or gridDim as the kernel reads them: three words at `at`.
    fn dims(&self, at: u32) -> Result<[u32; 3], ModelError> {
        let at = at as usize;
        Ok([self.word(at)?, self.word(at + 4)?, self.word(at + 8)?])
    }

    /// Threads the launch runs.
    pub fn threads(&self) -> u64 {
        self.grid
            .iter()
            .chain(&self.block)
            .map(|&d| u64::from(d))
            .product()
    }
}

type Model = fn(&ModelLaunch, &mut dyn KernelMemory) -> Result<(), ModelError>;

/// The kernels modelled, by name.
const MODELS: &[(&str, Model)] = &[("empty", empty), ("vector_add", vector_add), ("dims", dims)];

/// The kernels whose effect the sim computes, by name: what a program run
/// on the sim may check the results of.
pub fn modelled_kernels() -> impl Iterator<Item = &'static str> {
    MODELS.iter().map(|(name, _)| *name)
}

/// `empty()`: nothing.
fn empty(_: &ModelLaunch, _: &mut dyn KernelMemory) -> Result<(), ModelError> {
    Ok(())
}

/// `vector_add(a, b, c, n)`: thread `blockIdx.x * blockDim.x +
/// threadIdx.x` sets `c[i] = a[i] + b[i]` where `i < n`.
fn vector_add(l: &ModelLaunch, mem: &mut dyn KernelMemory) -> Result<(), ModelError> {
    const F32: u64 = 4;
    let (a, b, c) = (l.param_u64(0)?, l.param_u64(8)?, l.param_u64(16)?);
    // CAST: `int n`, as the kernel compares it.
    let n = l.param_u32(24)? as i32;
    let block_dim_x = l.dims(l.area.block_dim)?[0];
    let mut hit = Vec::new();
    for bx in 0..l.grid[0] {
        for tx in 0..l.block[0] {
            // The kernel's own 32-bit arithmetic.
            let i = bx.wrapping_mul(block_dim_x).wrapping_add(tx) as i32;
            if i < n && i >= 0 {
                // CAST: non-negative.
                hit.push(i as u64);
            }
        }
    }
    let Some(&last) = hit.iter().max() else {
        return Ok(());
    };
    let len = ((last + 1) * F32) as usize;
    let (mut va, mut vb, mut vc) = (vec![0u8; len], vec![0u8; len], vec![0u8; len]);
    mem.read(a, &mut va)?;
    mem.read(b, &mut vb)?;
    mem.read(c, &mut vc)?;
    let f = |v: &[u8], i: usize| f32::from_le_bytes([v[i], v[i + 1], v[i + 2], v[i + 3]]);
    for i in hit {
        let at = (i * F32) as usize;
        vc[at..at + 4].copy_from_slice(&(f(&va, at) + f(&vb, at)).to_le_bytes());
    }
    mem.write(c, &vc)
}

/// `dims(out)`: every thread writes blockDim, gridDim, its block's linear
/// index and its own linear index in the block, eight words at
/// `out + 8 * (block * threads + thread)`.
fn dims(l: &ModelLaunch, mem: &mut dyn KernelMemory) -> Result<(), ModelError> {
    let out = l.param_u64(0)?;
    let bd = l.dims(l.area.block_dim)?;
    let gd = l.dims(l.area.grid_dim)?;
    let threads = bd[0].wrapping_mul(bd[1]).wrapping_mul(bd[2]);
    for bz in 0..l.grid[2] {
        for by in 0..l.grid[1] {
            for bx in 0..l.grid[0] {
                let t = (bz.wrapping_mul(gd[1]).wrapping_add(by))
                    .wrapping_mul(gd[0])
                    .wrapping_add(bx);
                for tz in 0..l.block[2] {
                    for ty in 0..l.block[1] {
                        for tx in 0..l.block[0] {
                            let i = (tz.wrapping_mul(bd[1]).wrapping_add(ty))
                                .wrapping_mul(bd[0])
                                .wrapping_add(tx);
                            let words = [bd[0], bd[1], bd[2], gd[0], gd[1], gd[2], t, i];
                            let bytes: Vec<u8> =
                                words.iter().flat_map(|w| w.to_le_bytes()).collect();
                            // The kernel's unsigned arithmetic, then a
                            // 64-bit address.
                            let slot = u64::from(t.wrapping_mul(threads).wrapping_add(i));
                            mem.write(out + slot * DIMS_WORDS * 4, &bytes)?;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// One kernel the sim knows by its code.
#[derive(Debug, Clone)]
pub struct KnownKernel {
    pub name: &'static str,
    /// The cubin it was learned from.
    pub cubin: String,
    code: Vec<u8>,
    model: Model,
}

impl KnownKernel {
    /// Compute the launch's effect.
    ///
    /// # Errors
    /// A fault the kernel would meet, or a bank 0 too short for it.
    pub fn run(&self, l: &ModelLaunch, mem: &mut dyn KernelMemory) -> Result<(), ModelError> {
        (self.model)(l, mem)
    }
}

/// What became of one launch on the sim.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ModelOutcome {
    /// Its code is none of the modelled kernels': recorded only.
    #[default]
    NotModelled,
    /// The named model computed its effect.
    Ran(&'static str),
    /// A modelled kernel, but too large a launch to compute.
    TooLarge { name: &'static str, threads: u64 },
}

/// The table of kernels a card models, found by their code.
#[derive(Debug, Clone, Default)]
pub struct KernelModels {
    known: Vec<KnownKernel>,
}

impl KernelModels {
    /// Models of our own fixture kernels (`FIXTURES`).
    pub fn ours() -> KernelModels {
        let mut m = KernelModels::default();
        for (name, cubin) in FIXTURES {
            if let Err(e) = m.learn(name, cubin) {
                // A fixture that does not parse is a build mistake the
                // unit test below catches; the card still runs without it.
                tracing::warn!("the sim's kernel models: {e}");
            }
        }
        m
    }

    /// Learn every modelled kernel `cubin` holds; returns their names.
    ///
    /// # Errors
    /// A cubin that is not an ELF file.
    pub fn learn(&mut self, label: &str, cubin: &[u8]) -> Result<Vec<&'static str>, ModelError> {
        let file = object::File::parse(cubin).map_err(|e| ModelError::Cubin {
            cubin: label.to_string(),
            why: e.to_string(),
        })?;
        let mut learned = Vec::new();
        for section in file.sections() {
            let Some(kernel) = section
                .name()
                .ok()
                .and_then(|n| n.strip_prefix(TEXT_PREFIX))
            else {
                continue;
            };
            let Some(&(name, model)) = MODELS.iter().find(|(n, _)| *n == kernel) else {
                continue;
            };
            let code = section.data().map_err(|e| ModelError::Cubin {
                cubin: label.to_string(),
                why: format!("section {TEXT_PREFIX}{kernel}: {e}"),
            })?;
            if code.is_empty() {
                continue;
            }
            self.known.push(KnownKernel {
                name,
                cubin: label.to_string(),
                code: code.to_vec(),
                model,
            });
            learned.push(name);
        }
        Ok(learned)
    }

    /// The kernels known, with the cubin each came from.
    pub fn known(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.known.iter().map(|k| (k.name, k.cubin.as_str()))
    }

    /// The kernel whose code lies at `program`, if it is one of ours.
    /// Memory that cannot be read there is simply not a known kernel.
    pub fn identify(&self, mem: &mut dyn KernelMemory, program: u64) -> Option<&KnownKernel> {
        let mut buf = Vec::new();
        self.known.iter().find(|k| {
            buf.resize(k.code.len(), 0);
            mem.read(program, &mut buf).is_ok() && buf == k.code
        })
    }

    /// Run the launch's model where its code is a known kernel's.
    ///
    /// # Errors
    /// What the modelled kernel met.
    pub fn run(
        &self,
        program: u64,
        l: &ModelLaunch,
        mem: &mut dyn KernelMemory,
    ) -> Result<ModelOutcome, ModelError> {
        let Some(k) = self.identify(mem, program) else {
            return Ok(ModelOutcome::NotModelled);
        };
        let threads = l.threads();
        if threads > MODEL_THREAD_LIMIT {
            return Ok(ModelOutcome::TooLarge {
                name: k.name,
                threads,
            });
        }
        k.run(l, mem)?;
        Ok(ModelOutcome::Ran(k.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Memory at flat addresses.
    #[derive(Default)]
    struct Flat(BTreeMap<u64, u8>);

    impl KernelMemory for Flat {
        fn read(&mut self, va: u64, out: &mut [u8]) -> Result<(), ModelError> {
            for (i, b) in out.iter_mut().enumerate() {
                *b = *self.0.get(&(va + i as u64)).ok_or(ModelError::Memory {
                    fault: MmuFault::Unreadable {
                        va,
                        level: "page",
                        address: va,
                        why: "unmapped in the test".into(),
                    },
                    access: Access::Read,
                })?;
            }
            Ok(())
        }
        fn write(&mut self, va: u64, data: &[u8]) -> Result<(), ModelError> {
            for (i, b) in data.iter().enumerate() {
                self.0.insert(va + i as u64, *b);
            }
            Ok(())
        }
    }

    fn put(bank: &mut [u8], at: usize, v: &[u8]) {
        bank[at..at + v.len()].copy_from_slice(v);
    }

    fn bank0(area: DriverArea, block: [u32; 3], grid: [u32; 3], params: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; area.param_base as usize + params.len()];
        for (i, d) in block.iter().enumerate() {
            put(&mut b, area.block_dim as usize + 4 * i, &d.to_le_bytes());
        }
        for (i, d) in grid.iter().enumerate() {
            put(&mut b, area.grid_dim as usize + 4 * i, &d.to_le_bytes());
        }
        put(&mut b, area.param_base as usize, params);
        b
    }

    #[test]
    fn every_fixture_kernel_is_learned() {
        let m = KernelModels::ours();
        let known: Vec<_> = m.known().collect();
        for (fixture, _) in FIXTURES {
            let kernel = fixture.split('.').next().unwrap();
            assert!(
                known.contains(&(kernel, *fixture)),
                "{fixture} not learned: {known:?}"
            );
        }
        let e = KernelModels::default()
            .learn("junk", b"not an elf")
            .unwrap_err();
        assert!(matches!(e, ModelError::Cubin { .. }), "{e}");
    }

    #[test]
    fn vector_add_found_by_its_code_adds_where_the_kernel_would() {
        let m = KernelModels::ours();
        let area = macuda_hw::cbank0::for_sm(120).unwrap();
        let code = &m
            .known
            .iter()
            .find(|k| k.cubin == "vector_add.sm_120")
            .unwrap()
            .code;
        let mut mem = Flat::default();
        let (program, a, b, c) = (0x10_0000u64, 0x20_0000u64, 0x30_0000u64, 0x40_0000u64);
        mem.write(program, code).unwrap();
        let n = 300u32;
        for i in 0..512u64 {
            mem.write(a + 4 * i, &(i as f32).to_le_bytes()).unwrap();
            mem.write(b + 4 * i, &(0.5f32).to_le_bytes()).unwrap();
            mem.write(c + 4 * i, &(-1f32).to_le_bytes()).unwrap();
        }
        let mut params = Vec::new();
        for p in [a, b, c] {
            params.extend(p.to_le_bytes());
        }
        params.extend(n.to_le_bytes());
        let bank = bank0(area, [128, 1, 1], [3, 1, 1], &params);
        let launch = ModelLaunch {
            grid: [3, 1, 1],
            block: [128, 1, 1],
            bank0: &bank,
            area,
        };
        assert_eq!(
            m.run(program, &launch, &mut mem).unwrap(),
            ModelOutcome::Ran("vector_add")
        );
        let mut out = [0u8; 4];
        for i in 0..512u64 {
            mem.read(c + 4 * i, &mut out).unwrap();
            let want = if i < u64::from(n) {
                i as f32 + 0.5
            } else {
                -1.0
            };
            assert_eq!(f32::from_le_bytes(out), want, "c[{i}]");
        }
        // Other code at the program address: recorded only, nothing
        // written.
        mem.write(program, &[0u8; 16]).unwrap();
        mem.write(c, &7f32.to_le_bytes()).unwrap();
        assert_eq!(
            m.run(program, &launch, &mut mem).unwrap(),
            ModelOutcome::NotModelled
        );
        mem.read(c, &mut out).unwrap();
        assert_eq!(f32::from_le_bytes(out), 7.0);
        // A bank 0 cut short before the parameters is the launch's fault.
        mem.write(program, code).unwrap();
        let short = ModelLaunch {
            bank0: &bank[..area.param_base as usize + 8],
            ..launch
        };
        assert!(matches!(
            m.run(program, &short, &mut mem),
            Err(ModelError::ShortBank0 { .. })
        ));
        // Too many threads: not computed, and said so.
        let huge = ModelLaunch {
            grid: [1 << 20, 1, 1],
            ..launch
        };
        assert_eq!(
            m.run(program, &huge, &mut mem).unwrap(),
            ModelOutcome::TooLarge {
                name: "vector_add",
                threads: (1 << 20) * 128
            }
        );
    }

    #[test]
    fn dims_reads_the_driver_words_of_bank_0() {
        let m = KernelModels::ours();
        let area = macuda_hw::cbank0::for_sm(90).unwrap();
        let code = m
            .known
            .iter()
            .find(|k| k.cubin == "dims.sm_90")
            .unwrap()
            .code
            .clone();
        let mut mem = Flat::default();
        let (program, out) = (0x1000u64, 0x8000u64);
        mem.write(program, &code).unwrap();
        let (grid, block) = ([2, 3, 1], [4, 2, 2]);
        let bank = bank0(area, block, grid, &out.to_le_bytes());
        let launch = ModelLaunch {
            grid,
            block,
            bank0: &bank,
            area,
        };
        assert_eq!(
            m.run(program, &launch, &mut mem).unwrap(),
            ModelOutcome::Ran("dims")
        );
        let threads = 16u64;
        // Block (1, 2, 0) is linear block (0 * 3 + 2) * 2 + 1 = 5; thread
        // (3, 1, 1) is linear thread (1 * 2 + 1) * 4 + 3 = 15.
        let (t, l) = (5u64, 15u64);
        let mut words = [0u8; 32];
        mem.read(out + (t * threads + l) * 32, &mut words).unwrap();
        let w: Vec<u32> = words
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(w, vec![4, 2, 2, 2, 3, 1, 5, 15]);
        // A wrong blockDim in bank 0 shows in what the model writes, as it
        // would in what the kernel writes.
        let wrong = bank0(area, [1, 2, 2], grid, &out.to_le_bytes());
        let launch = ModelLaunch {
            bank0: &wrong,
            ..launch
        };
        m.run(program, &launch, &mut mem).unwrap();
        mem.read(out, &mut words).unwrap();
        assert_eq!(u32::from_le_bytes(words[..4].try_into().unwrap()), 1);
    }
}
