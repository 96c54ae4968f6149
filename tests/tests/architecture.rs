//! Checks on the shape of the code itself, read from the source tree (no build needed):
//! source names are written in one module only.

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
