//! Byte-level mutations of a known-good input. Parsers are mostly broken
//! by the few bytes that say how long or how many: flipping random bits
//! reaches them slowly, so besides flips and byte sets there are the
//! values at the edges of each integer width, written where a target says
//! its header fields are, and the structural moves (cut, grow, delete,
//! duplicate, splice with another input, insert a token a text format
//! knows).

use crate::rng::Rng;

/// Byte values at the edges: zero, one, sign boundaries, all ones.
pub const INTERESTING_8: [u8; 8] = [0, 1, 0x10, 0x20, 0x40, 0x7f, 0x80, 0xff];

/// 32-bit values at the edges of sizes, counts and signed ranges.
pub const INTERESTING_32: [u32; 22] = [
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    0xf,
    0x10,
    0x20,
    0x40,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x1000,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_fffe,
    0xffff_ffff,
];

/// 64-bit values that overflow sums and products of offsets and sizes.
pub const INTERESTING_64: [u64; 8] = [
    0,
    1,
    1 << 32,
    1 << 40,
    (1 << 63) - 1,
    1 << 63,
    u64::MAX - 1,
    u64::MAX,
];

/// Most mutations applied to one input before it is tried.
const MAX_STACK: usize = 4;
/// Longest run a range mutation (delete, duplicate, extend) touches.
const MAX_RANGE: usize = 64;
/// Largest step of the add/subtract mutation.
const MAX_ARITH: u32 = 16;

/// What a target tells the mutator about its inputs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hints<'a> {
    /// Tokens of a text format (operation names, keywords, separators).
    pub dictionary: &'a [Vec<u8>],
    /// Byte offsets of header fields (lengths, counts, offsets).
    pub fields: &'a [usize],
    /// The longest input worth trying.
    pub max_len: usize,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    FlipBit,
    SetByte,
    InterestingByte,
    InterestingWord,
    Arith,
    Truncate,
    Extend,
    Delete,
    Duplicate,
    Splice,
    Token,
}

const KINDS: [Kind; 11] = [
    Kind::FlipBit,
    Kind::SetByte,
    Kind::InterestingByte,
    Kind::InterestingWord,
    Kind::Arith,
    Kind::Truncate,
    Kind::Extend,
    Kind::Delete,
    Kind::Duplicate,
    Kind::Splice,
    Kind::Token,
];

/// Apply one to [`MAX_STACK`] mutations to `input`; `other` is a second
/// input to splice from.
pub fn mutate(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8], hints: Hints<'_>) {
    let stack = 1 + rng.below(MAX_STACK);
    for _ in 0..stack {
        let kind = *rng.pick(&KINDS).unwrap_or(&Kind::FlipBit);
        apply(rng, kind, input, other, hints);
    }
    if hints.max_len > 0 {
        input.truncate(hints.max_len);
    }
}

/// A position to write `width` bytes at: a header field half the time
/// (when the target named any that fit), else anywhere.
fn position(rng: &mut Rng, len: usize, width: usize, fields: &[usize]) -> Option<usize> {
    let fitting: Vec<usize> = fields
        .iter()
        .copied()
        .filter(|&f| f + width <= len)
        .collect();
    if !fitting.is_empty() && rng.one_in(2) {
        return rng.pick(&fitting).copied();
    }
    (len >= width).then(|| rng.below(len - width + 1))
}

