//! Pins the firmware parser's `nvfw_bin_hdr` offsets to NVIDIA's header,
//! through the part of the project oracle copied into tests/data.
//! `RM_RISCV_UCODE_DESC` is not in the oracle; its offsets follow
//! reference gsp.md 3.3 and are checked against the real images by
//! tests/firmware_images.rs.

use macuda_gsp::firmware::bootloader::bin_hdr;
use serde_json::Value;

#[test]
fn nvfw_bin_hdr_matches_the_oracle() {
    let oracle: Value =
        serde_json::from_str(include_str!("data/firmware-oracle.json")).expect("oracle parses");
    let hdr = &oracle["structs"]["struct_nvfw_bin_hdr"];
    assert_eq!(hdr["size"].as_u64(), Some(bin_hdr::SIZE));
    let ours = [
        ("bin_magic", bin_hdr::BIN_MAGIC),
        ("bin_ver", bin_hdr::BIN_VER),
        ("bin_size", bin_hdr::BIN_SIZE),
        ("header_offset", bin_hdr::HEADER_OFFSET),
        ("data_offset", bin_hdr::DATA_OFFSET),
        ("data_size", bin_hdr::DATA_SIZE),
    ];
    let fields = hdr["fields"].as_array().expect("fields");
    assert_eq!(fields.len(), ours.len());
    for (name, offset) in ours {
        let field = fields
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in the oracle"));
        assert_eq!(field["offset"].as_u64(), Some(offset), "{name}");
    }
}
