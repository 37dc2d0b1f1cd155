//! The vector_add fixture loaded into a Host and registered with submit,
//! and its launches: the kernel the integration tests run on the fake
//! module's GPU.

use macuda_submit::{KernelId, LaunchRecord};
use macuda_supervisor::Host;

/// vector_add as the loader laid it out and submit registered it.
pub struct VectorAdd {
    pub kernel: KernelId,
    pub info: macuda_loader::FunctionInfo,
}

impl VectorAdd {
    /// Load the fixture's fatbin for sm_90 and register its kernel.
    ///
    /// # Panics
    /// Where the fixture is missing or the Host refuses it (a test's
    /// failure).
    pub fn load(host: &Host) -> VectorAdd {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/cuda/fixtures/vector_add.size.fatbin"
        );
        let fatbin = std::fs::read(path).expect("fixture");
        let m = host.call(|s| s.loader.load_module(fatbin, 90)).unwrap();
        let info = host
            .call(|s| s.loader.function(m, "vector_add".into()))
            .unwrap();
        let kernel = host
            .call(|s| s.submit.register_kernel(info.kernel_desc()))
            .unwrap();
        VectorAdd { kernel, info }
    }

    /// A launch of `c = a + b` over `n` elements, in blocks of 256.
    ///
    /// # Panics
    /// Where `n` is negative.
    pub fn record(&self, a: u64, b: u64, c: u64, n: i32) -> LaunchRecord {
        let params = self
            .info
            .marshal(&[
                &a.to_le_bytes(),
                &b.to_le_bytes(),
                &c.to_le_bytes(),
                &n.to_le_bytes(),
            ])
            .unwrap();
        LaunchRecord {
            kernel: self.kernel,
            grid: [u32::try_from(n).unwrap().div_ceil(256), 1, 1],
            block: [256, 1, 1],
            dynamic_shared_bytes: 0,
            params,
        }
    }
}
