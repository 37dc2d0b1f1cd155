//! Dependencies inside a crate run one way: no file of a crate reaches,
//! through `crate::` or `super::` paths, a module that reaches back to it.
//! A circle makes a crate's files impossible to read bottom-up and to
//! split along their jobs, so this test names the first circle it finds
//! in each crate of the workspace. Unit-test modules (`#[cfg(test)] mod`)
//! are left out: a test may use what sits above the code it tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates' source roots, from the workspace root.
const CRATES: &[&str] = &[
    "actors/core",
    "actors/hw",
    "actors/pci",
    "actors/gsp",
    "actors/memory",
    "actors/submit",
    "actors/loader",
    "abi",
    "abi/cublas",
    "supervisor",
    "tests",
    "tests/fuzz",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lies in the workspace")
        .to_path_buf()
}

/// Every module file under `src` (binaries aside: each is its own crate),
/// by its path from the crate root: `runtime`, `api::device`.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "bin") {
                    dirs.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            if parts == ["lib"] || parts == ["main"] {
                continue;
            }
            found.insert(parts.join("::"), path);
        }
    }
    found
}

/// The code of a file without its comments (a doc link is no import) and
/// its unit-test modules.
fn code_without_tests(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let line = line.split("//").next().unwrap_or("");
        if line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod "))
        {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The paths a file names through `crate::` or `super::`, resolved to
/// module paths (as many leading segments as name a module).
fn references(module: &str, text: &str, known: &BTreeMap<String, PathBuf>) -> BTreeSet<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let own: Vec<&str> = module.split("::").collect();
    let mut out = BTreeSet::new();
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", own[..own.len().saturating_sub(1)].to_vec()),
    ] {
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().next_back();
            let tail = &rest[at + prefix.len()..];
            rest = tail;
            if before.is_some_and(ident) {
                continue;
            }
            // `crate::{a, b::c}` names several paths; `crate::a::b` one.
            let names: Vec<String> = if let Some(group) = tail.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                group[..end]
                    .split(',')
                    .map(|s| s.trim().replace(' ', ""))
                    .collect()
            } else {
                let end = tail
                    .find(|c: char| !(ident(c) || c == ':'))
                    .unwrap_or(tail.len());
                vec![tail[..end].to_string()]
            };
            for name in names {
                let mut path = base.iter().map(|s| s.to_string()).collect::<Vec<_>>();
                let mut best = None;
                for seg in name.split("::").filter(|s| !s.is_empty()) {
                    path.push(seg.to_string());
                    let joined = path.join("::");
                    if known.contains_key(&joined) {
                        best = Some(joined);
                    }
                }
                if let Some(m) = best.filter(|m| m != module) {
                    out.insert(m);
                }
            }
        }
    }
    out
}

/// A circle through the graph, if there is one, as the modules on it.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = stack.iter().position(|n| n == node).unwrap();
                let mut c = stack[from..].to_vec();
                c.push(node.to_string());
                return Some(c);
            }
            None => {}
        }
        marks.insert(node.to_string(), Mark::Open);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, marks, stack) {
                return Some(c);
            }
        }
        stack.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if let Some(c) = visit(node, graph, &mut marks, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

fn graph_of(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let known = modules(&workspace().join(krate).join("src"));
    known
        .iter()
        .map(|(m, path)| {
            let text = code_without_tests(&std::fs::read_to_string(path).unwrap());
            (m.clone(), references(m, &text, &known))
        })
        .collect()
}

#[test]
fn no_crate_has_files_that_import_each_other_in_a_circle() {
    let circles: Vec<String> = CRATES
        .iter()
        .filter_map(|k| circle(&graph_of(k)).map(|c| format!("{k}: {}", c.join(" -> "))))
        .collect();
    assert!(circles.is_empty(), "circles:\n{}", circles.join("\n"));
}

#[test]
fn the_circle_finder_finds_a_circle_and_passes_a_line() {
    let g = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    assert_eq!(circle(&g(&[("a", "b"), ("b", "c")])), None);
    assert_eq!(
        circle(&g(&[("a", "b"), ("b", "c"), ("c", "a")])),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    let known: BTreeMap<String, PathBuf> = ["runtime", "api::device", "api::errors", "error"]
        .iter()
        .map(|m| (m.to_string(), PathBuf::new()))
        .collect();
    let text = "use crate::{error::CudaError, runtime::Runtime};\nuse super::errors::x;\nlet y = crate::runtime::host_config();\nnotcrate::error";
    assert_eq!(
        references("api::device", text, &known),
        ["api::errors", "error", "runtime"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
}

/// The CUDA runtime's layers, bottom first: a file may use its own layer
/// and those below, never one above.
const ABI_LAYERS: &[(&str, &[&str])] = &[
    (
        "leaves",
        &[
            "types",
            "hash",
            "call_spans",
            "call_stats",
            "profile_trace",
            "launch_log",
            "device",
            "error",
            "knobs",
        ],
    ),
    ("state", &["state"]),
    ("runtime", &["runtime"]),
    (
        "operations",
        &["resolve", "memory", "work", "launch", "graph"],
    ),
    ("entry points", &["api", "embed"]),
];

fn abi_layer(module: &str) -> usize {
    let top = module.split("::").next().unwrap_or(module);
    ABI_LAYERS
        .iter()
        .position(|(_, members)| members.contains(&top))
        .unwrap_or_else(|| panic!("abi module {module} is in no layer of ABI_LAYERS"))
}

#[test]
fn the_cuda_runtime_uses_only_its_own_layer_and_those_below() {
    let upward: Vec<String> = graph_of("abi")
        .iter()
        .flat_map(|(m, uses)| {
            uses.iter()
                .filter(|u| abi_layer(u) > abi_layer(m))
                .map(move |u| {
                    format!(
                        "{m} ({}) uses {u} ({})",
                        ABI_LAYERS[abi_layer(m)].0,
                        ABI_LAYERS[abi_layer(u)].0
                    )
                })
        })
        .collect();
    assert!(upward.is_empty(), "{}", upward.join("\n"));
}

/// The stack reaches gsp through its crate root only: what the kernel
/// module's RM is made of (`macuda_gsp::kernel`) is gsp's own, published
/// for the tests' fake module and direct device checks, and a crate above
/// that reached into it would grow an arm per RM. Memory and the Host ask
/// the device description instead.
#[test]
fn only_the_tests_reach_into_the_kernel_modules_rm() {
    let reaching: Vec<String> = CRATES
        .iter()
        .filter(|k| !matches!(**k, "tests" | "actors/gsp"))
        .flat_map(|k| {
            modules(&workspace().join(k).join("src"))
                .into_values()
                .chain(
                    std::fs::read_dir(workspace().join(k).join("src").join("bin"))
                        .into_iter()
                        .flatten()
                        .map(|e| e.unwrap().path()),
                )
                .filter(|path| {
                    code_without_tests(&std::fs::read_to_string(path).unwrap())
                        .contains("macuda_gsp::kernel")
                })
                .map(|path| path.display().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        reaching.is_empty(),
        "files above gsp naming macuda_gsp::kernel:\n{}",
        reaching.join("\n")
    );
}
