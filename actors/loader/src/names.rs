//! Matching the kernel name host code registers with the one in the cubin.
//! nvcc registers the device's own mangled name, so the two are equal; a
//! clang host compile (macOS) mangles with its own rules and host headers,
//! so the names differ where the reference (cuda-binary-and-runtime-abi.md
//! 4.6) says they do. Both sides are demangled and brought to one form:
//! nvcc's per-file `_INTERNAL_<id>` namespace dropped, anonymous namespaces
//! named one way, `long long` folded to `long` (int64_t is `long long` in
//! macOS headers, `long` in Linux ones). The internal-linkage marker clang
//! adds (`_ZL`) does not survive demangling, so it needs no rule.

use cpp_demangle::{DemangleOptions, Symbol};
use std::collections::{HashMap, HashSet};

/// A module's names, exactly and in comparable form, for finding the one
/// host code registered.
#[derive(Debug, Default)]
pub struct NameIndex {
    exact: HashSet<String>,
    /// `None` where two names share a form: those match only exactly.
    by_form: HashMap<String, Option<String>>,
}

impl NameIndex {
    pub fn new(names: impl IntoIterator<Item = String>) -> NameIndex {
        let mut n = NameIndex::default();
        for name in names {
            if let Some(form) = comparable(&name) {
                n.by_form
                    .entry(form)
                    .and_modify(|e| *e = None)
                    .or_insert_with(|| Some(name.clone()));
            }
            n.exact.insert(name);
        }
        n
    }

    /// The module's name for a registered one: the same name, or the one
    /// name of the same comparable form.
    pub fn find(&self, registered: &str) -> Option<String> {
        if self.exact.contains(registered) {
            return Some(registered.to_string());
        }
        self.by_form.get(&comparable(registered)?)?.clone()
    }
}

/// The form both sides are compared in; `None` for a name that does not
/// demangle (`extern "C"` kernels: those match exactly or not at all).
pub fn comparable(mangled: &str) -> Option<String> {
    let symbol = Symbol::new(mangled).ok()?;
    let text = symbol.demangle(&DemangleOptions::default()).ok()?;
    Some(normalize(&text))
}

const ANONYMOUS: &str = "(anonymous namespace)";

/// Apply the three rules to demangled text.
pub fn normalize(demangled: &str) -> String {
    let mut out = String::with_capacity(demangled.len());
    let mut rest = demangled;
    while !rest.is_empty() {
        let word_start = !out
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if word_start {
            if let Some(tail) = strip_scope(rest, "_INTERNAL_") {
                rest = tail;
                continue;
            }
            if let Some(tail) = identifier_after(rest, "_GLOBAL__N") {
                out.push_str(ANONYMOUS);
                rest = tail;
                continue;
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    out.replace("long long", "long")
}

/// At an identifier starting with `prefix`: the text after the identifier
/// and its `::`.
fn strip_scope<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let tail = identifier_after(s, prefix)?;
    tail.strip_prefix("::")
}

/// At an identifier starting with `prefix`: the text after the identifier.
fn identifier_after<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    if !s.starts_with(prefix) {
        return None;
    }
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map_or(s.len(), |(i, _)| i);
    Some(&s[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_template_as_a_template_argument_matches_in_clangs_abi_17_mangling() {
        // ggml-cuda's getrows.cu: nvcc's name, clang 19's with
        // -fclang-abi-compat=17 (the split build's host halves), and clang
        // 19's own, which spells the parameter's type out (`Tn...`).
        let nvcc = comparable("_Z13k_get_rows_kqIfXadL_ZN46_INTERNAL_d3881d02_10_getrows_cu_a5ed39ba_116916dequantize_mxfp4IfEEvPKvlPT_iEEEvS3_PKiS5_ll5uint3mmmmmmmmm");
        let clang17 = comparable("_ZL13k_get_rows_kqIfXadL_ZL16dequantize_mxfp4IfEvPKvlPT_iEEEvS2_PKiS4_ll5uint3mmmmmmmmm");
        let clang19 = comparable("_ZL13k_get_rows_kqIfTnPFvPKvlPT_iEXadL_ZL16dequantize_mxfp4IfEvS1_lS3_iEEEvS1_PKiS3_ll5uint3mmmmmmmmm");
        eprintln!("{nvcc:?}\n{clang17:?}\n{clang19:?}");
        assert!(nvcc.is_some());
        assert_eq!(nvcc, clang17);
        assert_ne!(nvcc, clang19);
    }

    #[test]
    fn the_internal_namespace_and_linkage_marker_drop_out() {
        // The reference's pair (4.6), clang's and nvcc's.
        let clang = comparable("_Z6fptmplIXadL_ZL8static_ffEEEvPf").unwrap();
        let nvcc = comparable("_Z6fptmplIXadL_ZN30_INTERNAL_64ce26ef_4_k_cu_ctab8static_fEfEEEvPf")
            .unwrap();
        assert_eq!(clang, nvcc);
        assert_eq!(
            comparable("_ZL11static_kernPi"),
            comparable("_Z11static_kernPi")
        );
    }

    #[test]
    fn anonymous_namespaces_are_named_one_way() {
        let clang = comparable("_Z6fptmplIXadL_ZN12_GLOBAL__N_16anon_fEfEEEvPf").unwrap();
        let nvcc = comparable(
            "_Z6fptmplIXadL_ZN30_INTERNAL_64ce26ef_4_k_cu_ctab32_GLOBAL__N__64ce26ef_4_k_cu_ctab6anon_fEfEEEvPf",
        )
        .unwrap();
        assert_eq!(clang, nvcc);
        assert!(clang.contains(ANONYMOUS), "{clang}");
    }

    #[test]
    fn long_long_is_long() {
        assert_eq!(comparable("_Z3k64Pxx"), comparable("_Z3k64Pll"));
        assert_eq!(comparable("_Z3u64Pyy"), comparable("_Z3u64Pmm"));
        assert_ne!(comparable("_Z3k64Pxx"), comparable("_Z3k64Pii"));
    }

    #[test]
    fn an_ambiguous_form_matches_only_exactly() {
        let idx = NameIndex::new(["_Z1fPl".to_string(), "_Z1fPx".to_string()]);
        assert_eq!(idx.find("_Z1fPl").as_deref(), Some("_Z1fPl"));
        assert_eq!(idx.find("_Z1fPx").as_deref(), Some("_Z1fPx"));
        let one = NameIndex::new(["_Z1fPl".to_string()]);
        assert_eq!(one.find("_Z1fPx").as_deref(), Some("_Z1fPl"));
        assert_eq!(one.find("_Z1gPx"), None);
    }

    #[test]
    fn different_kernels_stay_different() {
        assert_ne!(comparable("_Z4kernPfi"), comparable("_Z4kernPfj"));
        assert_ne!(
            comparable("_ZN30_INTERNAL_64ce26ef_4_k_cu_ctab1aEv"),
            comparable("_ZN30_INTERNAL_64ce26ef_4_k_cu_ctab1bEv")
        );
        assert_eq!(
            comparable("vector_add"),
            None,
            "extern \"C\" names do not demangle"
        );
        // A user identifier that merely contains the prefix is kept.
        assert_eq!(normalize("my_INTERNAL_x::f()"), "my_INTERNAL_x::f()");
    }
}
