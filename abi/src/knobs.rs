//! Settings of ours a user or a test sets in the environment, read once
//! when the runtime starts, for finding a bad kernel or a bad seam:
//!
//! - `MACUDA_CHAIN_DEPTH=N`: launches linked into one chain before it is
//!   handed over (the submit actor's default otherwise).
//! - `MACUDA_SYNC_LAUNCHES=1`: wait for every launch before the call
//!   returns, so the first kernel that faults is the one named in the
//!   error (on stderr) instead of a later synchronise.
//! - `MACUDA_INJECT=ACTOR[.REQUEST]:panic|error|hang:N` (as `macuda
//!   --inject`): a fault at an actor's Nth request, to see a program live
//!   through the recovery contract (the error it is given, the crash
//!   report, the next process running normally).
//! - `MACUDA_INJECT_GPU_FAULT=N`: the Nth kernel launch (counted from
//!   the start, graph replays included) has its first 8-byte parameter
//!   replaced by an address nothing is mapped at, so that kernel faults on
//!   the GPU (an MMU fault), to see a program live through a real one.
//! - `MACUDA_SYNC_PATIENCE=SECONDS`: how long a sync point waits with its
//!   queue's timeline standing still before it calls the queue stuck
//!   (`cudaErrorLaunchTimeout`; the submit actor's default otherwise), to
//!   tell a queue a loaded GPU runs slowly from one that never moves.
//! - `MACUDA_COPY_ENGINE=N|compute`: the copy channel in a channel group
//!   of its own on copy engine N (`NV2080_ENGINE_TYPE_COPYn`, as CUDA
//!   places its copies), or in the compute channel's group (`compute`, the
//!   default), to compare how copies fare on a GPU many processes share.
//! - `MACUDA_CHAIN_MEMBAR=gpu|system`: the memory barrier at the end of a
//!   grid that another of its chain follows (`system` by default, as
//!   CUDA's stream launches have it; `gpu` is enough for the next grid,
//!   and the chain's tail keeps the system one either way), to measure
//!   what the wider barrier costs a chain of small kernels.
//! - `MACUDA_CHAIN_LINK=invalidate-copy|schedule`: what a completed grid
//!   does to the next QMD of its chain (re-read it from memory and launch
//!   it, the default, or launch it as the engine fetched it), to measure
//!   what the re-read costs a chain.
//! - `MACUDA_LAUNCH_INVALIDATE=cuda|all|none|NAME,...`: the caches every
//!   launch invalidates before its grid runs (`cuda` by default, as CUDA's
//!   graph QMDs: texture header, sampler and data, and shader data, with
//!   the constant caches invalidated once at each chain's head; `all` adds
//!   shader constant and each bound bank's to every launch; names as
//!   `macuda_submit::LaunchInvalidates::parse` takes), a diagnostic to
//!   measure what each costs: the seed notes saw greedy text change with
//!   them off while the op suite still passed.
//! - `MACUDA_CHAIN_PREFETCH=next|none`: each grid of a chain prefetches the
//!   next one's code and bank 0 while it runs (`next`, the default, as
//!   CUDA's graph QMDs do), or each grid fetches its own at launch
//!   (`none`), to set the two side by side.
//! - `MACUDA_CARVE_OUT_MIN=occupancy|block`: the least shared-memory
//!   carve-out a launch lets an SM run it in: the one that holds every
//!   block the SM takes in at once (`occupancy`, the default, also the
//!   target), or the one that holds a single block (`block`, as CUDA's
//!   graph QMDs ask), to measure whether SMs reconfiguring between grids
//!   of differing needs cost a chain.
//! - `MACUDA_GRAPH_REPLAY=recorded|nodes`: a CUDA graph's launches replay
//!   its kernel runs as chains recorded on the card (`recorded`, the
//!   default) or node by node as a stream runs them (`nodes`, as before
//!   chains were recorded), to set the two side by side.
//! - `MACUDA_SMALL_UPLOADS=inline|staged|cpu`: an upload from pageable
//!   memory of up to 64 KiB travels in the compute queue's push buffer
//!   and the engine writes it (`inline`, the default), or is staged in
//!   pinned memory and carried by the copy engine (`staged`, as before),
//!   or, when the GPU has nothing of ours left to run, the CPU writes it
//!   into video memory itself through the card's BAR1 mapping (`cpu`: a
//!   decode token's six input uploads, each followed by a sync, then wait
//!   for nothing), to set them side by side.
//! - `MACUDA_SYNC_WAIT=caller|actor`: who waits out a stream or device
//!   sync: the caller's own thread, reading the timelines (`caller`, the
//!   default where the card maps them), or the submit actor, through its
//!   mailbox (`actor`), to compare what the hand-over between threads
//!   costs on busy CPUs.
//! - `MACUDA_HUGE_PAGES_FROM=BYTES`: on the kernel path, video memory
//!   allocations from this size take 2 MiB pages (the module path's own
//!   threshold otherwise), to measure what the GPU's TLB misses on 4 KiB
//!   pages cost a chain whose QMDs and banks 0 lie in a region smaller
//!   than that threshold.
//! - `MACUDA_PROFILE=FILE`: the per-kernel GPU timeline, written at exit
//!   as a trace-event JSON at FILE (ui.perfetto.dev opens it) and a text
//!   summary at FILE.txt (`crate::profile_trace`).
//! - `MACUDA_LOG=FILTER` (as for the `macuda` command): the stack's log on
//!   stderr, e.g. why a `cudaMalloc` was refused (`warn`, the least that
//!   says it).
//!
//! A value that does not parse stops the runtime from starting, with the
//! variable named: a check that silently ran with the defaults would
//! report the wrong thing.

