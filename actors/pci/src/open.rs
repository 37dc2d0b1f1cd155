//! Choosing a transport: the opener a resolved device selection names,
//! each holding the card's lock where it drives a real card itself (boot,
//! reset); the kernel module's path shares the card the module drives. Apart from
//! the [`Transport`] and [`Opener`] traits, so that the transports depend
//! on the traits and the traits on none of them.

use crate::error::PciError;
use crate::kernel_module::KernelModuleOpener;
use crate::lock::{default_lock_dir, CardLock};
use crate::null::NullOpener;
use crate::spec::{default_tinygpu_socket, DeviceSpec};
use crate::sysfs::SysfsOpener;
use crate::tinygpu::{Endpoint, TinyGpuOpener};
use crate::trace::{RecordingOpener, ReplayOpener};
use crate::transport::{Opener, Transport, TRANSPORT_TIMEOUT};
use std::sync::Arc;

/// The opener for a resolved device choice.
///
/// # Errors
/// `NotBuilt` for transports whose issue has not landed; `CardBusy` when
/// another process holds the card.
pub fn open_transport(spec: &DeviceSpec) -> Result<Arc<dyn Opener>, PciError> {
    let (opener, lock) = unlocked(spec)?;
    match lock {
        Lock::Card => locked(spec, opener),
        Lock::None => Ok(opener),
    }
}

/// The opener for `spec` under a lock this process already holds for it
/// (`macuda run` looking at the card it holds for a step): no second lock
/// is taken, which would refuse it.
///
/// # Errors
/// As [`open_transport`], and `CardBusy` naming `held`'s file when `held`
/// is not the lock of this card.
pub fn open_transport_held(
    spec: &DeviceSpec,
    held: &CardLock,
) -> Result<Arc<dyn Opener>, PciError> {
    let (opener, lock) = unlocked(spec)?;
    if lock == Lock::Card && !held.is_for(&default_lock_dir(), &spec.to_string()) {
        return Err(PciError::CardBusy {
            path: held.path().to_path_buf(),
            pid: "this process, for another card".to_string(),
        });
    }
    Ok(opener)
}

/// Whether a transport's card takes the one-process lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lock {
    Card,
    None,
}

fn unlocked(spec: &DeviceSpec) -> Result<(Arc<dyn Opener>, Lock), PciError> {
    let (backend, lands_with) = match spec {
        DeviceSpec::Null => return Ok((Arc::new(NullOpener::gb202()), Lock::None)),
        DeviceSpec::TinyGpu { socket } => {
            let path = socket.clone().unwrap_or_else(default_tinygpu_socket);
            let opener = TinyGpuOpener::new(Endpoint::Unix(path), TRANSPORT_TIMEOUT);
            return Ok((Arc::new(opener), Lock::Card));
        }
        DeviceSpec::Remote { host, port } => {
            let endpoint = Endpoint::Tcp {
                host: host.clone(),
                port: *port,
            };
            let opener = TinyGpuOpener::new(endpoint, TRANSPORT_TIMEOUT);
            return Ok((Arc::new(opener), Lock::Card));
        }
        DeviceSpec::Sysfs { bdf } => return Ok((Arc::new(SysfsOpener::new(bdf)?), Lock::Card)),
        DeviceSpec::Replay { trace } => {
            return Ok((Arc::new(ReplayOpener::load(trace)?), Lock::None))
        }
        // NVIDIA's module owns the card, boots it and shares it among
        // processes, as it does for its own libcuda: nothing here resets the
        // GPU, so nothing here takes the one-process lock.
        DeviceSpec::Kernel { index } => {
            return Ok((Arc::new(KernelModuleOpener::new(*index)), Lock::None))
        }
        DeviceSpec::Auto => ("auto (resolve it first)", "device selection"),
        // The simulated card lives in a crate above this one: the
        // supervisor starts it and hands the Host its opener.
        DeviceSpec::Sim { .. } => ("sim (started by the supervisor)", "the Host's start"),
    };
    Err(PciError::NotBuilt {
        backend,
        lands_with,
    })
}

/// An opener that holds the card's lock for as long as it lives: one
/// process per card, for the whole session, recovery included.
struct LockedOpener {
    inner: Arc<dyn Opener>,
    _lock: CardLock,
}

impl Opener for LockedOpener {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn open(&self) -> Result<Box<dyn Transport>, PciError> {
        self.inner.open()
    }

    fn end_session(&self) -> Result<Option<String>, PciError> {
        self.inner.end_session()
    }

    fn owns_function(&self) -> bool {
        self.inner.owns_function()
    }
}

/// Record every connection `opener` makes into the trace at `path`.
///
/// # Errors
/// The trace file cannot be created.
pub fn record_to(
    opener: Arc<dyn Opener>,
    path: &std::path::Path,
) -> Result<Arc<dyn Opener>, PciError> {
    Ok(Arc::new(RecordingOpener::new(opener, path)?))
}

fn locked(spec: &DeviceSpec, inner: Arc<dyn Opener>) -> Result<Arc<dyn Opener>, PciError> {
    let lock = CardLock::acquire(&default_lock_dir(), &spec.to_string())?;
    if let Some(pid) = lock.took_over_from() {
        tracing::warn!(pid, card = %spec, "took over the lock of a process that is gone");
    }
    Ok(Arc::new(LockedOpener { inner, _lock: lock }))
}
