//! The C enums of NVIDIA's cuBLAS API that cross our ABI, declared once:
//! each a Rust enum with the header's value (pinned to NVIDIA's headers in
//! tests/values.rs) and a checked conversion from what the caller passed.

use crate::status::Error;
use std::ffi::c_int;

macro_rules! c_enum {
    ($(#[$doc:meta])* $name:ident ($what:literal) { $( $variant:ident = $value:literal => $cname:literal, )+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(i32)]
        pub enum $name {
            $( $variant = $value, )+
        }

        impl $name {
            /// Every value with the header's name, for the value test.
            pub const ALL: &'static [($name, &'static str)] = &[ $( ($name::$variant, $cname), )+ ];

            pub fn from_c(v: c_int) -> Result<Self, Error> {
                match v {
                    $( $value => Ok($name::$variant), )+
                    _ => Err(Error::Invalid {
                        what: $what,
                        value: i64::from(v),
                        rule: concat!("not a ", stringify!($name), " value"),
                    }),
                }
            }

            pub fn c_name(self) -> &'static str {
                match self {
                    $( $name::$variant => $cname, )+
                }
            }
        }
    };
}

c_enum! {
    /// `cublasOperation_t`. CONJG is declared by NVIDIA but not supported.
    Operation ("trans") {
        N = 0 => "CUBLAS_OP_N",
        T = 1 => "CUBLAS_OP_T",
        C = 2 => "CUBLAS_OP_C",
    }
}

impl Operation {
    /// Whether op(X) reads X transposed (for real types C is T).
    pub fn transposes(self) -> bool {
        self != Operation::N
    }
}

c_enum! {
    /// `cudaDataType_t`, the element types a GEMM may name. Those we do not
    /// compute with are still recognised, so they are refused as
    /// unsupported rather than as invalid.
    DataType ("data type") {
        R16F = 2 => "CUDA_R_16F",
        C16F = 6 => "CUDA_C_16F",
        R16BF = 14 => "CUDA_R_16BF",
        C16BF = 15 => "CUDA_C_16BF",
        R32F = 0 => "CUDA_R_32F",
        C32F = 4 => "CUDA_C_32F",
        R64F = 1 => "CUDA_R_64F",
        C64F = 5 => "CUDA_C_64F",
        R8I = 3 => "CUDA_R_8I",
        C8I = 7 => "CUDA_C_8I",
        R8U = 8 => "CUDA_R_8U",
        R32I = 10 => "CUDA_R_32I",
        R8fE4m3 = 28 => "CUDA_R_8F_E4M3",
        R8fE5m2 = 29 => "CUDA_R_8F_E5M2",
    }
}

c_enum! {
    /// `cublasComputeType_t`.
    ComputeType ("compute type") {
        F16 = 64 => "CUBLAS_COMPUTE_16F",
        F16Pedantic = 65 => "CUBLAS_COMPUTE_16F_PEDANTIC",
        F32 = 68 => "CUBLAS_COMPUTE_32F",
        F32Pedantic = 69 => "CUBLAS_COMPUTE_32F_PEDANTIC",
        F32Fast16F = 74 => "CUBLAS_COMPUTE_32F_FAST_16F",
        F32Fast16BF = 75 => "CUBLAS_COMPUTE_32F_FAST_16BF",
        F32FastTf32 = 77 => "CUBLAS_COMPUTE_32F_FAST_TF32",
        F32Emulated16BFx9 = 78 => "CUBLAS_COMPUTE_32F_EMULATED_16BFX9",
        F64 = 70 => "CUBLAS_COMPUTE_64F",
        F64Pedantic = 71 => "CUBLAS_COMPUTE_64F_PEDANTIC",
        F64EmulatedFixedPoint = 79 => "CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT",
        I32 = 72 => "CUBLAS_COMPUTE_32I",
        I32Pedantic = 73 => "CUBLAS_COMPUTE_32I_PEDANTIC",
    }
}