use macuda_supervisor::cli::InjectSpec;
use std::ffi::OsString;

pub const CHAIN_DEPTH: &str = "MACUDA_CHAIN_DEPTH";
pub const SYNC_LAUNCHES: &str = "MACUDA_SYNC_LAUNCHES";
pub const SYNC_PATIENCE: &str = "MACUDA_SYNC_PATIENCE";
pub const COPY_ENGINE: &str = "MACUDA_COPY_ENGINE";
pub const CHAIN_MEMBAR: &str = "MACUDA_CHAIN_MEMBAR";
pub const CHAIN_LINK: &str = "MACUDA_CHAIN_LINK";
pub const LAUNCH_INVALIDATE: &str = "MACUDA_LAUNCH_INVALIDATE";
pub const GRAPH_REPLAY: &str = "MACUDA_GRAPH_REPLAY";
pub const CHAIN_PREFETCH: &str = "MACUDA_CHAIN_PREFETCH";
pub const CARVE_OUT_MIN: &str = "MACUDA_CARVE_OUT_MIN";
pub const SYNC_WAIT: &str = "MACUDA_SYNC_WAIT";
pub const SMALL_UPLOADS: &str = "MACUDA_SMALL_UPLOADS";
pub const HUGE_PAGES_FROM: &str = "MACUDA_HUGE_PAGES_FROM";
pub const LOG: &str = "MACUDA_LOG";
pub const PROFILE: &str = "MACUDA_PROFILE";
pub const INJECT: &str = "MACUDA_INJECT";
pub const INJECT_GPU_FAULT: &str = "MACUDA_INJECT_GPU_FAULT";

/// With `MACUDA_LOG` set, the stack's log goes to stderr through that
/// filter (unless the program installed a subscriber of its own).
///
/// # Errors
/// A filter that does not parse.
pub fn start_log() -> Result<(), KnobError> {
    let Some(v) = std::env::var_os(LOG) else {
        return Ok(());
    };
    let v = v.to_string_lossy().into_owned();
    let filter = tracing_subscriber::EnvFilter::try_new(&v).map_err(|_| KnobError {
        name: LOG,
        value: v,
        expected: "a log filter such as warn, info or macuda_memory=debug",
    })?;
    // A subscriber the program set up first stays.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    Ok(())
}

