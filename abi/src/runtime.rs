//! The process's one runtime: the Host it drives, started on the first call
//! that needs a device, and the state CUDA keeps per process (streams,
//! events, allocations, graphs). Nothing here runs before a CUDA call
//! needs it: registration happens in static constructors, before `main`.
//!
//! The device comes from `MACUDA_DEVICE` (the CLI's `--device` forms). Left
//! unset, the best GPU present is used and, with none, calls answer
//! `cudaErrorNoDevice` as NVIDIA's runtime does; the null device (which
//! executes nothing) is used only when asked for by name.

use crate::device::{arch_limits, DeviceFacts, Execution};
use crate::error::CudaError;
use crate::knobs::Knobs;
use crate::launch_log::LaunchLog;
use crate::state::graphs::GraphTable;
use crate::state::memory_map::MemoryMap;
use crate::state::streams::{EventTable, StreamTable};
use macuda_memory::DeviceWindow;
use macuda_pci::DeviceSpec;
use macuda_pci::{NullCard, NullOpener, NullProfile};
use macuda_submit::{CallerSync, LaneItem, LaunchLane, StreamId};
use macuda_supervisor::{Host, HostConfig, HostError, Stack};
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How long a call waits on the actors before the Host gives up on them.
const DEADLINE: Duration = Duration::from_secs(30);
/// The Host's deadline when a sync point may wait `patience` on a queue
/// standing still: long enough that the sync reports the stuck queue
/// itself (and where both queues stood) before its caller gives up on the
/// actor and calls it failed.
fn deadline_for(patience: Duration) -> Duration {
    DEADLINE.max(patience * 2)
}

/// Report slots of the GPU timeline under `MACUDA_PROFILE` (16 bytes each,
/// 1 MiB of pinned memory): far more launches than a sync interval of
/// llama.cpp's holds, so the ring is read before it wraps.
pub const PROFILE_SLOTS: u32 = 1 << 16;

/// How long exit waits for calls still in flight on other threads.
const EXIT_WAIT: Duration = Duration::from_secs(5);

pub struct Runtime {
    host: RwLock<Option<Host>>,
    pub(crate) lane: LaunchLane,
    pub(crate) execution: Execution,
    pub(crate) facts: DeviceFacts,
    /// The submit stream the legacy and per-thread default streams use.
    pub(crate) default_stream: StreamId,
    pub(crate) streams: StreamTable,
    pub(crate) events: EventTable,
    pub(crate) graphs: GraphTable,
    pub(crate) memory: Mutex<MemoryMap>,
    pub(crate) log: Option<LaunchLog>,
    /// The environment's settings of ours (`crate::knobs`).
    pub(crate) knobs: Knobs,
    /// Kernel launches handed to the lane so far (graph replays included),
    /// counted while `MACUDA_INJECT_GPU_FAULT` is set.
    pub(crate) launches: std::sync::atomic::AtomicU64,
    /// One more than the lane's count at the last sync that returned (see
    /// [`Runtime::synchronize`]); 0 until one has.
    synced_past: std::sync::atomic::AtomicU64,
    /// The CPU's window on each device allocation the CPU has written
    /// small uploads into (`MACUDA_SMALL_UPLOADS=cpu`), by its base; `None`
    /// where the card gives it none. Dropped when the allocation is freed.
    pub(crate) windows: Mutex<BTreeMap<u64, Option<DeviceWindow>>>,
}

static RUNTIME: OnceLock<Result<Runtime, CudaError>> = OnceLock::new();
/// Set at exit: later calls answer `cudaErrorCudartUnloading`.
static UNLOADING: AtomicBool = AtomicBool::new(false);

/// The runtime, started on first use.
pub fn runtime() -> Result<&'static Runtime, CudaError> {
    if UNLOADING.load(Ordering::Acquire) {
        return Err(CudaError::CUDART_UNLOADING);
    }
    match RUNTIME.get_or_init(start) {
        Ok(r) => Ok(r),
        Err(e) => Err(*e),
    }
}

/// Start the runtime over a Host the caller made (tests hold a fake of the
/// kernel module this way), before any CUDA call starts one from
/// `MACUDA_DEVICE`. Exit shuts it down as it would its own.
///
/// # Errors
/// `cudaErrorIllegalState` when a runtime is already running, and the
/// start-up errors of [`Runtime::over`].
pub fn install(host: Host) -> Result<(), CudaError> {
    install_with(host, Knobs::default())
}

