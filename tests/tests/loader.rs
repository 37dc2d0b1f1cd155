//! The loader actor inside a running Host on the null device: real fat
//! binaries loaded for the device's architecture, kernels looked up with
//! their launch facts, uploads counted (the null device performs none), and
//! bad modules refused with typed errors that leave the stack running.

use macuda_loader::module::ModuleError;
use macuda_loader::LoaderError;
use macuda_supervisor::HostError;
use macuda_tests::NullWorld;
use std::time::Duration;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/cuda/fixtures/").to_string() + name)
        .unwrap()
}

fn module_error(e: &HostError) -> Option<&ModuleError> {
    match e {
        HostError::Loader(LoaderError::Module(m)) => Some(m),
        _ => None,
    }
}

#[test]
fn loads_every_fixture_for_sm_120_and_describes_its_kernels() {
    let world = NullWorld::new(Duration::from_secs(5));
    let host = world.start();
    let sm = host.device().chip.chip.compute_capability().unwrap();
    assert_eq!(sm, 120, "the null card is a GB202");
    // The submit actor's own regions are allocated at boot.
    let vram_before = host.call(|s| s.memory.stats()).unwrap().vram_used;
    for (file, kernel, params) in [
        ("vector_add.size.fatbin", "vector_add", 4),
        ("banks.speed.fatbin", "scale_by_table", 3),
        ("params.none.fatbin", "big_param", 2),
        ("shared.size.fatbin", "reverse_block", 2),
        ("printf.size.fatbin", "say", 1),
    ] {
        let m = host
            .call(|s| s.loader.load_module(fixture(file), sm))
            .unwrap();
        let f = host
            .call(|s| s.loader.function(m, kernel.to_string()))
            .unwrap();
        assert_eq!(f.sm, 120, "{file}");
        assert_eq!(f.param_base, 0x380, "{file}: Blackwell parameter base");
        assert_eq!(f.params.len(), params, "{file}");
        assert_eq!(f.entry % 128, 0, "{file}: code is 128-byte aligned");
        assert!(f.registers > 0, "{file}");
        assert!(f.cbank0_bytes >= 0x380 + u64::from(f.param_bytes));
        for b in &f.banks {
            assert_eq!(b.address % 64, 0, "{file}: bank {} misaligned", b.bank);
        }
        if kernel == "scale_by_table" {
            assert_eq!(
                f.banks.iter().map(|b| b.bank).collect::<Vec<_>>(),
                vec![3, 4]
            );
        }
        if kernel == "reverse_block" {
            assert_eq!(f.shared_bytes, 2048, "1 KiB tile plus the 1 KiB reserve");
            assert_eq!(f.max_threads, Some([256, 1, 1]));
        }
    }
    let modules = host.call(|s| s.loader.modules()).unwrap();
    assert_eq!(modules.len(), 5);
    let printf = modules
        .iter()
        .find(|m| m.kernels == vec!["say".to_string()])
        .unwrap();
    assert_eq!(printf.unprovided_externs, vec!["vprintf".to_string()]);
    let stats = host.call(|s| s.loader.stats()).unwrap();
    assert!(stats.relocations_applied >= 4, "{stats:?}");
    // Uploads go through submit; the null card keeps no memory, so every
    // module is laid out but none is resident, and nothing was counted as
    // uploaded.
    let submit = host.call(|s| s.submit.stats()).unwrap();
    assert_eq!((submit.uploads, stats.uploaded_bytes), (0, 0), "{submit:?}");
    assert_eq!(stats.not_resident, 5, "{stats:?}");
    assert!(modules.iter().all(|m| !m.resident));
    for m in &modules {
        host.call(|s| s.loader.unload(m.id)).unwrap();
    }
    assert_eq!(
        host.call(|s| s.memory.stats()).unwrap().vram_used,
        vram_before,
        "unloading freed everything the modules took"
    );
}