c_enum! {
    /// `cublasMath_t`, without the flag below.
    MathMode ("math mode") {
        Default = 0 => "CUBLAS_DEFAULT_MATH",
        TensorOp = 1 => "CUBLAS_TENSOR_OP_MATH",
        Pedantic = 2 => "CUBLAS_PEDANTIC_MATH",
        Tf32TensorOp = 3 => "CUBLAS_TF32_TENSOR_OP_MATH",
        Fp32EmulatedBf16x9 = 4 => "CUBLAS_FP32_EMULATED_BF16X9_MATH",
        Fp64EmulatedFixedPoint = 8 => "CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH",
    }
}

/// `CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION`, OR-ed onto a mode.
pub const MATH_DISALLOW_REDUCED_PRECISION_REDUCTION: c_int = 16;

c_enum! {
    /// `cublasPointerMode_t`: where alpha and beta live.
    PointerMode ("pointer mode") {
        Host = 0 => "CUBLAS_POINTER_MODE_HOST",
        Device = 1 => "CUBLAS_POINTER_MODE_DEVICE",
    }
}

c_enum! {
    /// `cublasAtomicsMode_t`.
    AtomicsMode ("atomics mode") {
        NotAllowed = 0 => "CUBLAS_ATOMICS_NOT_ALLOWED",
        Allowed = 1 => "CUBLAS_ATOMICS_ALLOWED",
    }
}

c_enum! {
    /// `cublasSideMode_t`.
    Side ("side") {
        Left = 0 => "CUBLAS_SIDE_LEFT",
        Right = 1 => "CUBLAS_SIDE_RIGHT",
    }
}

c_enum! {
    /// `cublasFillMode_t`; FULL names no triangle and is refused by the
    /// triangular solves.
    Fill ("fill mode") {
        Lower = 0 => "CUBLAS_FILL_MODE_LOWER",
        Upper = 1 => "CUBLAS_FILL_MODE_UPPER",
        Full = 2 => "CUBLAS_FILL_MODE_FULL",
    }
}

c_enum! {
    /// `cublasDiagType_t`.
    Diag ("diagonal type") {
        NonUnit = 0 => "CUBLAS_DIAG_NON_UNIT",
        Unit = 1 => "CUBLAS_DIAG_UNIT",
    }
}

/// `cublasGemmAlgo_t`: a hint. Every named algorithm is accepted and runs
/// our own choice of kernel; others are refused.
pub mod algo {
    use std::ffi::c_int;
    pub const DEFAULT: c_int = -1;
    pub const ALGO0: c_int = 0;
    pub const ALGO23: c_int = 23;
    pub const DEFAULT_TENSOR_OP: c_int = 99;
    pub const ALGO0_TENSOR_OP: c_int = 100;
    pub const ALGO15_TENSOR_OP: c_int = 115;

    pub fn is_named(v: c_int) -> bool {
        v == DEFAULT
            || (ALGO0..=ALGO23).contains(&v)
            || (DEFAULT_TENSOR_OP..=ALGO15_TENSOR_OP).contains(&v)
    }
}

/// `libraryPropertyType` for cublasGetProperty.
pub mod property {
    use std::ffi::c_int;
    pub const MAJOR_VERSION: c_int = 0;
    pub const MINOR_VERSION: c_int = 1;
    pub const PATCH_LEVEL: c_int = 2;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip_and_refuse_the_rest() {
        for &(v, name) in Operation::ALL {
            assert_eq!(Operation::from_c(v as c_int).unwrap(), v);
            assert_eq!(v.c_name(), name);
        }
        let e = Operation::from_c(3).unwrap_err();
        assert_eq!(e.to_string(), "trans is 3: not a Operation value");
        assert!(
            ComputeType::from_c(0).is_err(),
            "a data type is no compute type"
        );
        assert_eq!(DataType::from_c(14).unwrap(), DataType::R16BF);
    }

    #[test]
    fn algorithms_named_by_the_header_are_accepted() {
        for v in [-1, 0, 23, 99, 100, 115] {
            assert!(algo::is_named(v), "{v}");
        }
        for v in [-2, 24, 98, 116] {
            assert!(!algo::is_named(v), "{v}");
        }
    }
}
