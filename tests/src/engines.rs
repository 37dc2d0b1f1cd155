//! The simulated GPU's submission half, small: a copy engine and a compute
//! engine that execute captured submissions the way the hardware would
//! order them. Each engine runs its own queue in order; a semaphore acquire
//! blocks its engine until the 64-bit value in memory reaches the payload;
//! a release writes it; a compute launch walks the QMD chain from the head
//! and performs each QMD's releases after its kernel. A scheduler picks
//! which unblocked engine moves next from a seed, so a test can run many
//! interleavings and check that the ordering holds in all of them - which
//! reading the streams alone cannot show.

use macuda_hw::methods::{compute, copy};
use macuda_hw::push::{SUBCHANNEL_COMPUTE, SUBCHANNEL_COPY};
use macuda_hw::qmd::LaunchDescriptor;
use macuda_sim::pbdma::{decode, EngineStep, Pbdma};
use macuda_submit::Submission;
use std::collections::{HashMap, VecDeque};

/// (method, data word) of every method in a push buffer, in order (the
/// simulated GPU's own header decoder, `macuda_sim::pbdma`).
///
/// # Panics
/// A word that is not a method header where one must be.
pub fn methods(words: &[u32]) -> Vec<(u32, u32)> {
    macuda_sim::pbdma::decode(words)
        .expect("a push buffer of ours decodes")
        .into_iter()
        .map(|c| (c.method, c.data))
        .collect()
}

/// One thing an engine does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Acquire {
        address: u64,
        value: u64,
    },
    Release {
        address: u64,
        value: u64,
        /// The engine also writes its clock at `address + 8`.
        stamped: bool,
    },
    Copy {
        src: u64,
        dst: u64,
        line_bytes: u64,
        lines: u64,
        /// Bytes from one line's start to the next (0 for one line).
        src_pitch: u64,
        dst_pitch: u64,
        fill: Option<u32>,
    },
    Launch {
        qmd_address: u64,
    },
    /// The compute engine writes bytes the push buffer carried.
    InlineWrite {
        dst: u64,
        data: Vec<u8>,
    },
    /// The channel's shader local memory: bytes per TPC
    /// (SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B).
    LocalMemory {
        per_tpc: u64,
    },
}

/// The steps of one push buffer, read as the simulated GPU's PBDMA reads
/// it (`macuda_sim::pbdma`), on a channel where our stack's prologue has
/// bound its classes: compute on [`SUBCHANNEL_COMPUTE`], copy on
/// [`SUBCHANNEL_COPY`] (the class numbers matter only for which engine).
///
/// # Panics
/// A word that is not a method header where one must be.
pub fn steps(words: &[u32]) -> Vec<Step> {
    let mut pbdma = Pbdma::with_bound(&[
        (SUBCHANNEL_COMPUTE, compute::HOPPER_COMPUTE_A),
        (SUBCHANNEL_COPY, copy::HOPPER_DMA_COPY_A),
    ]);
    let calls = decode(words).expect("a push buffer of ours decodes");
    pbdma
        .execute(&calls)
        .into_iter()
        .filter_map(|s| match s {
            EngineStep::Acquire {
                address, payload, ..
            } => Some(Step::Acquire {
                address,
                value: payload,
            }),
            EngineStep::Release {
                address,
                payload,
                stamped,
                ..
            } => Some(Step::Release {
                address,
                value: payload,
                stamped,
            }),
            EngineStep::Copy {
                src,
                dst,
                line_bytes,
                lines,
                src_pitch,
                dst_pitch,
                fill,
                ..
            } => Some(Step::Copy {
                src,
                dst,
                line_bytes,
                lines,
                src_pitch,
                dst_pitch,
                fill,
            }),
            EngineStep::Launch { qmd_address, .. } => Some(Step::Launch { qmd_address }),
            EngineStep::LocalMemory { per_tpc } => Some(Step::LocalMemory { per_tpc }),
            EngineStep::Unbound { subchannel, method } => {
                panic!("a method {method:#x} on subchannel {subchannel}, which ours never binds")
            }
            EngineStep::InlineWrite { dst, data } => Some(Step::InlineWrite { dst, data }),
            EngineStep::Bound { .. } => None,
        })
        .collect()
}

/// What the engines did, in the order they did it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    Copy {
        dst: u64,
        bytes: u64,
        fill: Option<u32>,
    },
    /// Bytes the compute engine wrote from the push buffer.
    Upload {
        dst: u64,
        bytes: u64,
    },
    /// One kernel of a chain: its QMD's address and grid.
    Kernel {
        qmd_address: u64,
        grid: [u32; 3],
    },
    Release {
        address: u64,
        value: u64,
    },
}

