//! The null device: a card that exists only as identification. It answers
//! configuration space and the identification registers as a GB202 with
//! 32 GiB, records every write and reset it receives (so tests can check
//! what recovery really did to the "card"), and refuses DMA and submission.

use crate::capabilities::Capabilities;
use crate::error::PciError;
use crate::transport::{BarInfo, DmaId, DmaRegion, Opener, Transport};
use macuda_hw::pci::{offset, Width, CONFIG_SPACE_BYTES, VENDOR_NVIDIA};
use macuda_hw::regs::{
    NV_HUBMMU_PRI_MMU_WPR2_ADDR_HI, NV_PFB_PRI_MMU_WPR2_ADDR_HI,
    NV_PGC6_AON_SECURE_SCRATCH_GROUP_42, NV_PMC_BOOT_0, NV_PMC_BOOT_42,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What the null card claims to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NullProfile {
    pub device_id: u16,
    pub revision_and_class: u32,
    pub boot_0: u32,
    pub boot_42: u32,
    pub vram_mib: u32,
    pub bars: Vec<BarInfo>,
    /// Tests of command streams set this: doorbells are then recorded
    /// instead of refused (nothing executes; the streams can be read back).
    pub swallow_doorbells: bool,
    /// Tests that play the GPU set this: the card keeps its video memory
    /// (sparsely, by page) so the host can write and read it. Otherwise
    /// video memory access is refused like DMA.
    pub keeps_vram: bool,
}

const MIB: u64 = 1 << 20;

impl NullProfile {
    /// An RTX 5090 (GB202, 32 GiB) behind a small (256 MiB) BAR1, as over
    /// Thunderbolt.
    pub fn gb202() -> NullProfile {
        NullProfile {
            device_id: 0x2B85,
            // Class 0x030000 (VGA display controller), revision 0xA1.
            revision_and_class: 0x0300_00A1,
            boot_0: 0x1B20_00A1,
            boot_42: 0x1B2A_1000,
            vram_mib: 32 * 1024,
            bars: vec![
                BarInfo {
                    index: 0,
                    bytes: 64 * MIB,
                },
                BarInfo {
                    index: 1,
                    bytes: 256 * MIB,
                },
                BarInfo {
                    index: 3,
                    bytes: 32 * MIB,
                },
            ],
            swallow_doorbells: false,
            keeps_vram: false,
        }
    }
}

/// Something a connection did to the card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CardEvent {
    Opened {
        connection: u32,
    },
    ConfigWrite {
        connection: u32,
        offset: u16,
        width: Width,
        value: u32,
    },
    MmioWrite {
        connection: u32,
        offset: u64,
        value: u32,
    },
    FunctionReset {
        connection: u32,
    },
    Doorbell {
        connection: u32,
        token: u32,
    },
}

/// Bytes per page of the null card's sparse video memory.
const VRAM_PAGE: u64 = 4096;
/// What video memory nobody wrote reads as: real video memory is not
/// zeroed, so neither is this, and code that forgets to initialise what
/// it reads shows up in tests.
pub const STALE_VRAM_BYTE: u8 = 0xA5;

struct CardState {
    config: Vec<u8>,
    /// Pages of video memory ever written; the rest reads as stale bytes.
    vram: std::collections::HashMap<u64, Box<[u8]>>,
    events: Vec<CardEvent>,
    connections: u32,
}

/// The card itself, shared by every connection opened to it; tests hold it
/// to read back what was done to it.
pub struct NullCard {
    profile: NullProfile,
    state: Mutex<CardState>,
}

impl NullCard {
    pub fn new(profile: NullProfile) -> Arc<NullCard> {
        let mut config = vec![0u8; CONFIG_SPACE_BYTES];
        put(
            &mut config,
            offset::VENDOR_ID,
            Width::U16,
            u32::from(VENDOR_NVIDIA),
        );
        put(
            &mut config,
            offset::DEVICE_ID,
            Width::U16,
            u32::from(profile.device_id),
        );
        put(
            &mut config,
            offset::REVISION_AND_CLASS,
            Width::U32,
            profile.revision_and_class,
        );
        Arc::new(NullCard {
            profile,
            state: Mutex::new(CardState {
                config,
                vram: std::collections::HashMap::new(),
                events: Vec::new(),
                connections: 0,
            }),
        })
    }

