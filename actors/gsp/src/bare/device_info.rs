//! The FIFO device-info table over GSP-RM (reference gsp.md 6.6 step 5):
//! read page by page from the subdevice, decoded into typed entries, and
//! the runlists of the graphics/compute engine and the first copy engine
//! looked up, as the golden context needs them.

use super::{CardBus, GspRpc, RpcError};
use macuda_hw::gsp_rpc::device_info_table as dit;
use macuda_hw::gsp_rpc::engine_type;
use macuda_hw::le::{put_u32, u32_at};
use macuda_hw::rm::control;

/// The most pages read before the table is taken as hostile.
pub const MAX_PAGES: usize = 8;

/// One engine of the device-info table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfoEntry {
    pub name: String,
    /// engineData[2] (meaning inferred): `NV2080_ENGINE_TYPE_*`.
    pub rm_engine_type: u32,
    /// engineData[3] (meaning inferred): the runlist id.
    pub runlist: u32,
    pub pbdma_ids: Vec<u32>,
    pub pbdma_fault_ids: Vec<u32>,
    pub engine_data: [u32; dit::entry::ENGINE_DATA_WORDS],
}

/// Why a table could not be read.
#[derive(Debug)]
pub enum DeviceInfoError {
    Rpc(RpcError),
    /// The reply is shorter than the parameters.
    Short {
        got: usize,
    },
    /// numEntries beyond a page.
    TooManyEntries {
        num: u32,
    },
    /// numPbdmas beyond the entry's arrays.
    TooManyPbdmas {
        entry: usize,
        num: u32,
    },
    /// bMore still set after [`MAX_PAGES`] pages.
    Endless,
}

impl From<RpcError> for DeviceInfoError {
    fn from(e: RpcError) -> Self {
        Self::Rpc(e)
    }
}

/// The parameters asking for the page from `base_index`.
pub fn encode_request(base_index: u32) -> [u8; dit::BYTES] {
    let mut p = [0u8; dit::BYTES];
    put_u32(&mut p, dit::BASE_INDEX, base_index);
    p
}

/// One page decoded: its entries and whether more follow.
///
/// # Errors
/// A short reply, or counts beyond the layout's arrays.
pub fn decode_page(p: &[u8]) -> Result<(Vec<DeviceInfoEntry>, bool), DeviceInfoError> {
    if p.len() < dit::BYTES {
        return Err(DeviceInfoError::Short { got: p.len() });
    }
    let num = u32_at(p, dit::NUM_ENTRIES);
    let n = usize::try_from(num)
        .ok()
        .filter(|n| *n <= dit::MAX_ENTRIES)
        .ok_or(DeviceInfoError::TooManyEntries { num })?;
    let mut entries = Vec::with_capacity(n);
    for i in 0..n {
        let e = &p[dit::ENTRIES + i * dit::entry::BYTES..][..dit::entry::BYTES];
        let mut engine_data = [0u32; dit::entry::ENGINE_DATA_WORDS];
        for (w, d) in engine_data.iter_mut().enumerate() {
            *d = u32_at(e, dit::entry::ENGINE_DATA + 4 * w);
        }
        let np = u32_at(e, dit::entry::NUM_PBDMAS);
        let pbdmas = usize::try_from(np)
            .ok()
            .filter(|n| *n <= dit::entry::MAX_PBDMAS)
            .ok_or(DeviceInfoError::TooManyPbdmas { entry: i, num: np })?;
        let ids = |at: usize| (0..pbdmas).map(|k| u32_at(e, at + 4 * k)).collect();
        let raw = &e[dit::entry::ENGINE_NAME..][..dit::entry::ENGINE_NAME_BYTES];
        let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
        entries.push(DeviceInfoEntry {
            name: String::from_utf8_lossy(&raw[..end]).into_owned(),
            rm_engine_type: engine_data[dit::entry::DATA_RM_ENGINE_TYPE],
            runlist: engine_data[dit::entry::DATA_RUNLIST],
            pbdma_ids: ids(dit::entry::PBDMA_IDS),
            pbdma_fault_ids: ids(dit::entry::PBDMA_FAULT_IDS),
            engine_data,
        });
    }
    Ok((entries, p[dit::B_MORE] != 0))
}

