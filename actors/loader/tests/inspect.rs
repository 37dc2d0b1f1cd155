//! `inspect` on a host object that embeds a fat binary, as nvcc's and
//! clang's host objects do (ELF `.nv_fatbin`, Mach-O `__NV_CUDA,__nv_fatbin`).

use macuda_loader::inspect::{inspect, render};
use object::write::Object;
use object::{Architecture, BinaryFormat, Endianness, SectionKind};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/cuda/fixtures/{}"),
        name
    ))
    .unwrap()
}

fn host_object(format: BinaryFormat, segment: &[u8], section: &[u8], fatbin: &[u8]) -> Vec<u8> {
    let arch = if format == BinaryFormat::MachO {
        Architecture::Aarch64
    } else {
        Architecture::X86_64
    };
    let mut o = Object::new(format, arch, Endianness::Little);
    let id = o.add_section(
        segment.to_vec(),
        section.to_vec(),
        SectionKind::ReadOnlyData,
    );
    o.append_section_data(id, fatbin, 8);
    o.write().unwrap()
}

#[test]
fn host_objects_show_their_embedded_kernels() {
    let fatbin = fixture("dims.size.fatbin");
    for (format, segment, section) in [
        (BinaryFormat::Elf, &b""[..], &b".nv_fatbin"[..]),
        (BinaryFormat::MachO, &b"__NV_CUDA"[..], &b"__nv_fatbin"[..]),
    ] {
        let obj = host_object(format, segment, section, &fatbin);
        let i = inspect(&obj).unwrap();
        assert_eq!(i.input, "host object", "{format:?}");
        assert_eq!(i.fatbins.len(), 1);
        assert_eq!(i.cubins.len(), 2);
        let text = render(&i);
        assert!(text.contains("kernel dims"), "{text}");
        assert!(text.contains("exits at"), "{text}");
    }
}
