//! Commands longer than one record arrive as continuation records
//! (reference/gsp.md 5.7): a first record under the command's own
//! function with a full payload, then CONTINUATION_RECORDs carrying the
//! rest, each a message of its own. A command is whole once its own
//! header's length is in (an allocation's or a control's parameter size,
//! a registry table's size); a continuation with nothing before it, a
//! command cut short by another, or a command that runs past its length
//! stops GSP-RM as a protocol fault.

use super::calls::{alloc_at, control_at};
use super::queues::{Command, QueueFault};
use macuda_hw::gsp_rpc::{function, RPC_PAYLOAD_MAX};
use macuda_hw::le::u32_at;

/// The payload bytes a command of `function` needs, where its payload
/// says: (at most the first record's bytes are read).
fn whole_length(function: u32, payload: &[u8]) -> Option<usize> {
    let at = |o: usize| (payload.len() >= o + 4).then(|| u32_at(payload, o) as usize);
    match function {
        function::GSP_RM_ALLOC => Some(alloc_at::BYTES + at(alloc_at::PARAMS_SIZE)?),
        function::GSP_RM_CONTROL => Some(control_at::BYTES + at(control_at::PARAMS_SIZE)?),
        // PACKED_REGISTRY_TABLE's own size.
        function::SET_REGISTRY => at(0),
        _ => None,
    }
}

/// A command being put together from its records.
#[derive(Default)]
pub struct Reassembly {
    pending: Option<(Command, usize)>,
}

impl Reassembly {
    /// Take one record; a whole command once it is in.
    ///
    /// # Errors
    /// A continuation with no command before it, a command cut short by
    /// another, or one longer than its own length says.
    pub fn take(&mut self, record: Command) -> Result<Option<Command>, QueueFault> {
        let bad = |seq, what: String| Err(QueueFault::Message { seq, what });
        if record.function == function::CONTINUATION_RECORD {
            let Some((mut cmd, whole)) = self.pending.take() else {
                return bad(
                    record.seq,
                    "a continuation record with no command before it".into(),
                );
            };
            cmd.payload.extend(record.payload);
            return match cmd.payload.len() {
                n if n < whole => {
                    self.pending = Some((cmd, whole));
                    Ok(None)
                }
                n if n == whole => Ok(Some(cmd)),
                n => bad(
                    record.seq,
                    format!("continuation records carried {n} bytes of a {whole}-byte command"),
                ),
            };
        }
        if let Some((cmd, whole)) = self.pending.take() {
            return bad(
                record.seq,
                format!(
                    "function {} came while command {} (seq {}) had {} of its {whole} bytes",
                    record.function,
                    cmd.function,
                    cmd.seq,
                    cmd.payload.len()
                ),
            );
        }
        match whole_length(record.function, &record.payload) {
            Some(whole) if record.payload.len() == RPC_PAYLOAD_MAX && whole > RPC_PAYLOAD_MAX => {
                self.pending = Some((record, whole));
                Ok(None)
            }
            _ => Ok(Some(record)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u32, function: u32, payload: Vec<u8>) -> Command {
        Command {
            seq,
            function,
            payload,
        }
    }

    fn registry(size: usize) -> Vec<u8> {
        let mut p = vec![7u8; size];
        p[..4].copy_from_slice(&(size as u32).to_le_bytes());
        p
    }

    #[test]
    fn a_long_command_comes_whole_from_its_records() {
        let whole = registry(RPC_PAYLOAD_MAX * 2 + 100);
        let mut r = Reassembly::default();
        let chunks: Vec<&[u8]> = whole.chunks(RPC_PAYLOAD_MAX).collect();
        assert_eq!(
            r.take(record(5, function::SET_REGISTRY, chunks[0].to_vec())),
            Ok(None)
        );
        assert_eq!(
            r.take(record(6, function::CONTINUATION_RECORD, chunks[1].to_vec())),
            Ok(None)
        );
        let cmd = r
            .take(record(7, function::CONTINUATION_RECORD, chunks[2].to_vec()))
            .unwrap()
            .expect("whole");
        assert_eq!(
            (cmd.seq, cmd.function, cmd.payload),
            (5, function::SET_REGISTRY, whole)
        );
        // A short command passes straight through.
        let small = record(8, function::SET_REGISTRY, registry(64));
        assert_eq!(r.take(small.clone()), Ok(Some(small)));
    }

    #[test]
    fn stray_cut_short_or_overlong_continuations_are_faults() {
        let mut r = Reassembly::default();
        assert!(
            r.take(record(0, function::CONTINUATION_RECORD, vec![0; 8]))
                .is_err(),
            "stray"
        );
        let whole = registry(RPC_PAYLOAD_MAX + 10);
        r.take(record(
            1,
            function::SET_REGISTRY,
            whole[..RPC_PAYLOAD_MAX].to_vec(),
        ))
        .unwrap();
        let e = r.take(record(2, function::NOP, vec![])).unwrap_err();
        assert!(e.to_string().contains("had 65456 of its"), "{e}");
        r.take(record(
            3,
            function::SET_REGISTRY,
            whole[..RPC_PAYLOAD_MAX].to_vec(),
        ))
        .unwrap();
        assert!(
            r.take(record(4, function::CONTINUATION_RECORD, vec![0; 11]))
                .is_err(),
            "overlong"
        );
    }
}
