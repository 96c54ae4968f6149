//! The man pages (`daemon/dist/man/*.1`) and shell completions (`daemon/dist/completions/`)
//! are generated from the clap definitions and kept in the repository, so that the Debian
//! package (`cargo deb`) and a hand install ship them without a build step of their own.
//! This test regenerates them in memory and fails when a committed file is stale, missing
//! or left over; `WATTSON_UPDATE_DIST=1 cargo test -p wattson --test daemon_e2e
//! man_and_completions::` rewrites them.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::CommandFactory as _;
use clap_complete::Shell;
use wattson::cli::Cli;

fn dist() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dist")
}

/// Escapes one line of plain text for roff inside a no-fill block.
fn roff_line(line: &str) -> String {
    let text = line.replace('\\', "\\e").replace('-', "\\-");
    if text.starts_with('.') || text.starts_with('\'') {
        format!("\\&{text}")
    } else {
        text
    }
}

/// One man page: clap_mangen's sections, then EXAMPLES (the `--help` examples) and SEE ALSO.
fn man_page(cmd: &clap::Command, related: &[String]) -> Vec<u8> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out).unwrap();
    man.render_name_section(&mut out).unwrap();
    match cmd.get_overridden_usage() {
        // A usage written by hand (`sweep`: --name is required unless --list or --show).
        Some(usage) => {
            let mut synopsis = String::from(".SH SYNOPSIS\n.nf\n");
            for l in usage.to_string().lines() {
                synopsis.push_str(&roff_line(l.trim()));
                synopsis.push('\n');
            }
            synopsis.push_str(".fi\n");
            out.extend_from_slice(synopsis.as_bytes());
        }
        None => man.render_synopsis_section(&mut out).unwrap(),
    }
    man.render_description_section(&mut out).unwrap();
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out).unwrap();
    }
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut out).unwrap();
    }
    let examples = cmd
        .get_after_help()
        .map(ToString::to_string)
        .unwrap_or_default();
    let lines: Vec<&str> = examples
        .lines()
        .filter(|l| l.trim() != "Examples:")
        .collect();
    assert!(
        !lines.is_empty(),
        "{}: no examples",
        cmd.get_display_name().unwrap_or(cmd.get_name())
    );
    let mut extra = String::from(".SH EXAMPLES\n.nf\n");
    for l in lines {
        extra.push_str(&roff_line(l.strip_prefix("  ").unwrap_or(l)));
        extra.push('\n');
    }
    extra.push_str(".fi\n");
    if cmd.get_display_name() == Some("wattson") {
        extra.push_str(
            ".SH FILES\n.TP\n/etc/wattson/wattson.toml\nThe configuration (or \\fB\\-\\-config\\fR, \
             or \\fB$WATTSON_CONFIG\\fR).\n.TP\n/var/lib/wattson/wattson.db\nThe database \
             (\\fB[storage] path\\fR).\n",
        );
    }
    if !related.is_empty() {
        extra.push_str(".SH SEE ALSO\n");
        extra.push_str(
            &related
                .iter()
                .map(|r| format!("\\fB{}\\fR(1)", r.replace('-', "\\-")))
                .collect::<Vec<_>>()
                .join(", "),
        );
        extra.push('\n');
    }
    out.extend_from_slice(extra.as_bytes());
    man.render_version_section(&mut out).unwrap();
    out
}

/// Every file under `dist/` as the clap definitions generate it, by path relative to `dist/`.
fn generated() -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(cmd: &clap::Command, pages: &mut Vec<clap::Command>) {
        pages.push(cmd.clone());
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, pages);
        }
    }
    let mut cmd = Cli::command();
    cmd.build();
    let mut pages = Vec::new();
    walk(&cmd, &mut pages);
    let names: Vec<String> = pages
        .iter()
        .map(|c| c.get_display_name().unwrap_or(c.get_name()).to_owned())
        .collect();
    let mut out = BTreeMap::new();
    for page in &pages {
        let name = page.get_display_name().unwrap_or(page.get_name());
        // The top page lists every subcommand's page; a subcommand's page the top one and
        // its own subcommands'.
        let related: Vec<String> = if name == "wattson" {
            names.iter().filter(|n| *n != "wattson").cloned().collect()
        } else {
            let prefix = format!("{name}-");
            std::iter::once("wattson".to_owned())
                .chain(names.iter().filter(|n| n.starts_with(&prefix)).cloned())
                .collect()
        };
        out.insert(
            PathBuf::from(format!("man/{name}.1")),
            man_page(page, &related),
        );
    }
    for (shell, file) in [
        (Shell::Bash, "wattson.bash"),
        (Shell::Zsh, "_wattson"),
        (Shell::Fish, "wattson.fish"),
    ] {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "wattson", &mut buf);
        out.insert(PathBuf::from(format!("completions/{file}")), buf);
    }
    out
}

