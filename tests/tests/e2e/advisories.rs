//! Known vulnerabilities in what wattson is built from: every crate version in `Cargo.lock`
//! against the RustSec advisories kept in `tests/advisories/`, a snapshot of the RustSec
//! advisory database (its commit and date in `SNAPSHOT`; `tests/advisories/refresh.sh`
//! refreshes it from a checkout). CI reaches no advisory database, so the snapshot travels
//! with the code, as `cargo deny check advisories` would read it; the rule is cargo-audit's: a
//! version is affected unless a `patched` or `unaffected` requirement of the advisory
//! matches it, withdrawn advisories aside.
//!
//! A vulnerability fails the test unless [`ACCEPTED`] says why wattson cannot reach it.
//! Informational advisories (unmaintained, unsound) are printed, not failed.

// A snapshot that cannot be read fails the test loudly.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Advisories that match a locked version but that wattson cannot reach: (id, why).
const ACCEPTED: &[(&str, &str)] = &[
    (
        "RUSTSEC-2026-0049",
        "rustls-webpki 0.102 comes with rumqttc 0.25.1 (the newest) for rumqttc's own TLS, \
         which wattson does not use: rumqttc reaches the broker through wattson's relay \
         (publish/mqtt/driver/relay.rs), whose TLS is rustls 0.23 verifying with \
         rustls-webpki 0.103.17 (patched)",
    ),
    ("RUSTSEC-2026-0098", "as RUSTSEC-2026-0049"),
    ("RUSTSEC-2026-0099", "as RUSTSEC-2026-0049"),
    ("RUSTSEC-2026-0104", "as RUSTSEC-2026-0049"),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_owned()
}

fn snapshot() -> PathBuf {
    workspace().join("tests/advisories")
}

#[derive(Deserialize)]
struct Lock {
    package: Vec<Locked>,
}

#[derive(Deserialize)]
struct Locked {
    name: String,
    version: String,
    /// Absent for the workspace's own crates.
    source: Option<String>,
}

/// The crates.io packages of `Cargo.lock`.
fn locked() -> Vec<Locked> {
    let text = std::fs::read_to_string(workspace().join("Cargo.lock")).expect("Cargo.lock");
    let lock: Lock = toml::from_str(&text).expect("Cargo.lock is TOML");
    lock.package
        .into_iter()
        .filter(|p| p.source.is_some())
        .collect()
}

#[derive(Deserialize)]
struct Front {
    advisory: Meta,
    #[serde(default)]
    versions: Versions,
}

#[derive(Deserialize)]
struct Meta {
    id: String,
    package: String,
    informational: Option<String>,
    withdrawn: Option<toml::Value>,
}

#[derive(Deserialize, Default)]
struct Versions {
    #[serde(default)]
    patched: Vec<String>,
    #[serde(default)]
    unaffected: Vec<String>,
}

/// One advisory file: its TOML front matter (between the ```` ```toml ```` fence and the
/// next fence) and its title (the first `# ` heading after it).
struct Advisory {
    front: Front,
    title: String,
}

fn parse(path: &Path) -> Advisory {
    let text = std::fs::read_to_string(path).expect("an advisory file");
    let body = text
        .split_once("```toml\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .unwrap_or_else(|| panic!("{}: no ```toml front matter", path.display()));
    let front: Front =
        toml::from_str(body.0).unwrap_or_else(|e| panic!("{}: front matter: {e}", path.display()));
    let title = body
        .1
        .lines()
        .find_map(|l| l.strip_prefix("# "))
        .unwrap_or("(no title)")
        .to_owned();
    Advisory { front, title }
}

/// Whether `version` is affected: no `patched` or `unaffected` requirement matches it.
fn affects(versions: &Versions, version: &semver::Version) -> bool {
    !versions
        .patched
        .iter()
        .chain(&versions.unaffected)
        .any(|req| {
            semver::VersionReq::parse(req)
                .unwrap_or_else(|e| panic!("version requirement {req:?}: {e}"))
                .matches(version)
        })
}

/// The advisories of the snapshot that affect a locked version: (crate version, advisory).
fn matches() -> Vec<(String, Advisory)> {
    let mut out = Vec::new();
    for p in locked() {
        let dir = snapshot().join("crates").join(&p.name);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let version = semver::Version::parse(&p.version).expect("a locked version");
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let a = parse(&f);
            assert_eq!(a.front.advisory.package, p.name, "{}", f.display());
            if a.front.advisory.withdrawn.is_none() && affects(&a.front.versions, &version) {
                out.push((format!("{} {}", p.name, p.version), a));
            }
        }
    }
    out
}

#[test]
fn no_locked_crate_has_a_known_vulnerability() {
    let stamp = std::fs::read_to_string(snapshot().join("SNAPSHOT")).expect("SNAPSHOT");
    let mut failures = Vec::new();
    for (krate, a) in matches() {
        let id = &a.front.advisory.id;
        let line = format!("{krate}: {id} {}", a.title);
        if let Some(kind) = &a.front.advisory.informational {
            eprintln!("warning ({kind}): {line}");
        } else if let Some((_, why)) = ACCEPTED.iter().find(|(a, _)| a == id) {
            eprintln!("accepted: {line}: {why}");
        } else {
            failures.push(line);
        }
    }
    eprintln!("advisory database snapshot: {}", stamp.replace('\n', ", "));
    assert!(
        failures.is_empty(),
        "vulnerable dependencies (update them: cargo update -p NAME; or, where wattson cannot \
         reach the flaw, say why in ACCEPTED):\n{}",
        failures.join("\n")
    );
}

/// Every accepted advisory still matches a locked version: an update that leaves it behind
/// removes it from the list.
#[test]
fn every_accepted_advisory_still_applies() {
    let found: Vec<String> = matches()
        .into_iter()
        .map(|(_, a)| a.front.advisory.id)
        .collect();
    for (id, _) in ACCEPTED {
        assert!(
            found.iter().any(|f| f == id),
            "{id} no longer matches Cargo.lock: remove it from ACCEPTED"
        );
    }
}

/// A locked crate that the database has advisories for, but the snapshot keeps none of, was
/// added after the last refresh.
#[test]
fn the_snapshot_keeps_the_advisories_of_every_locked_crate() {
    let known = std::fs::read_to_string(snapshot().join("crates.txt")).expect("crates.txt");
    let missing: Vec<String> = locked()
        .into_iter()
        .filter(|p| known.lines().any(|k| k == p.name))
        .filter(|p| !snapshot().join("crates").join(&p.name).is_dir())
        .map(|p| p.name)
        .collect();
    assert!(
        missing.is_empty(),
        "the snapshot predates these dependencies: run tests/advisories/refresh.sh: {missing:?}"
    );
}

#[test]
fn version_requirements_read_as_the_advisory_database_means_them() {
    let v = |s: &str| semver::Version::parse(s).unwrap();
    let versions = Versions {
        patched: vec![
            ">= 0.103.12, < 0.104.0-alpha.1".into(),
            ">= 0.104.0-alpha.6".into(),
        ],
        unaffected: vec!["< 0.100.0".into()],
    };
    assert!(affects(&versions, &v("0.102.8")));
    assert!(affects(&versions, &v("0.103.11")));
    assert!(!affects(&versions, &v("0.103.12")));
    assert!(!affects(&versions, &v("0.103.17")));
    assert!(!affects(&versions, &v("0.105.0")));
    assert!(!affects(&versions, &v("0.99.1")));
    assert!(
        affects(&Versions::default(), &v("1.0.0")),
        "no fix: affected"
    );
}
