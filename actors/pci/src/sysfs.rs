//! The Linux sysfs transport: a card with no NVIDIA kernel module bound,
//! reached through the files the PCI core publishes for every function under
//! `/sys/bus/pci/devices/DDDD:BB:DD.F/`:
//!
//! - `config`: configuration space, read and written at file offsets;
//! - `resource`: one text line per resource (`0xSTART 0xEND 0xFLAGS`), the
//!   first six being BAR0..BAR5;
//! - `resource0`: BAR0, mapped into this process for register access;
//! - `reset`: writing `1` makes the kernel reset the function, saving and
//!   restoring configuration space around it.
//!
//! DMA is not available here: host memory the GPU may reach needs an IOMMU
//! mapping, which only VFIO gives a userspace driver, and the VFIO transport
//! is not built. DMA and doorbells are refused as `Unsupported`.
//!
//! Everything but register access needs only file permissions; mapping
//! `resource0` and writing `config` or `reset` need root.

use crate::error::PciError;
use crate::transport::{BarInfo, DmaId, DmaRegion, Opener, Transport};
use macuda_hw::pci::{Width, CONFIG_SPACE_BYTES};
use memmap2::{MmapOptions, MmapRaw};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Where the kernel lists PCI functions.
pub const SYSFS_PCI_DEVICES: &str = "/sys/bus/pci/devices";

const BACKEND: &str = "sysfs";

/// Drivers that may be bound while we drive the card ourselves: they only
/// hold the device for userspace and never touch it.
const PASSIVE_DRIVERS: &[&str] = &["vfio-pci", "pci-stub"];

/// Opens sysfs connections to one PCI function.
#[derive(Debug, Clone)]
pub struct SysfsOpener {
    bdf: String,
    dir: PathBuf,
}

impl SysfsOpener {
    /// The function `bdf` (`DDDD:BB:DD.F`, hex) under `/sys/bus/pci/devices`.
    ///
    /// # Errors
    /// `BadBdf` when the address is malformed, `NoSuchDevice` when the
    /// function is not there.
    pub fn new(bdf: &str) -> Result<SysfsOpener, PciError> {
        SysfsOpener::with_root(PathBuf::from(SYSFS_PCI_DEVICES), bdf)
    }

    /// The function `bdf` under `root` instead of `/sys/bus/pci/devices`
    /// (tests point it at a fake tree).
    ///
    /// # Errors
    /// As [`SysfsOpener::new`].
    pub fn with_root(root: PathBuf, bdf: &str) -> Result<SysfsOpener, PciError> {
        let bdf = parse_bdf(bdf)?;
        let dir = root.join(&bdf);
        let opener = SysfsOpener { bdf, dir };
        opener.check_present()?;
        Ok(opener)
    }

    /// The address in the canonical (lower-case) form sysfs uses.
    pub fn bdf(&self) -> &str {
        &self.bdf
    }

    /// The function's sysfs directory.
    pub fn device_dir(&self) -> &Path {
        &self.dir
    }

    fn check_present(&self) -> Result<(), PciError> {
        if self.dir.is_dir() {
            Ok(())
        } else {
            Err(PciError::NoSuchDevice {
                bdf: self.bdf.clone(),
                path: self.dir.clone(),
            })
        }
    }

    /// Refuse a function that a kernel driver is driving: its registers
    /// and DMA belong to that driver, and two drivers on one card corrupt it.
    fn check_unbound(&self) -> Result<(), PciError> {
        let link = self.dir.join("driver");
        match fs::read_link(&link) {
            Ok(target) => {
                let driver = target
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| target.display().to_string());
                if PASSIVE_DRIVERS.contains(&driver.as_str()) {
                    Ok(())
                } else {
                    Err(PciError::DriverBound {
                        bdf: self.bdf.clone(),
                        driver,
                    })
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(PciError::Os {
                what: format!("reading the driver link {}", link.display()),
                source,
            }),
        }
    }
}

impl Opener for SysfsOpener {
    fn describe(&self) -> String {
        format!("sysfs {} ({})", self.bdf, self.dir.display())
    }

