//! Our declarations of cuBLAS's C enums and statuses against NVIDIA's
//! headers: tests/data/cublas13-values.json, printed by values/values.c
//! compiled against the cuBLAS 13.1 headers from PyPI
//! (values/generate.sh; CI regenerates and compares, values/check.sh).

use cublas::enums::*;
use cublas::status::ALL;
use serde_json::Value;

fn values() -> Value {
    serde_json::from_str(include_str!("data/cublas13-values.json")).expect("the table parses")
}

fn value(v: &Value, key: &str) -> i64 {
    v[key]
        .as_i64()
        .unwrap_or_else(|| panic!("`{key}` is not in the table"))
}

#[test]
fn statuses_match_the_headers() {
    let v = values();
    for &(name, code) in ALL {
        assert_eq!(
            value(&v, &format!("CUBLAS_STATUS_{name}")),
            i64::from(code),
            "{name}"
        );
    }
    // And every status the headers have is ours.
    let theirs = v
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("CUBLAS_STATUS_"))
        .count();
    assert_eq!(theirs, ALL.len());
}

macro_rules! check_enum {
    ($v:expr, $t:ty) => {
        for &(variant, name) in <$t>::ALL {
            assert_eq!(value(&$v, name), variant as i64, "{name}");
        }
    };
}

#[test]
fn enums_match_the_headers() {
    let v = values();
    check_enum!(v, Operation);
    check_enum!(v, DataType);
    check_enum!(v, ComputeType);
    check_enum!(v, MathMode);
    check_enum!(v, PointerMode);
    check_enum!(v, AtomicsMode);
    check_enum!(v, Side);
    check_enum!(v, Fill);
    check_enum!(v, Diag);
    assert_eq!(
        value(&v, "CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION"),
        i64::from(MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
    );
}

#[test]
fn algorithms_properties_and_version_match_the_headers() {
    let v = values();
    assert_eq!(value(&v, "CUBLAS_GEMM_DEFAULT"), i64::from(algo::DEFAULT));
    assert_eq!(value(&v, "CUBLAS_GEMM_ALGO0"), i64::from(algo::ALGO0));
    assert_eq!(value(&v, "CUBLAS_GEMM_ALGO23"), i64::from(algo::ALGO23));
    assert_eq!(
        value(&v, "CUBLAS_GEMM_DEFAULT_TENSOR_OP"),
        i64::from(algo::DEFAULT_TENSOR_OP)
    );
    assert_eq!(
        value(&v, "CUBLAS_GEMM_ALGO0_TENSOR_OP"),
        i64::from(algo::ALGO0_TENSOR_OP)
    );
    assert_eq!(
        value(&v, "CUBLAS_GEMM_ALGO15_TENSOR_OP"),
        i64::from(algo::ALGO15_TENSOR_OP)
    );
    assert_eq!(
        value(&v, "MAJOR_VERSION"),
        i64::from(property::MAJOR_VERSION)
    );
    assert_eq!(
        value(&v, "MINOR_VERSION"),
        i64::from(property::MINOR_VERSION)
    );
    assert_eq!(value(&v, "PATCH_LEVEL"), i64::from(property::PATCH_LEVEL));
    let (major, minor, patch) = cublas::VERSION;
    assert_eq!(
        (
            value(&v, "CUBLAS_VER_MAJOR"),
            value(&v, "CUBLAS_VER_MINOR"),
            value(&v, "CUBLAS_VER_PATCH")
        ),
        (i64::from(major), i64::from(minor), i64::from(patch))
    );
}
