//! Kernel launches as host code makes them: the call configuration a
//! `<<<...>>>` site pushes and the stub pops, nvcc's `__cudaGetKernel` /
//! `__cudaLaunchKernel` pair, `cudaLaunchKernel`, and clang's legacy
//! `cudaConfigureCall` / `cudaSetupArgument` / `cudaLaunch`. Each ends in
//! [`launch`]: the stub's kernel found by a hash on its address, the
//! configuration checked against the device and the kernel's metadata,
//! the arguments marshalled into the parameter block, the work issued.

use crate::device::{MAX_BLOCK_DIM, MAX_GRID_DIM, MAX_THREADS_PER_BLOCK, REGISTERS_PER_BLOCK};
use crate::error::CudaError;
use crate::runtime::Runtime;
use crate::state::nodes::{KernelNode, Node};
use crate::state::registry::{Resolved, REGISTRY};
use crate::types::Dim3;
use crate::work::{issue, launch_now};
use macuda_hw::sm::{registers_per_warp, WARP_SIZE};
use macuda_submit::{ParamBlock, INLINE_PARAM_BYTES};
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One `<<<grid, block, shared, stream>>>`.
#[derive(Debug, Clone, Copy)]
pub struct CallConfig {
    pub grid: Dim3,
    pub block: Dim3,
    pub shared: usize,
    pub stream: usize,
}