    fn open(&self) -> Result<Box<dyn Transport>, PciError> {
        // The card may have gone since the opener was made (Thunderbolt).
        self.check_present()?;
        self.check_unbound()?;
        let path = self.dir.join("config");
        let config = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(os(format!(
                "opening configuration space {} for reading and writing",
                path.display()
            )))?;
        let len = config.metadata().map_err(os(format!(
            "reading the size of configuration space {}",
            path.display()
        )))?;
        // Conventional PCI functions expose 256 bytes, PCIe ones 4096.
        // CAST: the length is at most CONFIG_SPACE_BYTES after the min.
        let config_bytes = len.len().min(CONFIG_SPACE_BYTES as u64) as usize;
        Ok(Box::new(SysfsTransport {
            dir: self.dir.clone(),
            config,
            config_bytes,
            bar0: None,
        }))
    }
}

/// Check `text` is `DDDD:BB:DD.F` in hex (device at most 0x1f, function at
/// most 7) and return it in lower case, as sysfs names it.
fn parse_bdf(text: &str) -> Result<String, PciError> {
    let bad = |why| PciError::BadBdf {
        bdf: text.to_string(),
        why,
    };
    let (domain, rest) = text.split_once(':').ok_or_else(|| bad("no `:`"))?;
    let (bus, rest) = rest
        .split_once(':')
        .ok_or_else(|| bad("no domain (lspci -D shows it)"))?;
    let (device, function) = rest.split_once('.').ok_or_else(|| bad("no `.`"))?;
    let field = |s: &str, digits: usize, what| -> Result<u32, PciError> {
        if s.len() != digits || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad(what));
        }
        u32::from_str_radix(s, 16).map_err(|_| bad(what))
    };
    field(domain, 4, "the domain is not 4 hex digits")?;
    field(bus, 2, "the bus is not 2 hex digits")?;
    if field(device, 2, "the device is not 2 hex digits")? > 0x1F {
        return Err(bad("the device is above 0x1f"));
    }
    if field(function, 1, "the function is not 1 hex digit")? > 7 {
        return Err(bad("the function is above 7"));
    }
    Ok(text.to_ascii_lowercase())
}

/// Turn an I/O error into `PciError::Os` with a sentence naming the file.
fn os(what: String) -> impl FnOnce(io::Error) -> PciError {
    move |source| PciError::Os { what, source }
}

struct SysfsTransport {
    dir: PathBuf,
    config: File,
    config_bytes: usize,
    /// BAR0, mapped on first register access and dropped around a reset.
    bar0: Option<MmapRaw>,
}

impl SysfsTransport {
    fn config_path(&self) -> PathBuf {
        self.dir.join("config")
    }

    fn check_config(&self, at: u16, width: Width) -> Result<u64, PciError> {
        let start = usize::from(at);
        if start + width.bytes() > self.config_bytes || start % width.bytes() != 0 {
            return Err(PciError::ConfigOutOfRange {
                offset: at,
                width: width.bytes(),
            });
        }
        Ok(u64::from(at))
    }

    fn map_bar0(&self) -> Result<MmapRaw, PciError> {
        let path = self.dir.join("resource0");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(os(format!(
                "opening BAR0 {} for reading and writing",
                path.display()
            )))?;
        // The mapping keeps its own reference to the file; `file` may close.
        MmapOptions::new()
            .map_raw(&file)
            .map_err(os(format!("mapping BAR0 {}", path.display())))
    }

    fn bar0(&mut self) -> Result<&MmapRaw, PciError> {
        let map = match self.bar0.take() {
            Some(map) => map,
            None => self.map_bar0()?,
        };
        Ok(self.bar0.insert(map))
    }