/// As [`install`], with the runtime's own knobs (those that are not the
/// Host's: its config already holds those).
///
/// # Errors
/// As [`install`].
pub fn install_with(host: Host, knobs: Knobs) -> Result<(), CudaError> {
    let mut rt = over_or_say(host)?;
    rt.knobs = knobs;
    RUNTIME.set(Ok(rt)).map_err(|_| CudaError::ILLEGAL_STATE)?;
    register_exit();
    Ok(())
}

/// The runtime if it has started (for exit paths that must not start it).
pub fn started() -> Option<&'static Runtime> {
    RUNTIME.get().and_then(|r| r.as_ref().ok())
}

pub fn unloading() -> bool {
    UNLOADING.load(Ordering::Acquire)
}

/// The device `MACUDA_DEVICE` names.
fn chosen_device() -> Result<DeviceSpec, CudaError> {
    let asked = std::env::var("MACUDA_DEVICE").unwrap_or_default();
    let spec: DeviceSpec = asked.parse().map_err(|e| {
        eprintln!("macuda: MACUDA_DEVICE: {e}");
        CudaError::INITIALIZATION_ERROR
    })?;
    if spec != DeviceSpec::Auto {
        return Ok(spec);
    }
    let (found, _) = DeviceSpec::Auto.resolve();
    if found == DeviceSpec::Null {
        // A program asking for a GPU must not get one that runs nothing.
        return Err(CudaError::NO_DEVICE);
    }
    Ok(found)
}

/// The Host config the runtime uses for `spec`: the null card keeps its
/// memory (so copies and memsets work), Ctrl-C stays the program's, and
/// the knobs' chain depth, sync patience, copy placement, chain barrier
/// and injected fault apply.
pub fn host_config(spec: DeviceSpec, knobs: &Knobs) -> HostConfig {
    let mut config = HostConfig::new(spec.clone());
    if let Some(depth) = knobs.chain_depth {
        config.submit.chain_depth = depth;
    }
    if let Some(patience) = knobs.sync_patience {
        config.submit.sync_timeout = patience;
    }
    config.deadline = deadline_for(config.submit.sync_timeout);
    if let Some(placement) = knobs.copy_placement {
        config.submit.copy_placement = placement;
    }
    if let Some(membar) = knobs.chain_membar {
        config.submit.chain.membar = membar;
    }
    if let Some(link) = knobs.chain_link {
        config.submit.chain.link = link;
    }
    if let Some(invalidates) = knobs.launch_invalidates {
        config.submit.chain.invalidates = invalidates;
    }
    if let Some(prefetch) = knobs.chain_prefetch {
        config.submit.chain.prefetch_next = prefetch;
    }
    if let Some(min) = knobs.carve_out_min {
        config.submit.chain.carve_out_min = min;
    }
    if let Some(caller_waits) = knobs.caller_waits {
        config.submit.caller_waits = caller_waits;
    }
    config.huge_pages_from = knobs.huge_pages_from;
    if knobs.profile.is_some() {
        config.submit.profile_slots = Some(PROFILE_SLOTS);
    }
    if let Some(spec) = &knobs.inject {
        spec.install(&config.faults);
    }
    if spec == DeviceSpec::Null {
        let mut profile = NullProfile::gb202();
        profile.keeps_vram = true;
        config.opener = Some(Arc::new(NullOpener::new(NullCard::new(profile))));
    }
    config
}

fn start() -> Result<Runtime, CudaError> {
    if std::env::var_os(crate::call_stats::CALL_STATS).is_some() {
        crate::call_stats::enable();
    }
    let knobs = crate::knobs::start_log()
        .and_then(|()| Knobs::from_env())
        .map_err(|e| {
            eprintln!("macuda: {e}");
            CudaError::INITIALIZATION_ERROR
        })?;
    let spec = chosen_device()?;
    let host = Host::start(host_config(spec, &knobs)).map_err(|e| {
        eprintln!(
            "macuda: the device did not start: {}",
            macuda_core::error_chain(&e).join(": ")
        );
        CudaError::INITIALIZATION_ERROR
    })?;
    if knobs.profile.is_some() {
        crate::call_spans::enable();
    }
    let mut rt = over_or_say(host)?;
    rt.knobs = knobs;
    register_exit();
    Ok(rt)
}

/// The runtime over `host`, or why not (on stderr: nothing else can say it).
fn over_or_say(host: Host) -> Result<Runtime, CudaError> {
    Runtime::over(host).map_err(|e| {
        eprintln!(
            "macuda: the runtime did not start: {}",
            macuda_core::error_chain(&e).join(": ")
        );
        CudaError::INITIALIZATION_ERROR
    })
}

