//! The parameter structures our kernels take, by value, as their one
//! parameter: the Rust half of the contract whose CUDA half is
//! kernels/params.cuh. Both sides pin sizes and offsets to the same numbers
//! (static_asserts there, the tests here), and the committed cubins' own
//! parameter sizes are checked against these in tests/kernels.rs.

use std::ffi::c_void;

/// `ElemType`: element types of matrices and of device-side scalars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Elem {
    F32 = 0,
    F16 = 1,
    Bf16 = 2,
    F64 = 3,
}

/// `GemmFlag`.
pub mod gemm_flag {
    pub const TRANS_A: u32 = 1 << 0;
    pub const TRANS_B: u32 = 1 << 1;
    pub const POINTER_ARRAYS: u32 = 1 << 2;
    pub const SCALARS_ON_DEVICE: u32 = 1 << 3;
}

/// `GemmParams`: C = alpha op(A) op(B) + beta C for each batch member,
/// column-major; strides and leading dimensions in elements.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GemmParams {
    pub a: *const c_void,
    pub b: *const c_void,
    pub c: *mut c_void,
    pub alpha_ptr: *const c_void,
    pub beta_ptr: *const c_void,
    pub lda: i64,
    pub ldb: i64,
    pub ldc: i64,
    pub stride_a: i64,
    pub stride_b: i64,
    pub stride_c: i64,
    pub alpha: f64,
    pub beta: f64,
    pub m: i32,
    pub n: i32,
    pub k: i32,
    pub batch: i32,
    pub flags: u32,
    pub c_type: u32,
    pub scalar_type: u32,
    /// Elements of K per piece, for the split kernel and its reduction
    /// (0 for every other kernel).
    pub k_chunk: i32,
    /// The pieces' partial sums: one m x n f32 slice each, column-major.
    pub partials: *mut c_void,
}

/// `TrsmFlag`.
pub mod trsm_flag {
    pub const SIDE_RIGHT: u32 = 1 << 0;
    pub const UPPER: u32 = 1 << 1;
    pub const TRANS: u32 = 1 << 2;
    pub const UNIT_DIAGONAL: u32 = 1 << 3;
    pub const SCALARS_ON_DEVICE: u32 = 1 << 4;
    pub const POINTER_ARRAYS: u32 = 1 << 5;
}

/// `TrsmParams`: B (m x n) overwritten by X.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TrsmParams {
    pub a: *const c_void,
    pub b: *mut c_void,
    pub alpha_ptr: *const c_void,
    pub lda: i64,
    pub ldb: i64,
    pub alpha: f64,
    pub m: i32,
    pub n: i32,
    pub batch: i32,
    pub flags: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The numbers params.cuh asserts.
    #[test]
    fn gemm_params_match_the_kernels_declaration() {
        assert_eq!(size_of::<GemmParams>(), 144);
        assert_eq!(offset_of!(GemmParams, lda), 40);
        assert_eq!(offset_of!(GemmParams, stride_a), 64);
        assert_eq!(offset_of!(GemmParams, alpha), 88);
        assert_eq!(offset_of!(GemmParams, m), 104);
        assert_eq!(offset_of!(GemmParams, flags), 120);
        assert_eq!(offset_of!(GemmParams, scalar_type), 128);
        assert_eq!(offset_of!(GemmParams, k_chunk), 132);
        assert_eq!(offset_of!(GemmParams, partials), 136);
    }

    #[test]
    fn trsm_params_match_the_kernels_declaration() {
        assert_eq!(size_of::<TrsmParams>(), 64);
        assert_eq!(offset_of!(TrsmParams, lda), 24);
        assert_eq!(offset_of!(TrsmParams, alpha), 40);
        assert_eq!(offset_of!(TrsmParams, m), 48);
        assert_eq!(offset_of!(TrsmParams, flags), 60);
    }
}