    /// Check `len` bytes at `offset` lie inside BAR0 and return the mapping
    /// and the start as an index into it.
    fn bar0_range(&mut self, offset: u64, len: usize) -> Result<(&MmapRaw, usize), PciError> {
        let map = self.bar0()?;
        // CAST: usize is at most 64 bits on every target we build for.
        let (len, size) = (len as u64, map.len() as u64);
        match offset.checked_add(len) {
            // CAST: offset < size, and size came from a usize.
            Some(end) if end <= size => Ok((map, offset as usize)),
            _ => Err(PciError::OutOfRange {
                what: "BAR0 (resource0)".to_string(),
                offset,
                len,
                size,
            }),
        }
    }
}

impl Transport for SysfsTransport {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn config_read(&mut self, at: u16, width: Width) -> Result<u32, PciError> {
        let pos = self.check_config(at, width)?;
        let mut bytes = [0u8; 4];
        self.config
            .read_exact_at(&mut bytes[..width.bytes()], pos)
            .map_err(os(format!(
                "reading {} bytes at {at:#x} of configuration space {}",
                width.bytes(),
                self.config_path().display()
            )))?;
        Ok(u32::from_le_bytes(bytes))
    }

    fn config_write(&mut self, at: u16, width: Width, value: u32) -> Result<(), PciError> {
        let pos = self.check_config(at, width)?;
        // One positioned write of exactly `width` bytes: the kernel turns an
        // aligned write into a single config cycle of that width, so a
        // 16-bit command write never touches the status register beside it.
        self.config
            .write_all_at(&value.to_le_bytes()[..width.bytes()], pos)
            .map_err(os(format!(
                "writing {} bytes at {at:#x} of configuration space {}",
                width.bytes(),
                self.config_path().display()
            )))
    }

    fn bars(&mut self) -> Result<Vec<BarInfo>, PciError> {
        let path = self.dir.join("resource");
        let text = fs::read_to_string(&path)
            .map_err(os(format!("reading the BAR list {}", path.display())))?;
        parse_resource(&text).map_err(|why| PciError::Os {
            what: format!("parsing the BAR list {}", path.display()),
            source: io::Error::new(io::ErrorKind::InvalidData, why),
        })
    }

    fn mmio_read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        let (map, start) = self.bar0_range(offset, out.len())?;
        let base = map.as_ptr();
        let mut i = 0;
        while i < out.len() {
            let at = start + i;
            if at % 4 == 0 && out.len() - i >= 4 {
                // SAFETY: `at + 4 <= map.len()` (bar0_range checked the whole
                // access), so the pointer stays inside the live mapping that
                // `map` borrows; the mapping is page-aligned and `at` is a
                // multiple of 4, so the u32 is aligned. Only raw pointers are
                // used, never references, so a card (or another mapping)
                // changing the memory does not break aliasing rules.
                let word = unsafe { base.add(at).cast::<u32>().read_volatile() };
                out[i..i + 4].copy_from_slice(&word.to_ne_bytes());
                i += 4;
            } else {
                // SAFETY: `at < map.len()` as above; a byte needs no alignment.
                out[i] = unsafe { base.add(at).read_volatile() };
                i += 1;
            }
        }
        Ok(())
    }

    fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), PciError> {
        let (map, start) = self.bar0_range(offset, data.len())?;
        let base = map.as_mut_ptr();
        let mut i = 0;
        while i < data.len() {
            let at = start + i;
            if at % 4 == 0 && data.len() - i >= 4 {
                let word = u32::from_ne_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
                // SAFETY: in bounds and aligned as in `mmio_read`; the
                // mapping is shared and writable (resource0 was opened read
                // and write), and only raw pointers touch it.
                unsafe { base.add(at).cast::<u32>().write_volatile(word) };
                i += 4;
            } else {
                // SAFETY: `at < map.len()`, writable shared mapping as above.
                unsafe { base.add(at).write_volatile(data[i]) };
                i += 1;
            }
        }
        Ok(())
    }

    /// Nothing to push out: every `mmio_write` has been stored to the
    /// uncached BAR mapping before it returns, and PCIe ordering makes any
    /// later read of the card arrive after it.
    fn flush(&mut self) -> Result<(), PciError> {
        Ok(())
    }

    /// Refused: submission needs DMA, and DMA needs VFIO (not built).
    fn doorbell(&mut self, _token: u32) -> Result<(), PciError> {
        Err(unsupported(
            "doorbells (submission needs DMA, which needs VFIO)",
        ))
    }

    /// Refused: the GPU may only reach host memory through an IOMMU mapping,
    /// which a userspace driver gets from VFIO, and the VFIO transport is
    /// not built.
    fn alloc_dma(&mut self, _bytes: u64) -> Result<DmaRegion, PciError> {
        Err(unsupported("DMA (it needs VFIO, which is not built)"))
    }

    /// Refused: there are no DMA regions (see `alloc_dma`).
    fn dma_read(&mut self, _id: DmaId, _offset: u64, _out: &mut [u8]) -> Result<(), PciError> {
        Err(unsupported("DMA (it needs VFIO, which is not built)"))
    }

    /// Refused: there are no DMA regions (see `alloc_dma`).
    fn dma_write(&mut self, _id: DmaId, _offset: u64, _data: &[u8]) -> Result<(), PciError> {
        Err(unsupported("DMA (it needs VFIO, which is not built)"))
    }

    /// Ask the kernel to reset the function. It saves configuration space
    /// first and restores it after, so the BARs come back where they were.
    /// BAR0 is unmapped first and mapped again on the next register access.
    fn function_reset(&mut self) -> Result<(), PciError> {
        self.bar0 = None;
        let path = self.dir.join("reset");
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(os(format!("opening the reset file {}", path.display())))?;
        file.write_all_at(b"1", 0).map_err(os(format!(
            "writing 1 to the reset file {}",
            path.display()
        )))
    }
}

