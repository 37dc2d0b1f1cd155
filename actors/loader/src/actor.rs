use crate::cubin::Param;
use crate::error::LoaderError;
use crate::image::{bank_bindings, cbank0_bytes, BankBinding, Bases};
use crate::module::{prepare, system_extern_address, ModuleId, Prepared};
use macuda_core::{actor_protocol, ActorConfig, ActorJoin};
use macuda_memory::{DeviceBuffer, MemoryHandle};
use macuda_submit::SubmitHandle;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a launcher needs to know of one kernel of a loaded module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionInfo {
    pub module: ModuleId,
    pub name: String,
    /// GPU address of the first instruction.
    pub entry: u64,
    pub code_bytes: u64,
    pub sm: u32,
    /// The PTX target its code was built from (`.note.nv.cuinfo`), or
    /// `sm` where the cubin does not say.
    pub ptx_version: u32,
    pub registers: u32,
    /// The register cap ptxas compiled for (`__launch_bounds__`,
    /// `-maxrregcount`), where it recorded one.
    pub max_registers: Option<u32>,
    /// Static shared memory (including the 1 KiB reserve on sm_90+).
    pub shared_bytes: u64,
    /// Per-thread local memory the kernel needs (stack and frame).
    pub local_bytes: u32,
    pub barriers: u32,
    pub max_threads: Option<[u32; 3]>,
    pub required_threads: Option<[u32; 3]>,
    pub param_base: u32,
    pub param_bytes: u32,
    pub params: Vec<Param>,
    /// Bank-0 size for a launch (driver area and parameters).
    pub cbank0_bytes: u64,
    /// Banks 2, 3 and 4 as they must be bound.
    pub banks: Vec<BankBinding>,
    pub cooperative: bool,
}

impl FunctionInfo {
    /// What the submit actor needs to launch this kernel.
    pub fn kernel_desc(&self) -> macuda_submit::KernelDesc {
        macuda_submit::KernelDesc {
            name: self.name.clone(),
            entry: self.entry,
            code_bytes: self.code_bytes,
            registers: self.registers,
            barriers: self.barriers,
            shared_bytes: self.shared_bytes,
            local_bytes: self.local_bytes,
            param_base: self.param_base,
            param_bytes: self.param_bytes,
            banks: self
                .banks
                .iter()
                .map(|b| macuda_submit::BankDesc {
                    bank: b.bank,
                    address: b.address,
                    bytes: b.bytes,
                })
                .collect(),
        }
    }

    /// The parameter block (what goes at `param_base` in bank 0) from one
    /// byte slice per parameter, each exactly as large as the metadata says.
    ///
    /// # Errors
    /// A wrong number of arguments, or one of the wrong size.
    pub fn marshal(&self, args: &[&[u8]]) -> Result<Vec<u8>, crate::image::ImageError> {
        let mut block = vec![0u8; self.param_bytes as usize];
        crate::image::place_params(&mut block, &self.name, &self.params, args)?;
        Ok(block)
    }
}

impl FunctionInfo {
    /// The parameter block from the argument array CUDA host code passes
    /// (`void** args`: one pointer per parameter, to that parameter's value).
    ///
    /// # Safety
    /// `args` must point to `self.params.len()` pointers, each to at least
    /// as many readable bytes as that parameter's size.
    pub unsafe fn marshal_from_pointers(
        &self,
        args: *const *const u8,
    ) -> Result<Vec<u8>, crate::image::ImageError> {
        let mut slices: Vec<&[u8]> = Vec::with_capacity(self.params.len());
        for (i, p) in self.params.iter().enumerate() {
            // SAFETY: the caller promises args[i] exists and points to
            // p.size readable bytes.
            let arg = unsafe { std::slice::from_raw_parts(*args.add(i), p.size as usize) };
            slices.push(arg);
        }
        self.marshal(&slices)
    }
}

/// A device variable of a loaded module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlobalInfo {
    pub module: ModuleId,
    pub name: String,
    /// Its GPU address.
    pub address: u64,
    pub bytes: u64,
}

