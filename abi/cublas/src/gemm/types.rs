//! Which element, scalar and compute types a GEMM names, and what that
//! means for our kernels: the combinations NVIDIA's cuBLAS documents for
//! cublasGemmEx that we compute, each resolved to the input and output
//! element types, the scalars' type and how exact the products must be;
//! every other combination is CUBLAS_STATUS_NOT_SUPPORTED.

use crate::enums::{ComputeType, DataType, MathMode};
use crate::kernels::params::Elem;
use crate::status::Error;
use std::fmt;

/// The compute type a GemmEx call names: a cublasComputeType_t, or, as
/// older code passes and NVIDIA's library still takes, a cudaDataType
/// standing for the compute type of that precision (pedantic under the
/// pedantic math mode, as cuBLAS's header maps them); anything else is
/// NOT_SUPPORTED, as NVIDIA answers.
pub fn compute_type(v: i32, math: MathMode) -> Result<ComputeType, Error> {
    if let Ok(c) = ComputeType::from_c(v) {
        return Ok(c);
    }
    let pedantic = math == MathMode::Pedantic;
    let pick = |plain, strict| if pedantic { strict } else { plain };
    match DataType::from_c(v) {
        Ok(DataType::R32F | DataType::C32F) => Ok(pick(ComputeType::F32, ComputeType::F32Pedantic)),
        Ok(DataType::R64F | DataType::C64F) => Ok(pick(ComputeType::F64, ComputeType::F64Pedantic)),
        Ok(DataType::R16F) => Ok(pick(ComputeType::F16, ComputeType::F16Pedantic)),
        Ok(DataType::R32I) => Ok(pick(ComputeType::I32, ComputeType::I32Pedantic)),
        _ => Err(Error::Unsupported(format!("compute type {v}"))),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Types {
    pub a: DataType,
    pub b: DataType,
    pub c: DataType,
    pub compute: ComputeType,
}

impl fmt::Display for Types {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "A {} B {} C {} compute {}",
            self.a.c_name(),
            self.b.c_name(),
            self.c.c_name(),
            self.compute.c_name()
        )
    }
}

/// How a product may be computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// In the compute type itself, on the CUDA cores (pedantic modes,
    /// plain float and double).
    Exact,
    /// 16-bit inputs on tensor cores, f32 accumulation.
    Tensor16,
    /// f32 inputs rounded to tf32 on tensor cores, f32 accumulation.
    Tf32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    pub input: Elem,
    pub output: Elem,
    /// The type alpha and beta are read as.
    pub scalar: Elem,
    pub precision: Precision,
}

fn elem(t: DataType) -> Elem {
    match t {
        DataType::R16F => Elem::F16,
        DataType::R16BF => Elem::Bf16,
        DataType::R64F => Elem::F64,
        _ => Elem::F32,
    }
}

