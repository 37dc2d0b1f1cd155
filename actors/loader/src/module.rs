//! A module as the loader prepares it, before and apart from any GPU: the
//! cubin chosen from whatever the host code registered (a fat binary, or a
//! bare cubin), checked against the device, and laid out.

use crate::cubin::{self, Cubin, CubinError};
use crate::fatbin::{self, Fatbin, FatbinError, InputKind};
use crate::image::Layout;

/// A module the loader holds, by the number it handed out.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ModuleId(pub u32);

/// Externs the CUDA driver links into every module (device-side printf,
/// assert, malloc). This runtime provides none yet: their bank-4 slots are
/// left 0, so a kernel reaches them only on an error path that faults
/// instead of printing. Any other undefined symbol refuses the module.
pub const SYSTEM_EXTERNS: [&str; 4] = ["vprintf", "__assertfail", "malloc", "free"];

/// Why a module cannot be prepared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModuleError {
    #[error("fat binary")]
    Fatbin(#[from] FatbinError),
    #[error("cubin")]
    Cubin(#[from] CubinError),
    #[error("neither a fat binary nor a cubin (first bytes {0:02x?})")]
    Unrecognised(Vec<u8>),
    #[error("the cubin is for sm_{cubin}{}, which does not run on an sm_{device} device", if *.arch_specific { "a" } else { "" })]
    WrongArchitecture {
        cubin: u32,
        arch_specific: bool,
        device: u32,
    },
    #[error("the module calls `{0}`, which this runtime does not provide")]
    UnknownExtern(String),
    #[error("layout")]
    Layout(#[from] crate::image::ImageError),
}

/// Whether code built for `cubin_sm` runs on `device_sm`: same major and a
/// minor no higher than the device's, or exactly the device for `a` code.
pub fn runs_on(cubin_sm: u32, arch_specific: bool, device_sm: u32) -> bool {
    if arch_specific {
        return cubin_sm == device_sm;
    }
    cubin_sm / 10 == device_sm / 10 && cubin_sm % 10 <= device_sm % 10
}

/// A cubin ready to be placed on the GPU.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub cubin: Cubin,
    pub layout: Layout,
    /// System externs the module names (their slots stay 0).
    pub unprovided_externs: Vec<String>,
}

/// The cubin bytes to load on `device_sm` from a registered image.
///
/// # Errors
/// Malformed input, or a fat binary with no code for the device.
pub fn cubin_for_device(image: &[u8], device_sm: u32) -> Result<Vec<u8>, ModuleError> {
    match fatbin::classify(image) {
        InputKind::Cubin => Ok(image.to_vec()),
        InputKind::Fatbin => {
            let fb = Fatbin::parse(image)?;
            let index = fb.select(device_sm)?;
            Ok(fb.payload(image, index)?.into_owned())
        }
        _ => Err(ModuleError::Unrecognised(
            image.iter().take(8).copied().collect(),
        )),
    }
}

/// Choose, parse, check and lay out the module for `device_sm`.
///
/// # Errors
/// As [`cubin_for_device`], a malformed cubin, code for another
/// architecture, or an extern this runtime cannot provide.
pub fn prepare(image: &[u8], device_sm: u32) -> Result<Prepared, ModuleError> {
    let bytes = cubin_for_device(image, device_sm)?;
    let cubin = cubin::parse(&bytes)?;
    if !runs_on(cubin.sm, cubin.arch_specific, device_sm) {
        return Err(ModuleError::WrongArchitecture {
            cubin: cubin.sm,
            arch_specific: cubin.arch_specific,
            device: device_sm,
        });
    }
    let mut unprovided_externs = Vec::new();
    for e in &cubin.externs {
        if SYSTEM_EXTERNS.contains(&e.as_str()) {
            unprovided_externs.push(e.clone());
        } else {
            return Err(ModuleError::UnknownExtern(e.clone()));
        }
    }
    let layout = Layout::new(&cubin)?;
    Ok(Prepared {
        cubin,
        layout,
        unprovided_externs,
    })
}

/// The address a system extern's slot gets: none is provided (see
/// [`SYSTEM_EXTERNS`]).
pub fn system_extern_address(name: &str) -> Option<u64> {
    SYSTEM_EXTERNS.contains(&name).then_some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compatibility_rules() {
        assert!(runs_on(90, false, 90));
        assert!(runs_on(120, false, 121));
        assert!(!runs_on(121, false, 120));
        assert!(!runs_on(90, false, 100));
        assert!(runs_on(120, true, 120));
        assert!(!runs_on(120, true, 121));
    }

    #[test]
    fn garbage_is_unrecognised() {
        assert!(matches!(
            prepare(b"\x00\x01\x02", 90),
            Err(ModuleError::Unrecognised(_))
        ));
    }
}