fn committed() -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for dir in ["man", "completions"] {
        let Ok(entries) = std::fs::read_dir(dist().join(dir)) else {
            continue;
        };
        for e in entries {
            let e = e.unwrap();
            let rel = PathBuf::from(dir).join(e.file_name());
            out.insert(rel, std::fs::read(e.path()).unwrap());
        }
    }
    out
}

#[test]
fn man_pages_and_completions_match_the_command_line() {
    let want = generated();
    if std::env::var_os("WATTSON_UPDATE_DIST").is_some() {
        for dir in ["man", "completions"] {
            let _ = std::fs::remove_dir_all(dist().join(dir));
            std::fs::create_dir_all(dist().join(dir)).unwrap();
        }
        for (rel, bytes) in &want {
            std::fs::write(dist().join(rel), bytes).unwrap();
        }
    }
    let have = committed();
    let mut problems = Vec::new();
    for (rel, bytes) in &want {
        match have.get(rel) {
            None => problems.push(format!("missing: {}", rel.display())),
            Some(b) if b != bytes => problems.push(format!("stale: {}", rel.display())),
            Some(_) => {}
        }
    }
    for rel in have.keys().filter(|r| !want.contains_key(*r)) {
        problems.push(format!("left over: {}", rel.display()));
    }
    assert!(
        problems.is_empty(),
        "daemon/dist does not match the command line ({}); regenerate with \
         `WATTSON_UPDATE_DIST=1 cargo test -p wattson --test daemon_e2e man_and_completions::` and commit it",
        problems.join(", ")
    );
    // One page per command, each with examples.
    for page in [
        "wattson.1",
        "wattson-sweep.1",
        "wattson-meter-probe.1",
        "wattson-help.1",
    ] {
        let text = String::from_utf8(want[&PathBuf::from("man").join(page)].clone()).unwrap();
        assert!(text.contains(".SH EXAMPLES"), "{page}");
    }
}

/// Every file `[package.metadata.deb]` installs exists (but the release binary, which
/// `cargo deb` builds), and the man pages and completions are among them.
#[test]
fn the_debian_package_lists_the_man_pages_and_completions() {
    let manifest: toml::Value = toml::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap(),
    )
    .unwrap();
    let assets = manifest["package"]["metadata"]["deb"]["assets"]
        .as_array()
        .unwrap();
    let mut installed = Vec::new();
    for a in assets {
        let (src, dest) = (a[0].as_str().unwrap(), a[1].as_str().unwrap());
        if src.starts_with("target/") {
            continue;
        }
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
        let matches: Vec<PathBuf> = match path.file_name().and_then(|n| n.to_str()) {
            Some(name) if name.contains('*') => {
                let (prefix, suffix) = name.split_once('*').unwrap();
                std::fs::read_dir(path.parent().unwrap())
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with(prefix) && n.ends_with(suffix))
                    })
                    .collect()
            }
            _ => vec![path.clone()],
        };
        assert!(
            matches.iter().any(|p| p.is_file()),
            "deb asset {src} matches no file"
        );
        for m in matches {
            let name = m.file_name().unwrap().to_string_lossy().into_owned();
            installed.push(if dest.ends_with('/') {
                format!("{dest}{name}")
            } else {
                dest.to_owned()
            });
        }
    }
    for want in [
        "usr/share/man/man1/wattson.1",
        "usr/share/man/man1/wattson-sweep.1",
        "usr/share/bash-completion/completions/wattson",
        "usr/share/zsh/vendor-completions/_wattson",
        "usr/share/fish/vendor_completions.d/wattson.fish",
    ] {
        assert!(
            installed.iter().any(|i| i == want),
            "{want} not installed: {installed:?}"
        );
    }
}
