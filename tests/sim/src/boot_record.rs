//! What a boot was handed, as the card saw it: the COT request's fields,
//! GSP_FMC_BOOT_PARAMS, the WPR meta as it arrived (before the FMC writes
//! its layout back), what the radix3 table reaches, the bootloader and the
//! signature, and the libos page's entries. Two drivers booting the same
//! firmware should hand over the same sizes, hashes and flags; comparing
//! their records (tests/sim/tinygrad/xcheck.sh) finds where ours differs
//! from tinygrad's without a card.
//!
//! The record is read on its own, apart from the FSP's and the FMC's
//! checks, so that a request they refuse is recorded as far as it could be
//! read. Every read is bounded and every failure is kept as a typed error in
//! the record: a hostile driver gets an incomplete record, never a crashed
//! sim.

use crate::dma::Dma;
use macuda_hw::fsp::{self, CotPayload, COT_PAYLOAD_BYTES, FMC_IMAGE_HEADER_BYTES};
use macuda_hw::gsp_boot::{
    radix3, wpr_meta_offset as at, FmcBootParams, WprMeta, FMC_BOOT_PARAMS_BYTES, WPR_META_BYTES,
};
use macuda_hw::gsp_rpc::libos_region;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The FMC images are a few hundred KiB: more is not an FMC image.
const MAX_FMC_BYTES: u64 = 4 << 20;
/// The bootloader and signature are tens of KiB; a driver that names more
/// is not read past this, so a bogus size cannot make the sim allocate
/// what it asks for.
const MAX_BLOB_BYTES: u64 = 16 << 20;

/// Why part of a record could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum RecordError {
    #[error("{what} at {address:#x}: {why}")]
    Dma {
        what: String,
        address: u64,
        why: String,
    },
    #[error("{what} is {bytes} bytes, more than the {limit} a boot hands over")]
    TooLarge {
        what: String,
        bytes: u64,
        limit: u64,
    },
    #[error("radix3: {0}")]
    Radix3(String),
}

/// A buffer the card read: where, how long, and its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blob {
    pub address: u64,
    pub bytes: u64,
    pub sha256: String,
    /// The same bytes with the zeros at their end left out: a buffer
    /// declared at its page's size and one declared at its content's size
    /// hold the same content when these agree.
    pub trimmed_bytes: u64,
    pub trimmed_sha256: String,
}

/// The COT payload's fields, decoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CotRecord {
    pub version: u16,
    pub size: u16,
    /// Bytes after the packet headers beyond the payload (tinygrad pads
    /// with 4 zero bytes; RM sends none).
    pub padding_bytes: u64,
    pub gsp_fmc_sysmem_offset: u64,
    pub frts_sysmem_offset: u64,
    pub frts_sysmem_size: u32,
    pub frts_vidmem_offset: u64,
    pub frts_vidmem_size: u32,
    pub hash384: String,
    pub public_key_sha256: String,
    pub signature_sha256: String,
    pub gsp_boot_args_sysmem_offset: u64,
}

/// GSP_FMC_BOOT_PARAMS as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootParamsRecord {
    pub regkeys: u32,
    pub boot_gsp_rm_target: u32,
    pub gsp_rm_desc_size: u32,
    pub gsp_rm_desc_offset: u64,
    pub wpr_carveout_offset: u64,
    pub wpr_carveout_size: u32,
    pub is_gsp_rm_boot: bool,
    pub gsp_rm_target: u32,
    pub boot_args_offset: u64,
}

/// The radix3 walk: pages per level (root first), the image's size, and
/// the SHA-256 of `size_of_radix3_elf` bytes read through the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Radix3Record {
    pub root: u64,
    pub level_pages: [u64; 3],
    pub image_pages: u64,
    pub image_bytes: u64,
    pub image_sha256: String,
}

/// One entry of the libos init-arguments page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibosEntry {
    pub name: String,
    pub address: u64,
    pub size: u64,
    pub kind: u8,
    pub loc: u8,
}

