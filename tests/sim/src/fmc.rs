//! The FMC, the GSP's first code, as far as the host can see it: once the
//! FSP accepted a COT request, it reads GSP_FMC_BOOT_PARAMS and the WPR
//! meta they point at, checks them (magic, revision, sizes, a GSP-RM image
//! reachable through a well-formed radix3 table, a bootloader and a
//! signature it can read), lays FB out from the top, writes the layout and
//! `verified` back into the meta, and reports where WPR2 is. GSP-RM's boot
//! (the libos arguments at `gspRmParams.bootArgsOffset`) follows.
//!
//! The placement is the sim's own reading of reference/gsp.md section 9.3
//! (VGA workspace at the top, FRTS at `frtsVidmemOffset` below FB's end,
//! then the bootloader, the GSP-RM image, its heap, and the non-WPR heap
//! below WPR2): inferred, since the FMC is closed. A driver must read it
//! back (the meta, WPR2), never assume it.

use crate::dma::Dma;
use crate::fsp::FRTS_BYTES;
use macuda_hw::fsp::CotPayload;
use macuda_hw::gsp_boot::{
    dma_target, wpr_meta_offset as at, FmcBootParams, WprMeta, FMC_BOOT_PARAMS_BYTES,
    WPR_META_BYTES, WPR_META_MAGIC, WPR_META_REVISION, WPR_META_VERIFIED,
};
use macuda_hw::wpr2;

/// Radix3 pages are 4 KiB and hold 512 entries of u64 bus addresses.
const RADIX_PAGE_BYTES: u64 = 4096;
const RADIX_ENTRIES_PER_PAGE: u64 = RADIX_PAGE_BYTES / 8;
/// The GSP-RM image sits on a 64 KiB boundary; the heaps on 1 MiB ones.
const IMAGE_ALIGN: u64 = 64 << 10;
const HEAP_ALIGN: u64 = 1 << 20;
/// WPR2's granule: its HI register names the last 128 KiB granule.
pub const WPR2_GRANULE: u64 = wpr2::GRANULE_BYTES;
/// The WPR meta's own page inside WPR2.
const META_PAGE: u64 = 4096;

/// Where the FMC put things, in FB byte offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WprLayout {
    pub fb_size: u64,
    pub vga_workspace_offset: u64,
    pub frts_offset: u64,
    pub boot_bin_offset: u64,
    pub gsp_fw_offset: u64,
    pub gsp_fw_heap_offset: u64,
    pub gsp_fw_wpr_start: u64,
    /// Exclusive end of WPR2.
    pub gsp_fw_wpr_end: u64,
    pub non_wpr_heap_offset: u64,
}

impl WprLayout {
    /// NV_PFB_PRI_MMU_WPR2_ADDR_LO: the start.
    pub fn wpr2_lo(&self) -> u32 {
        wpr2::encode(&(self.gsp_fw_wpr_start..self.gsp_fw_wpr_end)).0
    }

    /// NV_PFB_PRI_MMU_WPR2_ADDR_HI: the last 128 KiB granule's start.
    pub fn wpr2_hi(&self) -> u32 {
        wpr2::encode(&(self.gsp_fw_wpr_start..self.gsp_fw_wpr_end)).1
    }
}

/// A finished FMC boot: the layout, and where GSP-RM's boot begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FmcBoot {
    pub layout: WprLayout,
    /// Bus address of the libos init-arguments page.
    pub boot_args: u64,
    /// Bus address of the WPR meta.
    pub meta: u64,
}

/// Run the FMC for an accepted COT request; an error says what it refused.
pub fn boot(cot: &CotPayload, dma: &mut dyn Dma, fb_size: u64) -> Result<FmcBoot, String> {
    let params = read_boot_params(&*dma, cot.gsp_boot_args_sysmem_offset)?;
    let meta_address = params.gsp_rm_desc_offset;
    let mut meta = WprMeta::zeroed();
    dma.read(meta_address, &mut meta.0)
        .map_err(|e| format!("the WPR meta at {meta_address:#x}: {e}"))?;
    check_meta(&meta)?;
    check_reachable(&*dma, &meta)?;
    let layout = lay_out(&meta, cot, fb_size)?;
    write_layout(&mut meta, &layout);
    dma.write(meta_address, &meta.0)
        .map_err(|e| format!("writing the WPR meta back at {meta_address:#x}: {e}"))?;
    Ok(FmcBoot {
        layout,
        boot_args: params.boot_args_offset,
        meta: meta_address,
    })
}

