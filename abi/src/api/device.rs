//! Device selection and queries. There is one device, 0.

use super::out;
use crate::error::{clear_sticky, guard, take_last, CudaError};
use crate::launch::max_threads;
use crate::runtime::runtime;
use crate::state::registry::REGISTRY;
use crate::state::streams::{GREATEST_PRIORITY, LEAST_PRIORITY};
use crate::types::{
    func_attr, DeviceProp12, DeviceProp13, FuncAttributes, DRIVER_VERSION, RUNTIME_VERSION,
};
use macuda_hw::sm::{BlockNeeds, WARP_SIZE};
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

/// `cudaSetDeviceFlags`' flags, for `cudaGetDeviceFlags`.
static DEVICE_FLAGS: AtomicU32 = AtomicU32::new(0);

fn only_device(device: c_int) -> Result<(), CudaError> {
    if device == 0 {
        Ok(())
    } else {
        Err(CudaError::INVALID_DEVICE)
    }
}

/// # Safety
/// `count` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaGetDeviceCount(count: *mut c_int) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let count = unsafe { out(count) }?;
        match runtime() {
            Ok(_) => {
                *count = 1;
                Ok(())
            }
            Err(e) => {
                *count = 0;
                Err(e)
            }
        }
    })
}

/// # Safety
/// `device` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaGetDevice(device: *mut c_int) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        *unsafe { out(device) }? = 0;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn cudaSetDevice(device: c_int) -> CudaError {
    guard(|| {
        runtime()?;
        only_device(device)
    })
}

#[no_mangle]
pub extern "C" fn cudaSetDeviceFlags(flags: c_uint) -> CudaError {
    guard(|| {
        DEVICE_FLAGS.store(flags, Ordering::Release);
        Ok(())
    })
}

/// # Safety
/// `flags` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaGetDeviceFlags(flags: *mut c_uint) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        *unsafe { out(flags) }? = DEVICE_FLAGS.load(Ordering::Acquire);
        Ok(())
    })
}

/// CUDA 13's layout.
///
/// # Safety
/// `prop` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaGetDeviceProperties(
    prop: *mut DeviceProp13,
    device: c_int,
) -> CudaError {
    guard(|| {
        let rt = runtime()?;
        only_device(device)?;
        // SAFETY: the caller's promise.
        *unsafe { out(prop) }? = rt.facts.props13();
        Ok(())
    })
}

/// CUDA 12's layout (its headers rename cudaGetDeviceProperties to this).
///
/// # Safety
/// `prop` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaGetDeviceProperties_v2(
    prop: *mut DeviceProp12,
    device: c_int,
) -> CudaError {
    guard(|| {
        let rt = runtime()?;
        only_device(device)?;
        // SAFETY: the caller's promise.
        *unsafe { out(prop) }? = rt.facts.props12();
        Ok(())
    })
}

/// # Safety
/// `value` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaDeviceGetAttribute(
    value: *mut c_int,
    attr: c_int,
    device: c_int,
) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let value = unsafe { out(value) }?;
        let rt = runtime()?;
        only_device(device)?;
        let v = rt.facts.attribute(attr).ok_or(CudaError::INVALID_VALUE)?;
        *value = c_int::try_from(v).unwrap_or(c_int::MAX);
        Ok(())
    })
}

/// # Safety
/// `bus_id` is null or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn cudaDeviceGetPCIBusId(
    bus_id: *mut c_char,
    len: c_int,
    device: c_int,
) -> CudaError {
    guard(|| {
        let rt = runtime()?;
        only_device(device)?;
        let len = usize::try_from(len).map_err(|_| CudaError::INVALID_VALUE)?;
        if bus_id.is_null() || len == 0 {
            return Err(CudaError::INVALID_VALUE);
        }
        let id = rt.facts.pci_bus_id();
        let n = id.len().min(len - 1);
        // SAFETY: `len` writable bytes, as the caller promises; we write
        // n + 1 <= len.
        unsafe {
            std::ptr::copy_nonoverlapping(id.as_ptr(), bus_id.cast::<u8>(), n);
            *bus_id.add(n) = 0;
        }
        Ok(())
    })
}

/// # Safety
/// Both pointers are null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaMemGetInfo(free: *mut usize, total: *mut usize) -> CudaError {
    guard(|| {
        let rt = runtime()?;
        let stats = rt.call(|s| s.memory.stats())?;
        let total_bytes = rt.facts.total_memory;
        // SAFETY: the caller's promise.
        unsafe {
            *out(free)? = total_bytes.saturating_sub(stats.vram_used) as usize;
            *out(total)? = total_bytes as usize;
        }
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn cudaDeviceSynchronize() -> CudaError {
    let _timed = crate::call_spans::time("cudaDeviceSynchronize");
    guard(|| runtime()?.synchronize_all())
}

/// The context survives; what a reset promises a program (a clean error
/// state after the device is idle) it gets.
#[no_mangle]
pub extern "C" fn cudaDeviceReset() -> CudaError {
    guard(|| {
        // A sticky error the wait runs into is what the reset clears.
        let _ = runtime()?.synchronize_all();
        clear_sticky();
        let _ = take_last();
        Ok(())
    })
}

/// # Safety
/// Both pointers are null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaDeviceGetStreamPriorityRange(
    least: *mut c_int,
    greatest: *mut c_int,
) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise; null ones are skipped, as NVIDIA's.
        unsafe {
            if let Some(l) = least.as_mut() {
                *l = LEAST_PRIORITY;
            }
            if let Some(g) = greatest.as_mut() {
                *g = GREATEST_PRIORITY;
            }
        }
        Ok(())
    })
}

