//! RM class numbers: the kinds of object the resource manager allocates.
//! Declared once, in [`crate::rm::class`]; this module names the ones the
//! null RM's and the simulated GSP-RM's object trees know, for them and the
//! oracle test.

pub use crate::rm::class::{
    BLACKWELL_USERMODE_A, FERMI_CONTEXT_SHARE_A, FERMI_VASPACE_A, GT200_DEBUGGER,
    HOPPER_USERMODE_A, KEPLER_CHANNEL_GROUP_A, NV01_DEVICE_0, NV01_MEMORY_LIST_SYSTEM,
    NV01_MEMORY_VIRTUAL, NV01_ROOT, NV01_ROOT_CLIENT, NV20_SUBDEVICE_0,
};
/// Video memory, under its NVIDIA name (`NV1_MEMORY_USER` is its alias).
pub const NV01_MEMORY_LOCAL_USER: u32 = crate::rm::class::NV1_MEMORY_USER;

/// Every class declared here, for the oracle test.
pub const ALL: &[(&str, u32)] = &[
    ("NV01_ROOT", NV01_ROOT),
    ("NV01_ROOT_CLIENT", NV01_ROOT_CLIENT),
    ("NV01_MEMORY_VIRTUAL", NV01_MEMORY_VIRTUAL),
    ("NV01_MEMORY_LIST_SYSTEM", NV01_MEMORY_LIST_SYSTEM),
    ("FERMI_CONTEXT_SHARE_A", FERMI_CONTEXT_SHARE_A),
    ("HOPPER_USERMODE_A", HOPPER_USERMODE_A),
    ("BLACKWELL_USERMODE_A", BLACKWELL_USERMODE_A),
    ("NV01_DEVICE_0", NV01_DEVICE_0),
    ("NV20_SUBDEVICE_0", NV20_SUBDEVICE_0),
    ("FERMI_VASPACE_A", FERMI_VASPACE_A),
    ("NV01_MEMORY_LOCAL_USER", NV01_MEMORY_LOCAL_USER),
    ("KEPLER_CHANNEL_GROUP_A", KEPLER_CHANNEL_GROUP_A),
    ("GT200_DEBUGGER", GT200_DEBUGGER),
];

/// A readable name for a class number, for logs and reports.
pub fn name(class: u32) -> Option<&'static str> {
    ALL.iter().find(|(_, c)| *c == class).map(|(n, _)| *n)
}