/// How an upload of up to 64 KiB travels (`MACUDA_SMALL_UPLOADS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SmallUploads {
    /// In the compute queue's push buffer; the engine writes it.
    #[default]
    Inline,
    /// Staged in pinned memory, carried by the copy engine.
    Staged,
    /// Written by the CPU through the card's mapping of video memory when
    /// the GPU has nothing of ours left to run, else inline.
    Cpu,
}

#[derive(Debug, Clone, Default)]
pub struct Knobs {
    pub chain_depth: Option<usize>,
    pub sync_launches: bool,
    pub sync_patience: Option<std::time::Duration>,
    pub copy_placement: Option<macuda_gsp::CopyPlacement>,
    /// The barrier between the grids of a chain.
    pub chain_membar: Option<macuda_submit::GridMembar>,
    /// How a grid hands over to the next of its chain.
    pub chain_link: Option<macuda_submit::ChainLink>,
    /// The caches every launch invalidates.
    pub launch_invalidates: Option<macuda_submit::LaunchInvalidates>,
    /// Whether a grid prefetches the next one's code and bank 0.
    pub chain_prefetch: Option<bool>,
    /// The least carve-out a launch lets an SM run it in.
    pub carve_out_min: Option<macuda_submit::CarveOutMin>,
    /// Graph launches replay node by node instead of as recorded chains.
    pub graph_nodes: bool,
    /// How small uploads travel.
    pub small_uploads: SmallUploads,
    /// Whether the caller waits out its syncs itself (`None`: the
    /// submit actor's default).
    pub caller_waits: Option<bool>,
    /// Video memory allocations from this many bytes take huge pages.
    pub huge_pages_from: Option<u64>,
    /// Where the GPU timeline goes at exit.
    pub profile: Option<std::path::PathBuf>,
    pub inject: Option<InjectSpec>,
    /// The launch (1-based) that is made to fault.
    pub gpu_fault_at: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}={value:?}: {expected}")]
pub struct KnobError {
    pub name: &'static str,
    pub value: String,
    pub expected: &'static str,
}

impl Knobs {
    /// From the process's environment.
    ///
    /// # Errors
    /// A set variable whose value does not parse.
    pub fn from_env() -> Result<Knobs, KnobError> {
        Knobs::from_lookup(|name| std::env::var_os(name))
    }