/// # Safety
/// `can` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaDeviceCanAccessPeer(
    can: *mut c_int,
    device: c_int,
    peer: c_int,
) -> CudaError {
    guard(|| {
        only_device(device)?;
        if peer == device {
            return Err(CudaError::INVALID_DEVICE);
        }
        only_device(peer)?;
        // SAFETY: the caller's promise.
        *unsafe { out(can) }? = 0;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn cudaDeviceEnablePeerAccess(peer: c_int, _flags: c_uint) -> CudaError {
    guard(|| {
        only_device(peer)?;
        Err(CudaError::INVALID_DEVICE)
    })
}

/// # Safety
/// `version` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaRuntimeGetVersion(version: *mut c_int) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        *unsafe { out(version) }? = RUNTIME_VERSION;
        Ok(())
    })
}

/// # Safety
/// `version` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaDriverGetVersion(version: *mut c_int) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        *unsafe { out(version) }? = DRIVER_VERSION;
        Ok(())
    })
}

/// # Safety
/// `attr` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaFuncGetAttributes(
    attr: *mut FuncAttributes,
    func: *const c_void,
) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let attr = unsafe { out(attr) }?;
        let rt = runtime()?;
        let entry = REGISTRY.kernel(func as usize)?;
        let r = entry.resolve(rt)?;
        let info = &r.info;
        let constant = info
            .banks
            .iter()
            .filter(|b| b.bank == CONSTANT_BANK)
            .map(|b| b.bytes)
            .sum::<u64>();
        *attr = FuncAttributes {
            sharedSizeBytes: rt.facts.user_static_shared(info.shared_bytes) as usize,
            constSizeBytes: constant as usize,
            localSizeBytes: info.local_bytes as usize,
            maxThreadsPerBlock: max_threads(r) as c_int,
            numRegs: info.registers as c_int,
            ptxVersion: info.ptx_version as c_int,
            binaryVersion: info.sm as c_int,
            maxDynamicSharedSizeBytes: entry.max_dynamic_shared.load(Ordering::Acquire) as c_int,
            preferredShmemCarveout: entry.carveout.load(Ordering::Acquire),
            ..FuncAttributes::default()
        };
        Ok(())
    })
}

/// The bank `__constant__` data lives in.
const CONSTANT_BANK: u8 = 3;

#[no_mangle]
pub extern "C" fn cudaFuncSetAttribute(
    func: *const c_void,
    attr: c_int,
    value: c_int,
) -> CudaError {
    guard(|| {
        let rt = runtime()?;
        let entry = REGISTRY.kernel(func as usize)?;
        let r = entry.resolve(rt)?;
        match attr {
            func_attr::MAX_DYNAMIC_SHARED_MEMORY_SIZE => {
                let user_static = rt.facts.user_static_shared(r.info.shared_bytes);
                let room = rt
                    .facts
                    .arch
                    .shared_per_block_optin
                    .saturating_sub(user_static);
                let v = u32::try_from(value).map_err(|_| CudaError::INVALID_VALUE)?;
                if u64::from(v) > room {
                    return Err(CudaError::INVALID_VALUE);
                }
                entry.max_dynamic_shared.store(v, Ordering::Release);
                Ok(())
            }
            func_attr::PREFERRED_SHARED_MEMORY_CARVEOUT => {
                if !(-1..=100).contains(&value) {
                    return Err(CudaError::INVALID_VALUE);
                }
                entry.carveout.store(value, Ordering::Release);
                Ok(())
            }
            _ => Err(CudaError::INVALID_VALUE),
        }
    })
}

#[no_mangle]
pub extern "C" fn cudaFuncSetCacheConfig(func: *const c_void, _config: c_int) -> CudaError {
    guard(|| REGISTRY.kernel(func as usize).map(|_| ()))
}

/// # Safety
/// `blocks` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    blocks: *mut c_int,
    func: *const c_void,
    block_size: c_int,
    dynamic_shared: usize,
    _flags: c_uint,
) -> CudaError {
    guard(|| {
        // SAFETY: the caller's promise.
        let blocks = unsafe { out(blocks) }?;
        let rt = runtime()?;
        let entry = REGISTRY.kernel(func as usize)?;
        let r = entry.resolve(rt)?;
        let threads = u64::try_from(block_size).map_err(|_| CudaError::INVALID_VALUE)?;
        if threads == 0 || threads > u64::from(max_threads(r)) {
            *blocks = 0;
            return Ok(());
        }
        let facts = &rt.facts;
        let shared = facts.user_static_shared(r.info.shared_bytes)
            + facts.reserved_shared_per_block()
            + dynamic_shared as u64;
        // CAST: at most max_threads(r), 1024.
        let needs = BlockNeeds {
            threads: threads as u32,
            registers: r.info.registers,
            shared_bytes: shared,
        };
        // The warps RM says an SM holds, where it says.
        let by_warps = u64::from(facts.compute.max_warps_per_sm.max(1))
            / threads.div_ceil(u64::from(WARP_SIZE));
        let n = u64::from(facts.arch.resident_blocks(needs)).min(by_warps);
        *blocks = c_int::try_from(n).unwrap_or(c_int::MAX);
        Ok(())
    })
}

/// # Safety
/// As the flags form.
#[no_mangle]
pub unsafe extern "C" fn cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    blocks: *mut c_int,
    func: *const c_void,
    block_size: c_int,
    dynamic_shared: usize,
) -> CudaError {
    // SAFETY: passed on.
    unsafe {
        cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
            blocks,
            func,
            block_size,
            dynamic_shared,
            0,
        )
    }
}
