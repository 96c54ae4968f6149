//! Every dependency a crate declares is used by that crate's code: a crate named in
//! `[dependencies]`, `[dev-dependencies]` or `[build-dependencies]` of a member's
//! `Cargo.toml` appears as a path (`name::`, `use name`, `name!`-style macros through a path)
//! in one of the member's Rust files. A dependency used only through a feature or by another
//! crate's macros is named in [`USED_WITHOUT_A_PATH`] with the reason.

use std::path::Path;

use super::{rust_files, workspace};

/// Dependencies used without their name in the code (through a feature, or by another
/// crate's macros, or to choose another crate's back end): (member, dependency, why).
const USED_WITHOUT_A_PATH: &[(&str, &str, &str)] = &[(
    "daemon",
    "idna_adapter",
    "chooses idna's stub back end for url: ASCII host names, no Unicode tables compiled in",
)];

/// The dependency names of one table (`[dependencies]`, ...) of a Cargo.toml, as written.
fn declared(manifest: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut table = String::new();
    for line in manifest.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            name.clone_into(&mut table);
            continue;
        }
        let deps = matches!(
            table.as_str(),
            "dependencies" | "dev-dependencies" | "build-dependencies"
        );
        if !deps || line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.split(['=', '.', ' ']).next().filter(|n| !n.is_empty()) {
            out.push((table.clone(), name.to_owned()));
        }
    }
    out
}

/// Whether `source` refers to the crate `ident` (its name with `_` for `-`) by a path.
fn refers_to(source: &str, ident: &str) -> bool {
    source.match_indices(ident).any(|(at, _)| {
        let before = source[..at].chars().next_back();
        let after = &source[at + ident.len()..];
        let starts_a_path = after.starts_with("::");
        let is_an_import = after.starts_with(';') || after.starts_with(" as ");
        let word_start = !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
        word_start && (starts_a_path || (is_an_import && source[..at].ends_with("use ")))
    })
}

#[test]
fn every_declared_dependency_is_used() {
    let root = workspace();
    let mut unused = Vec::new();
    for member in ["collectors", "daemon", "tests"] {
        let dir = root.join(member);
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
        let sources: Vec<String> = rust_files(&dir)
            .into_iter()
            .filter(|p| !p.starts_with(dir.join("target")))
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect();
        for (table, name) in declared(&manifest) {
            if USED_WITHOUT_A_PATH
                .iter()
                .any(|&(m, n, _)| m == member && n == name)
            {
                continue;
            }
            let ident = name.replace('-', "_");
            if !sources.iter().any(|s| refers_to(s, &ident)) {
                unused.push(format!("{member}/Cargo.toml [{table}] {name}"));
            }
        }
    }
    assert!(
        unused.is_empty(),
        "declared but used nowhere in the crate's code (remove it, or name it in \
         USED_WITHOUT_A_PATH with why):\n{}",
        unused.join("\n")
    );
}

#[test]
fn the_dependency_scanner_sees_what_it_must() {
    let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nserde.workspace = true\n\
                    tokio-util = { version = \"1\" }\n# a comment\n\n[dev-dependencies]\n\
                    proptest = \"1\"\n\n[lints]\nworkspace = true\n";
    assert_eq!(
        declared(manifest),
        vec![
            ("dependencies".to_owned(), "serde".to_owned()),
            ("dependencies".to_owned(), "tokio-util".to_owned()),
            ("dev-dependencies".to_owned(), "proptest".to_owned()),
        ]
    );
    assert!(refers_to("use serde::Deserialize;", "serde"));
    assert!(refers_to(
        "let x = tokio_util::sync::CancellationToken::new();",
        "tokio_util"
    ));
    assert!(refers_to("use libc;", "libc"));
    assert!(!refers_to("let myserde::x = 1;", "serde"));
    assert!(!refers_to("// serde is nice", "serde"));
    assert!(!refers_to("wattson_tests::x", "tests"));
    assert!(Path::new(&workspace()).join("Cargo.toml").is_file());
}