/// Everything a COT request handed the card (see the module's note).
/// A part that could not be read is `None`, with its error in `errors`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootRecord {
    pub cot: CotRecord,
    pub fmc_image: Option<Blob>,
    pub boot_params: Option<BootParamsRecord>,
    /// Every field of the meta by its NVIDIA name, as it arrived.
    pub wpr_meta: Option<BTreeMap<String, u64>>,
    pub radix3: Option<Radix3Record>,
    pub bootloader: Option<Blob>,
    pub signature: Option<Blob>,
    /// The libos page's entries, as they stood when the FSP took the COT.
    pub libos: Option<Vec<LibosEntry>>,
    /// What the FSP answered: `None` when the FMC booted, else why not.
    pub refused: Option<String>,
    pub errors: Vec<RecordError>,
}

// `verified` is the meta's last field: the record names every byte.
const _: () = assert!(at::VERIFIED + 8 == WPR_META_BYTES);

/// The meta's fields by name, in their order.
const META_FIELDS: [(&str, usize); 26] = [
    ("magic", at::MAGIC),
    ("revision", at::REVISION),
    ("sysmemAddrOfRadix3Elf", at::SYSMEM_ADDR_OF_RADIX3_ELF),
    ("sizeOfRadix3Elf", at::SIZE_OF_RADIX3_ELF),
    ("sysmemAddrOfBootloader", at::SYSMEM_ADDR_OF_BOOTLOADER),
    ("sizeOfBootloader", at::SIZE_OF_BOOTLOADER),
    ("bootloaderCodeOffset", at::BOOTLOADER_CODE_OFFSET),
    ("bootloaderDataOffset", at::BOOTLOADER_DATA_OFFSET),
    ("bootloaderManifestOffset", at::BOOTLOADER_MANIFEST_OFFSET),
    ("sysmemAddrOfSignature", at::SYSMEM_ADDR_OF_SIGNATURE),
    ("sizeOfSignature", at::SIZE_OF_SIGNATURE),
    ("gspFwRsvdStart", at::GSP_FW_RSVD_START),
    ("nonWprHeapOffset", at::NON_WPR_HEAP_OFFSET),
    ("nonWprHeapSize", at::NON_WPR_HEAP_SIZE),
    ("gspFwWprStart", at::GSP_FW_WPR_START),
    ("gspFwHeapOffset", at::GSP_FW_HEAP_OFFSET),
    ("gspFwHeapSize", at::GSP_FW_HEAP_SIZE),
    ("gspFwOffset", at::GSP_FW_OFFSET),
    ("bootBinOffset", at::BOOT_BIN_OFFSET),
    ("frtsOffset", at::FRTS_OFFSET),
    ("frtsSize", at::FRTS_SIZE),
    ("gspFwWprEnd", at::GSP_FW_WPR_END),
    ("fbSize", at::FB_SIZE),
    ("vgaWorkspaceOffset", at::VGA_WORKSPACE_OFFSET),
    ("vgaWorkspaceSize", at::VGA_WORKSPACE_SIZE),
    ("bootCount", at::BOOT_COUNT),
];