thread_local! {
    /// Configurations pushed and not yet popped (a kernel's arguments may
    /// themselves launch, so this is a stack).
    static CONFIGS: RefCell<Vec<CallConfig>> = const { RefCell::new(Vec::new()) };
    /// The legacy path's arguments, in `cudaSetupArgument` order.
    static LEGACY_ARGS: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

pub fn push_config(c: CallConfig) {
    CONFIGS.with(|s| s.borrow_mut().push(c));
}

pub fn pop_config() -> Result<CallConfig, CudaError> {
    CONFIGS
        .with(|s| s.borrow_mut().pop())
        .ok_or(CudaError::MISSING_CONFIGURATION)
}

pub fn setup_argument(arg: &[u8]) {
    LEGACY_ARGS.with(|a| a.borrow_mut().push(arg.to_vec()));
}

pub fn take_legacy_args() -> Vec<Vec<u8>> {
    LEGACY_ARGS.with(|a| std::mem::take(&mut *a.borrow_mut()))
}

/// The most threads a block of this kernel can have.
pub fn max_threads(r: &Resolved) -> u32 {
    let mut max = MAX_THREADS_PER_BLOCK;
    if let Some(t) = r.info.max_threads {
        max = max.min(t.iter().product());
    }
    let per_warp = registers_per_warp(r.info.registers);
    if let Some(warps) = u64::from(REGISTERS_PER_BLOCK).checked_div(per_warp) {
        // CAST: at most 2048 warps' worth of threads.
        max = max.min((warps * u64::from(WARP_SIZE)) as u32);
    }
    max
}

/// A launch's configuration against the device's and the kernel's limits.
/// NVIDIA's runtime answers every violation with `cudaErrorInvalidValue`
/// (seen on the H200: a block too large or empty, a grid too large, more
/// threads than `__launch_bounds__` allows, too much shared memory).
fn check(
    r: &Resolved,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u64,
    max_dynamic: u32,
) -> Result<(), CudaError> {
    let over = |v: [u32; 3], lim: [u32; 3]| v.iter().zip(lim).any(|(a, b)| *a == 0 || *a > b);
    let threads: u64 = block.iter().map(|&d| u64::from(d)).product();
    let refused = over(grid, MAX_GRID_DIM)
        || over(block, MAX_BLOCK_DIM)
        || threads > u64::from(max_threads(r))
        || r.info.required_threads.is_some_and(|req| req != block)
        || shared > u64::from(max_dynamic);
    if refused {
        Err(CudaError::INVALID_VALUE)
    } else {
        Ok(())
    }
}

/// The parameter block from the stub's argument array.
///
/// # Safety
/// `args` must hold one pointer per kernel parameter, each to as many
/// readable bytes as that parameter's size (the CUDA launch contract).
unsafe fn marshal(r: &Resolved, args: *const *const c_void) -> Result<ParamBlock, CudaError> {
    let len = r.info.param_bytes as usize;
    if !r.params.is_empty() && args.is_null() {
        return Err(CudaError::INVALID_VALUE);
    }
    let fill = |block: &mut [u8]| -> Result<(), CudaError> {
        for (i, &(offset, size)) in r.params.iter().enumerate() {
            // SAFETY: the caller promises args[i] for every parameter.
            let arg = unsafe { *args.add(i) };
            let slot = block
                .get_mut(offset..offset + size)
                .ok_or(CudaError::INVALID_KERNEL_IMAGE)?;
            if arg.is_null() {
                return Err(CudaError::INVALID_VALUE);
            }
            // SAFETY: args[i] points to `size` readable bytes.
            slot.copy_from_slice(unsafe { std::slice::from_raw_parts(arg.cast::<u8>(), size) });
        }
        Ok(())
    };
    if len <= INLINE_PARAM_BYTES {
        let mut bytes = [0u8; INLINE_PARAM_BYTES];
        fill(&mut bytes[..len])?;
        // CAST: at most INLINE_PARAM_BYTES.
        Ok(ParamBlock::Inline {
            len: len as u16,
            bytes,
        })
    } else {
        let mut block = vec![0u8; len];
        fill(&mut block)?;
        Ok(ParamBlock::Heap(block.into_boxed_slice()))
    }
}

/// Launch the kernel whose host stub is at `host_fun`.
///
/// # Safety
/// As [`marshal`] for `args`.
pub unsafe fn launch(
    rt: &Runtime,
    host_fun: usize,
    grid: Dim3,
    block: Dim3,
    shared: usize,
    stream: usize,
    args: *const *const c_void,
) -> Result<(), CudaError> {
    let entry = REGISTRY
        .kernels
        .get(&host_fun)
        .ok_or(CudaError::INVALID_RESOURCE_HANDLE)?;
    let r = entry.resolve(rt)?;
    let (grid, block) = (grid.as_array(), block.as_array());
    check(
        r,
        grid,
        block,
        shared as u64,
        entry.max_dynamic_shared.load(Ordering::Acquire),
    )?;
    // SAFETY: passed on from the caller.
    let params = unsafe { marshal(r, args) }?;
    // CAST: checked against the kernel's limit (under 4 GiB).
    let shared = shared as u32;
    let s = rt.streams.for_work(stream)?;
    if s.capture.load().is_some() {
        let node = Node::Kernel(KernelNode {
            entry: Arc::clone(&entry),
            grid,
            block,
            shared,
            params,
        });
        return issue(rt, stream, node, false);
    }
    launch_now(rt, r, grid, block, shared, params, &s, stream, false)
}

/// The legacy path's launch: the arguments `cudaSetupArgument` collected,
/// one per parameter in order.
pub fn launch_legacy(rt: &Runtime, host_fun: usize) -> Result<(), CudaError> {
    let args = take_legacy_args();
    let config = pop_config()?;
    let entry = REGISTRY.kernel(host_fun)?;
    let r = entry.resolve(rt)?;
    if args.len() != r.params.len()
        || args
            .iter()
            .zip(&r.params)
            .any(|(a, &(_, size))| a.len() != size)
    {
        return Err(CudaError::INVALID_VALUE);
    }
    let pointers: Vec<*const c_void> = args.iter().map(|a| a.as_ptr().cast()).collect();
    // SAFETY: one pointer per parameter, each to exactly its size.
    unsafe {
        launch(
            rt,
            host_fun,
            config.grid,
            config.block,
            config.shared,
            config.stream,
            pointers.as_ptr(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_pop_last_in_first_out() {
        let c = |x| CallConfig {
            grid: Dim3 { x, y: 1, z: 1 },
            block: Dim3 { x: 1, y: 1, z: 1 },
            shared: 0,
            stream: 0,
        };
        push_config(c(1));
        push_config(c(2));
        assert_eq!(pop_config().unwrap().grid.x, 2);
        assert_eq!(pop_config().unwrap().grid.x, 1);
        assert_eq!(pop_config().err(), Some(CudaError::MISSING_CONFIGURATION));
    }
}