    /// Walk `[offset, offset + len)` of video memory page by page: `visit`
    /// gets the page number, the offset inside it, and the range of the
    /// caller's buffer that falls there.
    fn vram_pages(
        &self,
        offset: u64,
        len: u64,
        mut visit: impl FnMut(u64, usize, std::ops::Range<usize>),
    ) -> Result<(), PciError> {
        if !self.profile.keeps_vram {
            return Err(PciError::Refused {
                what: "video memory access",
            });
        }
        let size = u64::from(self.profile.vram_mib) * MIB;
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(PciError::OutOfRange {
                what: "video memory".into(),
                offset,
                len,
                size,
            });
        }
        let mut done = 0u64;
        while done < len {
            let at = offset + done;
            let n = (VRAM_PAGE - at % VRAM_PAGE).min(len - done);
            // CAST: within one page, and within the caller's buffer.
            visit(
                at / VRAM_PAGE,
                (at % VRAM_PAGE) as usize,
                done as usize..(done + n) as usize,
            );
            done += n;
        }
        Ok(())
    }

    pub fn profile(&self) -> &NullProfile {
        &self.profile
    }

    /// Everything done to the card so far, in order.
    pub fn events(&self) -> Vec<CardEvent> {
        self.state.lock().events.clone()
    }

    /// The command register as it stands.
    pub fn command(&self) -> u16 {
        // CAST: a 16-bit field read.
        (get(&self.state.lock().config, offset::COMMAND, Width::U16) & 0xFFFF) as u16
    }

    fn record(&self, event: CardEvent) {
        self.state.lock().events.push(event);
    }
}

fn put(config: &mut [u8], at: u16, width: Width, value: u32) {
    let at = usize::from(at);
    let bytes = value.to_le_bytes();
    config[at..at + width.bytes()].copy_from_slice(&bytes[..width.bytes()]);
}

fn get(config: &[u8], at: u16, width: Width) -> u32 {
    let at = usize::from(at);
    let mut bytes = [0u8; 4];
    bytes[..width.bytes()].copy_from_slice(&config[at..at + width.bytes()]);
    u32::from_le_bytes(bytes)
}

fn check_range(at: u16, width: Width) -> Result<(), PciError> {
    if usize::from(at) + width.bytes() > CONFIG_SPACE_BYTES || usize::from(at) % width.bytes() != 0
    {
        return Err(PciError::ConfigOutOfRange {
            offset: at,
            width: width.bytes(),
        });
    }
    Ok(())
}

/// Opens connections to one null card.
pub struct NullOpener {
    card: Arc<NullCard>,
}

impl NullOpener {
    pub fn new(card: Arc<NullCard>) -> NullOpener {
        NullOpener { card }
    }

    pub fn gb202() -> NullOpener {
        NullOpener::new(NullCard::new(NullProfile::gb202()))
    }

    pub fn card(&self) -> &Arc<NullCard> {
        &self.card
    }
}

impl Opener for NullOpener {
    fn describe(&self) -> String {
        "null (no transport)".to_string()
    }

    fn open(&self) -> Result<Box<dyn Transport>, PciError> {
        let connection = {
            let mut s = self.card.state.lock();
            s.connections += 1;
            s.connections
        };
        self.card.record(CardEvent::Opened { connection });
        Ok(Box::new(NullTransport {
            card: Arc::clone(&self.card),
            connection,
        }))
    }
}

struct NullTransport {
    card: Arc<NullCard>,
    connection: u32,
}

