//! What a clang-compiled host object registers, checked against the fat
//! binaries it embeds, without running it: the split build's host halves
//! (clang) and device halves (nvcc) come from two compilers, and a kernel
//! whose name the two spell differently fails only when a program first
//! launches it ("no kernel is registered"). Clang names each kernel's host
//! stub after the kernel, the identifier prefixed with `__device_stub__`,
//! so the symbol table gives every name its registration code passes to
//! `__cudaRegisterFunction`.

use crate::names::NameIndex;
use object::{Object, ObjectSymbol};
use serde::Serialize;

/// The prefix clang puts before a kernel's identifier to name its stub.
const STUB_PREFIX: &str = "__device_stub__";
/// The runtime entry every registration code calls, ours as NVIDIA's.
const REGISTER_FUNCTION: &str = "__cudaRegisterFunction";
/// Part of the static initialiser nvcc's host code registers from; clang's
/// has no such symbol (its registration function is local and unnamed in
/// an optimised object).
const NVCC_REGISTER_ALL: &str = "__cudaRegisterAll";

/// A host object's registered kernels and those its fat binaries lack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Registrations {
    pub registered: usize,
    /// Registered names no kernel of the embedded fat binaries matches
    /// (exactly, or in the comparable form the runtime matches by).
    pub unmatched: Vec<String>,
}

/// The kernel names clang's registration code in `bytes` registers, or
/// `None` for an object clang's CUDA host compile did not make (nvcc's
/// host objects name their stubs another way and register nvcc's own
/// names, which match by construction).
pub fn clang_registered(bytes: &[u8]) -> Option<Vec<String>> {
    let file = object::File::parse(bytes).ok()?;
    let macho = matches!(file.format(), object::BinaryFormat::MachO);
    let plain = |name: &str| -> String {
        match name.strip_prefix('_') {
            Some(rest) if macho => rest.to_string(),
            _ => name.to_string(),
        }
    };
    let names: Vec<String> = file
        .symbols()
        .filter_map(|s| s.name().ok().map(plain))
        .collect();
    let registers = names.iter().any(|n| n == REGISTER_FUNCTION);
    if !registers || names.iter().any(|n| n.contains(NVCC_REGISTER_ALL)) {
        return None;
    }
    let mut kernels: Vec<String> = names.iter().filter_map(|n| kernel_of_stub(n)).collect();
    kernels.sort();
    kernels.dedup();
    Some(kernels)
}

/// The kernel a stub symbol stands for: the identifier's length in the
/// mangled name counts the prefix, which goes. Where the component before
/// it ends in a digit (clang's anonymous namespace, `_GLOBAL__N_1`) the
/// length's own digits are not marked off, so each split is tried,
/// shortest length first, and the first that demangles is the name.
fn kernel_of_stub(stub: &str) -> Option<String> {
    let at = stub.find(STUB_PREFIX)?;
    let digits_start = stub[..at]
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    let candidates = (digits_start..at).rev().filter_map(|from| {
        let len: usize = stub[from..at].parse().ok()?;
        let kept = len.checked_sub(STUB_PREFIX.len()).filter(|&n| n > 0)?;
        Some(format!(
            "{}{kept}{}",
            &stub[..from],
            &stub[at + STUB_PREFIX.len()..]
        ))
    });
    let mut last = None;
    for name in candidates {
        if cpp_demangle::Symbol::new(name.as_str()).is_ok() {
            return Some(name);
        }
        last = Some(name);
    }
    last
}

/// Check `registered` against the kernels of the embedded cubins.
pub fn check(registered: &[String], kernels: impl IntoIterator<Item = String>) -> Registrations {
    let index = NameIndex::new(kernels);
    Registrations {
        registered: registered.len(),
        unmatched: registered
            .iter()
            .filter(|r| index.find(r).is_none())
            .cloned()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stub_names_its_kernel() {
        assert_eq!(
            kernel_of_stub("_ZL31__device_stub__k_get_rows_floatIiiEvPKT_PKiPT0_ll5uint3mmmmmmmmm")
                .as_deref(),
            Some("_ZL16k_get_rows_floatIiiEvPKT_PKiPT0_ll5uint3mmmmmmmmm")
        );
        // In a namespace: the identifier's length is after the scopes.
        assert_eq!(
            kernel_of_stub("_ZN3cub17CUB_300200_SM_900_NS26__device_stub__EmptyKernelIvEEvv")
                .as_deref(),
            Some("_ZN3cub17CUB_300200_SM_900_NS11EmptyKernelIvEEvv")
        );
        // In clang's anonymous namespace, whose name ends in a digit.
        assert_eq!(
            kernel_of_stub("_ZN12_GLOBAL__N_120__device_stub__embedEPKfPfi").as_deref(),
            Some("_ZN12_GLOBAL__N_15embedEPKfPfi")
        );
        assert_eq!(kernel_of_stub("_Z10vector_addPfS_S_i"), None);
        // A length that cannot hold the prefix is no stub of clang's.
        assert_eq!(kernel_of_stub("_Z3__device_stub__x"), None);
    }

    #[test]
    fn names_the_registered_kernels_the_fat_binary_lacks() {
        // The split build's first run on the GPU: clang 19's own mangling
        // of a function template's specialization as a template argument,
        // and CUB from another CCCL, against nvcc 13's names.
        let fat = [
            "_Z13k_get_rows_kqIfXadL_ZN46_INTERNAL_d3881d02_10_getrows_cu_a5ed39ba_116916dequantize_mxfp4IfEEvPKvlPT_iEEEvS3_PKiS5_ll5uint3mmmmmmmmm",
            "_ZN3cub17CUB_300001_SM_9006detail11EmptyKernelIvEEvv",
        ]
        .map(String::from);
        let registered = [
            "_ZL13k_get_rows_kqIfXadL_ZL16dequantize_mxfp4IfEvPKvlPT_iEEEvS2_PKiS4_ll5uint3mmmmmmmmm",
            "_ZL13k_get_rows_kqIfTnPFvPKvlPT_iEXadL_ZL16dequantize_mxfp4IfEvS1_lS3_iEEEvS1_PKiS3_ll5uint3mmmmmmmmm",
            "_ZN3cub32CUB_200700___CUDA_ARCH_LIST___NS11EmptyKernelIvEEvv",
        ]
        .map(String::from);
        let r = check(&registered, fat);
        assert_eq!(r.registered, 3);
        assert_eq!(r.unmatched, registered[1..].to_vec());
    }
}
