//! GSP_RM_ALLOC, GSP_RM_CONTROL and FREE: the RM API carried over RPC
//! (reference/gsp.md 6.5, 6.9). Each request is a fixed header and the
//! caller's parameters; the reply echoes it with RM's status filled in
//! (and a control's parameters written back). A refusal may show in the
//! structure's `status`, in the RPC header's `rpc_result`, or both (which
//! one RM fills is not pinned down), so both are read, and RM's status
//! becomes [`RpcError::Rm`] with its name.

use super::queue::Message;
use super::rpc_error::RpcError;
use macuda_hw::gsp_rpc::{result, rm_alloc, rm_control, rm_free};
use macuda_hw::le::{put_u32, u32_at};
use macuda_hw::rm::status;

/// rpc_result values at or above this are NV_VGPU_MSG_RESULT_* (the RPC
/// layer's own), below it RM's NV_STATUS.
const VGPU_RESULT_BASE: u32 = 0xFF00_0000;

/// An object to allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmAlloc<'a> {
    pub client: u32,
    /// 0 for a client (NV01_ROOT).
    pub parent: u32,
    pub object: u32,
    pub class: u32,
    /// The class's allocation parameters (may be empty).
    pub params: &'a [u8],
}

impl RmAlloc<'_> {
    /// GSP_RM_ALLOC's payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut p = vec![0u8; rm_alloc::BYTES];
        put_u32(&mut p, rm_alloc::H_CLIENT, self.client);
        put_u32(&mut p, rm_alloc::H_PARENT, self.parent);
        put_u32(&mut p, rm_alloc::H_OBJECT, self.object);
        put_u32(&mut p, rm_alloc::H_CLASS, self.class);
        // CAST: a class's parameters are at most a few KiB.
        put_u32(&mut p, rm_alloc::PARAMS_SIZE, self.params.len() as u32);
        p.extend_from_slice(self.params);
        p
    }
}

/// GSP_RM_CONTROL's payload.
pub fn encode_control(client: u32, object: u32, cmd: u32, params: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; rm_control::BYTES];
    put_u32(&mut p, rm_control::H_CLIENT, client);
    put_u32(&mut p, rm_control::H_OBJECT, object);
    put_u32(&mut p, rm_control::CMD, cmd);
    // CAST: a control's parameters are at most a few KiB.
    put_u32(&mut p, rm_control::PARAMS_SIZE, params.len() as u32);
    p.extend_from_slice(params);
    p
}

/// FREE's payload: `object` under `parent` of `client` (the client itself
/// when `object` is the client).
pub fn encode_free(client: u32, parent: u32, object: u32) -> Vec<u8> {
    let mut p = vec![0u8; rm_free::BYTES];
    put_u32(&mut p, rm_free::H_ROOT, client);
    put_u32(&mut p, rm_free::H_OBJECT_PARENT, parent);
    put_u32(&mut p, rm_free::H_OBJECT_OLD, object);
    p
}

/// The name of an NV_VGPU_MSG_RESULT_*.
fn vgpu_result_name(r: u32) -> &'static str {
    result::ALL
        .iter()
        .find(|(_, v)| *v == r)
        .map_or("an RPC result we do not name", |(n, _)| n)
}

/// RM's verdict on a call: the structure's status first (RM's own
/// answer), then the RPC header's result.
fn verdict(
    call: &'static str,
    function: u32,
    rpc_result: u32,
    rm_status: u32,
) -> Result<(), RpcError> {
    if rm_status != 0 {
        return Err(RpcError::Rm {
            call,
            status: rm_status,
            name: status::name(rm_status),
        });
    }
    match rpc_result {
        result::SUCCESS => Ok(()),
        r if r >= VGPU_RESULT_BASE => Err(RpcError::RpcResult {
            function,
            result: r,
            name: vgpu_result_name(r),
        }),
        r => Err(RpcError::Rm {
            call,
            status: r,
            name: status::name(r),
        }),
    }
}

/// The reply's echoed header and `params` bytes after it, checked long
/// enough; the status at `status_at`.
fn echoed<'m>(
    call: &'static str,
    reply: &'m Message,
    header: usize,
    status_at: usize,
    params: usize,
) -> Result<&'m [u8], RpcError> {
    let need = header + params;
    let short = || RpcError::ShortReply {
        call,
        len: reply.payload.len(),
        need,
    };
    if reply.payload.len() < header {
        // Too short to hold a status: the RPC result is all there is.
        verdict(call, reply.function, reply.result, 0)?;
        return Err(short());
    }
    verdict(
        call,
        reply.function,
        reply.result,
        u32_at(&reply.payload, status_at),
    )?;
    reply.payload.get(header..need).ok_or_else(short)
}

