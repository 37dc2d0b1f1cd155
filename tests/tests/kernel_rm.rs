//! The kernel-module RM path on a real GPU (needs NVIDIA's kernel module;
//! skipped with the reason printed where /dev/nvidiactl is absent).

use macuda_gsp::kernel::{cards, KernelRm, CTL_NODE, DRIVER_MAJOR};

fn gpu_present() -> bool {
    if std::path::Path::new(CTL_NODE).exists() {
        true
    } else {
        eprintln!("skipped: {CTL_NODE} is absent (no NVIDIA kernel module on this machine)");
        false
    }
}

#[test]
fn opens_a_client_device_and_subdevice_and_identifies_the_gpu() {
    if !gpu_present() {
        return;
    }
    let listed = cards().unwrap();
    assert!(!listed.is_empty(), "the module lists no GPU");
    let rm = KernelRm::open(0).unwrap();
    let id = rm.identify().unwrap();
    eprintln!("{id:?}");
    assert!(id.driver_version.starts_with(&format!("{DRIVER_MAJOR}.")));
    assert_eq!(id.pci.vendor_id, 0x10DE);
    assert_eq!(id.pci.device_id, listed[0].pci_info.device_id);
    assert!(
        id.chip.is_some(),
        "unnamed architecture {:#x}",
        id.architecture
    );
    assert!(!id.name.is_empty());
    assert!(id.vram_bytes > 1 << 30, "{} bytes of VRAM", id.vram_bytes);
    // A GPU index past the list is a typed error.
    let past = u32::try_from(listed.len()).unwrap();
    assert!(matches!(
        KernelRm::open(past),
        Err(macuda_gsp::kernel::KernelRmError::NoGpu { .. })
    ));
}
