//! The fat binary the library embeds, read back by our loader: every
//! architecture it is built for is there, each holds every kernel the
//! Rust side names, taking the one parameter structure of the size both
//! sides declare, and needing no more shared memory than the device of
//! that architecture gives a block.

use cublas::kernels::params::{GemmParams, TrsmParams};
use cublas::kernels::{fatbin, Family, Kernel};
use macuda_loader::cubin;
use macuda_loader::fatbin::Fatbin;

/// The most dynamic shared memory a block may have, per architecture.
fn optin(sm: u32) -> u32 {
    match sm {
        80 => 163 << 10,
        90 => 227 << 10,
        _ => 99 << 10,
    }
}

#[test]
fn every_architecture_holds_every_kernel_with_its_parameter_block() {
    let bytes = fatbin();
    let f = Fatbin::parse(bytes).expect("the fat binary parses");
    let mut sms: Vec<u32> = f.entries().iter().map(|e| e.sm).collect();
    sms.sort();
    assert_eq!(sms, [80, 86, 89, 90, 120]);
    for (i, e) in f.entries().iter().enumerate() {
        let payload = f.payload(bytes, i).expect("an entry decompresses");
        let c = cubin::parse(&payload).expect("a cubin parses");
        assert_eq!(
            c.arch_specific,
            e.sm == 90,
            "sm_90 is built as sm_90a, for wgmma"
        );
        for &k in Kernel::ALL {
            let name = k.name().to_str().unwrap();
            let kernel = c
                .kernels
                .iter()
                .find(|x| x.name == name)
                .unwrap_or_else(|| panic!("sm_{}: {name} is missing", e.sm));
            let size = if k.family() == Family::Trsm {
                std::mem::size_of::<TrsmParams>()
            } else {
                std::mem::size_of::<GemmParams>()
            };
            assert_eq!(kernel.param_bytes as usize, size, "sm_{}: {name}", e.sm);
            // wgmma runs only on sm_90; elsewhere its body is a trap.
            if k.family() != Family::Wgmma || e.sm == 90 {
                assert!(k.shared_bytes() <= optin(e.sm), "sm_{}: {name}", e.sm);
            }
        }
    }
}
