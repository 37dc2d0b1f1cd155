//! What host code registers from its static constructors: fat binaries
//! (modules), the kernels' host stubs and the device variables' host
//! shadows. A stub's address is the key every later call passes (a hash
//! lookup); a module is loaded, and its names matched, on first use.

use crate::error::CudaError;
use crate::hash::AddressMap;
use macuda_loader::fatbin::{Fatbin, FatbinWrapper, CONTAINER_HEADER_LEN, WRAPPER_LEN};
use macuda_loader::module::ModuleError;
use macuda_loader::names::NameIndex;
use macuda_loader::{FunctionInfo, GlobalInfo, LoaderError, ModuleId};
use macuda_submit::KernelId;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};

/// A registered fat binary.
pub struct ModuleEntry {
    /// Where its fatbin lies in the program (static data), and how long it
    /// is; or why it cannot be used.
    pub(crate) image: Result<(usize, usize), CudaError>,
    pub(crate) loaded: OnceLock<Result<Loaded, CudaError>>,
    pub live: AtomicBool,
}

/// A module in the loader, with its names indexed for matching.
pub(crate) struct Loaded {
    pub(crate) id: ModuleId,
    pub(crate) kernels: NameIndex,
    pub(crate) globals: NameIndex,
}

/// A kernel's host stub, registered.
pub struct KernelEntry {
    pub module: Arc<ModuleEntry>,
    /// The device name host code registered (nvcc: the cubin's own; clang:
    /// its own mangling).
    pub registered: String,
    pub(crate) resolved: OnceLock<Result<Resolved, CudaError>>,
    /// `cudaFuncAttributeMaxDynamicSharedMemorySize`, once set.
    pub max_dynamic_shared: AtomicU32,
    /// `cudaFuncAttributePreferredSharedMemoryCarveout` (-1: default).
    pub carveout: std::sync::atomic::AtomicI32,
}

/// A kernel found in its loaded module and registered with submit.
pub struct Resolved {
    pub info: FunctionInfo,
    pub kernel: KernelId,
    /// The cubin's name, and it demangled (for the launch log).
    pub mangled: String,
    pub demangled: String,
    /// (offset in the parameter block, size) in parameter order.
    pub params: Vec<(usize, usize)>,
}

/// Dynamic shared memory a kernel may take without opting in: what is
/// left of the 48 KiB default after its static shared memory.
pub fn default_dynamic_shared(info: &FunctionInfo, facts: &crate::device::DeviceFacts) -> u32 {
    let user_static = facts.user_static_shared(info.shared_bytes);
    // CAST: at most 48 KiB.
    crate::device::SHARED_PER_BLOCK.saturating_sub(user_static) as u32
}

impl KernelEntry {
    /// The resolution, if it was made.
    pub fn resolved(&self) -> Option<&Resolved> {
        self.resolved.get().and_then(|r| r.as_ref().ok())
    }
}

/// A `__device__` or `__constant__` variable's host shadow, registered.
pub struct VarEntry {
    pub module: Arc<ModuleEntry>,
    pub registered: String,
    pub bytes: usize,
    /// `__managed__`: we keep no managed memory.
    pub managed: bool,
    pub(crate) global: OnceLock<Result<GlobalInfo, CudaError>>,
}

/// Everything registered, by the keys host code passes.
#[derive(Default)]
pub struct Registry {
    pub modules: AddressMap<Arc<ModuleEntry>>,
    pub kernels: AddressMap<Arc<KernelEntry>>,
    pub vars: AddressMap<Arc<VarEntry>>,
    /// Handles handed out; each is a leaked word, so a handle is a real,
    /// unique pointer (no caller dereferences it).
    handles: Mutex<Vec<usize>>,
}

pub static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::default);

/// Why a registered fat binary cannot be used, as the error launches get.
pub(crate) fn image_error(e: &ModuleError) -> CudaError {
    match e {
        ModuleError::Fatbin(macuda_loader::fatbin::FatbinError::NoMatchingCode { .. })
        | ModuleError::WrongArchitecture { .. } => CudaError::NO_KERNEL_IMAGE_FOR_DEVICE,
        _ => CudaError::INVALID_KERNEL_IMAGE,
    }
}

/// The loader's refusal of a module, as CUDA names it.
pub fn loader_error(e: &LoaderError) -> CudaError {
    match e {
        LoaderError::Module(m) => image_error(m),
        _ => CudaError::INVALID_KERNEL_IMAGE,
    }
}

