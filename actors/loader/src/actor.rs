use crate::error::LoaderError;
use macuda_core::{actor_protocol, ActorConfig, ActorJoin};
use macuda_memory::{DeviceBuffer, MemoryHandle};
use macuda_submit::SubmitHandle;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Code sections start on this boundary.
const CODE_ALIGN: u64 = 128;
/// Unmapped-fault protection after the last instruction: the instruction
/// prefetcher reads past the end of the code and faults without it.
const GUARD_BYTES: u64 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ModuleId(pub u32);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleInfo {
    pub id: ModuleId,
    pub name: String,
    pub image_bytes: u64,
    /// Where the code lives on the device, guard page included.
    pub code: DeviceBuffer,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderStats {
    pub loaded: u64,
    pub unloaded: u64,
    pub live: u64,
    pub uploaded_bytes: u64,
}

actor_protocol! {
    /// The loader actor's handle.
    pub handle LoaderHandle;
    request LoaderRequest;
    service LoaderService;
    error LoaderError;
    LoadImage => fn load_image(name: String, image: Vec<u8>) -> ModuleId;
    Unload => fn unload(module: ModuleId) -> ();
    Modules => fn modules() -> Vec<ModuleInfo>;
    Stats => fn stats() -> LoaderStats;
}

struct LoaderActor {
    memory: MemoryHandle,
    submit: SubmitHandle,
    modules: BTreeMap<ModuleId, ModuleInfo>,
    next: u32,
    stats: LoaderStats,
}

impl LoaderService for LoaderActor {
    fn load_image(&mut self, name: String, image: Vec<u8>) -> Result<ModuleId, LoaderError> {
        if image.is_empty() {
            return Err(LoaderError::EmptyImage { name });
        }
        let image_bytes = image.len() as u64;
        let reserve = image_bytes.next_multiple_of(CODE_ALIGN) + GUARD_BYTES;
        let code = self
            .memory
            .alloc_device(reserve)
            .map_err(LoaderError::Memory)?;
        if let Err(e) = self.submit.upload(code.va, image) {
            let _ = self.memory.free_device(code.va);
            return Err(LoaderError::Submit(e));
        }
        self.next += 1;
        let id = ModuleId(self.next);
        self.modules.insert(
            id,
            ModuleInfo {
                id,
                name,
                image_bytes,
                code,
            },
        );
        self.stats.loaded += 1;
        self.stats.live = self.modules.len() as u64;
        self.stats.uploaded_bytes += image_bytes;
        Ok(id)
    }

    fn unload(&mut self, module: ModuleId) -> Result<(), LoaderError> {
        let m = self
            .modules
            .remove(&module)
            .ok_or(LoaderError::NoSuchModule(module))?;
        self.memory
            .free_device(m.code.va)
            .map_err(LoaderError::Memory)?;
        self.stats.unloaded += 1;
        self.stats.live = self.modules.len() as u64;
        Ok(())
    }

    fn modules(&mut self) -> Result<Vec<ModuleInfo>, LoaderError> {
        Ok(self.modules.values().cloned().collect())
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