extern "C" {
    fn atexit(f: extern "C" fn()) -> i32;
}

fn register_exit() {
    // SAFETY: atexit takes a plain function; on_exit is one.
    if unsafe { atexit(on_exit) } != 0 {
        tracing::warn!("atexit refused: the Host will not be shut down at exit");
    }
}

/// At exit: no more calls, then the Host's normal shutdown (the recovery
/// contract's exit path). libc calls it, so it runs in the quiet guard as
/// an entry point does: a panic in the shutdown is said on stderr and the
/// exit goes on, where unwinding into libc would abort the process.
extern "C" fn on_exit() {
    crate::error::guard_quiet((), || {
        UNLOADING.store(true, Ordering::Release);
        crate::call_stats::write_at_exit();
        if let Some(rt) = started() {
            rt.shutdown();
        }
    });
}

impl Runtime {
    /// The runtime over a Host that has started.
    ///
    /// # Errors
    /// The stack refusing the lane or the default stream.
    pub fn over(host: Host) -> Result<Runtime, HostError> {
        let lane = host.call(|s| s.submit.lane())?;
        let default_stream = host.call(|s| s.submit.create_stream())?;
        let device = host.device().clone();
        // Decided by what the device takes, not by which RM it is.
        let execution = if device.can.submission {
            Execution::Gpu
        } else {
            Execution::Nothing
        };
        let sm = device.chip.chip.sm();
        let facts = DeviceFacts {
            name: device
                .name
                .clone()
                .unwrap_or_else(|| format!("macuda null device ({})", device.chip.chip)),
            sm,
            total_memory: device.compute.total_memory,
            compute: device.compute,
            pci_device_id: device.identity.device,
            arch: arch_limits(sm),
        };
        Ok(Runtime {
            host: RwLock::new(Some(host)),
            lane,
            execution,
            facts,
            default_stream,
            streams: StreamTable::new(default_stream),
            events: EventTable::default(),
            graphs: GraphTable::default(),
            memory: Mutex::new(MemoryMap::default()),
            log: LaunchLog::from_env(),
            knobs: Knobs::default(),
            launches: std::sync::atomic::AtomicU64::new(0),
            synced_past: std::sync::atomic::AtomicU64::new(0),
            windows: Mutex::new(BTreeMap::new()),
        })
    }

    /// Run `f` against the stack through the Host (which turns an actor's
    /// failure into its recovery).
    pub fn call<T, E: Into<HostError>>(
        &self,
        f: impl FnOnce(&Stack) -> Result<T, E>,
    ) -> Result<T, CudaError> {
        let host = self.host.read();
        let host = host.as_ref().ok_or(CudaError::CUDART_UNLOADING)?;
        host.call(f).map_err(|e| crate::error::from_host(&e))
    }

    /// What each actor has handled so far, by request kind (none after
    /// exit).
    pub fn actor_snapshots(&self) -> Vec<macuda_core::ActorSnapshot> {
        self.host
            .read()
            .as_ref()
            .map(Host::snapshots)
            .unwrap_or_default()
    }

    /// As [`Runtime::call`], keeping the Host's error for the caller to
    /// read (see [`Runtime::cuda_error`]).
    pub fn call_host<T, E: Into<HostError>>(
        &self,
        f: impl FnOnce(&Stack) -> Result<T, E>,
    ) -> Result<T, HostError> {
        let host = self.host.read();
        match host.as_ref() {
            Some(h) => h.call(f),
            None => Err(HostError::Down {
                cause: "exit".to_string(),
                report: None,
            }),
        }
    }

    /// The CUDA code for a Host error (sticky ones latched).
    pub fn cuda_error(&self, e: &HostError) -> CudaError {
        crate::error::from_host(e)
    }

    /// Hand `item` to the submit actor's lane. When the actor has stopped
    /// (or, alive, took nothing for the lane's patience), the error is the
    /// one the Host gives for it, not a wait on a lane nobody drains.
    ///
    /// # Errors
    /// The submit actor has stopped or is stuck.
    pub fn push(&self, item: LaneItem) -> Result<(), CudaError> {
        self.lane
            .push(item)
            // Asked of the actor itself (not the shortcut): its error is
            // what the caller must see.
            .map_err(|_refused| {
                match self
                    .call(|st| st.submit.synchronize(self.default_stream))
                    .map(|_| ())
                {
                    Err(e) => e,
                    Ok(()) => CudaError::LAUNCH_FAILURE,
                }
            })
    }

