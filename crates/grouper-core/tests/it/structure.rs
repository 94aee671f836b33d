//! The workspace's shape, checked on every test run: no import cycle between the source files
//! of any crate, and no source file over [`MAX_LINES`] lines (docs/ARCHITECTURE.md, "Rules of
//! the house"). It lives here because grouper-core's test binary is the cheapest to build; it
//! reads every crate under `crates/`.
//!
//! A file depends on another when it names an item of the other's module: `use crate::a::b`,
//! `crate::a::b::f(..)`, `super::x` — resolved to the longest module path that is a file.
//! Not counted: the crate root (it declares modules and re-exports), `pub use` re-exports,
//! `mod` declarations, and test code (`#[cfg(test)]` to the end of a file, `tests.rs` files).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The most lines a source file may have.
const MAX_LINES: usize = 800;

/// One crate's source files by module path (`["gpu", "run"]` for `src/gpu/run.rs`).
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            let last = parts.pop().unwrap();
            if last == "tests" {
                continue;
            }
            if !matches!(last.as_str(), "mod" | "lib" | "main") {
                parts.push(last);
            }
            out.insert(parts, path);
        }
    }
    out
}

/// The text of a file without its tests: everything before its first `#[cfg(test)]` line.
fn code(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        if line.trim() == "#[cfg(test)]" {
            break;
        }
        // Doc comments name items without depending on them.
        let t = line.trim_start();
        if t.starts_with("//") || t.starts_with("pub use ") || t.starts_with("pub(crate) use ") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Every path `crate::…` or `super::…` names, expanded from `use` groups
/// (`use crate::a::{b, c::d}` gives `crate::a::b` and `crate::a::c::d`), as segments.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < bytes.len() {
        let starts = |w: &str| {
            bytes[i..].iter().take(w.len()).copied().eq(w.chars())
                && (i == 0 || !ident(bytes[i - 1]))
        };
        if starts("crate::") || starts("super::") {
            let (end, found) = expand(&bytes, i);
            out.extend(found);
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// Parses a path starting at `i` (with `{…}` groups) into its expansions; returns where it ends.
fn expand(s: &[char], mut i: usize) -> (usize, Vec<Vec<String>>) {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut prefix = Vec::new();
    loop {
        let start = i;
        while i < s.len() && ident(s[i]) {
            i += 1;
        }
        if i > start {
            prefix.push(s[start..i].iter().collect::<String>());
        }
        if i + 1 < s.len() && s[i] == ':' && s[i + 1] == ':' {
            i += 2;
            if i < s.len() && s[i] == '{' {
                // A group: each comma-separated member at depth one is a path of its own.
                let mut out = Vec::new();
                i += 1;
                loop {
                    while i < s.len() && (s[i].is_whitespace() || s[i] == ',') {
                        i += 1;
                    }
                    if i >= s.len() || s[i] == '}' {
                        return (i + 1, out);
                    }
                    let (end, found) = expand(s, i);
                    for f in found {
                        out.push(prefix.iter().cloned().chain(f).collect());
                    }
                    i = end;
                }
            }
            continue;
        }
        return (i, vec![prefix]);
    }
}

/// The module a path names: the longest prefix that is a file of the crate, from `here`.
fn resolve(
    path: &[String],
    here: &[String],
    files: &BTreeMap<Vec<String>, PathBuf>,
) -> Option<Vec<String>> {
    let mut abs: Vec<String> = Vec::new();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => rest = &rest[1..],
        Some("super") => {
            // `super` of `a/b.rs` (module a::b) and of `a/b/mod.rs` (also a::b) is `a`.
            abs = here.to_vec();
            while rest.first().map(String::as_str) == Some("super") {
                abs.pop();
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    abs.extend(rest.iter().cloned());
    (1..=abs.len())
        .rev()
        .map(|n| abs[..n].to_vec())
        .find(|m| files.contains_key(m))
}

/// The import graph of the crate at `src`: module → modules it depends on.
fn graph(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let files = modules(src);
    let mut g = BTreeMap::new();
    for (module, path) in &files {
        let mut deps = BTreeSet::new();
        for p in paths(&code(path)) {
            if let Some(target) = resolve(&p, module, &files) {
                if &target != module && !target.is_empty() {
                    deps.insert(target);
                }
            }
        }
        g.insert(module.clone(), deps);
    }
    g
}

/// A cycle of `g`, if there is one (depth-first search).
fn cycle(g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<Vec<String>>> {
    fn visit(
        n: &Vec<String>,
        g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<Vec<String>, u8>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        state.insert(n.clone(), 1);
        stack.push(n.clone());
        for m in g.get(n).into_iter().flatten() {
            match state.get(m).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == m).unwrap();
                    return Some(stack[at..].to_vec());
                }
                0 => {
                    if let Some(c) = visit(m, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if state.get(n).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The workspace's crates: beside this crate where it was built, else under `crates/` of the
/// working directory (a test executable carried to another machine runs from the repository's
/// root there).
fn crates() -> Vec<PathBuf> {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = match built.is_dir() {
        true => built,
        false => PathBuf::from("crates"),
    };
    let mut out: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    assert!(
        out.len() >= 4,
        "expected the workspace's crates under {root:?}"
    );
    out
}

#[test]
fn no_crate_has_an_import_cycle() {
    let mut found = Vec::new();
    for src in crates() {
        if let Some(c) = cycle(&graph(&src)) {
            let names: Vec<String> = c.iter().map(|m| m.join("::")).collect();
            found.push(format!("{}: {}", src.display(), names.join(" -> ")));
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn no_source_file_is_over_the_limit() {
    let mut long = Vec::new();
    for src in crates() {
        for path in modules(&src).values() {
            let lines = fs::read_to_string(path).unwrap().lines().count();
            if lines > MAX_LINES {
                long.push(format!("{} ({lines} lines)", path.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The checker itself finds what it must: a two-file cycle through a `use` group and an inline
/// path, and nothing where the dependency runs one way.
#[test]
fn the_checker_finds_a_cycle_it_is_shown() {
    let dir = std::env::temp_dir().join(format!("grouper-structure-{}", std::process::id()));
    let src = dir.join("src");
    fs::create_dir_all(src.join("a")).unwrap();
    fs::write(
        src.join("lib.rs"),
        "pub mod a;\npub mod b;\npub use a::X;\n",
    )
    .unwrap();
    fs::write(
        src.join("a/mod.rs"),
        "pub mod c;\nuse crate::{b::Y, a::c};\n",
    )
    .unwrap();
    fs::write(src.join("a/c.rs"), "fn f() { super::super::b::g(); }\n").unwrap();
    fs::write(src.join("b.rs"), "pub fn g() {}\n").unwrap();
    let g = graph(&src);
    assert_eq!(cycle(&g), None, "{g:?}");
    assert!(g[&vec!["a".to_string(), "c".to_string()]].contains(&vec!["b".to_string()]));
    fs::write(src.join("b.rs"), "pub fn g() { crate::a::c::h() }\n").unwrap();
    let c = cycle(&graph(&src)).expect("a cycle b -> a::c -> b");
    let _ = fs::remove_dir_all(&dir);
    assert_eq!(c.len(), 2, "{c:?}");
}
