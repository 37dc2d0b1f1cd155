//! What can go wrong while staging the boot in host memory and asking the
//! FSP to start it. Each variant says which step failed and with what, so
//! a failed boot reads as a sentence rather than a transport code.

use macuda_pci::PciError;
use std::time::Duration;

/// Why the bare-metal boot stopped.
#[derive(Debug, thiserror::Error)]
pub enum BareError {
    /// The transport refused a register access, a mapping or a DMA copy.
    #[error("{context}")]
    Transport {
        /// What the boot was doing, e.g. "writing the radix3 table".
        context: String,
        #[source]
        source: PciError,
    },
    /// A piece could not be placed in host memory the card reaches in one
    /// bus-contiguous run (the transport's mappings are scattered).
    #[error(
        "{what} needs {bytes} bus-contiguous bytes; a fresh mapping's largest run was {largest}"
    )]
    NoContiguousRun {
        what: String,
        bytes: u64,
        largest: u64,
    },
    /// An image is larger than the structure that describes it can name.
    #[error("{what} is {bytes} bytes, more than the {limit} it may be")]
    TooLarge {
        what: &'static str,
        bytes: u64,
        limit: u64,
    },
    /// The libos page has room for no more regions.
    #[error("the libos page holds {max} regions; {what} would be one more")]
    LibosPageFull { what: String, max: usize },
    /// A libos region's name is not an id8: at most 8 ASCII characters.
    #[error("`{name}` cannot name a libos region (at most 8 ASCII characters)")]
    BadRegionName { name: String },
    /// The packet would not fit the FSP's EMEM channel.
    #[error("a {bytes}-byte packet does not fit the FSP's {max}-byte EMEM channel")]
    PacketTooLarge { bytes: usize, max: usize },
    /// EMEM's position did not advance by what was written: the FSP did
    /// not take every dword.
    #[error("EMEM is at dword {found} after writing {expected} dwords")]
    EmemPosition { expected: u32, found: u32 },
    /// A wait ran out; `state` names the registers that were watched.
    #[error("timed out after {waited:?} waiting for {what} ({state})")]
    Timeout {
        what: &'static str,
        waited: Duration,
        state: String,
    },
    /// The FSP answered with something other than a single-packet
    /// command response to the COT.
    #[error("the FSP's response is malformed: {why}")]
    BadResponse { why: String },
    /// The FSP refused the COT request: it left this code in its
    /// response (and, on real cards, its debug scratch). The codes are
    /// the FSP's own; RM maps all but a few to NV_ERR_GENERIC.
    #[error("the FSP refused the chain-of-trust request with error code {code:#x}")]
    FspRefused { code: u32 },
}

/// Adds what the boot was doing to a transport error.
pub(crate) trait Context<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, BareError>;
}

impl<T> Context<T> for Result<T, PciError> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, BareError> {
        self.map_err(|source| BareError::Transport {
            context: what(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_step_and_the_code() {
        let e = Err::<(), _>(PciError::OutOfRange {
            what: "region 3".into(),
            offset: 0,
            len: 8,
            size: 0,
        })
        .context(|| "writing the WPR meta".into())
        .unwrap_err();
        assert_eq!(e.to_string(), "writing the WPR meta");
        assert!(std::error::Error::source(&e).is_some());
        let e = BareError::FspRefused { code: 0x1d };
        assert!(e.to_string().contains("0x1d"), "{e}");
    }
}