impl Signature {
    pub fn resolve(t: Types, math: MathMode) -> Result<Signature, Error> {
        use ComputeType as C;
        use DataType::*;
        let unsupported = || Error::Unsupported(t.to_string());
        if t.a != t.b {
            return Err(unsupported());
        }
        let pedantic = matches!(
            math,
            MathMode::Pedantic | MathMode::Fp32EmulatedBf16x9 | MathMode::Fp64EmulatedFixedPoint
        );
        let (scalar_type, precision) = match (t.compute, t.a, t.c) {
            (C::F16 | C::F16Pedantic, R16F, R16F) => (
                R16F,
                if t.compute == C::F16Pedantic {
                    Precision::Exact
                } else {
                    Precision::Tensor16
                },
            ),
            (C::F32 | C::F32Pedantic, R16F, R16F | R32F)
            | (C::F32 | C::F32Pedantic, R16BF, R16BF | R32F) => (
                R32F,
                if t.compute == C::F32Pedantic {
                    Precision::Exact
                } else {
                    Precision::Tensor16
                },
            ),
            (C::F32 | C::F32Pedantic, R32F, R32F) => (
                R32F,
                // ggml turns TF32 on for the handle (CUBLAS_TF32_TENSOR_OP_MATH);
                // the deprecated TENSOR_OP mode allows it too.
                if t.compute == C::F32
                    && matches!(math, MathMode::Tf32TensorOp | MathMode::TensorOp)
                {
                    Precision::Tf32
                } else {
                    Precision::Exact
                },
            ),
            (C::F32Fast16F | C::F32Fast16BF | C::F32FastTf32, R32F, R32F) => {
                (R32F, Precision::Tf32)
            }
            (C::F64 | C::F64Pedantic, R64F, R64F) => (R64F, Precision::Exact),
            _ => return Err(unsupported()),
        };
        Ok(Signature {
            input: elem(t.a),
            output: elem(t.c),
            scalar: elem(scalar_type),
            precision: if pedantic {
                Precision::Exact
            } else {
                precision
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(a: DataType, c: DataType, compute: ComputeType) -> Types {
        Types {
            a,
            b: a,
            c,
            compute,
        }
    }

    #[test]
    fn ggmls_combinations_resolve() {
        use ComputeType as C;
        use DataType::*;
        let s = Signature::resolve(t(R16F, R16F, C::F16), MathMode::Tf32TensorOp).unwrap();
        assert_eq!(
            (s.input, s.output, s.scalar, s.precision),
            (Elem::F16, Elem::F16, Elem::F16, Precision::Tensor16)
        );
        let s = Signature::resolve(t(R16BF, R32F, C::F32), MathMode::Tf32TensorOp).unwrap();
        assert_eq!(
            (s.input, s.output, s.scalar),
            (Elem::Bf16, Elem::F32, Elem::F32)
        );
        let s = Signature::resolve(t(R32F, R32F, C::F32), MathMode::Tf32TensorOp).unwrap();
        assert_eq!(s.precision, Precision::Tf32);
        let s = Signature::resolve(t(R32F, R32F, C::F32), MathMode::Default).unwrap();
        assert_eq!(
            s.precision,
            Precision::Exact,
            "without TF32 math, floats are exact"
        );
        let s = Signature::resolve(t(R16F, R32F, C::F32), MathMode::Pedantic).unwrap();
        assert_eq!(s.precision, Precision::Exact);
    }

    #[test]
    fn data_types_stand_for_compute_types_as_older_code_passes_them() {
        assert_eq!(
            compute_type(0, MathMode::Default).unwrap(),
            ComputeType::F32
        );
        assert_eq!(
            compute_type(0, MathMode::Pedantic).unwrap(),
            ComputeType::F32Pedantic
        );
        assert_eq!(
            compute_type(2, MathMode::Default).unwrap(),
            ComputeType::F16
        );
        assert_eq!(
            compute_type(68, MathMode::Pedantic).unwrap(),
            ComputeType::F32
        );
        let e = compute_type(1000, MathMode::Default).unwrap_err();
        assert_eq!(e.status(), crate::status::Status::NOT_SUPPORTED);
        assert!(
            compute_type(14, MathMode::Default).is_err(),
            "no bf16 compute type"
        );
    }

    #[test]
    fn other_combinations_are_not_supported() {
        use ComputeType as C;
        use DataType::*;
        for types in [
            t(R16F, R16BF, C::F32),
            t(R16F, R16F, C::F64),
            t(R8I, R32I, C::I32),
            t(R32F, R16F, C::F32),
            t(R64F, R64F, C::F32),
            t(C32F, C32F, C::F32),
        ] {
            let e = Signature::resolve(types, MathMode::Default).unwrap_err();
            assert_eq!(e.status(), crate::status::Status::NOT_SUPPORTED, "{types}");
        }
        let mixed = Types {
            a: R16F,
            b: R16BF,
            c: R32F,
            compute: C::F32,
        };
        assert!(Signature::resolve(mixed, MathMode::Default).is_err());
    }
}