/// Read the wrapper and the container length at registration; a bad one
/// is remembered and reported at first use (registration cannot fail).
///
/// # Safety
/// `wrapper` must be null or point to readable memory of a wrapper's size,
/// whose data pointer (if the magic is right) points at a fat binary.
unsafe fn locate_image(wrapper: *const u8) -> Result<(usize, usize), CudaError> {
    if wrapper.is_null() {
        eprintln!("macuda: __cudaRegisterFatBinary got a null wrapper");
        return Err(CudaError::INVALID_KERNEL_IMAGE);
    }
    // SAFETY: the caller promises a wrapper's bytes.
    let head = unsafe { std::slice::from_raw_parts(wrapper, WRAPPER_LEN) };
    let w = FatbinWrapper::parse(head).map_err(|e| {
        eprintln!("macuda: a registered fat binary is unusable: {e}");
        CudaError::INVALID_KERNEL_IMAGE
    })?;
    // SAFETY: a well-formed wrapper's data points at a fat binary, which
    // starts with its container header.
    let first = unsafe { std::slice::from_raw_parts(w.data as *const u8, CONTAINER_HEADER_LEN) };
    let len = Fatbin::container_len(first).map_err(|e| {
        eprintln!("macuda: a registered fat binary is unusable: {e}");
        CudaError::INVALID_KERNEL_IMAGE
    })?;
    Ok((w.data as usize, len))
}

impl Registry {
    /// # Safety
    /// As [`locate_image`].
    pub unsafe fn register_module(&self, wrapper: *const u8) -> usize {
        // SAFETY: passed on from the caller.
        let image = unsafe { locate_image(wrapper) };
        let handle = Box::into_raw(Box::new(0usize)) as usize;
        self.handles.lock().push(handle);
        self.modules.insert(
            handle,
            Arc::new(ModuleEntry {
                image,
                loaded: OnceLock::new(),
                live: AtomicBool::new(true),
            }),
        );
        handle
    }

    pub fn module(&self, handle: usize) -> Option<Arc<ModuleEntry>> {
        self.modules.get(&handle).map(|m| Arc::clone(&m))
    }

    pub fn register_kernel(&self, handle: usize, host_fun: usize, name: String) -> bool {
        let Some(module) = self.module(handle) else {
            return false;
        };
        self.kernels.insert(
            host_fun,
            Arc::new(KernelEntry {
                module,
                registered: name,
                resolved: OnceLock::new(),
                max_dynamic_shared: AtomicU32::new(0),
                carveout: std::sync::atomic::AtomicI32::new(-1),
            }),
        );
        true
    }

    pub fn register_var(
        &self,
        handle: usize,
        host_var: usize,
        name: String,
        bytes: usize,
        managed: bool,
    ) -> bool {
        let Some(module) = self.module(handle) else {
            return false;
        };
        self.vars.insert(
            host_var,
            Arc::new(VarEntry {
                module,
                registered: name,
                bytes,
                managed,
                global: OnceLock::new(),
            }),
        );
        true
    }

    /// The kernel a host stub (or `cudaKernel_t`, which is the stub's
    /// address here) names. A function that is no registered stub is an
    /// invalid handle, as NVIDIA's runtime answers (seen on the H200).
    pub fn kernel(&self, host_fun: usize) -> Result<Arc<KernelEntry>, CudaError> {
        self.kernels
            .get(&host_fun)
            .map(|k| Arc::clone(&k))
            .ok_or(CudaError::INVALID_RESOURCE_HANDLE)
    }

    pub fn var(&self, host_var: usize) -> Result<Arc<VarEntry>, CudaError> {
        self.vars
            .get(&host_var)
            .map(|v| Arc::clone(&v))
            .ok_or(CudaError::INVALID_SYMBOL)
    }

    /// A module leaves: its stubs and shadows are forgotten (their
    /// addresses may be reused by a library loaded later).
    pub fn unregister(&self, handle: usize) {
        if let Some((_, m)) = self.modules.remove(&handle) {
            m.live.store(false, Ordering::Release);
            self.kernels.retain(|_, k| !Arc::ptr_eq(&k.module, &m));
            self.vars.retain(|_, v| !Arc::ptr_eq(&v.module, &m));
        }
    }
}
