//! A registered module loaded, and its kernels and variables found in it,
//! on first use: what turns registration (static constructors, before any
//! device) into the loader's and submit's objects.

use crate::error::CudaError;
use crate::runtime::Runtime;
use crate::state::registry::{
    default_dynamic_shared, loader_error, KernelEntry, Loaded, ModuleEntry, Resolved, VarEntry,
};
use macuda_loader::names::NameIndex;
use macuda_loader::{GlobalInfo, LoaderError};
use std::sync::atomic::Ordering;

impl ModuleEntry {
    /// Load the module (once) and index its names.
    pub(crate) fn load(&self, rt: &Runtime) -> Result<&Loaded, CudaError> {
        self.loaded
            .get_or_init(|| {
                let (at, len) = self.image?;
                // SAFETY: registration found a fat binary of `len` bytes at
                // `at`, in the program's static data, which lives while the
                // module is registered.
                let bytes = unsafe { std::slice::from_raw_parts(at as *const u8, len) }.to_vec();
                let sm = rt.facts.sm;
                let id = rt
                    .call_host(|s| s.loader.load_module(bytes, sm))
                    .map_err(|e| {
                        eprintln!(
                            "macuda: a registered module does not load: {}",
                            macuda_core::error_chain(&e).join(": ")
                        );
                        match (&e, macuda_core::find_in_chain::<LoaderError>(&e)) {
                            (macuda_supervisor::HostError::Loader(_), Some(le)) => loader_error(le),
                            _ => rt.cuda_error(&e),
                        }
                    })?;
                let info = rt.call(|s| s.loader.module(id))?;
                if let Some(d) = &info.data {
                    rt.memory.lock().add_module_memory(d.va, d.bytes);
                }
                Ok(Loaded {
                    id,
                    kernels: NameIndex::new(info.kernels),
                    globals: NameIndex::new(info.globals),
                })
            })
            .as_ref()
            .map_err(|e| *e)
    }
}

impl KernelEntry {
    /// Load the module if need be, find the kernel, register it with
    /// submit (once).
    pub fn resolve(&self, rt: &Runtime) -> Result<&Resolved, CudaError> {
        self.resolved
            .get_or_init(|| {
                if !self.module.live.load(Ordering::Acquire) {
                    return Err(CudaError::INVALID_DEVICE_FUNCTION);
                }
                let loaded = self.module.load(rt)?;
                let name = loaded.kernels.find(&self.registered).ok_or_else(|| {
                    eprintln!(
                        "macuda: no kernel in its module matches the registered `{}`",
                        self.registered
                    );
                    CudaError::INVALID_DEVICE_FUNCTION
                })?;
                let info = rt.call(|s| s.loader.function(loaded.id, name.clone()))?;
                let desc = info.kernel_desc();
                let kernel = rt.call(|s| s.submit.register_kernel(desc))?;
                let mut params: Vec<_> = info
                    .params
                    .iter()
                    .map(|p| (p.ordinal, usize::from(p.offset), p.size as usize))
                    .collect();
                params.sort_unstable();
                let demangled = cpp_demangle::Symbol::new(name.as_str())
                    .ok()
                    .and_then(|s| s.demangle(&Default::default()).ok())
                    .unwrap_or_else(|| name.clone());
                let max = default_dynamic_shared(&info, &rt.facts);
                let _ = self.max_dynamic_shared.compare_exchange(
                    0,
                    max,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                Ok(Resolved {
                    info,
                    kernel,
                    mangled: name,
                    demangled,
                    params: params.into_iter().map(|(_, o, s)| (o, s)).collect(),
                })
            })
            .as_ref()
            .map_err(|e| *e)
    }
}

impl VarEntry {
    pub fn resolve(&self, rt: &Runtime) -> Result<&GlobalInfo, CudaError> {
        if self.managed {
            return Err(CudaError::NOT_SUPPORTED);
        }
        self.global
            .get_or_init(|| {
                let loaded = self.module.load(rt)?;
                let name = loaded
                    .globals
                    .find(&self.registered)
                    .ok_or(CudaError::INVALID_SYMBOL)?;
                rt.call(|s| s.loader.global(loaded.id, name))
            })
            .as_ref()
            .map_err(|e| *e)
    }
}
