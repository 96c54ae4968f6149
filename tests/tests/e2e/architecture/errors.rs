//! `anyhow` only at the top of the daemon: in `commands/` (one module per subcommand) and
//! `main.rs`. Below them every module returns its own error type (thiserror), which says
//! what failed and which exit status it stands for (`commands::exit_status_of` reads them);
//! a command converts at the boundary with `?`. A file here that still names `anyhow` is in
//! [`NOT_YET_TYPED`] with why; the list only shrinks.

use std::path::Path;

use super::{rust_files, workspace};

/// Daemon files below `commands/` that still use anyhow: (path under `daemon/src`, why).
const NOT_YET_TYPED: &[(&str, &str)] = &[];

/// Where `anyhow` is named in `source` outside comments: the 1-based line numbers.
fn anyhow_lines(source: &str) -> Vec<usize> {
    source
        .lines()
        .enumerate()
        .filter(|(_, l)| {
            let code = l.split("//").next().unwrap_or_default();
            code.match_indices("anyhow").any(|(at, _)| {
                let before = code[..at].chars().next_back();
                let after = code[at + "anyhow".len()..].chars().next();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// Whether `rel` (a path under `daemon/src`) is the command layer, where anyhow belongs.
fn is_command_layer(rel: &Path) -> bool {
    rel.starts_with("commands") || rel == Path::new("main.rs")
}

#[test]
fn anyhow_is_used_only_in_the_command_layer() {
    let src = workspace().join("daemon/src");
    let mut found = Vec::new();
    for path in rust_files(&src) {
        let rel = path.strip_prefix(&src).expect("under daemon/src");
        if is_command_layer(rel) || NOT_YET_TYPED.iter().any(|&(p, _)| Path::new(p) == rel) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("reading a source file");
        for line in anyhow_lines(&text) {
            found.push(format!("daemon/src/{}:{line}", rel.display()));
        }
    }
    assert!(
        found.is_empty(),
        "anyhow below the command layer (give the module an error type that says what failed, \
         and convert with `?` in commands/; see ARCHITECTURE.md, Layers):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_anyhow_scanner_sees_what_it_must() {
    assert_eq!(
        anyhow_lines("use anyhow::Context as _;\nfn f() -> anyhow::Result<()> {}\n"),
        vec![1, 2]
    );
    assert!(anyhow_lines("// anyhow in a comment\nlet not_anyhow_here = 1;\n").is_empty());
    assert_eq!(
        anyhow_lines("x // anyhow\nanyhow::bail!(\"no\");\n"),
        vec![2]
    );
    assert!(is_command_layer(Path::new("commands/status/render.rs")));
    assert!(is_command_layer(Path::new("main.rs")));
    assert!(!is_command_layer(Path::new("ledger/costs.rs")));
    for &(p, why) in NOT_YET_TYPED {
        assert!(
            workspace().join("daemon/src").join(p).is_file() && !why.is_empty(),
            "{p}: listed in NOT_YET_TYPED but not a daemon source file, or without a reason"
        );
    }
}