/// The record of a COT request whose payload decoded: `body` is what
/// followed the packet headers.
pub fn record(cot: &CotPayload, body_len: usize, dma: &dyn Dma) -> BootRecord {
    let mut errors = Vec::new();
    let mut keep = Keep(&mut errors);
    let fmc_image = keep.take(read_fmc_image(dma, cot.gsp_fmc_sysmem_offset));
    let params = keep.take(read_boot_params(dma, cot.gsp_boot_args_sysmem_offset));
    let meta = params
        .as_ref()
        .and_then(|p| keep.take(read_meta(dma, p.gsp_rm_desc_offset)));
    let radix3 = meta.as_ref().and_then(|m| keep.take(walk_radix3(dma, m)));
    let blob = |m: &WprMeta, address: usize, size: usize, what: &str| {
        read_blob(dma, m.get(address), m.get(size), what)
    };
    let bootloader = meta.as_ref().and_then(|m| {
        keep.take(blob(
            m,
            at::SYSMEM_ADDR_OF_BOOTLOADER,
            at::SIZE_OF_BOOTLOADER,
            "the bootloader",
        ))
    });
    let signature = meta.as_ref().and_then(|m| {
        keep.take(blob(
            m,
            at::SYSMEM_ADDR_OF_SIGNATURE,
            at::SIZE_OF_SIGNATURE,
            "the signature",
        ))
    });
    let libos = params
        .as_ref()
        .and_then(|p| keep.take(read_libos(dma, p.boot_args_offset)));
    BootRecord {
        cot: CotRecord {
            version: cot.version,
            size: cot.size,
            padding_bytes: body_len.saturating_sub(COT_PAYLOAD_BYTES) as u64,
            gsp_fmc_sysmem_offset: cot.gsp_fmc_sysmem_offset,
            frts_sysmem_offset: cot.frts_sysmem_offset,
            frts_sysmem_size: cot.frts_sysmem_size,
            frts_vidmem_offset: cot.frts_vidmem_offset,
            frts_vidmem_size: cot.frts_vidmem_size,
            hash384: hex(&cot.hash384),
            public_key_sha256: sha256_hex(&cot.public_key),
            signature_sha256: sha256_hex(&cot.signature),
            gsp_boot_args_sysmem_offset: cot.gsp_boot_args_sysmem_offset,
        },
        fmc_image,
        boot_params: params.map(|p| BootParamsRecord {
            regkeys: p.regkeys,
            boot_gsp_rm_target: p.boot_gsp_rm_target,
            gsp_rm_desc_size: p.gsp_rm_desc_size,
            gsp_rm_desc_offset: p.gsp_rm_desc_offset,
            wpr_carveout_offset: p.wpr_carveout_offset,
            wpr_carveout_size: p.wpr_carveout_size,
            is_gsp_rm_boot: p.is_gsp_rm_boot,
            gsp_rm_target: p.gsp_rm_target,
            boot_args_offset: p.boot_args_offset,
        }),
        wpr_meta: meta.as_ref().map(meta_fields),
        radix3,
        bootloader,
        signature,
        libos,
        refused: None,
        errors,
    }
}

/// Keeps each part's error and passes on what was read.
struct Keep<'a>(&'a mut Vec<RecordError>);

impl Keep<'_> {
    fn take<T>(&mut self, r: Result<T, RecordError>) -> Option<T> {
        r.map_err(|e| self.0.push(e)).ok()
    }
}

fn dma_error(what: &str, address: u64, why: String) -> RecordError {
    RecordError::Dma {
        what: what.into(),
        address,
        why,
    }
}

fn read_fmc_image(dma: &dyn Dma, address: u64) -> Result<Blob, RecordError> {
    let what = "the FMC image";
    let mut header = [0u8; FMC_IMAGE_HEADER_BYTES];
    dma.read(address, &mut header)
        .map_err(|e| dma_error(what, address, e))?;
    let bytes = fsp::fmc_image_len(&header);
    if bytes > MAX_FMC_BYTES {
        return Err(RecordError::TooLarge {
            what: what.into(),
            bytes,
            limit: MAX_FMC_BYTES,
        });
    }
    read_blob(dma, address, bytes, what)
}

fn read_boot_params(dma: &dyn Dma, address: u64) -> Result<FmcBootParams, RecordError> {
    let mut b = [0u8; FMC_BOOT_PARAMS_BYTES];
    dma.read(address, &mut b)
        .map_err(|e| dma_error("GSP_FMC_BOOT_PARAMS", address, e))?;
    Ok(FmcBootParams::decode(&b))
}

fn read_meta(dma: &dyn Dma, address: u64) -> Result<WprMeta, RecordError> {
    let mut meta = WprMeta::zeroed();
    dma.read(address, &mut meta.0)
        .map_err(|e| dma_error("the WPR meta", address, e))?;
    Ok(meta)
}