fn unsupported(what: &'static str) -> PciError {
    PciError::Unsupported {
        backend: BACKEND,
        what,
    }
}

/// The present BARs among the first six lines of a sysfs `resource` file.
fn parse_resource(text: &str) -> Result<Vec<BarInfo>, String> {
    let mut bars = Vec::new();
    for (index, line) in (0u8..6).zip(text.lines()) {
        let mut fields = line.split_whitespace().map(|f| {
            let digits = f
                .strip_prefix("0x")
                .ok_or_else(|| format!("line {index}: `{f}` is not 0x-prefixed hex"))?;
            u64::from_str_radix(digits, 16)
                .map_err(|e| format!("line {index}: `{f}` is not hex: {e}"))
        });
        let (Some(start), Some(end), Some(_flags), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(format!(
                "line {index}: expected `0xSTART 0xEND 0xFLAGS`, got `{line}`"
            ));
        };
        let (start, end) = (start?, end?);
        if start == 0 && end == 0 {
            continue;
        }
        if end < start {
            return Err(format!(
                "line {index}: end {end:#x} is below start {start:#x}"
            ));
        }
        bars.push(BarInfo {
            index,
            bytes: end - start + 1,
        });
    }
    Ok(bars)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actor::read_identity;
    use crate::transport::{clear_bus_master, enable_bus_master};
    use macuda_hw::pci::offset;
    use macuda_hw::regs::{NV_PFB_PRI_MMU_WPR2_ADDR_HI, NV_PMC_BOOT_0, NV_PMC_BOOT_42};
    use macuda_hw::Chip;
    use tempfile::TempDir;

    const BDF: &str = "0000:01:00.0";
    const MIB: u64 = 1 << 20;
    const BAR0_BYTES: u64 = 16 * MIB;
    const BOOT_0: u32 = 0x1B20_00A1;
    const BOOT_42: u32 = 0x1B2A_1000;
    /// Memory space on, bus mastering off.
    const COMMAND: u16 = 0x0002;
    /// Capabilities list: a status bit a 32-bit command write would clobber.
    const STATUS: u16 = 0x0010;

    /// A sysfs tree with one GB202 at `BDF`.
    struct Fake {
        // Held so the tree lives as long as the test.
        _tmp: TempDir,
        root: PathBuf,
        dir: PathBuf,
    }

    impl Fake {
        fn new() -> Fake {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().to_path_buf();
            let dir = root.join(BDF);
            fs::create_dir(&dir).unwrap();

            let mut config = vec![0u8; CONFIG_SPACE_BYTES];
            config[0..2].copy_from_slice(&0x10DEu16.to_le_bytes());
            config[2..4].copy_from_slice(&0x2B85u16.to_le_bytes());
            config[4..6].copy_from_slice(&COMMAND.to_le_bytes());
            config[6..8].copy_from_slice(&STATUS.to_le_bytes());
            config[8..12].copy_from_slice(&0x0300_00A1u32.to_le_bytes());
            fs::write(dir.join("config"), &config).unwrap();

            // As the kernel prints it: BAR0, BAR1 (64-bit, so BAR2 is
            // empty), BAR3 (64-bit, BAR4 empty), no BAR5, then the ROM and
            // bridge windows, which are not BARs.
            let line = |start: u64, bytes: u64, flags: u64| {
                let end = if bytes == 0 { 0 } else { start + bytes - 1 };
                format!("0x{start:016x} 0x{end:016x} 0x{flags:016x}\n")
            };
            let mut resource = String::new();
            resource += &line(0xF000_0000, BAR0_BYTES, 0x40200);
            resource += &line(0x60_0000_0000, 256 * MIB, 0x14_220C);
            resource += &line(0, 0, 0);
            resource += &line(0x60_1000_0000, 32 * MIB, 0x14_220C);
            resource += &line(0, 0, 0);
            resource += &line(0, 0, 0);
            resource += &line(0xF100_0000, 512 * 1024, 0x4_6200);
            for _ in 7..13 {
                resource += &line(0, 0, 0);
            }
            fs::write(dir.join("resource"), resource).unwrap();

            let bar0 = File::create(dir.join("resource0")).unwrap();
            bar0.set_len(BAR0_BYTES).unwrap();
            let fake = Fake {
                _tmp: tmp,
                root,
                dir,
            };
            fake.poke(u64::from(NV_PMC_BOOT_0::ADDR), BOOT_0);
            fake.poke(u64::from(NV_PMC_BOOT_42::ADDR), BOOT_42);
            fs::write(fake.dir.join("reset"), "").unwrap();
            fake
        }

        fn opener(&self) -> SysfsOpener {
            SysfsOpener::with_root(self.root.clone(), BDF).unwrap()
        }

        fn open(&self) -> Box<dyn Transport> {
            self.opener().open().unwrap()
        }

        /// Write a register straight into the BAR0 file.
        fn poke(&self, at: u64, value: u32) {
            let f = OpenOptions::new()
                .write(true)
                .open(self.dir.join("resource0"))
                .unwrap();
            f.write_all_at(&value.to_le_bytes(), at).unwrap();
        }

        fn file_bytes(&self, name: &str, at: u64, len: usize) -> Vec<u8> {
            let f = File::open(self.dir.join(name)).unwrap();
            let mut out = vec![0u8; len];
            f.read_exact_at(&mut out, at).unwrap();
            out
        }

        fn command_in_file(&self) -> u16 {
            let b = self.file_bytes("config", 4, 2);
            u16::from_le_bytes([b[0], b[1]])
        }
    }

    #[test]
    fn identifies_a_gb202_without_firmware() {
        let fake = Fake::new();
        let mut t = fake.open();
        let id = read_identity(t.as_mut()).unwrap();
        assert_eq!(id.backend, "sysfs");
        assert_eq!((id.vendor, id.device), (0x10DE, 0x2B85));
        assert_eq!(id.revision_and_class, 0x0300_00A1);
        assert_eq!(
            id.bars,
            vec![
                BarInfo {
                    index: 0,
                    bytes: 16 * MIB
                },
                BarInfo {
                    index: 1,
                    bytes: 256 * MIB
                },
                BarInfo {
                    index: 3,
                    bytes: 32 * MIB
                },
            ]
        );
        assert!(id.small_bar());
        assert_eq!((id.chip.boot_0, id.chip.boot_42), (BOOT_0, BOOT_42));
        assert_eq!(id.chip.chip, Chip::BlackwellConsumer { implementation: 2 });
        assert!(!id.firmware_resident);
    }

    #[test]
    fn wpr2_up_means_firmware_resident() {
        let fake = Fake::new();
        fake.poke(u64::from(NV_PFB_PRI_MMU_WPR2_ADDR_HI::ADDR), 0x07F4_A000);
        let id = read_identity(fake.open().as_mut()).unwrap();
        assert!(id.firmware_resident);
    }

    #[test]
    fn config_round_trips_at_each_width() {
        let fake = Fake::new();
        let mut t = fake.open();
        t.config_write(0x40, Width::U8, 0xAB).unwrap();
        t.config_write(0x42, Width::U16, 0xBEEF).unwrap();
        t.config_write(0x44, Width::U32, 0x1234_5678).unwrap();
        assert_eq!(t.config_read(0x40, Width::U8).unwrap(), 0xAB);
        assert_eq!(t.config_read(0x42, Width::U16).unwrap(), 0xBEEF);
        assert_eq!(t.config_read(0x44, Width::U32).unwrap(), 0x1234_5678);
        // Little-endian in the file, and each write only its own bytes.
        assert_eq!(
            fake.file_bytes("config", 0x40, 8),
            [0xAB, 0x00, 0xEF, 0xBE, 0x78, 0x56, 0x34, 0x12]
        );
        assert_eq!(t.config_read(0x40, Width::U32).unwrap(), 0xBEEF_00AB);
        assert_eq!(t.config_read(0x45, Width::U8).unwrap(), 0x56);
        // The last word of configuration space is reachable.
        t.config_write(0xFFC, Width::U32, 0xCAFE_F00D).unwrap();
        assert_eq!(t.config_read(0xFFE, Width::U16).unwrap(), 0xCAFE);
    }

    #[test]
    fn bus_master_changes_bit_2_in_the_file_only() {
        let fake = Fake::new();
        let mut t = fake.open();
        let on = enable_bus_master(t.as_mut()).unwrap();
        assert!(!on.before.bus_master());
        assert!(on.after.bus_master());
        assert_eq!(fake.command_in_file(), COMMAND | 0x0004);
        let off = clear_bus_master(fake.open().as_mut()).unwrap();
        assert!(off.before.bus_master());
        assert!(!off.after.bus_master());
        assert_eq!(fake.command_in_file(), COMMAND);
        // The 16-bit writes left the status register beside it alone.
        assert_eq!(fake.file_bytes("config", 6, 2), STATUS.to_le_bytes());
    }

    #[test]
    fn bulk_mmio_round_trips_at_any_alignment_and_length() {
        let fake = Fake::new();
        let mut t = fake.open();
        let data: Vec<u8> = (0..=255u8).cycle().skip(7).take(1000).collect();
        for (at, len) in [
            (0x1000u64, 64usize),
            (0x2001, 13),
            (0x3002, 7),
            (0x4003, 1),
            (0x5000, 999),
        ] {
            let data = &data[..len];
            t.mmio_write(at, data).unwrap();
            let mut back = vec![0u8; len];
            t.mmio_read(at, &mut back).unwrap();
            assert_eq!(back, data, "at {at:#x}, {len} bytes");
            // It went to the BAR, not a private copy.
            assert_eq!(fake.file_bytes("resource0", at, len), data);
            // And nothing around it moved.
            assert_eq!(fake.file_bytes("resource0", at - 1, 1), [0]);
            assert_eq!(fake.file_bytes("resource0", at + len as u64, 1), [0]);
        }
        // Registers are little-endian words.
        t.mmio_write32(0x6000, 0x1122_3344).unwrap();
        assert_eq!(
            fake.file_bytes("resource0", 0x6000, 4),
            [0x44, 0x33, 0x22, 0x11]
        );
        assert_eq!(t.mmio_read32(0x6000).unwrap(), 0x1122_3344);
        // The last word of BAR0 is reachable, and a second connection sees
        // what the first wrote.
        t.mmio_write32(BAR0_BYTES - 4, 0xDEAD_BEEF).unwrap();
        assert_eq!(
            fake.open().mmio_read32(BAR0_BYTES - 4).unwrap(),
            0xDEAD_BEEF
        );
        t.flush().unwrap();
    }

    #[test]
    fn mmio_outside_bar0_is_a_typed_error() {
        let fake = Fake::new();
        let mut t = fake.open();
        let err = t.mmio_read32(BAR0_BYTES - 2).unwrap_err();
        assert!(
            matches!(
                &err,
                PciError::OutOfRange { offset, len: 4, size, .. }
                    if *offset == BAR0_BYTES - 2 && *size == BAR0_BYTES
            ),
            "{err:?}"
        );
        assert!(matches!(
            t.mmio_write(BAR0_BYTES, &[1]),
            Err(PciError::OutOfRange { .. })
        ));
        // An offset that would overflow is out of range, not a wrap-around.
        assert!(matches!(
            t.mmio_read(u64::MAX, &mut [0u8; 2]),
            Err(PciError::OutOfRange { .. })
        ));
        // The refused write did not land anywhere.
        assert_eq!(fake.file_bytes("resource0", BAR0_BYTES - 1, 1), [0]);
    }

    #[test]
    fn config_outside_the_space_is_a_typed_error() {
        let fake = Fake::new();
        let mut t = fake.open();
        for (at, width) in [
            (4095u16, Width::U32),
            (4094, Width::U32),
            (4096, Width::U8),
            (3, Width::U16),
            (0x42, Width::U32),
        ] {
            assert!(
                matches!(
                    t.config_read(at, width),
                    Err(PciError::ConfigOutOfRange { offset, width: w })
                        if offset == at && w == width.bytes()
                ),
                "read {at:#x} {width:?}"
            );
            assert!(matches!(
                t.config_write(at, width, 0xFFFF_FFFF),
                Err(PciError::ConfigOutOfRange { .. })
            ));
        }
        // A conventional PCI function has only 256 bytes.
        let f = OpenOptions::new()
            .write(true)
            .open(fake.dir.join("config"))
            .unwrap();
        f.set_len(256).unwrap();
        let mut t = fake.open();
        assert_eq!(t.config_read(0xFC, Width::U32).unwrap(), 0);
        assert!(matches!(
            t.config_read(0x100, Width::U32),
            Err(PciError::ConfigOutOfRange { offset: 0x100, .. })
        ));
    }

    #[test]
    fn reset_writes_1_and_bar0_works_after() {
        let fake = Fake::new();
        let mut t = fake.open();
        assert_eq!(t.mmio_read32(0).unwrap(), BOOT_0);
        t.function_reset().unwrap();
        assert_eq!(fs::read_to_string(fake.dir.join("reset")).unwrap(), "1");
        assert_eq!(
            t.mmio_read32(u64::from(NV_PMC_BOOT_42::ADDR)).unwrap(),
            BOOT_42
        );
    }

    #[test]
    fn reset_without_a_reset_file_names_it() {
        let fake = Fake::new();
        fs::remove_file(fake.dir.join("reset")).unwrap();
        let err = fake.open().function_reset().unwrap_err();
        let PciError::Os { what, source } = &err else {
            panic!("{err:?}");
        };
        assert!(what.contains("reset"), "{what}");
        assert_eq!(source.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn malformed_addresses_are_typed_errors_naming_them() {
        let fake = Fake::new();
        for bdf in [
            "",
            "01:00.0",
            "0000:01:00",
            "0000:01:00.8",
            "0000:01:20.0",
            "000g:01:00.0",
            "0000:001:00.0",
            "00000:01:00.0",
            "0000:01:00.0\n",
            "0000:01:00.0/..",
            "+000:01:00.0",
            "0000:01:0.0",
            "0000-01-00.0",
        ] {
            match SysfsOpener::with_root(fake.root.clone(), bdf) {
                Err(PciError::BadBdf { bdf: named, .. }) => assert_eq!(named, bdf),
                other => panic!("{bdf:?}: {other:?}"),
            }
        }
        let msg = SysfsOpener::with_root(fake.root.clone(), "01:00.0")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("`01:00.0`"), "{msg}");
    }

    #[test]
    fn upper_case_addresses_find_the_lower_case_directory() {
        let fake = Fake::new();
        fs::rename(&fake.dir, fake.root.join("0000:0a:1f.7")).unwrap();
        let opener = SysfsOpener::with_root(fake.root.clone(), "0000:0A:1F.7").unwrap();
        assert_eq!(opener.bdf(), "0000:0a:1f.7");
        assert_eq!(opener.device_dir(), fake.root.join("0000:0a:1f.7"));
        assert!(opener.describe().contains("0000:0a:1f.7"));
        let mut t = opener.open().unwrap();
        assert_eq!(
            t.config_read(offset::VENDOR_ID, Width::U16).unwrap(),
            0x10DE
        );
    }

    #[test]
    fn a_missing_device_is_a_typed_error() {
        let fake = Fake::new();
        match SysfsOpener::with_root(fake.root.clone(), "0000:02:00.0") {
            Err(PciError::NoSuchDevice { bdf, path }) => {
                assert_eq!(bdf, "0000:02:00.0");
                assert_eq!(path, fake.root.join("0000:02:00.0"));
            }
            other => panic!("{other:?}"),
        }
        // A card unplugged after the opener was made.
        let opener = fake.opener();
        fs::remove_dir_all(&fake.dir).unwrap();
        assert!(matches!(
            opener.open(),
            Err(PciError::NoSuchDevice { bdf, .. }) if bdf == BDF
        ));
    }

    #[test]
    fn a_bound_kernel_driver_is_refused_but_vfio_is_not() {
        let fake = Fake::new();
        let link = fake.dir.join("driver");
        std::os::unix::fs::symlink("../../../bus/pci/drivers/nvidia", &link).unwrap();
        assert!(matches!(
            fake.opener().open(),
            Err(PciError::DriverBound { driver, .. }) if driver == "nvidia"
        ));
        fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink("../../../bus/pci/drivers/vfio-pci", &link).unwrap();
        assert!(fake.opener().open().is_ok());
    }

    #[test]
    fn dma_and_doorbells_are_unsupported() {
        let fake = Fake::new();
        let mut t = fake.open();
        let errs = [
            t.alloc_dma(4096).unwrap_err(),
            t.dma_read(DmaId(0), 0, &mut [0u8; 4]).unwrap_err(),
            t.dma_write(DmaId(0), 0, &[0u8; 4]).unwrap_err(),
            t.doorbell(1).unwrap_err(),
        ];
        for e in errs {
            assert!(
                matches!(
                    e,
                    PciError::Unsupported {
                        backend: "sysfs",
                        ..
                    }
                ),
                "{e:?}"
            );
            // Not the null device's by-design refusal: a real card is here.
            assert!(!e.is_refusal());
        }
    }

    #[test]
    fn a_malformed_bar_list_is_an_os_error_naming_the_file() {
        let fake = Fake::new();
        fs::write(fake.dir.join("resource"), "0xf0000000 0xf0ffffff\n").unwrap();
        let err = fake.open().bars().unwrap_err();
        let PciError::Os { what, source } = &err else {
            panic!("{err:?}");
        };
        assert!(what.contains("resource"), "{what}");
        assert_eq!(source.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn parses_resource_lines() {
        assert_eq!(parse_resource("").unwrap(), vec![]);
        assert_eq!(
            parse_resource("0x0000000000001000 0x0000000000001fff 0x0000000000040200\n").unwrap(),
            vec![BarInfo {
                index: 0,
                bytes: 0x1000
            }]
        );
        assert!(parse_resource("0x2000 0x1fff 0x0\n").is_err());
        assert!(parse_resource("1000 1fff 0\n").is_err());
        assert!(parse_resource("0x1000 0x1fff 0x0 0x0\n").is_err());
    }
}
