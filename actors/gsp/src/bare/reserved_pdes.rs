//! COPY_SERVER_RESERVED_PDES (reference gsp.md 6.6 step 6): the
//! directory tables covering a 512 MiB window of our VA space, handed to
//! GSP-RM so that its server-side allocations there share our tables.
//! The table addresses come from the caller (PD4 first), one per level.

use super::{CardBus, GspRpc, RpcError};
use macuda_hw::gsp_rpc::copy_server_reserved_pdes as c;
use macuda_hw::le::{put_u32, put_u64};
use macuda_hw::mmu::DIRECTORY_LEVELS;
use macuda_hw::rm::control;

/// The level whose one entry covers the window (PD1).
const WINDOW_LEVEL: usize = 3;
/// The window's size: one PD1 entry's VA, 512 MiB.
pub const WINDOW_BYTES: u64 = 1 << DIRECTORY_LEVELS[WINDOW_LEVEL].va_shift;
/// Levels tinygrad counts in numLevelsToCopy (it fills one more).
pub const LEVELS_COUNTED: u32 = 3;
/// RM numbers subdevices from 1.
const FIRST_SUBDEVICE_ID: u32 = 1;

/// Why the parameters could not be built or were refused.
#[derive(Debug)]
pub enum ReservedPdesError {
    /// The window does not start on a 512 MiB boundary.
    Unaligned { base: u64 },
    /// More or fewer table addresses than the levels down to PD1.
    Levels { given: usize },
    /// RM's refusal, or the conversation's.
    Rpc(RpcError),
}

impl From<RpcError> for ReservedPdesError {
    fn from(e: RpcError) -> Self {
        Self::Rpc(e)
    }
}

/// The parameters for the window at `base`, with `tables` the video
/// memory addresses of PD4, PD3, PD2 and PD1 covering it.
///
/// # Errors
/// An unaligned window or the wrong number of tables.
pub fn encode(
    subdevice: u32,
    base: u64,
    tables: &[u64],
) -> Result<[u8; c::BYTES], ReservedPdesError> {
    if !base.is_multiple_of(WINDOW_BYTES) {
        return Err(ReservedPdesError::Unaligned { base });
    }
    if tables.len() != WINDOW_LEVEL + 1 {
        return Err(ReservedPdesError::Levels {
            given: tables.len(),
        });
    }
    let mut p = [0u8; c::BYTES];
    put_u32(&mut p, c::H_SUB_DEVICE, subdevice);
    put_u32(&mut p, c::SUB_DEVICE_ID, FIRST_SUBDEVICE_ID);
    put_u64(&mut p, c::PAGE_SIZE, WINDOW_BYTES);
    put_u64(&mut p, c::VIRT_ADDR_LO, base);
    put_u64(&mut p, c::VIRT_ADDR_HI, base + (WINDOW_BYTES - 1));
    put_u32(&mut p, c::NUM_LEVELS_TO_COPY, LEVELS_COUNTED);
    for (i, (table, level)) in tables.iter().zip(DIRECTORY_LEVELS).enumerate() {
        let at = c::LEVELS + i * c::level::BYTES;
        put_u64(&mut p, at + c::level::PHYS_ADDRESS, *table);
        put_u64(
            &mut p,
            at + c::level::SIZE,
            (1u64 << level.index_bits) * level.entry_bytes,
        );
        put_u32(&mut p, at + c::level::APERTURE, c::APERTURE_VIDEO);
        // CAST: VA shifts are below 64.
        p[at + c::level::PAGE_SHIFT] = level.va_shift as u8;
    }
    Ok(p)
}

/// Send the window's levels to GSP-RM on `va_space`.
///
/// # Errors
/// A bad window, or RM's refusal.
pub fn copy_server_reserved_pdes(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    client: u32,
    subdevice: u32,
    va_space: u32,
    base: u64,
    tables: &[u64],
) -> Result<(), ReservedPdesError> {
    let p = encode(subdevice, base, tables)?;
    rpc.rm_control(
        bus,
        client,
        va_space,
        control::VASPACE_COPY_SERVER_RESERVED_PDES,
        &p,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_hw::le::{u32_at, u64_at};

    #[test]
    fn encodes_the_window_as_tinygrad_does() {
        let p = encode(7, 1 << 29, &[0x1000, 0x2000, 0x3000, 0x4000]).unwrap();
        assert_eq!(u64_at(&p, c::PAGE_SIZE), 0x2000_0000);
        assert_eq!(u64_at(&p, c::VIRT_ADDR_HI), 0x3FFF_FFFF);
        assert_eq!(u32_at(&p, c::NUM_LEVELS_TO_COPY), 3);
        let sizes: Vec<u64> = (0..4)
            .map(|i| u64_at(&p, c::LEVELS + i * c::level::BYTES + c::level::SIZE))
            .collect();
        assert_eq!(sizes, [16, 0x1000, 0x1000, 0x1000]);
        let shifts: Vec<u8> = (0..4)
            .map(|i| p[c::LEVELS + i * c::level::BYTES + c::level::PAGE_SHIFT])
            .collect();
        assert_eq!(shifts, [56, 47, 38, 29]);
        assert_eq!(u64_at(&p, c::LEVELS + 3 * c::level::BYTES), 0x4000);
    }

    #[test]
    fn refuses_bad_windows() {
        assert!(matches!(
            encode(7, 4096, &[0; 4]),
            Err(ReservedPdesError::Unaligned { .. })
        ));
        assert!(matches!(
            encode(7, 0, &[0; 7]),
            Err(ReservedPdesError::Levels { given: 7 })
        ));
    }
}