fn meta_fields(m: &WprMeta) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = META_FIELDS
        .iter()
        .map(|&(name, offset)| (name.to_string(), m.get(offset)))
        .collect();
    out.insert("pmuReservedSize".into(), u64::from(m.pmu_reserved_size()));
    out.insert("verified".into(), m.get(at::VERIFIED));
    out
}

/// `bytes` at `address`, hashed whole and without its trailing zeros.
fn read_blob(dma: &dyn Dma, address: u64, bytes: u64, what: &str) -> Result<Blob, RecordError> {
    if bytes > MAX_BLOB_BYTES {
        return Err(RecordError::TooLarge {
            what: what.into(),
            bytes,
            limit: MAX_BLOB_BYTES,
        });
    }
    let mut data = vec![0u8; bytes as usize];
    dma.read(address, &mut data)
        .map_err(|e| dma_error(what, address, e))?;
    let trimmed = data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    Ok(Blob {
        address,
        bytes,
        sha256: sha256_hex(&data),
        trimmed_bytes: trimmed as u64,
        trimmed_sha256: sha256_hex(&data[..trimmed]),
    })
}

/// Walk the table from its root as the FMC does (levels sized by the
/// image's page count) and hash the image's bytes through it, a page at a
/// time.
fn walk_radix3(dma: &dyn Dma, m: &WprMeta) -> Result<Radix3Record, RecordError> {
    let image_bytes = m.get(at::SIZE_OF_RADIX3_ELF);
    let pages = image_bytes.div_ceil(radix3::PAGE_BYTES);
    if pages > radix3::MAX_IMAGE_PAGES {
        return Err(RecordError::Radix3(format!(
            "a {pages}-page image is past what radix3 maps"
        )));
    }
    let level2 = pages.div_ceil(radix3::ENTRIES_PER_PAGE);
    let level1 = level2.div_ceil(radix3::ENTRIES_PER_PAGE);
    let root = m.get(at::SYSMEM_ADDR_OF_RADIX3_ELF);
    let l1 = entries(dma, &[root], level1, "level 0")?;
    let l2 = entries(dma, &l1, level2, "level 1")?;
    let image = entries(dma, &l2, pages, "level 2")?;
    let mut hash = Sha256::new();
    let mut page = vec![0u8; radix3::PAGE_BYTES as usize];
    let mut left = image_bytes;
    for (i, &a) in image.iter().enumerate() {
        let n = left.min(radix3::PAGE_BYTES) as usize;
        dma.read(a, &mut page[..n])
            .map_err(|e| dma_error(&format!("image page {i}"), a, e))?;
        hash.update(&page[..n]);
        left -= n as u64;
    }
    Ok(Radix3Record {
        root,
        level_pages: [1, level1, level2],
        image_pages: pages,
        image_bytes,
        image_sha256: hex(&hash.finalize()),
    })
}

/// The first `count` entries across `tables`, each a page address.
fn entries(dma: &dyn Dma, tables: &[u64], count: u64, what: &str) -> Result<Vec<u64>, RecordError> {
    let mut out = Vec::new();
    for &table in tables {
        let n = (count - out.len() as u64).min(radix3::ENTRIES_PER_PAGE) as usize;
        let mut raw = vec![0u8; n * radix3::ENTRY_BYTES as usize];
        dma.read(table, &mut raw)
            .map_err(|e| dma_error(&format!("radix3 {what} page"), table, e))?;
        for e in raw.chunks_exact(8) {
            let a = u64::from_le_bytes(e.try_into().unwrap_or_default());
            if a == 0 || !a.is_multiple_of(radix3::PAGE_BYTES) {
                return Err(RecordError::Radix3(format!(
                    "{what} entry {} is {a:#x}, not a page address",
                    out.len()
                )));
            }
            out.push(a);
        }
        if out.len() as u64 == count {
            break;
        }
    }
    if (out.len() as u64) < count {
        return Err(RecordError::Radix3(format!(
            "{what}: {} entries where {count} are needed",
            out.len()
        )));
    }
    Ok(out)
}