/// The allocation's parameters as RM left them.
///
/// # Errors
/// RM's refusal, or a reply too short.
pub fn decode_alloc_reply(reply: &Message, params: usize) -> Result<Vec<u8>, RpcError> {
    echoed(
        "GSP_RM_ALLOC",
        reply,
        rm_alloc::BYTES,
        rm_alloc::STATUS,
        params,
    )
    .map(<[u8]>::to_vec)
}

/// The control's parameters as RM filled them.
///
/// # Errors
/// RM's refusal, or a reply too short.
pub fn decode_control_reply(reply: &Message, params: usize) -> Result<Vec<u8>, RpcError> {
    echoed(
        "GSP_RM_CONTROL",
        reply,
        rm_control::BYTES,
        rm_control::STATUS,
        params,
    )
    .map(<[u8]>::to_vec)
}

/// # Errors
/// RM's refusal, or a reply too short.
pub fn decode_free_reply(reply: &Message) -> Result<(), RpcError> {
    echoed("FREE", reply, rm_free::BYTES, rm_free::STATUS, 0).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_hw::gsp_rpc::function;

    fn reply(function: u32, result: u32, payload: Vec<u8>) -> Message {
        Message {
            seq: 0,
            function,
            result,
            payload,
        }
    }

    #[test]
    fn requests_are_laid_out_as_rm_reads_them() {
        let a = RmAlloc {
            client: 0xC1D0_0001,
            parent: 0xC1D0_0001,
            object: 0xCF00_0001,
            class: 0x80,
            params: &[9; 56],
        }
        .encode();
        assert_eq!(a.len(), 32 + 56);
        assert_eq!(u32_at(&a, rm_alloc::H_OBJECT), 0xCF00_0001);
        assert_eq!(u32_at(&a, rm_alloc::H_CLASS), 0x80);
        assert_eq!(u32_at(&a, rm_alloc::PARAMS_SIZE), 56);
        let c = encode_control(1, 2, 0x2080_0110, &[0; 8]);
        assert_eq!((u32_at(&c, rm_control::CMD), c.len()), (0x2080_0110, 32));
        let f = encode_free(1, 1, 5);
        assert_eq!(u32_at(&f, rm_free::H_OBJECT_OLD), 5);
    }

    #[test]
    fn rm_status_and_rpc_results_become_typed_errors() {
        let mut p = vec![0u8; rm_control::BYTES + 4];
        put_u32(&mut p, rm_control::STATUS, status::INVALID_OBJECT_PARENT);
        let e =
            decode_control_reply(&reply(function::GSP_RM_CONTROL, 0, p.clone()), 4).unwrap_err();
        assert_eq!(e.rm_status(), Some(status::INVALID_OBJECT_PARENT));
        assert!(
            e.to_string().contains("NV_ERR_INVALID_OBJECT_PARENT"),
            "{e}"
        );
        put_u32(&mut p, rm_control::STATUS, 0);
        put_u32(&mut p, rm_control::BYTES, 0xABCD);
        let ok = decode_control_reply(&reply(function::GSP_RM_CONTROL, 0, p.clone()), 4);
        assert_eq!(ok.unwrap(), 0xABCDu32.to_le_bytes());
        let e = decode_control_reply(
            &reply(function::GSP_RM_CONTROL, result::RPC_UNKNOWN_FUNCTION, p),
            4,
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                RpcError::RpcResult {
                    result: result::RPC_UNKNOWN_FUNCTION,
                    ..
                }
            ),
            "{e}"
        );
        let e = decode_alloc_reply(
            &reply(function::GSP_RM_ALLOC, status::INVALID_CLIENT, vec![0; 4]),
            0,
        )
        .unwrap_err();
        assert_eq!(e.rm_status(), Some(status::INVALID_CLIENT));
        let e = decode_free_reply(&reply(function::FREE, 0, vec![0; 3])).unwrap_err();
        assert!(matches!(e, RpcError::ShortReply { need: 16, .. }), "{e}");
    }
}
