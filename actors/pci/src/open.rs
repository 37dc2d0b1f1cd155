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
/// `NotBuilt` for transports whose issue has not landed.
pub fn open_transport(spec: &DeviceSpec) -> Result<Arc<dyn Opener>, PciError> {
    let (backend, lands_with) = match spec {
        DeviceSpec::Null => return Ok(Arc::new(NullOpener::gb202())),
        DeviceSpec::TinyGpu { socket } => {
            let path = socket.clone().unwrap_or_else(default_tinygpu_socket);
            return locked(
                spec,
                Arc::new(TinyGpuOpener::new(Endpoint::Unix(path), TRANSPORT_TIMEOUT)),
            );
        }
        DeviceSpec::Remote { host, port } => {
            let endpoint = Endpoint::Tcp {
                host: host.clone(),
                port: *port,
            };
            return locked(
                spec,
                Arc::new(TinyGpuOpener::new(endpoint, TRANSPORT_TIMEOUT)),
            );
        }
        DeviceSpec::Sysfs { bdf } => return locked(spec, Arc::new(SysfsOpener::new(bdf)?)),
        DeviceSpec::Replay { trace } => return Ok(Arc::new(ReplayOpener::load(trace)?)),
        // NVIDIA's module owns the card, boots it and shares it among
        // processes, as it does for its own libcuda: nothing here resets the
        // GPU, so nothing here takes the one-process lock.
        DeviceSpec::Kernel { index } => return Ok(Arc::new(KernelModuleOpener::new(*index))),
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