    /// Wait for `stream`'s work. Every stream shares the queues, so a sync
    /// waits for everything the lane took before it; when the lane took
    /// nothing since the last sync that returned, there is nothing to wait
    /// for and the actor is not asked (llama.cpp syncs about 20 times a
    /// token, most with nothing queued since the last: on the H200 each
    /// such round trip cost about 15 us). Otherwise this thread waits
    /// itself where it can (`macuda_submit::LaunchLane::sync_point`), and
    /// through the actor where that says to ask it.
    pub fn synchronize(&self, stream: StreamId) -> Result<(), CudaError> {
        let past = self.lane.pushed() + 1;
        if self.idle_since_sync() {
            return Ok(());
        }
        if let CallerSync::Done { covered } = self.lane.sync_point() {
            self.synced_past.fetch_max(covered + 1, Ordering::SeqCst);
            return Ok(());
        }
        self.call(|st| st.submit.synchronize(stream))?;
        self.synced_past.fetch_max(past, Ordering::SeqCst);
        Ok(())
    }

    /// The lane's count so far: what a sync started now would cover.
    pub(crate) fn pushed(&self) -> u64 {
        self.lane.pushed()
    }

    /// Whether a sync that returned covered everything pushed so far: the
    /// GPU has nothing of ours left to run.
    pub(crate) fn idle_since_sync(&self) -> bool {
        self.synced_past.load(Ordering::SeqCst) > self.lane.pushed()
    }

    /// Whether a sync that returned covered the lane's first `count` items
    /// (all of them are done on the GPU).
    pub(crate) fn synced_through(&self, count: u64) -> bool {
        self.synced_past.load(Ordering::SeqCst) > count
    }

    /// Wait for everything queued (every stream shares the queues).
    pub fn synchronize_all(&self) -> Result<(), CudaError> {
        self.synchronize(self.default_stream)
    }

    fn shutdown(&self) {
        if let Some(log) = &self.log {
            log.flush();
        }
        let Some(mut guard) = self.host.try_write_for(EXIT_WAIT) else {
            eprintln!("macuda: calls still running at exit; the Host is left to the OS");
            return;
        };
        if let Some(host) = guard.take() {
            if let Some(path) = &self.knobs.profile {
                write_profile(&host, path);
            }
            drop(host.shutdown());
        }
    }
}

/// At exit under `MACUDA_PROFILE`: the timeline so far, at `path`.
fn write_profile(host: &Host, path: &std::path::Path) {
    let written = host
        .call(|s| s.submit.profile())
        .map_err(|e| e.to_string())
        .and_then(|report| {
            crate::profile_trace::write(&report, &crate::call_spans::recorded(), path)
                .map(|()| report)
                .map_err(|e| e.to_string())
        });
    match written {
        Ok(r) => eprintln!(
            "macuda: GPU timeline of {} records ({} reports missing) in {} and {}.txt",
            r.records.len(),
            r.missing,
            path.display(),
            path.display()
        ),
        Err(e) => eprintln!(
            "macuda: the GPU timeline was not written to {}: {e}",
            path.display()
        ),
    }
}

