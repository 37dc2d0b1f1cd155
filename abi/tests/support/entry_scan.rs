//! The functions a library's sources define with a foreign ABI (`extern
//! "C" fn`, or any ABI other than Rust's), by name: what the entry-panic
//! tests (abi/tests/entry_panics.rs, abi/cublas/tests/entry_panics.rs)
//! hold their lists to, so that an entry added without a probe fails
//! them. Shared by path: the two libraries are separate crates.
//!
//! It reads the text, not the compiled library: the symbols in a built
//! archive depend on which build of it a test finds in a target folder
//! others share, while the sources are the ones the test was built from.
//! Entries a `macro_rules!` stamps out are followed to their invocations
//! in the same file; a form it cannot follow fails loudly, as a silent
//! miss would defeat the check.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Keep the panics a test injects (their payload is `payload`) off
/// stderr; any other panic is reported as before.
pub fn hush_panics_carrying(payload: &'static str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let others = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&payload) {
                others(info);
            }
        }));
    });
}

/// How many probes each family has.
pub fn by_family<'a>(families: impl IntoIterator<Item = &'a str>) -> BTreeMap<&'a str, usize> {
    let mut counts = BTreeMap::new();
    for f in families {
        *counts.entry(f).or_default() += 1;
    }
    counts
}

/// Every foreign-ABI function under `src` is in `probed` or `exempt`
/// (name, reason), never both, and each listed name is one the sources
/// define.
pub fn assert_probed_or_exempt(src: &Path, probed: &[&str], exempt: &[(&str, &str)]) {
    let defined = foreign_functions(src);
    let probed_set: BTreeSet<String> = probed.iter().map(|n| n.to_string()).collect();
    assert_eq!(probed_set.len(), probed.len(), "an entry is probed twice");
    let exempt: BTreeSet<String> = exempt.iter().map(|(n, _)| n.to_string()).collect();
    let probed = probed_set;
    let unprobed: Vec<_> = defined
        .iter()
        .filter(|n| !probed.contains(*n) && !exempt.contains(*n))
        .collect();
    assert!(
        unprobed.is_empty(),
        "entries no probe calls (add each to probes(), or to EXEMPT with its reason): {unprobed:?}"
    );
    let gone: Vec<_> = probed
        .union(&exempt)
        .filter(|n| !defined.contains(*n))
        .collect();
    assert!(gone.is_empty(), "listed but not in the sources: {gone:?}");
    let both: Vec<_> = probed.intersection(&exempt).collect();
    assert!(both.is_empty(), "probed and exempt: {both:?}");
}

/// The names of the functions with a foreign ABI that the `.rs` files
/// under `src` define (the library's sources; `src/bin`, other targets,
/// is left out).
pub fn foreign_functions(src: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(src, &src.join("bin"), &mut files);
    assert!(!files.is_empty(), "no sources under {}", src.display());
    files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            in_file(&without_line_comments(&text))
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()))
        })
        .collect()
}

fn rust_files(dir: &Path, skip: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path == skip {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, skip, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text with `//` comments (doc comments too) cut, so that prose
/// naming an entry is not taken for one.
fn without_line_comments(text: &str) -> String {
    text.lines()
        .map(|l| l.find("//").map_or(l, |at| &l[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The identifier at the start of `s` (after blanks), with a leading `$`
/// kept for a macro's metavariable.
fn ident_at(s: &str) -> &str {
    let s = s.trim_start();
    let body = s.strip_prefix('$').unwrap_or(s);
    let n = body.find(|c| !is_ident(c)).unwrap_or(body.len());
    &s[..n + (s.len() - body.len())]
}

fn in_file(text: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut rest = text;
    let mut at = 0;
    while let Some(i) = rest.find("extern \"") {
        let after_quote = &rest[i + "extern \"".len()..];
        let abi_end = after_quote.find('"').ok_or("an unclosed ABI string")?;
        let abi = &after_quote[..abi_end];
        let after_abi = after_quote[abi_end + 1..].trim_start();
        at += i + 1;
        rest = &rest[i + 1..];
        // A block of declarations (`extern "C" {`), a function pointer
        // type (`extern "C" fn(`) or Rust's own ABI defines nothing here.
        let Some(after_fn) = after_abi.strip_prefix("fn") else {
            continue;
        };
        let name = ident_at(after_fn);
        if abi == "Rust" || name.is_empty() {
            continue;
        }
        match name.strip_prefix('$') {
            None => names.push(name.to_string()),
            Some(var) => names.extend(stamped(text, at, var)?),
        }
    }
    Ok(names)
}

/// The names a `macro_rules!` that defines `fn $var` at `at` gives its
/// function: the first argument of each invocation in the file, which
/// must be the macro's first metavariable.
fn stamped(text: &str, at: usize, var: &str) -> Result<Vec<String>, String> {
    let def = text[..at]
        .rfind("macro_rules!")
        .ok_or_else(|| format!("`fn ${var}` outside a macro_rules!"))?;
    let after = &text[def + "macro_rules!".len()..];
    let mac = ident_at(after);
    let matcher = after
        .find('(')
        .map(|p| ident_at(&after[p + 1..]))
        .unwrap_or_default();
    if matcher != format!("${var}") {
        return Err(format!(
            "macro `{mac}` names its function `${var}`, not its first metavariable ({matcher})"
        ));
    }
    let call = format!("{mac}!");
    let names: Vec<String> = text
        .match_indices(&call)
        // `typed_batched!` is no call of `batched!`.
        .filter(|(i, _)| !text[..*i].ends_with(is_ident))
        .map(|(i, _)| {
            let args = text[i + call.len()..].trim_start();
            ident_at(&args[1..]).to_string()
        })
        .collect();
    if names.is_empty() || names.iter().any(|n| n.is_empty()) {
        return Err(format!("cannot follow the invocations of `{mac}!`"));
    }
    Ok(names)
}
