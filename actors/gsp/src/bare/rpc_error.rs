//! What can go wrong speaking RPC with GSP-RM: the transport, a status
//! queue that breaks the protocol (each check names what it found), a
//! wait that ran out (naming what was awaited), and GSP-RM refusing a
//! call (its status code, by name).

use crate::sequencer::SequencerError;
use macuda_pci::PciError;
use std::time::Duration;

/// Why an RPC did not complete.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("the card: {0}")]
    Bus(#[from] PciError),
    #[error("byte {offset:#x} of a {bytes}-byte DMA mapping is not reachable by the card")]
    Unreachable { offset: u64, bytes: u64 },
    #[error("GSP-RM did not publish the status queue within {waited:?}")]
    NotLinked { waited: Duration },
    #[error("the status queue's header: {field} is {got:#x}, not {want:#x}")]
    StatusHeader {
        field: &'static str,
        got: u32,
        want: u32,
    },
    #[error("the {which} pointer {value} is past the queue's {count} elements")]
    Pointer {
        which: &'static str,
        value: u32,
        count: u32,
    },
    #[error("status message {seq} (function {function:#x}): checksum {stored:#010x} stored, {computed:#010x} computed")]
    Checksum {
        seq: u32,
        function: u32,
        stored: u32,
        computed: u32,
    },
    #[error("status message numbered {got} arrived when {expected} was next")]
    OutOfSequence { got: u32, expected: u32 },
    #[error("status message {seq}: rpc length {length} is outside {min}..={max}")]
    Length {
        seq: u32,
        length: usize,
        min: usize,
        max: usize,
    },
    #[error("status message {seq}: elemCount {elem_count} for an rpc of {length} bytes ({want} elements)")]
    ElementCount {
        seq: u32,
        elem_count: u32,
        length: usize,
        want: usize,
    },
    #[error("status message {seq} is truncated: {elem_count} elements claimed, {written} written")]
    Truncated {
        seq: u32,
        elem_count: u32,
        written: u32,
    },
    #[error("status message {seq}: header version {version:#x} and signature {signature:#x}, not {want_version:#x} and {want_signature:#x}")]
    Header {
        seq: u32,
        version: u32,
        signature: u32,
        want_version: u32,
        want_signature: u32,
    },
    #[error("a continuation record (status message {seq}) with no message before it")]
    StrayContinuation { seq: u32 },
    #[error("function {function:#x} had {had} of its {whole} bytes when status message {seq} (function {by:#x}) came")]
    ContinuationCut {
        function: u32,
        had: usize,
        whole: usize,
        seq: u32,
        by: u32,
    },
    #[error("continuation records carried {got} bytes of a {whole}-byte function {function:#x}")]
    ContinuationOverrun {
        function: u32,
        got: usize,
        whole: usize,
    },
    #[error("a {bytes}-byte command payload is larger than the queue can carry ({max})")]
    TooLarge { bytes: usize, max: usize },
    #[error("the command queue had no room for {elements} elements within {waited:?}")]
    NoRoom { elements: u32, waited: Duration },
    #[error("no {awaiting} from GSP-RM within {waited:?}")]
    Timeout { awaiting: String, waited: Duration },
    #[error("GSP-RM's init failed: GSP_INIT_DONE carried result {result:#x}")]
    InitFailed { result: u32 },
    #[error("GSP-RM answered function {function:#x} with RPC result {result:#x} ({name})")]
    RpcResult {
        function: u32,
        result: u32,
        name: &'static str,
    },
    #[error("{call}: RM status {status:#x} ({name})")]
    Rm {
        call: &'static str,
        status: u32,
        name: &'static str,
    },
    #[error("the reply to {call} is {len} bytes, shorter than the {need} it must echo")]
    ShortReply {
        call: &'static str,
        len: usize,
        need: usize,
    },
    #[error("the CPU-sequencer script GSP-RM sent: {0}")]
    Sequencer(#[from] SequencerError),
}

impl RpcError {
    /// RM's status code, when GSP-RM refused a call.
    pub fn rm_status(&self) -> Option<u32> {
        match self {
            RpcError::Rm { status, .. } => Some(*status),
            _ => None,
        }
    }
}