    /// From any lookup of variables (the environment, or a test's map).
    ///
    /// # Errors
    /// As `from_env`.
    pub fn from_lookup(get: impl Fn(&str) -> Option<OsString>) -> Result<Knobs, KnobError> {
        let text = |name: &'static str| get(name).map(|v| v.to_string_lossy().into_owned());
        // A whole number of at least 1, or the knob's error.
        let positive =
            |name: &'static str, expected: &'static str| -> Result<Option<u64>, KnobError> {
                text(name)
                    .map(|v| {
                        v.trim()
                            .parse::<u64>()
                            .ok()
                            .filter(|&n| n > 0)
                            .ok_or(KnobError {
                                name,
                                value: v,
                                expected,
                            })
                    })
                    .transpose()
            };
        let chain_depth = positive(CHAIN_DEPTH, "a whole number of launches, at least 1")?
            .map(|d| usize::try_from(d).unwrap_or(usize::MAX));
        let sync_patience = positive(SYNC_PATIENCE, "a whole number of seconds, at least 1")?
            .map(std::time::Duration::from_secs);
        let copy_placement = match text(COPY_ENGINE) {
            None => None,
            Some(v) => Some(match v.trim() {
                "compute" => macuda_gsp::CopyPlacement::ComputeGroup,
                n => n
                    .parse::<u8>()
                    .ok()
                    .filter(|&n| usize::from(n) < macuda_hw::rm::ENGINE_TYPE_COPY.len())
                    .map(macuda_gsp::CopyPlacement::CopyEngine)
                    .ok_or(KnobError {
                        name: COPY_ENGINE,
                        value: v,
                        expected: "a copy engine's number, 0 to 9, or compute",
                    })?,
            }),
        };
        // One of a few words, each meaning a value, or the knob's error.
        fn word<T: Copy>(
            name: &'static str,
            value: Option<String>,
            words: &[(&str, T)],
            expected: &'static str,
        ) -> Result<Option<T>, KnobError> {
            value
                .map(|v| {
                    words
                        .iter()
                        .find(|(w, _)| *w == v.trim())
                        .map(|&(_, t)| t)
                        .ok_or(KnobError {
                            name,
                            value: v,
                            expected,
                        })
                })
                .transpose()
        }
        let chain_membar = word(
            CHAIN_MEMBAR,
            text(CHAIN_MEMBAR),
            &[
                ("system", macuda_submit::GridMembar::System),
                ("gpu", macuda_submit::GridMembar::Gpu),
            ],
            "gpu or system",
        )?;
        let chain_link = word(
            CHAIN_LINK,
            text(CHAIN_LINK),
            &[
                (
                    "invalidate-copy",
                    macuda_submit::ChainLink::InvalidateCopySchedule,
                ),
                ("schedule", macuda_submit::ChainLink::Schedule),
            ],
            "invalidate-copy or schedule",
        )?;
        let launch_invalidates = text(LAUNCH_INVALIDATE)
            .map(|v| {
                macuda_submit::LaunchInvalidates::parse(&v).ok_or(KnobError {
                    name: LAUNCH_INVALIDATE,
                    value: v,
                    expected: "cuda, all, none, or texture-header, texture-sampler, texture-data, shader-data, shader-constant, constant-banks joined by commas",
                })
            })
            .transpose()?;
        let chain_prefetch = word(
            CHAIN_PREFETCH,
            text(CHAIN_PREFETCH),
            &[("next", true), ("none", false)],
            "next or none",
        )?;
        let carve_out_min = word(
            CARVE_OUT_MIN,
            text(CARVE_OUT_MIN),
            &[
                ("occupancy", macuda_submit::CarveOutMin::Occupancy),
                ("block", macuda_submit::CarveOutMin::OneBlock),
            ],
            "occupancy or block",
        )?;
        let graph_nodes = word(
            GRAPH_REPLAY,
            text(GRAPH_REPLAY),
            &[("recorded", false), ("nodes", true)],
            "recorded or nodes",
        )?
        .unwrap_or(false);
        let small_uploads = word(
            SMALL_UPLOADS,
            text(SMALL_UPLOADS),
            &[
                ("inline", SmallUploads::Inline),
                ("staged", SmallUploads::Staged),
                ("cpu", SmallUploads::Cpu),
            ],
            "inline, staged or cpu",
        )?
        .unwrap_or_default();
        let caller_waits = word(
            SYNC_WAIT,
            text(SYNC_WAIT),
            &[("caller", true), ("actor", false)],
            "caller or actor",
        )?;
        let profile = match get(PROFILE) {
            None => None,
            Some(v) if v.is_empty() => {
                return Err(KnobError {
                    name: PROFILE,
                    value: String::new(),
                    expected: "a file to write the GPU timeline to",
                })
            }
            Some(v) => Some(std::path::PathBuf::from(v)),
        };
        let sync_launches = match text(SYNC_LAUNCHES).as_deref().map(str::trim) {
            None | Some("" | "0") => false,
            Some("1") => true,
            Some(v) => {
                return Err(KnobError {
                    name: SYNC_LAUNCHES,
                    value: v.to_string(),
                    expected: "0 or 1",
                })
            }
        };
        let inject = match text(INJECT) {
            None => None,
            Some(v) => Some(v.trim().parse::<InjectSpec>().map_err(|_| KnobError {
                name: INJECT,
                value: v,
                expected: "ACTOR[.REQUEST]:panic|error|hang:N, as macuda --inject takes",
            })?),
        };
        let huge_pages_from = positive(HUGE_PAGES_FROM, "a whole number of bytes, at least 1")?;
        let gpu_fault_at = positive(
            INJECT_GPU_FAULT,
            "the number of the launch to fault, from 1",
        )?;
        Ok(Knobs {
            chain_depth,
            sync_launches,
            sync_patience,
            copy_placement,
            chain_membar,
            chain_link,
            launch_invalidates,
            chain_prefetch,
            carve_out_min,
            graph_nodes,
            small_uploads,
            caller_waits,
            huge_pages_from,
            profile,
            inject,
            gpu_fault_at,
        })
    }
}