fn read_boot_params(dma: &dyn Dma, address: u64) -> Result<FmcBootParams, String> {
    let mut b = [0u8; FMC_BOOT_PARAMS_BYTES];
    dma.read(address, &mut b)
        .map_err(|e| format!("GSP_FMC_BOOT_PARAMS at {address:#x}: {e}"))?;
    let p = FmcBootParams::decode(&b);
    let sysmem = |t: u32| t == dma_target::COHERENT_SYSTEM || t == dma_target::NONCOHERENT_SYSTEM;
    if !p.is_gsp_rm_boot {
        return Err("bIsGspRmBoot is 0: nothing to boot".into());
    }
    if p.gsp_rm_desc_size as usize != WPR_META_BYTES {
        return Err(format!(
            "gspRmDescSize {}; the WPR meta is {WPR_META_BYTES} bytes",
            p.gsp_rm_desc_size
        ));
    }
    if !sysmem(p.boot_gsp_rm_target) || p.gsp_rm_desc_offset == 0 {
        return Err(format!(
            "the WPR meta must be in system memory (target {}, address {:#x})",
            p.boot_gsp_rm_target, p.gsp_rm_desc_offset
        ));
    }
    if !sysmem(p.gsp_rm_target) || p.boot_args_offset == 0 {
        return Err(format!(
            "the libos arguments must be in system memory (target {}, address {:#x})",
            p.gsp_rm_target, p.boot_args_offset
        ));
    }
    Ok(p)
}

fn check_meta(m: &WprMeta) -> Result<(), String> {
    if m.get(at::MAGIC) != WPR_META_MAGIC {
        return Err(format!("WPR meta magic {:#x}", m.get(at::MAGIC)));
    }
    if m.get(at::REVISION) != WPR_META_REVISION {
        return Err(format!("WPR meta revision {}", m.get(at::REVISION)));
    }
    for (offset, name) in [
        (at::SIZE_OF_RADIX3_ELF, "sizeOfRadix3Elf"),
        (at::SIZE_OF_BOOTLOADER, "sizeOfBootloader"),
        (at::SIZE_OF_SIGNATURE, "sizeOfSignature"),
        (at::GSP_FW_HEAP_SIZE, "gspFwHeapSize"),
        (at::NON_WPR_HEAP_SIZE, "nonWprHeapSize"),
        (at::SYSMEM_ADDR_OF_RADIX3_ELF, "sysmemAddrOfRadix3Elf"),
        (at::SYSMEM_ADDR_OF_BOOTLOADER, "sysmemAddrOfBootloader"),
        (at::SYSMEM_ADDR_OF_SIGNATURE, "sysmemAddrOfSignature"),
    ] {
        if m.get(offset) == 0 {
            return Err(format!("the WPR meta's {name} is 0"));
        }
    }
    if m.get(at::FRTS_SIZE) != u64::from(FRTS_BYTES) {
        return Err(format!(
            "frtsSize {:#x}; FRTS is {FRTS_BYTES:#x}",
            m.get(at::FRTS_SIZE)
        ));
    }
    Ok(())
}

/// The bootloader and signature can be read, and the radix3 table is
/// whole: every entry of every level names a page that can be read.
fn check_reachable(dma: &dyn Dma, m: &WprMeta) -> Result<(), String> {
    let mut probe = [0u8; 8];
    for (offset, name) in [
        (at::SYSMEM_ADDR_OF_BOOTLOADER, "the bootloader"),
        (at::SYSMEM_ADDR_OF_SIGNATURE, "the signature"),
    ] {
        let a = m.get(offset);
        dma.read(a, &mut probe)
            .map_err(|e| format!("{name} at {a:#x}: {e}"))?;
    }
    let pages = m.get(at::SIZE_OF_RADIX3_ELF).div_ceil(RADIX_PAGE_BYTES);
    let level2 = pages.div_ceil(RADIX_ENTRIES_PER_PAGE);
    let level1 = level2.div_ceil(RADIX_ENTRIES_PER_PAGE);
    if level1 > RADIX_ENTRIES_PER_PAGE {
        return Err(format!(
            "a {pages}-page image is past what radix3 addresses (1 GiB)"
        ));
    }
    let root = m.get(at::SYSMEM_ADDR_OF_RADIX3_ELF);
    let l1_pages = entries(dma, &[root], level1, "radix3 level 0")?;
    let l2_pages = entries(dma, &l1_pages, level2, "radix3 level 1")?;
    let image = entries(dma, &l2_pages, pages, "radix3 level 2")?;
    for (i, &page) in image.iter().enumerate() {
        dma.read(page, &mut probe)
            .map_err(|e| format!("GSP-RM image page {i} at {page:#x}: {e}"))?;
    }
    Ok(())
}