fn apply(rng: &mut Rng, kind: Kind, input: &mut Vec<u8>, other: &[u8], hints: Hints<'_>) {
    let len = input.len();
    match kind {
        Kind::FlipBit if len > 0 => {
            let at = rng.below(len);
            input[at] ^= 1 << rng.below(8);
        }
        Kind::SetByte if len > 0 => {
            let at = rng.below(len);
            // CAST: a random byte.
            input[at] = rng.next_u32() as u8;
        }
        Kind::InterestingByte if len > 0 => {
            let at = rng.below(len);
            input[at] = *rng.pick(&INTERESTING_8).unwrap_or(&0);
        }
        Kind::InterestingWord => interesting_word(rng, input, hints.fields),
        Kind::Arith => {
            let Some(at) = position(rng, len, 4, hints.fields) else {
                return;
            };
            let mut w = [0u8; 4];
            w.copy_from_slice(&input[at..at + 4]);
            let step = 1 + rng.next_u32() % MAX_ARITH;
            let v = u32::from_le_bytes(w);
            let v = if rng.one_in(2) {
                v.wrapping_add(step)
            } else {
                v.wrapping_sub(step)
            };
            input[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        Kind::Truncate if len > 0 => input.truncate(rng.below(len)),
        Kind::Extend => {
            let n = 1 + rng.below(MAX_RANGE);
            if rng.one_in(2) || len == 0 {
                input.extend(rng.bytes(n));
            } else {
                let start = rng.below(len);
                let end = (start + n).min(len);
                let copy = input[start..end].to_vec();
                input.extend(copy);
            }
        }
        Kind::Delete if len > 0 => {
            let start = rng.below(len);
            let end = (start + 1 + rng.below(MAX_RANGE)).min(len);
            input.drain(start..end);
        }
        Kind::Duplicate if len > 0 => {
            let start = rng.below(len);
            let end = (start + 1 + rng.below(MAX_RANGE)).min(len);
            let copy = input[start..end].to_vec();
            let at = rng.below(len + 1);
            input.splice(at..at, copy);
        }
        Kind::Splice if !other.is_empty() => {
            // Our head, the other input's tail: two valid halves often
            // make a header that lies about what follows.
            let cut = rng.below(len + 1);
            let from = rng.below(other.len());
            input.truncate(cut);
            input.extend_from_slice(&other[from..]);
        }
        Kind::Token if !hints.dictionary.is_empty() => {
            let token = rng.pick(hints.dictionary).cloned().unwrap_or_default();
            let at = rng.below(len + 1);
            if rng.one_in(2) {
                input.splice(at..at, token);
            } else {
                let end = (at + token.len()).min(len);
                input.splice(at..end, token);
            }
        }
        // A mutation that needs bytes the input lacks: grow it instead.
        _ => {
            let n = 1 + rng.below(MAX_RANGE);
            input.extend(rng.bytes(n));
        }
    }
}

/// Write an edge value of 1, 2, 4 or 8 bytes, little-endian, at a field
/// or anywhere.
fn interesting_word(rng: &mut Rng, input: &mut [u8], fields: &[usize]) {
    const WIDTHS: [usize; 4] = [1, 2, 4, 8];
    let width = *rng.pick(&WIDTHS).unwrap_or(&4);
    let Some(at) = position(rng, input.len(), width, fields) else {
        return;
    };
    let value: u64 = if width == 8 {
        *rng.pick(&INTERESTING_64).unwrap_or(&0)
    } else {
        u64::from(*rng.pick(&INTERESTING_32).unwrap_or(&0))
    };
    let bytes = value.to_le_bytes();
    input[at..at + width].copy_from_slice(&bytes[..width]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_respect_the_length_limit_and_change_the_input() {
        let mut rng = Rng::new(3);
        let seed = vec![0u8; 64];
        let hints = Hints {
            dictionary: &[b"token".to_vec()],
            fields: &[0, 8, 60],
            max_len: 100,
        };
        let mut changed = 0;
        for _ in 0..1000 {
            let mut m = seed.clone();
            mutate(&mut rng, &mut m, b"other input", hints);
            assert!(m.len() <= 100);
            changed += usize::from(m != seed);
        }
        assert!(changed > 900, "{changed}");
    }

    #[test]
    fn empty_inputs_grow() {
        let mut rng = Rng::new(4);
        for _ in 0..100 {
            let mut m = Vec::new();
            mutate(&mut rng, &mut m, &[], Hints::default());
        }
    }
}