/// With `MACUDA_INJECT_GPU_FAULT`, whether launch number `n` (1-based)
/// is the one to fault, and if so `params` with its first 8-byte
/// parameter pointing at nothing. `layout` is (offset, size) per
/// parameter. A kernel without an 8-byte parameter is left alone.
pub fn faulted_params(
    at: Option<u64>,
    n: u64,
    params: &[u8],
    layout: &[(usize, usize)],
) -> Option<Vec<u8>> {
    if at != Some(n) {
        return None;
    }
    let &(offset, size) = layout.iter().find(|&&(_, size)| size == 8)?;
    let mut bytes = params.to_vec();
    bytes
        .get_mut(offset..offset + size)?
        .copy_from_slice(&macuda_memory::NEVER_MAPPED_VA.to_le_bytes());
    Some(bytes)
}

/// Knobs from name-value pairs instead of the environment, for tests here
/// and in the modules that read knobs.
#[cfg(test)]
impl Knobs {
    pub(crate) fn from_pairs(vars: &[(&str, &str)]) -> Result<Knobs, KnobError> {
        let m: std::collections::HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Knobs::from_lookup(|name| m.get(name).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn knobs(vars: &[(&str, &str)]) -> Result<Knobs, KnobError> {
        Knobs::from_pairs(vars)
    }

    #[test]
    fn unset_means_the_defaults() {
        let k = knobs(&[]).unwrap();
        assert_eq!((k.chain_depth, k.sync_launches), (None, false));
        assert!(k.inject.is_none());
    }

    #[test]
    fn values_parse() {
        let k = knobs(&[
            (CHAIN_DEPTH, "32"),
            (SYNC_LAUNCHES, "1"),
            (INJECT_GPU_FAULT, "7"),
        ])
        .unwrap();
        assert_eq!(k.chain_depth, Some(32));
        assert_eq!(k.gpu_fault_at, Some(7));
        assert!(k.sync_launches);
        assert!(!knobs(&[(SYNC_LAUNCHES, "0")]).unwrap().sync_launches);
    }

    #[test]
    fn only_the_named_launch_is_made_to_fault_through_its_first_pointer() {
        let params: Vec<u8> = (0..20).collect();
        let layout = [(0, 4), (8, 8), (16, 4)];
        assert_eq!(faulted_params(None, 1, &params, &layout), None);
        assert_eq!(faulted_params(Some(2), 1, &params, &layout), None);
        let hit = faulted_params(Some(2), 2, &params, &layout).unwrap();
        assert_eq!(&hit[..8], &params[..8]);
        assert_eq!(
            u64::from_le_bytes(hit[8..16].try_into().unwrap()),
            macuda_memory::NEVER_MAPPED_VA
        );
        assert_eq!(&hit[16..], &params[16..]);
        assert_eq!(
            faulted_params(Some(1), 1, &params, &[(0, 4)]),
            None,
            "no pointer to aim"
        );
    }

    #[test]
    fn bad_values_are_named() {
        for (name, value) in [
            (CHAIN_DEPTH, "0"),
            (CHAIN_DEPTH, "deep"),
            (CHAIN_DEPTH, "-4"),
            (SYNC_LAUNCHES, "yes"),
            (INJECT, "submit:explode:1"),
            (INJECT, "nobody:panic:1"),
            (INJECT_GPU_FAULT, "0"),
            (INJECT_GPU_FAULT, "first"),
        ] {
            let e = knobs(&[(name, value)]).unwrap_err();
            assert_eq!(e.name, name);
            assert!(e.to_string().starts_with(name), "{e}");
        }
    }
}