/// Why the engines stopped before running everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stall {
    /// Every engine with work left waits on a semaphore nobody will release.
    Deadlock { waiting: Vec<(String, u64, u64)> },
    /// A chain that does not end.
    EndlessChain { head: u64 },
}

/// The engines over one set of captured submissions.
pub struct Engines {
    queues: Vec<(String, VecDeque<Step>)>,
    semaphores: HashMap<u64, u64>,
    pub log: Vec<Done>,
}

impl Engines {
    /// One engine per queue name, each with its submissions in order.
    pub fn new(submissions: &[Submission]) -> Engines {
        let mut queues: Vec<(String, VecDeque<Step>)> = Vec::new();
        for s in submissions {
            let i = match queues.iter().position(|(n, _)| *n == s.queue) {
                Some(i) => i,
                None => {
                    queues.push((s.queue.clone(), VecDeque::new()));
                    queues.len() - 1
                }
            };
            queues[i].1.extend(steps(&s.words));
        }
        Engines {
            queues,
            semaphores: HashMap::new(),
            log: Vec::new(),
        }
    }

    /// Drop every semaphore wait from a queue: what a stream would do
    /// without its cross-queue waits (to show the waits are what orders it).
    pub fn remove_waits(&mut self, queue: &str) {
        for (name, q) in &mut self.queues {
            if name == queue {
                q.retain(|s| !matches!(s, Step::Acquire { .. }));
            }
        }
    }

    /// The steps a queue has left.
    pub fn queued(&self, queue: &str) -> Vec<Step> {
        self.queues
            .iter()
            .filter(|(n, _)| n == queue)
            .flat_map(|(_, q)| q.iter().cloned())
            .collect()
    }

    /// The 64-bit value at a semaphore address (0 before any release).
    pub fn semaphore(&self, address: u64) -> u64 {
        self.semaphores.get(&address).copied().unwrap_or(0)
    }

    /// Run to the end, choosing among the engines that can move with a
    /// generator seeded by `seed`; `qmd` reads the descriptor at an address.
    ///
    /// # Errors
    /// A deadlock or a chain that does not end.
    pub fn run(
        &mut self,
        seed: u64,
        qmd: &mut dyn FnMut(u64) -> LaunchDescriptor,
    ) -> Result<(), Stall> {
        let mut state = seed | 1;
        loop {
            let ready: Vec<usize> = (0..self.queues.len())
                .filter(|&i| match self.queues[i].1.front() {
                    Some(Step::Acquire { address, value }) => self.semaphore(*address) >= *value,
                    Some(_) => true,
                    None => false,
                })
                .collect();
            if ready.is_empty() {
                let waiting: Vec<(String, u64, u64)> = self
                    .queues
                    .iter()
                    .filter_map(|(n, q)| match q.front() {
                        Some(Step::Acquire { address, value }) => {
                            Some((n.clone(), *address, *value))
                        }
                        _ => None,
                    })
                    .collect();
                return if waiting.is_empty() {
                    Ok(())
                } else {
                    Err(Stall::Deadlock { waiting })
                };
            }
            // xorshift: enough to vary the interleaving from seed to seed.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // CAST: an index below the number of engines.
            let pick = ready[(state % ready.len() as u64) as usize];
            let step = self.queues[pick]
                .1
                .pop_front()
                .expect("ready engine has a step");
            self.execute(step, qmd)?;
        }
    }

    fn execute(
        &mut self,
        step: Step,
        qmd: &mut dyn FnMut(u64) -> LaunchDescriptor,
    ) -> Result<(), Stall> {
        match step {
            Step::Acquire { .. } | Step::LocalMemory { .. } => {}
            Step::Release { address, value, .. } => self.release(address, value),
            Step::Copy {
                dst,
                line_bytes,
                lines,
                fill,
                ..
            } => self.log.push(Done::Copy {
                dst,
                bytes: line_bytes * lines,
                fill,
            }),
            Step::InlineWrite { dst, data } => self.log.push(Done::Upload {
                dst,
                bytes: data.len() as u64,
            }),
            Step::Launch { qmd_address } => {
                let mut at = qmd_address;
                for _ in 0..=u16::MAX {
                    let d = qmd(at);
                    self.log.push(Done::Kernel {
                        qmd_address: at,
                        grid: d.grid,
                    });
                    for r in d.releases.iter().filter(|r| r.enable) {
                        self.release(r.address, r.payload);
                    }
                    if !d.dependents[0].enable {
                        return Ok(());
                    }
                    at = d.dependents[0].qmd_address;
                }
                return Err(Stall::EndlessChain { head: qmd_address });
            }
        }
        Ok(())
    }

    fn release(&mut self, address: u64, value: u64) {
        self.semaphores.insert(address, value);
        self.log.push(Done::Release { address, value });
    }
}
