//! Names of control groups as people know them: a cgroup directory name made printable and
//! short, systemd's unit-name escapes undone (`machine-qemu\x2d1\x2dvm.scope` is `qemu-1-vm`),
//! and container names from the container runtime's own files where they are readable
//! without privileges (Docker's `containers/<id>/config.v2.json`), else the short id.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The longest name shown, in characters; longer names are cut and end in `~`.
pub const MAX_NAME_CHARS: usize = 64;

/// The most of a runtime's config file read for a name, bytes.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// A directory name as shown: lossy UTF-8, control characters (newlines, escapes) as `?`,
/// `:` kept (names are never split on it), at most [`MAX_NAME_CHARS`] characters.
pub fn printable(raw: &OsStr) -> String {
    let text = String::from_utf8_lossy(raw.as_bytes());
    let mut out = String::with_capacity(text.len().min(MAX_NAME_CHARS * 4));
    for (i, c) in text.chars().enumerate() {
        if i == MAX_NAME_CHARS - 1 && text.chars().count() > MAX_NAME_CHARS {
            out.push('~');
            break;
        }
        out.push(if c.is_control() { '?' } else { c });
    }
    if out.is_empty() {
        out.push('?');
    }
    out
}

/// Undoes systemd's `\xNN` escapes in a unit name (`systemd-escape`): `\x2d` is `-`. Bytes
/// that do not decode stay as written.
pub fn unescape_unit(name: &str) -> String {
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && bytes.get(i + 1) == Some(&b'x')
            && let Some(hex) = bytes.get(i + 2..i + 4)
            && let Ok(hex) = std::str::from_utf8(hex)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    printable(OsStr::from_bytes(&out))
}

/// Which container runtime a scope belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Runtime {
    Docker,
    Podman,
}

impl Runtime {
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Docker => "docker",
            Runtime::Podman => "podman",
        }
    }
}

/// Container names by id, read once per container from the runtime's files and forgotten
/// when the container is gone (so short-lived containers do not grow it).
#[derive(Debug, Default)]
pub struct ContainerNames {
    /// Docker's data directory (`/var/lib/docker`), where its per-container config lives.
    docker_root: Option<PathBuf>,
    known: HashMap<(Runtime, String), String>,
    seen: Vec<(Runtime, String)>,
}

impl ContainerNames {
    pub fn new(docker_root: Option<PathBuf>) -> Self {
        ContainerNames {
            docker_root,
            known: HashMap::new(),
            seen: Vec::new(),
        }
    }

    /// The name of container `id`: the runtime's name where readable, else the runtime and
    /// the id's first 12 characters (`docker 4f1c2a9b7d3e`).
    pub fn name(&mut self, runtime: Runtime, id: &str) -> String {
        let key = (runtime, id.to_owned());
        self.seen.push(key.clone());
        if let Some(n) = self.known.get(&key) {
            return n.clone();
        }
        let short: String = id.chars().take(12).collect();
        let name = self
            .runtime_name(runtime, id)
            .unwrap_or_else(|| format!("{} {}", runtime.as_str(), printable(OsStr::new(&short))));
        self.known.insert(key, name.clone());
        name
    }

    /// Forget the containers not named since the last call.
    pub fn retain_seen(&mut self) {
        let seen = std::mem::take(&mut self.seen);
        self.known.retain(|k, _| seen.contains(k));
    }

    /// Containers whose names are remembered.
    pub fn len(&self) -> usize {
        self.known.len()
    }

    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    #[allow(clippy::disallowed_methods, reason = "a cgroup file: never a database")]
    fn runtime_name(&self, runtime: Runtime, id: &str) -> Option<String> {
        use std::io::Read as _;
        if runtime != Runtime::Docker || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let path = self
            .docker_root
            .as_ref()?
            .join("containers")
            .join(id)
            .join("config.v2.json");
        let mut text = Vec::new();
        std::fs::File::open(path)
            .ok()?
            .take(MAX_CONFIG_BYTES)
            .read_to_end(&mut text)
            .ok()?;
        docker_name(&text)
    }
}

/// The `"Name":"/jellyfin"` of a Docker `config.v2.json`, without the leading `/`.
fn docker_name(json: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"\"Name\":\"";
    let at = json.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let rest = &json[at..];
    let end = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
    let name = rest[..end].strip_prefix(b"/").unwrap_or(&rest[..end]);
    (!name.is_empty()).then(|| printable(OsStr::from_bytes(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_printable_and_bounded() {
        let long = "a".repeat(300);
        assert_eq!(printable(OsStr::new(&long)).chars().count(), MAX_NAME_CHARS);
        assert!(printable(OsStr::new(&long)).ends_with('~'));
        assert_eq!(printable(OsStr::new("evil\nname\x1b[2J")), "evil?name?[2J");
        assert_eq!(printable(OsStr::from_bytes(b"caf\xe9")), "caf\u{fffd}");
        assert_eq!(printable(OsStr::new("")), "?");
    }

    #[test]
    fn unit_escapes_are_undone() {
        assert_eq!(unescape_unit(r"qemu\x2d1\x2dvm"), "qemu-1-vm");
        assert_eq!(unescape_unit(r"bad\x2"), r"bad\x2");
        assert_eq!(unescape_unit(r"nl\x0a"), "nl?");
    }

    #[test]
    fn docker_names_come_from_config_or_the_short_id() {
        assert_eq!(
            docker_name(br#"{"ID":"ab","Name":"/jellyfin","State":{}}"#).as_deref(),
            Some("jellyfin")
        );
        assert_eq!(docker_name(br#"{"Name":""}"#), None);
        let dir = tempfile::tempdir().unwrap();
        let id = "4f1c2a9b7d3e".repeat(5);
        let c = dir.path().join("containers").join(&id);
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(c.join("config.v2.json"), r#"{"Name":"/backup"}"#).unwrap();
        let mut names = ContainerNames::new(Some(dir.path().to_owned()));
        assert_eq!(names.name(Runtime::Docker, &id), "backup");
        assert_eq!(names.name(Runtime::Podman, &id), "podman 4f1c2a9b7d3e");
        names.retain_seen();
        assert_eq!(names.len(), 2);
        names.retain_seen();
        assert!(names.is_empty(), "forgotten once not seen");
    }
}