/// One loaded module, for listings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleInfo {
    pub id: ModuleId,
    pub sm: u32,
    pub kernels: Vec<String>,
    /// Its device variables (`__device__`, `__constant__`), by name.
    pub globals: Vec<String>,
    pub code: DeviceBuffer,
    pub data: Option<DeviceBuffer>,
    pub relocations_applied: usize,
    /// System externs (printf, assert) whose slots are left 0.
    pub unprovided_externs: Vec<String>,
    /// Its code and data are in device memory (false where the device
    /// keeps no memory: the null card).
    pub resident: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderStats {
    pub loaded: u64,
    pub unloaded: u64,
    pub live: u64,
    pub uploaded_bytes: u64,
    pub relocations_applied: u64,
    /// Modules laid out on a device that keeps no memory.
    pub not_resident: u64,
}

actor_protocol! {
    /// The loader actor's handle.
    pub handle LoaderHandle;
    request LoaderRequest;
    service LoaderService;
    error LoaderError;
    /// Load a fat binary (or a bare cubin) for a device of compute
    /// capability `sm` (major*10 + minor).
    LoadModule => fn load_module(image: Vec<u8>, sm: u32) -> ModuleId;
    Function => fn function(module: ModuleId, name: String) -> FunctionInfo;
    /// Where a module's device variable (`__device__`, `__constant__`)
    /// lives on the GPU.
    Global => fn global(module: ModuleId, name: String) -> GlobalInfo;
    Unload => fn unload(module: ModuleId) -> ();
    Modules => fn modules() -> Vec<ModuleInfo>;
    /// One module's listing.
    Module => fn module(module: ModuleId) -> ModuleInfo;
    Stats => fn stats() -> LoaderStats;
}

struct Loaded {
    info: ModuleInfo,
    prepared: Prepared,
    bases: Bases,
}

struct LoaderActor {
    memory: MemoryHandle,
    submit: SubmitHandle,
    modules: BTreeMap<ModuleId, Loaded>,
    next: u32,
    stats: LoaderStats,
}

impl LoaderActor {
    fn free(&self, code: &DeviceBuffer, data: Option<&DeviceBuffer>) {
        let _ = self.memory.free_device(code.va);
        if let Some(d) = data {
            let _ = self.memory.free_device(d.va);
        }
    }
}

impl LoaderService for LoaderActor {
    fn load_module(&mut self, image: Vec<u8>, sm: u32) -> Result<ModuleId, LoaderError> {
        let prepared = prepare(&image, sm)?;
        let layout = &prepared.layout;
        let code = self
            .memory
            .alloc_device(layout.code_reserve)
            .map_err(LoaderError::Memory)?;
        let data = if layout.data_bytes > 0 {
            match self.memory.alloc_device(layout.data_bytes) {
                Ok(d) => Some(d),
                Err(e) => {
                    self.free(&code, None);
                    return Err(LoaderError::Memory(e));
                }
            }
        } else {
            None
        };
        let bases = Bases {
            code: code.va,
            data: data.map_or(0, |d| d.va),
        };
        let built = match layout.build(&prepared.cubin, bases, &system_extern_address) {
            Ok(b) => b,
            Err(e) => {
                self.free(&code, data.as_ref());
                return Err(LoaderError::Image(e));
            }
        };
        let mut uploads = vec![(code.va, built.code)];
        if let Some(d) = &data {
            uploads.push((d.va, built.data));
        }
        let mut resident = true;
        for (va, bytes) in uploads {
            let n = bytes.len() as u64;
            match self.submit.upload(va, bytes) {
                Ok(receipt) if receipt.resident => self.stats.uploaded_bytes += n,
                // A device that keeps no memory (the null card): the module
                // is laid out and its kernels can be named and launched,
                // but nothing of it is on a GPU.
                Ok(_) => resident = false,
                Err(e) => {
                    self.free(&code, data.as_ref());
                    return Err(LoaderError::Submit(e));
                }
            }
        }
        if !resident {
            self.stats.not_resident += 1;
        }
        for e in &prepared.unprovided_externs {
            tracing::warn!(extern_name = %e, "module calls a device-side system function this runtime does not provide; its slot is 0");
        }
        self.next += 1;
        let id = ModuleId(self.next);
        let info = ModuleInfo {
            id,
            sm: prepared.cubin.sm,
            kernels: prepared
                .cubin
                .kernels
                .iter()
                .map(|k| k.name.clone())
                .collect(),
            globals: prepared
                .cubin
                .globals
                .iter()
                .map(|g| g.name.clone())
                .collect(),
            code,
            data,
            relocations_applied: built.relocations_applied,
            unprovided_externs: prepared.unprovided_externs.clone(),
            resident,
        };
        self.stats.loaded += 1;
        self.stats.relocations_applied += built.relocations_applied as u64;
        self.modules.insert(
            id,
            Loaded {
                info,
                prepared,
                bases,
            },
        );
        self.stats.live = self.modules.len() as u64;
        Ok(id)
    }

