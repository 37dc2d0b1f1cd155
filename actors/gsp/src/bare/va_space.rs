//! A client's first objects over GSP-RM and the VA space whose page tables
//! are ours: client, device, subdevice, then a FERMI_VASPACE_A marked
//! externally owned, whose root (built by the memory actor's page-table
//! builder in video memory) is handed over with SET_PAGE_DIRECTORY, as
//! tinygrad installs its own (reference memory.md 2.1). GSP-RM then
//! points the instance block of every channel of that VA space at it.

use super::{CardBus, GspRpc, RmAlloc, RpcError};
use macuda_hw::class;
use macuda_hw::gsp_rpc::alloc_params::{device, root, subdevice, va_space};
use macuda_hw::gsp_rpc::{function, set_page_directory as spd};
use macuda_hw::le::{put_u32, put_u64};
use macuda_hw::mmu::DIRECTORY_LEVELS;
use macuda_hw::rm::vaspace;

/// The handles a client's first objects take (ours to choose).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientObjects {
    pub client: u32,
    pub device: u32,
    pub subdevice: u32,
    pub va_space: u32,
}

/// RM numbers subdevices from 1 in SET_PAGE_DIRECTORY (tinygrad sends 1
/// for the first).
const FIRST_SUBDEVICE_ID: u32 = 1;
/// No PASID: the VA space is not shared with a CPU process.
const NO_PASID: u32 = u32::MAX;

/// The user's client and its first objects: tinygrad's user client
/// number (reference 6.7) and its objects after it.
pub const USER_OBJECTS: ClientObjects = ClientObjects {
    client: 0xC100_0000,
    device: 0xC100_0001,
    subdevice: 0xC100_0002,
    va_space: 0xC100_0003,
};

/// Who builds a VA space's page tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TablesOwner {
    /// We do, over the user range, and hand GSP-RM the root
    /// ([`set_page_directory`]): the user's client.
    Driver,
    /// GSP-RM does (all parameters zero): the golden context's private
    /// client, which shares our tables only in the window it is given.
    Rm,
}

/// Allocate the client, its device and subdevice, and a VA space whose
/// page tables `owner` builds.
///
/// # Errors
/// RM's status for the first object refused, or the conversation's.
pub fn alloc_client_objects(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    h: ClientObjects,
    owner: TablesOwner,
) -> Result<(), RpcError> {
    let mut device_params = [0u8; device::BYTES];
    put_u32(&mut device_params, device::H_CLIENT_SHARE, h.client);
    let mut va_params = [0u8; va_space::BYTES];
    if owner == TablesOwner::Driver {
        put_u32(
            &mut va_params,
            va_space::FLAGS,
            vaspace::IS_EXTERNALLY_OWNED | vaspace::ENABLE_PAGE_FAULTING,
        );
        put_u64(&mut va_params, va_space::VA_BASE, vaspace::USER_BASE);
        put_u64(&mut va_params, va_space::VA_SIZE, vaspace::USER_SIZE);
    }
    for (parent, object, class, params) in [
        (0, h.client, class::NV01_ROOT, &[0u8; root::BYTES][..]),
        (h.client, h.device, class::NV01_DEVICE_0, &device_params[..]),
        (
            h.device,
            h.subdevice,
            class::NV20_SUBDEVICE_0,
            &[0u8; subdevice::BYTES][..],
        ),
        (h.device, h.va_space, class::FERMI_VASPACE_A, &va_params[..]),
    ] {
        rpc.rm_alloc(
            bus,
            &RmAlloc {
                client: h.client,
                parent,
                object,
                class,
                params,
            },
        )?;
    }
    Ok(())
}

/// Hand GSP-RM the root of our page tables for `h.va_space`: a PD4 in
/// video memory at `root`.
///
/// # Errors
/// RM's refusal, or the conversation's.
pub fn set_page_directory(
    rpc: &mut GspRpc,
    bus: &mut dyn CardBus,
    h: ClientObjects,
    root: u64,
) -> Result<(), RpcError> {
    let mut p = [0u8; spd::BYTES];
    put_u32(&mut p, spd::H_CLIENT, h.client);
    put_u32(&mut p, spd::H_DEVICE, h.device);
    put_u64(&mut p, spd::PHYS_ADDRESS, root);
    put_u32(
        &mut p,
        spd::NUM_ENTRIES,
        1 << DIRECTORY_LEVELS[0].index_bits,
    );
    put_u32(
        &mut p,
        spd::FLAGS,
        spd::FLAGS_ALL_CHANNELS | spd::APERTURE_VIDMEM,
    );
    put_u32(&mut p, spd::H_VA_SPACE, h.va_space);
    put_u32(&mut p, spd::SUB_DEVICE_ID, FIRST_SUBDEVICE_ID);
    put_u32(&mut p, spd::PASID, NO_PASID);
    let reply = rpc.call(bus, function::SET_PAGE_DIRECTORY, &p)?;
    if reply.result != 0 {
        return Err(RpcError::Rm {
            call: "SET_PAGE_DIRECTORY",
            status: reply.result,
            name: macuda_hw::rm::status::name(reply.result),
        });
    }
    Ok(())
}
