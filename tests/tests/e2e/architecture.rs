//! Checks on the shape of the code itself, read from the source tree (no build needed):
//! source names are written in one module only; the daemon's modules import each other in
//! no cycle; no source or test file is over [`MAX_FILE_LINES`] lines; no match over a meter
//! protocol has a wildcard arm ([`protocols`]); every declared dependency is used
//! ([`dependencies`]); `anyhow` only in the daemon's command layer ([`errors`]).

mod dependencies;
mod errors;
mod protocols;

use std::path::{Path, PathBuf};

/// The workspace root (this crate is `tests/`).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_owned()
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d)
            .expect("reading the source tree")
            .flatten()
        {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The plain (not raw) string literals of a Rust file, with the line each starts on (from
/// 1), roughly: good enough for this code base's style. Comments are skipped; so are raw
/// strings, which hold JSON fixtures of the wire formats (spelling sources as the wire does).
fn plain_literals(source: &str) -> Vec<(usize, String)> {
    let b = source.as_bytes();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'\'' => {
                // A char literal ('"' included) or a lifetime: skip the quoted char.
                if b.get(i + 2) == Some(&b'\'') {
                    i += 3;
                } else if b.get(i + 1) == Some(&b'\\') && b.get(i + 3) == Some(&b'\'') {
                    i += 4;
                } else {
                    i += 1;
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'#' | b'"'))
                && (i == 0
                    || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
                    || (b[i - 1] == b'b'
                        && (i < 2 || !(b[i - 2].is_ascii_alphanumeric() || b[i - 2] == b'_')))) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                let start = i + 1 + hashes + 1;
                let end = b
                    .get(start..)
                    .and_then(|rest| rest.windows(close.len()).position(|w| w == close))
                    .map_or(b.len(), |p| start + p + close.len());
                line += source[i..end].matches('\n').count();
                i = end;
            }
            b'"' => {
                let start_line = line;
                let mut text = String::new();
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    if let Some(&c) = b.get(i) {
                        if c == b'\n' {
                            line += 1;
                        }
                        text.push(c as char);
                    }
                    i += 1;
                }
                out.push((start_line, text));
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// Whether a string literal spells a source name or a CPU channel name that
/// `wattson_collectors::source` owns.
fn names_a_source(text: &str) -> bool {
    const EXACT: [&str; 9] = [
        "cpu",
        "rapl",
        "hwmon",
        "gpu",
        "ipmi",
        "all",
        "mean",
        "estimate:wall",
        "meter:",
    ];
    let id_after = |prefix: &str| {
        text.strip_prefix(prefix)
            .and_then(|rest| rest.chars().next())
            .is_some_and(|c| !c.is_whitespace())
    };
    let channel_format = |prefix: &str| {
        text.strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('{') && rest.ends_with('}') && !rest.contains('/'))
    };
    EXACT.contains(&text)
        || id_after("meter:")
        || id_after("ups:")
        || text.starts_with("estimate:")
        || text.starts_with("all/")
        || channel_format("cpu")
        || channel_format("gpu")
}

/// Regression: sources travelled as ~120 string literals (`"meter:"`, `"cpu"`, `"all/"`)
/// across the daemon and the collectors, and the host's power source was re-derived from
/// string prefixes at publish time. They are `SourceId` and `source::channel` now; a new
/// literal is caught here. A line that must spell a kernel name which happens to match
/// (`/proc/stat`'s `cpu` lines, sysfs `hwmonN` directories) says so with `// kernel name`;
/// a test's deliberately wrong channel with `// not a source`.
#[test]
fn source_names_are_written_in_the_source_module_only() {
    let root = workspace();
    let owner = root.join("collectors/src/source.rs");
    let mut found = Vec::new();
    for dir in ["daemon/src", "collectors/src"] {
        for file in rust_files(&root.join(dir)) {
            if file == owner {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (n, lit) in plain_literals(&text) {
                let line = lines.get(n - 1).copied().unwrap_or_default();
                let exempt = ["// kernel name", "// not a source"]
                    .iter()
                    .any(|m| line.contains(m));
                if !exempt && names_a_source(&lit) {
                    found.push(format!(
                        "{}:{n}: {lit:?}",
                        file.strip_prefix(&root).unwrap_or(&file).display()
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "source names spelled outside collectors/src/source.rs (use SourceId or \
         source::channel):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_literal_scanner_sees_what_it_must() {
    let texts =
        |src: &str| -> Vec<String> { plain_literals(src).into_iter().map(|x| x.1).collect() };
    assert_eq!(
        texts("let a = \"cpu\"; f('\"', \"all/C6\") // \"meter:x\"\n\"x\""),
        ["cpu", "all/C6", "x"]
    );
    assert_eq!(
        texts(r##"parse(br#"{"series":[["cpu"]]}"#), "rapl""##),
        ["rapl"]
    );
    assert_eq!(texts(r#"format!("cpu{n}")"#), ["cpu{n}"]);
    assert_eq!(
        plain_literals("\"a\\\n b\"\n\"cpu\""),
        [(1, "a\n b".to_owned()), (3, "cpu".to_owned())]
    );
    for bad in [
        "cpu",
        "meter:wall",
        "ups:nas",
        "all/C6",
        "cpu{n}",
        "gpu{}",
        "mean",
    ] {
        assert!(names_a_source(bad), "{bad}");
    }
    for fine in [
        "meter: {}",
        "cpu{cpu}/cpufreq",
        "cpu MHz",
        "cpuinfo",
        "ups",
        "power",
    ] {
        assert!(!names_a_source(fine), "{fine}");
    }
}

/// Edges between the daemon's top-level modules that point up the data path, each with why
/// it is there and what removes it: none. (The last ones went when the live view moved below
/// the outputs, report production into report/, and the clap arguments into cli/.) A new
/// edge that closes a cycle fails [`daemon_modules_form_no_import_cycle`]; an edge listed
/// here that is gone must leave the list.
const ALLOWED_BACK_EDGES: &[(&str, &str, &str)] = &[];

/// The daemon's top-level modules (`daemon/src/<name>.rs` or `daemon/src/<name>/`).
fn daemon_modules(src: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(src)
        .expect("reading daemon/src")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let name = name.strip_suffix(".rs").map_or(name.clone(), str::to_owned);
            (name != "lib" && name != "main").then_some(name)
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The top-level modules a file's code (not its comments or unit tests) names through
/// `crate::<module>` or `use crate::{<module>, ...}`, each with the line it is named on.
fn crate_references(source: &str) -> Vec<(String, usize)> {
    let code = source
        .find("#[cfg(test)]\nmod tests")
        .map_or(source, |at| &source[..at]);
    let mut text = String::with_capacity(code.len());
    for line in code.lines() {
        text.push_str(line.split("//").next().unwrap_or_default());
        text.push('\n');
    }
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `wattson_collectors::` and the like
        }
        let line = text[..at].matches('\n').count() + 1;
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The first name of each item at the group's top level.
            let mut depth = 1;
            let mut start = true;
            let mut line = line;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 1 => break,
                    '}' => depth -= 1,
                    ',' if depth == 1 => start = true,
                    '\n' => line += 1,
                    c if c.is_whitespace() => {}
                    _ if start && depth == 1 => {
                        out.push((ident(&group[i..]), line));
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.push((ident(rest), line));
        }
    }
    out
}

/// Every edge between the daemon's top-level modules: `(from, to) -> where`, one example
/// location (`file:line`) each.
fn module_edges() -> std::collections::BTreeMap<(String, String), String> {
    let root = workspace();
    let src = root.join("daemon/src");
    let modules = daemon_modules(&src);
    let mut edges = std::collections::BTreeMap::new();
    for file in rust_files(&src) {
        let rel = file.strip_prefix(&src).unwrap_or(&file);
        let Some(from) = rel.components().next().map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned()
        }) else {
            continue;
        };
        let in_tests = rel
            .components()
            .any(|c| c.as_os_str() == "tests" || c.as_os_str() == "tests.rs");
        if !modules.contains(&from) || in_tests {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("reading a source file");
        for (to, line) in crate_references(&text) {
            if to != from && modules.contains(&to) {
                edges
                    .entry((from.clone(), to))
                    .or_insert_with(|| format!("daemon/src/{}:{line}", rel.display()));
            }
        }
    }
    edges
}

/// A cycle in `edges`, as the modules along it (first = last), if there is one.
fn find_cycle(edges: &[(String, String)]) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &[(String, String)],
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for (_, to) in edges.iter().filter(|(from, _)| from == node) {
            if let Some(cycle) = visit(to, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = std::collections::BTreeSet::new();
    edges
        .iter()
        .find_map(|(from, _)| visit(from, edges, &mut Vec::new(), &mut done))
}

/// Regression: the daemon's modules imported each other in cycles (store -> control and
/// ledger, sweep <-> control, control <-> runtime, runtime -> commands, idle <-> publish,
/// sources <-> publish and runtime, publish -> runtime, commands and cli, cli <-> commands),
/// so no module could be read, tested or moved without the others. The modules now form layers along the data path, except the edges in
/// [`ALLOWED_BACK_EDGES`]; a new edge that closes a cycle fails here, naming the cycle and
/// where each of its edges is written.
#[test]
fn daemon_modules_form_no_import_cycle() {
    let edges = module_edges();
    let allowed = |from: &str, to: &str| {
        ALLOWED_BACK_EDGES
            .iter()
            .any(|(f, t, _)| *f == from && *t == to)
    };
    let kept: Vec<(String, String)> = edges
        .keys()
        .filter(|(from, to)| !allowed(from, to))
        .cloned()
        .collect();
    if let Some(cycle) = find_cycle(&kept) {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let at = &edges[&(w[0].clone(), w[1].clone())];
                format!("{} -> {} ({at})", w[0], w[1])
            })
            .collect();
        panic!(
            "an import cycle between the daemon's modules:\n  {}\nmove the type or function \
             the lower module needs down to it (or into wattson_collectors)",
            steps.join("\n  ")
        );
    }
    let stale: Vec<String> = ALLOWED_BACK_EDGES
        .iter()
        .filter(|(f, t, _)| !edges.contains_key(&((*f).to_owned(), (*t).to_owned())))
        .map(|(f, t, _)| format!("{f} -> {t}"))
        .collect();
    assert!(
        stale.is_empty(),
        "allowed back edges that no longer exist: remove them from ALLOWED_BACK_EDGES: {}",
        stale.join(", ")
    );
}

#[test]
fn the_import_scanner_sees_what_it_must() {
    let refs =
        |src: &str| -> Vec<String> { crate_references(src).into_iter().map(|x| x.0).collect() };
    assert_eq!(
        refs("use crate::store::Store;\nlet x = crate::ledger::f(); // crate::report\n"),
        ["store", "ledger"]
    );
    assert_eq!(
        refs("use crate::{\n    config::Config,\n    sweep::{a, b},\n};"),
        ["config", "sweep"]
    );
    assert_eq!(
        refs(
            "use wattson_collectors::x;\nfn f() {}\n#[cfg(test)]\nmod tests {\n use crate::cli;\n}"
        ),
        Vec::<String>::new()
    );
    let e = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    assert_eq!(find_cycle(&[e("a", "b"), e("b", "c")]), None);
    assert_eq!(
        find_cycle(&[e("a", "b"), e("b", "c"), e("c", "a")]),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

/// The most lines a source file of the daemon or the collectors may have, its unit tests
/// included, and a file of their integration tests or the test helpers. (A function's
/// limit, 120 lines of code, is clippy's `too_many_lines`, set in clippy.toml.)
const MAX_FILE_LINES: usize = 600;

/// The directories [`MAX_FILE_LINES`] holds for: the daemon's and the collectors' sources,
/// their integration tests, the end-to-end tests and the helpers they share.
const SIZED_DIRS: [&str; 6] = [
    "daemon/src",
    "collectors/src",
    "daemon/tests",
    "collectors/tests",
    "tests/src",
    "tests/tests",
];

/// The `.rs` files under `dirs` of `root` longer than `max` lines: `path: N lines` each,
/// the path from `root`.
fn long_files(root: &Path, dirs: &[&str], max: usize) -> Vec<String> {
    let mut out = Vec::new();
    for dir in dirs {
        for file in rust_files(&root.join(dir)) {
            let text = std::fs::read_to_string(&file).expect("reading a source file");
            let lines = text.lines().count();
            if lines > max {
                out.push(format!(
                    "{}: {lines} lines",
                    file.strip_prefix(root).unwrap_or(&file).display()
                ));
            }
        }
    }
    out
}

/// Regression: modules grew past 600 lines (one to 1107) and functions past 120 (one to
/// 366), each a long read doing several things. They were split along their seams: a
/// validation per config table, a helper per report section, submodules for a device, a
/// discovery, a level, a topic of tests. The end-to-end tests, unchecked, grew the same way
/// (`mqtt.rs` to 1297 lines) and were split by topic too. A file under [`SIZED_DIRS`] over
/// [`MAX_FILE_LINES`] fails here, named with its length: split it into submodules along a
/// seam.
#[test]
fn no_source_file_is_over_600_lines() {
    let long = long_files(&workspace(), &SIZED_DIRS, MAX_FILE_LINES);
    assert!(
        long.is_empty(),
        "source files over {MAX_FILE_LINES} lines: split each into submodules along a \
         seam:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_line_counter_sees_what_it_must() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("deep")).unwrap();
    std::fs::write(src.join("short.rs"), "fn a() {}\n".repeat(600)).unwrap();
    std::fs::write(src.join("deep/long.rs"), "fn a() {}\n".repeat(601)).unwrap();
    std::fs::write(src.join("notes.txt"), "x\n".repeat(700)).unwrap();
    assert_eq!(
        long_files(dir.path(), &["src"], 600),
        [format!(
            "{}: 601 lines",
            Path::new("src/deep/long.rs").display()
        )]
    );
}