/// Each knob's value reaches the configuration the host starts with (the
/// knobs' parsing alone is tested beside it, in `knobs`).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::*;

    fn knobs(vars: &[(&str, &str)]) -> Result<Knobs, KnobError> {
        Knobs::from_pairs(vars)
    }

    #[test]
    fn an_injected_fault_is_armed_on_the_hosts_board() {
        let k = knobs(&[(INJECT, "submit:panic:40")]).unwrap();
        let spec = k.inject.as_ref().unwrap();
        assert_eq!((spec.actor.as_str(), spec.nth), ("submit", 40));
        let config = host_config(macuda_pci::DeviceSpec::Null, &k);
        assert!(config.faults.armed("submit"), "no plan on the submit actor");
        assert!(!config.faults.armed("memory"));
    }

    #[test]
    fn the_chain_barrier_reaches_the_submit_actors_config_and_a_bad_one_is_named() {
        use macuda_submit::GridMembar;
        let k = knobs(&[(CHAIN_MEMBAR, "gpu")]).unwrap();
        let config = host_config(macuda_pci::DeviceSpec::Null, &k);
        assert_eq!(config.submit.chain.membar, GridMembar::Gpu);
        let default = host_config(macuda_pci::DeviceSpec::Null, &Knobs::default());
        assert_eq!(default.submit.chain.membar, GridMembar::System);
        assert_eq!(
            knobs(&[(CHAIN_MEMBAR, " system ")]).unwrap().chain_membar,
            Some(GridMembar::System)
        );
        let e = knobs(&[(CHAIN_MEMBAR, "sys")]).unwrap_err();
        assert_eq!((e.name, e.value.as_str()), (CHAIN_MEMBAR, "sys"));
        assert_eq!(knobs(&[]).unwrap().caller_waits, None);
        assert_eq!(
            knobs(&[(SYNC_WAIT, "actor")]).unwrap().caller_waits,
            Some(false)
        );
        assert_eq!(
            knobs(&[(SYNC_WAIT, " caller")]).unwrap().caller_waits,
            Some(true)
        );
        let e = knobs(&[(SYNC_WAIT, "thread")]).unwrap_err();
        assert_eq!((e.name, e.value.as_str()), (SYNC_WAIT, "thread"));
    }

    #[test]
    fn the_huge_page_threshold_reaches_the_hosts_config_and_a_bad_one_is_named() {
        let default = host_config(macuda_pci::DeviceSpec::Null, &Knobs::default());
        assert_eq!(default.huge_pages_from, None);
        let k = knobs(&[(HUGE_PAGES_FROM, "2097152")]).unwrap();
        let config = host_config(macuda_pci::DeviceSpec::Null, &k);
        assert_eq!(config.huge_pages_from, Some(2 << 20));
        for bad in ["2M", "0", "-1"] {
            let e = knobs(&[(HUGE_PAGES_FROM, bad)]).unwrap_err();
            assert_eq!((e.name, e.value.as_str()), (HUGE_PAGES_FROM, bad));
        }
    }

    #[test]
    fn the_chain_link_and_launch_invalidates_reach_the_submit_actors_config() {
        use macuda_submit::{ChainLink, LaunchInvalidates};
        let default = host_config(macuda_pci::DeviceSpec::Null, &Knobs::default());
        assert_eq!(default.submit.chain.link, ChainLink::InvalidateCopySchedule);
        assert_eq!(default.submit.chain.invalidates, LaunchInvalidates::CUDA);
        assert!(default.submit.chain.prefetch_next);
        let off = knobs(&[(CHAIN_PREFETCH, "none")]).unwrap();
        let config = host_config(macuda_pci::DeviceSpec::Null, &off);
        assert!(!config.submit.chain.prefetch_next);
        assert_eq!(
            knobs(&[(CHAIN_PREFETCH, "next")]).unwrap().chain_prefetch,
            Some(true)
        );
        assert_eq!(
            knobs(&[(CHAIN_PREFETCH, "all")]).unwrap_err().name,
            CHAIN_PREFETCH
        );
        assert_eq!(
            default.submit.chain.carve_out_min,
            macuda_submit::CarveOutMin::Occupancy
        );
        let block = knobs(&[(CARVE_OUT_MIN, "block")]).unwrap();
        let config = host_config(macuda_pci::DeviceSpec::Null, &block);
        assert_eq!(
            config.submit.chain.carve_out_min,
            macuda_submit::CarveOutMin::OneBlock
        );
        assert_eq!(
            knobs(&[(CARVE_OUT_MIN, "8k")]).unwrap_err().name,
            CARVE_OUT_MIN
        );
        let k = knobs(&[
            (CHAIN_LINK, "schedule"),
            (LAUNCH_INVALIDATE, "texture-data, shader-data"),
        ])
        .unwrap();
        let config = host_config(macuda_pci::DeviceSpec::Null, &k);
        assert_eq!(config.submit.chain.link, ChainLink::Schedule);
        let want = LaunchInvalidates {
            texture_data: true,
            shader_data: true,
            ..LaunchInvalidates::NONE
        };
        assert_eq!(config.submit.chain.invalidates, want);
        assert_eq!(
            knobs(&[(LAUNCH_INVALIDATE, "none")])
                .unwrap()
                .launch_invalidates,
            Some(LaunchInvalidates::NONE)
        );
        let e = knobs(&[(LAUNCH_INVALIDATE, "texture-data,l2")]).unwrap_err();
        assert_eq!(e.name, LAUNCH_INVALIDATE);
        let e = knobs(&[(CHAIN_LINK, "copy")]).unwrap_err();
        assert_eq!((e.name, e.value.as_str()), (CHAIN_LINK, "copy"));
        assert!(!knobs(&[]).unwrap().graph_nodes);
        assert!(knobs(&[(GRAPH_REPLAY, "nodes")]).unwrap().graph_nodes);
        assert!(!knobs(&[(GRAPH_REPLAY, "recorded")]).unwrap().graph_nodes);
        let small = |v: &str| knobs(&[(SMALL_UPLOADS, v)]).unwrap().small_uploads;
        assert_eq!(knobs(&[]).unwrap().small_uploads, SmallUploads::Inline);
        assert_eq!(small("staged"), SmallUploads::Staged);
        assert_eq!(small("inline"), SmallUploads::Inline);
        assert_eq!(small(" cpu"), SmallUploads::Cpu);
        assert_eq!(
            knobs(&[(SMALL_UPLOADS, "copy")]).unwrap_err().name,
            SMALL_UPLOADS
        );
        let e = knobs(&[(GRAPH_REPLAY, "chains")]).unwrap_err();
        assert_eq!(e.name, GRAPH_REPLAY);
    }

    #[test]
    fn the_sync_patience_reaches_the_submit_actors_config_and_a_bad_one_is_named() {
        let k = knobs(&[(SYNC_PATIENCE, "120")]).unwrap();
        let config = host_config(macuda_pci::DeviceSpec::Null, &k);
        assert_eq!(
            config.submit.sync_timeout,
            std::time::Duration::from_secs(120)
        );
        // The actor's callers, and the monitor, wait longer than the sync
        // does: a queue standing still is reported as such, not as a
        // failed actor (seen on the H200 with a patience of 120 s).
        let submit_waits = macuda_supervisor::layer_deadline(config.deadline, "submit");
        assert!(
            submit_waits > config.submit.sync_timeout,
            "{submit_waits:?}"
        );
        let default = host_config(macuda_pci::DeviceSpec::Null, &Knobs::default());
        assert_eq!(
            default.submit.sync_timeout,
            macuda_submit::SubmitConfig::default().sync_timeout
        );
        for bad in ["0", "ten", "-5"] {
            let e = knobs(&[(SYNC_PATIENCE, bad)]).unwrap_err();
            assert_eq!((e.name, e.value.as_str()), (SYNC_PATIENCE, bad));
        }
    }

    #[test]
    fn the_copy_engine_reaches_the_submit_actors_config_and_a_bad_one_is_named() {
        use macuda_gsp::CopyPlacement;
        let spec = macuda_pci::DeviceSpec::Null;
        let placed = |v: &str| {
            let k = knobs(&[(COPY_ENGINE, v)]).unwrap();
            host_config(spec.clone(), &k).submit.copy_placement
        };
        assert_eq!(placed("2"), CopyPlacement::CopyEngine(2));
        assert_eq!(placed("compute"), CopyPlacement::ComputeGroup);
        assert_eq!(
            host_config(spec.clone(), &Knobs::default())
                .submit
                .copy_placement,
            CopyPlacement::ComputeGroup
        );
        for bad in ["10", "lce", "-1", ""] {
            let e = knobs(&[(COPY_ENGINE, bad)]).unwrap_err();
            assert_eq!((e.name, e.value.as_str()), (COPY_ENGINE, bad));
        }
    }

    #[test]
    fn a_profile_file_asks_the_submit_actor_for_a_timeline() {
        let spec = macuda_pci::DeviceSpec::Null;
        let k = knobs(&[(PROFILE, "/tmp/t.json")]).unwrap();
        assert_eq!(
            k.profile.as_deref(),
            Some(std::path::Path::new("/tmp/t.json"))
        );
        let on = host_config(spec.clone(), &k);
        assert_eq!(on.submit.profile_slots, Some(PROFILE_SLOTS));
        let off = host_config(spec, &Knobs::default());
        assert_eq!(off.submit.profile_slots, None);
        assert_eq!(knobs(&[(PROFILE, "")]).unwrap_err().name, PROFILE);
    }

    #[test]
    fn the_chain_depth_reaches_the_submit_actors_config() {
        let k = knobs(&[(CHAIN_DEPTH, "3")]).unwrap();
        let spec = macuda_pci::DeviceSpec::Null;
        assert_eq!(host_config(spec.clone(), &k).submit.chain_depth, 3);
        let default = host_config(spec, &Knobs::default());
        assert_eq!(
            default.submit.chain_depth,
            macuda_submit::SubmitConfig::default().chain_depth
        );
    }
}