    fn function(&mut self, module: ModuleId, name: String) -> Result<FunctionInfo, LoaderError> {
        let m = self
            .modules
            .get(&module)
            .ok_or(LoaderError::NoSuchModule(module))?;
        let c = &m.prepared.cubin;
        let k = c.kernel(&name).ok_or_else(|| LoaderError::NoSuchFunction {
            module,
            name: name.clone(),
            available: c.kernels.len(),
        })?;
        let area = macuda_hw::cbank0::for_sm(c.sm).ok_or(LoaderError::Image(
            crate::image::ImageError::UnknownArchitecture(c.sm),
        ))?;
        let entry = m
            .prepared
            .layout
            .address(k.code_section, m.bases)
            .ok_or_else(|| LoaderError::NoSuchFunction {
                module,
                name: name.clone(),
                available: c.kernels.len(),
            })?;
        Ok(FunctionInfo {
            module,
            name,
            entry,
            code_bytes: k.code_bytes,
            sm: c.sm,
            ptx_version: c.virtual_arch.map_or(c.sm, u32::from),
            registers: k.registers.unwrap_or(0),
            max_registers: k.max_registers,
            shared_bytes: k.shared_bytes,
            local_bytes: k.local_bytes(),
            barriers: k.barriers.unwrap_or(0),
            max_threads: k.max_threads,
            required_threads: k.required_threads,
            param_base: k.param_base,
            param_bytes: k.param_bytes,
            params: k.params.clone(),
            cbank0_bytes: cbank0_bytes(k, &area),
            banks: bank_bindings(c, &m.prepared.layout, m.bases, k),
            cooperative: k.cooperative,
        })
    }

    fn global(&mut self, module: ModuleId, name: String) -> Result<GlobalInfo, LoaderError> {
        let m = self
            .modules
            .get(&module)
            .ok_or(LoaderError::NoSuchModule(module))?;
        let c = &m.prepared.cubin;
        let g =
            c.globals
                .iter()
                .find(|g| g.name == name)
                .ok_or_else(|| LoaderError::NoSuchGlobal {
                    module,
                    name: name.clone(),
                    available: c.globals.len(),
                })?;
        let base = m
            .prepared
            .layout
            .address(g.section, m.bases)
            .ok_or_else(|| LoaderError::NoSuchGlobal {
                module,
                name: name.clone(),
                available: c.globals.len(),
            })?;
        Ok(GlobalInfo {
            module,
            name,
            address: base + g.offset,
            bytes: g.bytes,
        })
    }

    fn unload(&mut self, module: ModuleId) -> Result<(), LoaderError> {
        let m = self
            .modules
            .remove(&module)
            .ok_or(LoaderError::NoSuchModule(module))?;
        self.memory
            .free_device(m.info.code.va)
            .map_err(LoaderError::Memory)?;
        if let Some(d) = m.info.data {
            self.memory.free_device(d.va).map_err(LoaderError::Memory)?;
        }
        self.stats.unloaded += 1;
        self.stats.live = self.modules.len() as u64;
        Ok(())
    }

    fn modules(&mut self) -> Result<Vec<ModuleInfo>, LoaderError> {
        Ok(self.modules.values().map(|m| m.info.clone()).collect())
    }

    fn module(&mut self, module: ModuleId) -> Result<ModuleInfo, LoaderError> {
        self.modules
            .get(&module)
            .map(|m| m.info.clone())
            .ok_or(LoaderError::NoSuchModule(module))
    }

    fn stats(&mut self) -> Result<LoaderStats, LoaderError> {
        Ok(self.stats)
    }
}

/// Start the loader actor.
///
/// # Errors
/// Only if the thread cannot start.
pub fn spawn(
    config: ActorConfig,
    memory: MemoryHandle,
    submit: SubmitHandle,
) -> Result<(LoaderHandle, ActorJoin), LoaderError> {
    let actor = LoaderActor {
        memory,
        submit,
        modules: BTreeMap::new(),
        next: 0,
        stats: LoaderStats::default(),
    };
    LoaderHandle::spawn(config, actor).map_err(LoaderError::Spawn)
}
