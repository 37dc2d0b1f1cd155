//! Which bank-0 templates a token's launches left in the descriptor shadow,
//! so a token that repeats the last one writes only the words that change.

use crate::lane::KernelId;

/// Which kernel's bank-0 template each launch of the current and the last
/// token left in the shadow. Descriptors restart at a standstill, so when a
/// token repeats the last one launch for launch, launch k's slot still holds
/// the template of the same kernel and only its changing words need writing.
#[derive(Default)]
pub(crate) struct TokenTemplates {
    last: Vec<(KernelId, u64)>,
    current: Vec<(KernelId, u64)>,
    /// The current token has matched the last one so far, without wrapping.
    aligned: bool,
    /// The current token wrapped the region: its late launches overwrote
    /// its early slots, so the next token cannot trust any of them.
    wrapped: bool,
}

impl TokenTemplates {
    /// Note a launch; whether its slot already holds the kernel's template.
    #[inline]
    pub(crate) fn place(&mut self, kernel: KernelId, offset: u64) -> bool {
        let k = self.current.len();
        if self.current.last().is_some_and(|&(_, prev)| offset < prev) {
            // The region wrapped inside the token: later slots were
            // overwritten by this token's own launches.
            self.aligned = false;
            self.wrapped = true;
        }
        self.aligned &= self.last.get(k) == Some(&(kernel, offset));
        self.current.push((kernel, offset));
        self.aligned
    }

    /// A standstill: the next token starts the region again.
    pub(crate) fn standstill(&mut self) {
        std::mem::swap(&mut self.last, &mut self.current);
        self.current.clear();
        if std::mem::take(&mut self.wrapped) {
            self.last.clear();
        }
        self.aligned = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_token_reuses_templates_until_it_diverges() {
        let (a, b) = (KernelId(0), KernelId(1));
        let mut t = TokenTemplates::default();
        t.standstill();
        assert!(!t.place(a, 0), "first token: nothing written before");
        assert!(!t.place(b, 512));
        t.standstill();
        assert!(t.place(a, 0));
        assert!(t.place(b, 512));
        t.standstill();
        assert!(t.place(a, 0));
        assert!(!t.place(a, 512), "another kernel held this slot");
        assert!(!t.place(b, 1024), "no trust after a divergence");
    }

    #[test]
    fn a_token_that_wrapped_leaves_nothing_to_reuse() {
        let (a, b) = (KernelId(0), KernelId(1));
        let mut t = TokenTemplates::default();
        t.standstill();
        t.place(a, 0);
        t.place(b, 512);
        // Wraps: b's launch overwrote slot 0 after a's launch wrote it.
        t.place(b, 0);
        t.standstill();
        assert!(!t.place(a, 0), "slot 0 last held b's template");
    }
}