/// The whole table, read from the subdevice while bMore, bounded.
///
/// # Errors
/// RM's refusal, a malformed page, or a table that never ends.
pub fn read_device_info(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    client: u32,
    subdevice: u32,
) -> Result<DeviceInfoTable, DeviceInfoError> {
    let mut all = Vec::new();
    for _ in 0..MAX_PAGES {
        // CAST: at most MAX_PAGES * 32 entries.
        let base = all.len() as u32;
        let reply = rpc.rm_control(
            bus,
            client,
            subdevice,
            control::FIFO_GET_DEVICE_INFO_TABLE,
            &encode_request(base),
        )?;
        let (entries, more) = decode_page(&reply)?;
        let empty = entries.is_empty();
        all.extend(entries);
        if !more || empty {
            return Ok(DeviceInfoTable { entries: all });
        }
    }
    Err(DeviceInfoError::Endless)
}

/// The decoded table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfoTable {
    pub entries: Vec<DeviceInfoEntry>,
}

impl DeviceInfoTable {
    /// The runlist of the first engine of RM type `ty`.
    pub fn runlist_of(&self, ty: u32) -> Option<u32> {
        self.entries
            .iter()
            .find(|e| e.rm_engine_type == ty)
            .map(|e| e.runlist)
    }

    /// The graphics/compute engine's runlist.
    pub fn graphics_runlist(&self) -> Option<u32> {
        self.runlist_of(engine_type::GRAPHICS)
    }

    /// The first copy engine's runlist.
    pub fn copy_runlist(&self) -> Option<u32> {
        self.runlist_of(engine_type::COPY0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(entries: &[(u32, u32, &str)], more: bool) -> Vec<u8> {
        let mut p = vec![0u8; dit::BYTES];
        // CAST: test tables are small.
        put_u32(&mut p, dit::NUM_ENTRIES, entries.len() as u32);
        p[dit::B_MORE] = u8::from(more);
        for (i, (ty, rl, name)) in entries.iter().enumerate() {
            let e = dit::ENTRIES + i * dit::entry::BYTES;
            put_u32(&mut p, e + 4 * dit::entry::DATA_RM_ENGINE_TYPE, *ty);
            put_u32(&mut p, e + 4 * dit::entry::DATA_RUNLIST, *rl);
            put_u32(&mut p, e + dit::entry::NUM_PBDMAS, 1);
            put_u32(&mut p, e + dit::entry::PBDMA_IDS, 7);
            p[e + dit::entry::ENGINE_NAME..][..name.len()].copy_from_slice(name.as_bytes());
        }
        p
    }

    #[test]
    fn decodes_entries_and_lookups() {
        let p = page(
            &[
                (engine_type::GRAPHICS, 0, "GR0"),
                (engine_type::COPY0, 3, "CE0"),
            ],
            false,
        );
        let (entries, more) = decode_page(&p).unwrap();
        assert!(!more);
        assert_eq!(entries[0].name, "GR0");
        assert_eq!(entries[1].pbdma_ids, vec![7]);
        let t = DeviceInfoTable { entries };
        assert_eq!(t.graphics_runlist(), Some(0));
        assert_eq!(t.copy_runlist(), Some(3));
    }

    #[test]
    fn refuses_hostile_pages() {
        let mut p = page(&[], true);
        put_u32(&mut p, dit::NUM_ENTRIES, 33);
        assert!(matches!(
            decode_page(&p),
            Err(DeviceInfoError::TooManyEntries { num: 33 })
        ));
        let mut p = page(&[(1, 0, "GR0")], false);
        put_u32(&mut p, dit::ENTRIES + dit::entry::NUM_PBDMAS, 9);
        assert!(matches!(
            decode_page(&p),
            Err(DeviceInfoError::TooManyPbdmas { .. })
        ));
        assert!(matches!(
            decode_page(&p[..10]),
            Err(DeviceInfoError::Short { got: 10 })
        ));
    }
}