/// The first `count` entries across `tables` (512 a page).
fn entries(dma: &dyn Dma, tables: &[u64], count: u64, what: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::with_capacity(count as usize);
    for &table in tables {
        let n = (count - out.len() as u64).min(RADIX_ENTRIES_PER_PAGE) as usize;
        let mut raw = vec![0u8; n * 8];
        dma.read(table, &mut raw)
            .map_err(|e| format!("{what} page at {table:#x}: {e}"))?;
        for (i, e) in raw.chunks_exact(8).enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(e);
            let a = u64::from_le_bytes(w);
            if a == 0 || !a.is_multiple_of(RADIX_PAGE_BYTES) {
                return Err(format!(
                    "{what} entry {} is {a:#x}, not a page address",
                    out.len() + i
                ));
            }
            out.push(a);
        }
        if out.len() as u64 == count {
            break;
        }
    }
    if (out.len() as u64) < count {
        return Err(format!(
            "{what}: {} entries where {count} are needed",
            out.len()
        ));
    }
    Ok(out)
}

/// FB from the top down (see the module's note).
fn lay_out(m: &WprMeta, cot: &CotPayload, fb_size: u64) -> Result<WprLayout, String> {
    let vga_size = m.get(at::VGA_WORKSPACE_SIZE);
    let frts_offset = fb_size
        .checked_sub(cot.frts_vidmem_offset + u64::from(FRTS_BYTES))
        .ok_or("FRTS lies below FB's start")?;
    let below = |top: u64, size: u64, align: u64, what: &str| {
        top.checked_sub(size)
            .map(|v| v - v % align)
            .ok_or_else(|| format!("{what} does not fit below {top:#x}"))
    };
    let boot_bin = below(
        frts_offset,
        m.get(at::SIZE_OF_BOOTLOADER),
        RADIX_PAGE_BYTES,
        "the bootloader",
    )?;
    let gsp_fw = below(
        boot_bin,
        m.get(at::SIZE_OF_RADIX3_ELF),
        IMAGE_ALIGN,
        "the GSP-RM image",
    )?;
    let heap = below(
        gsp_fw,
        m.get(at::GSP_FW_HEAP_SIZE),
        HEAP_ALIGN,
        "the GSP-RM heap",
    )?;
    let wpr_start = below(heap, META_PAGE, HEAP_ALIGN, "the WPR meta")?;
    let non_wpr = below(
        wpr_start,
        m.get(at::NON_WPR_HEAP_SIZE),
        HEAP_ALIGN,
        "the non-WPR heap",
    )?;
    let wpr_end = (frts_offset + u64::from(FRTS_BYTES)).next_multiple_of(WPR2_GRANULE);
    Ok(WprLayout {
        fb_size,
        vga_workspace_offset: fb_size.saturating_sub(vga_size),
        frts_offset,
        boot_bin_offset: boot_bin,
        gsp_fw_offset: gsp_fw,
        gsp_fw_heap_offset: heap,
        gsp_fw_wpr_start: wpr_start,
        gsp_fw_wpr_end: wpr_end,
        non_wpr_heap_offset: non_wpr,
    })
}

fn write_layout(m: &mut WprMeta, l: &WprLayout) {
    for (offset, value) in [
        (at::GSP_FW_RSVD_START, l.non_wpr_heap_offset),
        (at::NON_WPR_HEAP_OFFSET, l.non_wpr_heap_offset),
        (at::GSP_FW_WPR_START, l.gsp_fw_wpr_start),
        (at::GSP_FW_HEAP_OFFSET, l.gsp_fw_heap_offset),
        (at::GSP_FW_OFFSET, l.gsp_fw_offset),
        (at::BOOT_BIN_OFFSET, l.boot_bin_offset),
        (at::FRTS_OFFSET, l.frts_offset),
        (at::GSP_FW_WPR_END, l.gsp_fw_wpr_end),
        (at::FB_SIZE, l.fb_size),
        (at::VGA_WORKSPACE_OFFSET, l.vga_workspace_offset),
        (at::VERIFIED, WPR_META_VERIFIED),
    ] {
        m.set(offset, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wpr2_registers_name_the_start_and_the_last_granule() {
        let l = WprLayout {
            fb_size: 32 << 30,
            vga_workspace_offset: 0,
            frts_offset: 0,
            boot_bin_offset: 0,
            gsp_fw_offset: 0,
            gsp_fw_heap_offset: 0,
            gsp_fw_wpr_start: 0x7_E000_0000,
            gsp_fw_wpr_end: 0x7_F4A2_0000,
            non_wpr_heap_offset: 0,
        };
        assert_eq!(l.wpr2_lo(), 0x07E0_0000);
        // The HI a 5090 was seen to read after a good boot.
        assert_eq!(l.wpr2_hi(), 0x07F4_A000);
    }
}