#[test]
fn an_architecture_the_fatbin_lacks_is_refused_naming_what_it_has() {
    let world = NullWorld::new(Duration::from_secs(5));
    let host = world.start();
    let err = host
        .call(|s| s.loader.load_module(fixture("vector_add.size.fatbin"), 100))
        .unwrap_err();
    let text = macuda_core::error_chain(&err).join(": ");
    assert!(module_error(&err).is_some(), "{text}");
    assert!(
        text.contains("sm_90 ELF") && text.contains("sm_120 ELF") && text.contains("PTX"),
        "{text}"
    );
    // A refused module is not a failure of the actor: the stack still runs.
    assert!(host.call(|s| s.loader.stats()).is_ok());
}

#[test]
fn a_cubin_for_another_architecture_is_refused() {
    let world = NullWorld::new(Duration::from_secs(5));
    let host = world.start();
    let err = host
        .call(|s| s.loader.load_module(fixture("vector_add.sm_90.cubin"), 120))
        .unwrap_err();
    assert!(
        matches!(
            module_error(&err),
            Some(ModuleError::WrongArchitecture {
                cubin: 90,
                device: 120,
                ..
            })
        ),
        "{err:?}"
    );
    let m = host
        .call(|s| s.loader.load_module(fixture("vector_add.sm_90.cubin"), 90))
        .unwrap();
    assert!(host.call(|s| s.loader.function(m, "nope".into())).is_err());
}

#[test]
fn garbage_and_truncated_modules_are_typed_errors() {
    let world = NullWorld::new(Duration::from_secs(5));
    let host = world.start();
    let good = fixture("kinds.size.fatbin");
    for bad in [
        b"hello world".to_vec(),
        good[..40].to_vec(),
        good[..good.len() / 2].to_vec(),
    ] {
        let err = host.call(|s| s.loader.load_module(bad, 120)).unwrap_err();
        assert!(module_error(&err).is_some(), "{err:?}");
    }
    assert!(
        host.call(|s| s.loader.load_module(good, 120)).is_ok(),
        "the loader still works"
    );
}

#[test]
fn parameters_marshal_from_the_host_argument_array() {
    let world = NullWorld::new(Duration::from_secs(5));
    let host = world.start();
    let m = host
        .call(|s| s.loader.load_module(fixture("params.size.fatbin"), 120))
        .unwrap();
    let f = host
        .call(|s| s.loader.function(m, "mixed_params".into()))
        .unwrap();
    // mixed_params(float*, const int64_t*, int, Mixed{int;char;double}, float4, char, double)
    #[repr(C)]
    struct Mixed {
        a: i32,
        b: u8,
        c: f64,
    }
    let out = 0x1000u64;
    let idx = 0x2000u64;
    let n = 77i32;
    let m = Mixed {
        a: -5,
        b: 9,
        c: 2.5,
    };
    let v = [1.0f32, 2.0, 3.0, 4.0];
    let flag = 1u8;
    let scale = 0.25f64;
    let args: [*const u8; 7] = [
        (&raw const out).cast(),
        (&raw const idx).cast(),
        (&raw const n).cast(),
        (&raw const m).cast(),
        v.as_ptr().cast(),
        (&raw const flag).cast(),
        (&raw const scale).cast(),
    ];
    // SAFETY: seven pointers to values of the sizes the kernel declares.
    let block = unsafe { f.marshal_from_pointers(args.as_ptr()) }.unwrap();
    assert_eq!(block.len(), 0x50);
    assert_eq!(&block[0..8], &out.to_le_bytes());
    assert_eq!(&block[8..16], &idx.to_le_bytes());
    assert_eq!(&block[0x10..0x14], &n.to_le_bytes());
    assert_eq!(&block[0x18..0x1c], &(-5i32).to_le_bytes());
    assert_eq!(block[0x1c], 9);
    assert_eq!(&block[0x20..0x28], &2.5f64.to_le_bytes());
    assert_eq!(&block[0x30..0x34], &1.0f32.to_le_bytes());
    assert_eq!(&block[0x3c..0x40], &4.0f32.to_le_bytes());
    assert_eq!(block[0x40], 1);
    assert_eq!(&block[0x48..0x50], &0.25f64.to_le_bytes());
}