fn read_libos(dma: &dyn Dma, address: u64) -> Result<Vec<LibosEntry>, RecordError> {
    let mut page = vec![0u8; libos_region::INIT_ARGUMENTS_MAX];
    dma.read(address, &mut page)
        .map_err(|e| dma_error("the libos page", address, e))?;
    let u64_at =
        |r: &[u8], at: usize| u64::from_le_bytes(r[at..at + 8].try_into().unwrap_or_default());
    Ok(page
        .chunks_exact(libos_region::BYTES)
        .filter(|r| u64_at(r, libos_region::ID8) != 0)
        .map(|r| LibosEntry {
            name: id8_name(u64_at(r, libos_region::ID8)),
            address: u64_at(r, libos_region::PA),
            size: u64_at(r, libos_region::SIZE),
            kind: r[libos_region::KIND],
            loc: r[libos_region::LOC],
        })
        .collect())
}

/// An id8 back into its characters (big-endian, leading zeros dropped);
/// a byte that is not printable ASCII is written as `\xNN`.
fn id8_name(id8: u64) -> String {
    id8.to_be_bytes()
        .iter()
        .skip_while(|&&b| b == 0)
        .map(|&b| {
            if b.is_ascii_graphic() {
                char::from(b).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect()
}

fn sha256_hex(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_hw::gsp_rpc::id8;

    /// Memory where nothing can be read: every part fails, with its error.
    struct NoDma;
    impl Dma for NoDma {
        fn read(&self, _: u64, _: &mut [u8]) -> Result<(), String> {
            Err("nothing there".into())
        }
        fn write(&mut self, _: u64, _: &[u8]) -> Result<(), String> {
            Err("nothing there".into())
        }
    }

    /// Memory that reads as one byte value everywhere: every size and
    /// address a hostile driver could name.
    struct Everywhere(u8);
    impl Dma for Everywhere {
        fn read(&self, _: u64, out: &mut [u8]) -> Result<(), String> {
            out.fill(self.0);
            Ok(())
        }
        fn write(&mut self, _: u64, _: &[u8]) -> Result<(), String> {
            Ok(())
        }
    }

    fn cot() -> CotPayload {
        CotPayload::decode(&[0u8; COT_PAYLOAD_BYTES]).unwrap()
    }

    #[test]
    fn unreadable_memory_gives_a_record_of_the_payload_and_typed_errors() {
        let r = record(&cot(), COT_PAYLOAD_BYTES + 4, &NoDma);
        assert_eq!(r.cot.padding_bytes, 4);
        assert!(r.fmc_image.is_none() && r.boot_params.is_none() && r.wpr_meta.is_none());
        assert_eq!(r.errors.len(), 2, "{:?}", r.errors);
        assert!(matches!(r.errors[0], RecordError::Dma { .. }));
        serde_json_round_trip(&r);
    }

    #[test]
    fn absurd_sizes_and_tables_are_errors_not_allocations() {
        // Every field reads 0xFFFF...: sizes far past any limit.
        let r = record(&cot(), COT_PAYLOAD_BYTES, &Everywhere(0xFF));
        assert!(r.wpr_meta.is_some());
        assert!(r.radix3.is_none() && r.bootloader.is_none() && r.signature.is_none());
        assert!(r.errors.iter().any(|e| matches!(e, RecordError::Radix3(_))));
        assert!(r
            .errors
            .iter()
            .any(|e| matches!(e, RecordError::TooLarge { .. })));
    }

    #[test]
    fn id8_names_read_back_and_odd_bytes_are_escaped() {
        assert_eq!(id8_name(id8(b"LOGINIT")), "LOGINIT");
        assert_eq!(id8_name(id8(b"RMARGS")), "RMARGS");
        assert_eq!(
            id8_name(0x4100_0A00_0000_0000),
            "A\\x00\\x0a\\x00\\x00\\x00\\x00\\x00"
        );
    }

    fn serde_json_round_trip(r: &BootRecord) {
        let json = serde_json::to_string(r).unwrap();
        let back: BootRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(&back, r);
    }
}