impl Transport for NullTransport {
    fn backend(&self) -> &'static str {
        "null"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            video_memory: self.card.profile.keeps_vram,
            dma: false,
            submission: self.card.profile.swallow_doorbells,
        }
    }

    fn config_read(&mut self, at: u16, width: Width) -> Result<u32, PciError> {
        check_range(at, width)?;
        Ok(get(&self.card.state.lock().config, at, width))
    }

    fn config_write(&mut self, at: u16, width: Width, value: u32) -> Result<(), PciError> {
        check_range(at, width)?;
        let mut s = self.card.state.lock();
        // Identification is read-only, as on real hardware.
        if (offset::COMMAND..offset::REVISION_AND_CLASS).contains(&at) {
            put(&mut s.config, at, width, value);
        }
        s.events.push(CardEvent::ConfigWrite {
            connection: self.connection,
            offset: at,
            width,
            value,
        });
        Ok(())
    }

    fn bars(&mut self) -> Result<Vec<BarInfo>, PciError> {
        Ok(self.card.profile.bars.clone())
    }

    fn mmio_read(&mut self, at: u64, out: &mut [u8]) -> Result<(), PciError> {
        let p = &self.card.profile;
        let value = match (u32::try_from(at), out.len()) {
            (Ok(NV_PMC_BOOT_0::ADDR), 4) => p.boot_0,
            (Ok(NV_PMC_BOOT_42::ADDR), 4) => p.boot_42,
            (Ok(NV_PGC6_AON_SECURE_SCRATCH_GROUP_42::ADDR), 4) => p.vram_mib,
            // No firmware ever ran on the null card.
            (Ok(NV_PFB_PRI_MMU_WPR2_ADDR_HI::ADDR | NV_HUBMMU_PRI_MMU_WPR2_ADDR_HI), 4) => 0,
            _ => return Err(PciError::NoSuchRegister { offset: at }),
        };
        out.copy_from_slice(&value.to_le_bytes());
        Ok(())
    }

    fn mmio_write(&mut self, at: u64, data: &[u8]) -> Result<(), PciError> {
        for (i, word) in data.chunks(4).enumerate() {
            let mut b = [0u8; 4];
            b[..word.len()].copy_from_slice(word);
            self.card.record(CardEvent::MmioWrite {
                connection: self.connection,
                offset: at + 4 * i as u64,
                value: u32::from_le_bytes(b),
            });
        }
        Ok(())
    }

    fn doorbell(&mut self, token: u32) -> Result<(), PciError> {
        if !self.card.profile.swallow_doorbells {
            return Err(PciError::Refused { what: "submission" });
        }
        self.card.record(CardEvent::Doorbell {
            connection: self.connection,
            token,
        });
        Ok(())
    }

    fn alloc_dma(&mut self, _bytes: u64) -> Result<DmaRegion, PciError> {
        Err(PciError::Refused { what: "DMA" })
    }

    fn dma_read(&mut self, _id: DmaId, _offset: u64, _out: &mut [u8]) -> Result<(), PciError> {
        Err(PciError::Refused { what: "DMA" })
    }

    fn dma_write(&mut self, _id: DmaId, _offset: u64, _data: &[u8]) -> Result<(), PciError> {
        Err(PciError::Refused { what: "DMA" })
    }

    fn vram_read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), PciError> {
        let state = self.card.state.lock();
        self.card
            .vram_pages(offset, out.len() as u64, |page, at, range| {
                match state.vram.get(&page) {
                    Some(p) => out[range.clone()].copy_from_slice(&p[at..at + range.len()]),
                    None => out[range].fill(STALE_VRAM_BYTE),
                }
            })
    }

    fn vram_write(&mut self, offset: u64, data: &[u8]) -> Result<(), PciError> {
        let mut state = self.card.state.lock();
        self.card
            .vram_pages(offset, data.len() as u64, |page, at, range| {
                let p = state.vram.entry(page).or_insert_with(|| {
                    vec![STALE_VRAM_BYTE; VRAM_PAGE as usize].into_boxed_slice()
                });
                p[at..at + range.len()].copy_from_slice(&data[range]);
            })
    }

    fn function_reset(&mut self) -> Result<(), PciError> {
        let mut s = self.card.state.lock();
        // A reset returns the command register to its power-on value.
        put(&mut s.config, offset::COMMAND, Width::U16, 0);
        s.events.push(CardEvent::FunctionReset {
            connection: self.connection,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{clear_bus_master, enable_bus_master};

    #[test]
    fn publishes_what_its_profile_lets_it_take_and_refuses_the_rest() {
        let plain = NullOpener::new(NullCard::new(NullProfile::gb202()));
        let mut t = plain.open().unwrap();
        let none = Capabilities {
            video_memory: false,
            dma: false,
            submission: false,
        };
        assert_eq!(t.capabilities(), none);
        assert!(t.doorbell(1).unwrap_err().is_refusal());
        let mut profile = NullProfile::gb202();
        profile.keeps_vram = true;
        profile.swallow_doorbells = true;
        let mut t = NullOpener::new(NullCard::new(profile)).open().unwrap();
        let played = Capabilities {
            video_memory: true,
            submission: true,
            ..none
        };
        assert_eq!(t.capabilities(), played);
        t.doorbell(1).unwrap();
        t.vram_write(0, &[1]).unwrap();
        assert!(t.alloc_dma(4096).unwrap_err().is_refusal());
    }

    #[test]
    fn keeps_video_memory_across_pages_when_asked_and_refuses_otherwise() {
        let mut profile = NullProfile::gb202();
        profile.keeps_vram = true;
        let card = NullCard::new(profile);
        let mut t = NullOpener::new(Arc::clone(&card)).open().unwrap();
        let data: Vec<u8> = (0..64u8).collect();
        t.vram_write(VRAM_PAGE - 32, &data).unwrap();
        let mut back = vec![0u8; 96];
        t.vram_read(VRAM_PAGE - 64, &mut back).unwrap();
        assert_eq!(&back[..32], &[STALE_VRAM_BYTE; 32], "never written");
        assert_eq!(&back[32..], &data[..], "across the page boundary");
        let size = 32 * 1024 * MIB;
        assert!(matches!(
            t.vram_read(size - 4, &mut [0u8; 8]),
            Err(PciError::OutOfRange { .. })
        ));
        assert!(t.vram_write(u64::MAX - 2, &[1; 8]).is_err(), "no overflow");

        let plain = NullCard::new(NullProfile::gb202());
        let mut t = NullOpener::new(plain).open().unwrap();
        assert!(t.vram_read(0, &mut [0u8; 4]).unwrap_err().is_refusal());
    }

    #[test]
    fn identifies_as_gb202() {
        let opener = NullOpener::gb202();
        let mut t = opener.open().unwrap();
        assert_eq!(
            t.config_read(offset::VENDOR_ID, Width::U16).unwrap(),
            0x10DE
        );
        assert_eq!(
            t.config_read(offset::DEVICE_ID, Width::U16).unwrap(),
            0x2B85
        );
        assert_eq!(
            t.mmio_read32(u64::from(NV_PMC_BOOT_42::ADDR)).unwrap(),
            0x1B2A_1000
        );
        assert_eq!(
            t.mmio_read32(u64::from(NV_PGC6_AON_SECURE_SCRATCH_GROUP_42::ADDR))
                .unwrap(),
            32768
        );
        assert!(matches!(
            t.mmio_read32(0x1234),
            Err(PciError::NoSuchRegister { offset: 0x1234 })
        ));
    }

    #[test]
    fn refuses_dma_and_submission() {
        let mut t = NullOpener::gb202().open().unwrap();
        assert!(t.alloc_dma(4096).unwrap_err().is_refusal());
        assert!(t.doorbell(1).unwrap_err().is_refusal());
    }

    #[test]
    fn bus_master_is_visible_across_connections_and_cleared_by_reset() {
        let opener = NullOpener::gb202();
        let mut a = opener.open().unwrap();
        let on = enable_bus_master(a.as_mut()).unwrap();
        assert!(on.after.bus_master());
        let mut b = opener.open().unwrap();
        let off = clear_bus_master(b.as_mut()).unwrap();
        assert!(off.before.bus_master());
        assert!(!off.after.bus_master());
        enable_bus_master(a.as_mut()).unwrap();
        b.function_reset().unwrap();
        assert_eq!(opener.card().command(), 0);
        let events = opener.card().events();
        assert!(matches!(
            events.last(),
            Some(CardEvent::FunctionReset { connection: 2 })
        ));
    }

    #[test]
    fn config_writes_out_of_range_are_typed_errors() {
        let mut t = NullOpener::gb202().open().unwrap();
        assert!(matches!(
            t.config_write(4095, Width::U32, 0),
            Err(PciError::ConfigOutOfRange { .. })
        ));
        assert!(matches!(
            t.config_read(3, Width::U16),
            Err(PciError::ConfigOutOfRange { .. })
        ));
    }
}
