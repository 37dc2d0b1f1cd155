//! GET_GSP_STATIC_INFO, asked right after GSP_INIT_DONE as RM asks it: what
//! GSP-RM says of the card once it runs (its name, FB length, L2, the FB
//! regions it leaves to the driver, its own client's handles). The regions
//! are the firmware's word on where a driver may allocate: the boot checks
//! them against WPR2 rather than assuming a hold-back.

use super::{CardBus, GspRpc, RpcError};
use macuda_hw::gsp_rpc::function;
use macuda_hw::gsp_rpc::static_info::{self as si, fb_regions as r};
use macuda_hw::le::{u32_at, u64_at};
use std::ops::Range;

/// Why a GET_GSP_STATIC_INFO reply could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StaticInfoError {
    #[error(transparent)]
    Rpc(#[from] RpcError),
    #[error("the reply is {len} bytes, shorter than GspStaticConfigInfo_t's {need}")]
    Short { len: usize, need: usize },
    #[error("the reply names {count} FB regions; the structure holds {max}")]
    TooManyRegions { count: u32, max: usize },
    #[error("FB region {index} runs from {base:#x} to {limit:#x}, backwards")]
    BackwardsRegion { index: usize, base: u64, limit: u64 },
}

/// What GSP-RM reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GspStaticInfo {
    pub name: String,
    pub short_name: String,
    pub fb_length: u64,
    pub l2_bytes: u32,
    /// The FB regions left to the driver, `[base, limit + 1)`.
    pub fb_regions: Vec<Range<u64>>,
    /// GSP-RM's own client, device and subdevice.
    pub internal_client: u32,
    pub internal_device: u32,
    pub internal_subdevice: u32,
}

/// A NUL-terminated name in its fixed field, lossily as UTF-8.
fn name_at(p: &[u8], at: usize) -> String {
    let field = &p[at..at + si::NAME_BYTES];
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

impl GspStaticInfo {
    /// Decode a reply.
    ///
    /// # Errors
    /// A short reply, more regions than the structure holds, or a region
    /// whose limit is below its base.
    pub fn decode(p: &[u8]) -> Result<GspStaticInfo, StaticInfoError> {
        if p.len() < si::BYTES {
            return Err(StaticInfoError::Short {
                len: p.len(),
                need: si::BYTES,
            });
        }
        let regions = si::FB_REGION_INFO;
        let count = u32_at(p, regions + r::COUNT);
        let n = usize::try_from(count)
            .ok()
            .filter(|&n| n <= r::MAX)
            .ok_or(StaticInfoError::TooManyRegions { count, max: r::MAX })?;
        let fb_regions = (0..n)
            .map(|index| {
                let at = regions + r::FIRST + index * r::REGION_BYTES;
                let (base, limit) = (u64_at(p, at + r::BASE), u64_at(p, at + r::LIMIT));
                if limit < base || limit == u64::MAX {
                    return Err(StaticInfoError::BackwardsRegion { index, base, limit });
                }
                Ok(base..limit + 1)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(GspStaticInfo {
            name: name_at(p, si::GPU_NAME_STRING),
            short_name: name_at(p, si::GPU_SHORT_NAME_STRING),
            fb_length: u64_at(p, si::FB_LENGTH),
            l2_bytes: u32_at(p, si::L2_CACHE_SIZE),
            fb_regions,
            internal_client: u32_at(p, si::H_INTERNAL_CLIENT),
            internal_device: u32_at(p, si::H_INTERNAL_DEVICE),
            internal_subdevice: u32_at(p, si::H_INTERNAL_SUBDEVICE),
        })
    }

    /// Ask GSP-RM for it.
    ///
    /// # Errors
    /// The call's, or the reply's.
    pub fn ask(rpc: &mut GspRpc, bus: &mut dyn CardBus) -> Result<GspStaticInfo, StaticInfoError> {
        let request = vec![0u8; si::BYTES];
        let reply = rpc.call(bus, function::GET_GSP_STATIC_INFO, &request)?;
        GspStaticInfo::decode(&reply.payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_hw::le::{put_u32, put_u64};

    fn reply_with(regions: &[(u64, u64)]) -> Vec<u8> {
        let mut p = vec![0u8; si::BYTES];
        p[si::GPU_NAME_STRING..][..9].copy_from_slice(b"A GPU\0xyz");
        put_u64(&mut p, si::FB_LENGTH, 32 << 30);
        put_u32(&mut p, si::FB_REGION_INFO + r::COUNT, regions.len() as u32);
        for (i, (base, limit)) in regions.iter().enumerate() {
            let at = si::FB_REGION_INFO + r::FIRST + i * r::REGION_BYTES;
            put_u64(&mut p, at + r::BASE, *base);
            put_u64(&mut p, at + r::LIMIT, *limit);
        }
        p
    }

    #[test]
    fn regions_are_half_open_and_names_stop_at_their_nul() {
        let info = GspStaticInfo::decode(&reply_with(&[(0, 0x7_EFFF_FFFF)])).unwrap();
        assert_eq!(info.fb_regions, vec![0..0x7_F000_0000]);
        assert_eq!(info.name, "A GPU");
        assert_eq!(info.fb_length, 32 << 30);
    }

    #[test]
    fn malformed_replies_are_named() {
        assert!(matches!(
            GspStaticInfo::decode(&[0; 100]),
            Err(StaticInfoError::Short { len: 100, .. })
        ));
        let mut p = reply_with(&[]);
        put_u32(&mut p, si::FB_REGION_INFO + r::COUNT, 17);
        assert!(matches!(
            GspStaticInfo::decode(&p),
            Err(StaticInfoError::TooManyRegions { count: 17, .. })
        ));
        assert!(matches!(
            GspStaticInfo::decode(&reply_with(&[(0x2000, 0x1000)])),
            Err(StaticInfoError::BackwardsRegion { index: 0, .. })
        ));
    }
}
