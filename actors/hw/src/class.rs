//! RM class numbers: the kinds of object the resource manager allocates.

pub const NV01_ROOT_CLIENT: u32 = 0x0000_0041;
pub const NV01_DEVICE_0: u32 = 0x0000_0080;
pub const NV20_SUBDEVICE_0: u32 = 0x0000_2080;
pub const FERMI_VASPACE_A: u32 = 0x0000_90F1;
pub const NV01_MEMORY_LOCAL_USER: u32 = 0x0000_0040;

/// Every class declared here, for the oracle test.
pub const ALL: &[(&str, u32)] = &[
    ("NV01_ROOT_CLIENT", NV01_ROOT_CLIENT),
    ("NV01_DEVICE_0", NV01_DEVICE_0),
    ("NV20_SUBDEVICE_0", NV20_SUBDEVICE_0),
    ("FERMI_VASPACE_A", FERMI_VASPACE_A),
    ("NV01_MEMORY_LOCAL_USER", NV01_MEMORY_LOCAL_USER),
];

/// A readable name for a class number, for logs and reports.
pub fn name(class: u32) -> Option<&'static str> {
    ALL.iter().find(|(_, c)| *c == class).map(|(n, _)| *n)
}
