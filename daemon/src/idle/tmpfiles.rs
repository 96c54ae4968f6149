//! The one writer of the systemd-tmpfiles.d(5) file wattson keeps (`wattson-idle.conf`),
//! which systemd-tmpfiles reads as root at every boot. wattson writes into it comment lines
//! and `w PATH - - - - VALUE` lines (type `w`: write VALUE into the existing file PATH), and
//! nothing else: [`Lines`] refuses a control character in a comment, and in a `w` line a
//! path or value outside that grammar (whitespace, `%` specifiers, `\` escapes, quotes,
//! relative or `..` paths), so text that reaches it cannot add a line of another type.
//!
//! The file is wattson's when its first line is [`MARK`]; its lines end at [`END`], and
//! the lines an administrator wrote below that one are kept, as they are, whenever the file
//! is written again or wattson's lines are taken out. With no line of wattson's and none
//! kept, the file is removed rather than left holding comments.

use std::path::{Path, PathBuf};

/// The file's name in its directory.
pub const FILE_NAME: &str = "wattson-idle.conf";
/// Where systemd-tmpfiles reads administrators' files.
pub const DEFAULT_DIR: &str = "/etc/tmpfiles.d";
/// The first line of the file: what says wattson wrote it.
pub const MARK: &str = "# Written by `wattson idle --apply`.";
/// The line after wattson's: what follows it is the administrator's and is kept.
pub const END: &str = "# End of wattson's lines. Lines below this one are kept by `wattson idle`.";

/// The longest value a `w` line holds (a setting's values are under 32 characters).
const MAX_VALUE_CHARS: usize = 64;

/// Why a line is not written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error(
        "a tmpfiles.d comment may not hold a control character (it would start another \
         line): {0:?}"
    )]
    Comment(String),
    #[error(
        "{0:?} is not a path a tmpfiles.d `w` line may hold (absolute, printable ASCII, no \
         whitespace, `%`, `\\`, quotes, `.` or `..` components)"
    )]
    Path(String),
    #[error(
        "{value:?} for {path} is not a value a tmpfiles.d `w` line may hold (1 to \
         {MAX_VALUE_CHARS} letters, digits, `_`, `-`, `.` or `:`)"
    )]
    Value { path: String, value: String },
}

/// Why the file is not written or removed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error(transparent)]
    Line(#[from] LineError),
    #[error(
        "{} is not a regular file (a symbolic link, or another kind of file), which \
         `wattson idle --apply` never writes: left as it is",
        .0.display()
    )]
    NotRegular(PathBuf),
    #[error(
        "{} was not written by `wattson idle --apply` (its first line is not {MARK:?}): left \
         as it is; move it aside to let wattson write its own",
        .0.display()
    )]
    NotOurs(PathBuf),
    #[error(
        "{} belongs to another user (uid {owner}), not to the one running wattson: left as \
         it is",
        path.display()
    )]
    Owner { path: PathBuf, owner: u32 },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

/// wattson's lines, each checked against the format as it is added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lines {
    text: String,
    writes: usize,
}

impl Lines {
    pub fn new() -> Lines {
        Lines::default()
    }

    /// `# text`, or `Err` when `text` holds a control character.
    pub fn comment(&mut self, text: &str) -> Result<(), LineError> {
        if text
            .chars()
            .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}')
        {
            return Err(LineError::Comment(text.chars().take(80).collect()));
        }
        self.text.push_str("# ");
        self.text.push_str(text);
        self.text.push('\n');
        Ok(())
    }

    pub fn blank(&mut self) {
        self.text.push('\n');
    }

    /// `w PATH - - - - VALUE`, or `Err` when either is outside the grammar.
    pub fn write(&mut self, path: &Path, value: &str) -> Result<(), LineError> {
        let shown = || path.to_string_lossy().chars().take(200).collect::<String>();
        let Some(text) = path.to_str().filter(|_| plain_path(path)) else {
            return Err(LineError::Path(shown()));
        };
        let plain_value = (1..=MAX_VALUE_CHARS).contains(&value.chars().count())
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
        if !plain_value {
            return Err(LineError::Value {
                path: shown(),
                value: value.chars().take(80).collect(),
            });
        }
        self.text.push_str("w ");
        self.text.push_str(text);
        self.text.push_str(" - - - - ");
        self.text.push_str(value);
        self.text.push('\n');
        self.writes += 1;
        Ok(())
    }

    /// The lines as they will be written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// How many `w` lines there are.
    pub fn writes(&self) -> usize {
        self.writes
    }
}

/// What to add to [`Lines`]: a comment, or a `w` line of a path and a value.
#[cfg(any(test, feature = "fuzz"))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Comment(String),
    Write(String, String),
}

/// The property of [`Lines`] that its fuzz target (`tests/fuzz`, `tmpfiles_line`) and
/// property test check: after `ops` (each taken or refused), the text, read line by line as
/// systemd-tmpfiles reads it (a line ends at `\n`, `\r` or NUL), is exactly the comments and
/// `w` lines taken, in order: a comment one line of `# ` and its text, every other line a
/// `w` line of seven fields for the path and value given. `Err` says what broke it. Built
/// for tests and with the `fuzz` feature only.
#[cfg(any(test, feature = "fuzz"))]
pub fn holds_only_what_was_taken(ops: &[Op]) -> Result<(), String> {
    let mut lines = Lines::new();
    let mut taken = Vec::new();
    for op in ops {
        let ok = match op {
            Op::Comment(text) => lines.comment(text).is_ok(),
            Op::Write(path, value) => lines.write(Path::new(path), value).is_ok(),
        };
        if ok {
            taken.push(op);
        }
    }
    let text = lines.text();
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(format!("the text does not end a line: {text:?}"));
    }
    let read: Vec<&str> = text
        .split(['\n', '\r', '\0'])
        .filter(|l| !l.is_empty())
        .collect();
    if read.len() != taken.len() {
        return Err(format!(
            "{} lines read for {} taken: {text:?}",
            read.len(),
            taken.len()
        ));
    }
    for (line, op) in read.iter().zip(&taken) {
        let fine = match op {
            Op::Comment(c) => line.strip_prefix("# ") == Some(c.as_str()),
            Op::Write(path, value) => {
                line.split_ascii_whitespace().collect::<Vec<_>>()
                    == ["w", path.as_str(), "-", "-", "-", "-", value.as_str()]
                    && !line.contains(['%', '\\'])
            }
        };
        if !fine {
            return Err(format!("{line:?} is not what was taken: {op:?}"));
        }
    }
    if lines.writes() != taken.iter().filter(|o| matches!(o, Op::Write(..))).count() {
        return Err("the count of `w` lines is not the count taken".into());
    }
    Ok(())
}

/// An absolute path of plain components, each printable ASCII without whitespace or what
/// tmpfiles.d would read as a specifier, an escape or a quote.
fn plain_path(path: &Path) -> bool {
    let Some(text) = path.to_str() else {
        return false;
    };
    text.starts_with('/')
        && text
            .chars()
            .all(|c| c.is_ascii_graphic() && !matches!(c, '%' | '\\' | '"' | '\''))
        && text
            .split('/')
            .skip(1)
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// The file as found in its directory: whether it is there, and the lines below [`END`]
/// that are kept. Only [`Existing::read`] makes one, so the lines kept are the file's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    path: PathBuf,
    found: bool,
    kept: Vec<String>,
}

impl Existing {
    /// Reads `dir/FILE_NAME`. `Err` when something is there that wattson does not write:
    /// not a regular file, another user's, or a file whose first line is not [`MARK`].
    ///
    /// A file written before [`END`] existed keeps what follows its last `w` line (what
    /// wattson wrote ended there).
    pub fn read(dir: &Path) -> Result<Existing, FileError> {
        use std::os::unix::fs::MetadataExt as _;
        let path = dir.join(FILE_NAME);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Existing {
                    path,
                    found: false,
                    kept: Vec::new(),
                });
            }
            Err(source) => {
                return Err(FileError::Io {
                    what: format!("reading {}", path.display()),
                    source,
                });
            }
        };
        if !meta.is_file() {
            return Err(FileError::NotRegular(path));
        }
        if meta.uid() != nix::unistd::geteuid().as_raw() {
            return Err(FileError::Owner {
                path,
                owner: meta.uid(),
            });
        }
        let text = std::fs::read_to_string(&path).map_err(|source| FileError::Io {
            what: format!("reading {}", path.display()),
            source,
        })?;
        let lines: Vec<&str> = text.lines().collect();
        if lines.first() != Some(&MARK) {
            return Err(FileError::NotOurs(path));
        }
        let below = match lines.iter().position(|l| *l == END) {
            Some(end) => end + 1,
            None => lines
                .iter()
                .rposition(|l| l.starts_with("w "))
                .map_or(lines.len(), |w| w + 1),
        };
        let mut kept: Vec<String> = lines[below..].iter().map(|l| (*l).to_owned()).collect();
        while kept.last().is_some_and(|l| l.trim().is_empty()) {
            kept.pop();
        }
        while kept.first().is_some_and(|l| l.trim().is_empty()) {
            kept.remove(0);
        }
        Ok(Existing {
            path,
            found: true,
            kept,
        })
    }

    /// The administrator's lines, kept below wattson's.
    pub fn kept(&self) -> &[String] {
        &self.kept
    }
}

/// What [`replace`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The file now holds wattson's lines and those kept.
    Written(PathBuf),
    /// Nothing was left to hold: the file was removed.
    Removed(PathBuf),
    /// There was no file and nothing to write.
    Absent(PathBuf),
}

/// Writes `dir/FILE_NAME` as [`MARK`], `ours` (when it holds a `w` line; its comments alone
/// are not written), [`END`] and the lines `existing` keeps: a new file, mode 0644, renamed
/// over the old one. With no `w` line and nothing kept, removes the file instead.
pub fn replace(dir: &Path, ours: &Lines, existing: &Existing) -> Result<Outcome, FileError> {
    let target = dir.join(FILE_NAME);
    if ours.writes() == 0 && existing.kept.is_empty() {
        if !existing.found {
            return Ok(Outcome::Absent(target));
        }
        return match std::fs::remove_file(&existing.path) {
            Ok(()) => Ok(Outcome::Removed(target)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Outcome::Absent(target)),
            Err(source) => Err(FileError::Io {
                what: format!("removing {}", existing.path.display()),
                source,
            }),
        };
    }
    let mut text = format!("{MARK}\n");
    if ours.writes() > 0 {
        text.push_str(&ours.text);
        text.push('\n');
    }
    text.push_str(END);
    text.push('\n');
    for line in &existing.kept {
        text.push_str(line);
        text.push('\n');
    }
    write_new(dir, &target, &text)?;
    Ok(Outcome::Written(target))
}

fn write_new(dir: &Path, target: &Path, text: &str) -> Result<(), FileError> {
    use std::os::unix::fs::PermissionsExt as _;
    let io = |what: String| move |source| FileError::Io { what, source };
    let mut tmp = tempfile::Builder::new()
        .prefix(".wattson-idle.")
        .tempfile_in(dir)
        .map_err(io(format!("creating a file in {}", dir.display())))?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .and_then(|()| {
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o644))
        })
        .map_err(io(format!("writing {}", target.display())))?;
    tmp.persist(target)
        .map_err(|e| e.error)
        .map_err(io(format!("replacing {}", target.display())))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_outside_the_grammar_is_refused() {
        let mut l = Lines::new();
        l.comment("ASPM powersave: -3.00 +/- 0.40 W").unwrap();
        l.write(
            Path::new("/sys/module/pcie_aspm/parameters/policy"),
            "powersave",
        )
        .unwrap();
        l.write(
            Path::new("/sys/devices/pci0000:00/0000:00:1c.0/power/control"),
            "auto",
        )
        .unwrap();
        for comment in [
            "ASPM\nf+ /etc/sudoers.d/x 0440 root root - x",
            "a\rb",
            "nul\0",
            "line\u{2028}separator",
        ] {
            assert!(
                matches!(l.comment(comment), Err(LineError::Comment(_))),
                "{comment:?}"
            );
        }
        for path in [
            "sys/x",
            "/sys/x y",
            "/sys/x\n",
            "/sys/%h",
            "/sys/a\\x",
            "/sys/\"x\"",
            "/sys/../etc/shadow",
            "/sys/./x",
            "/sys//x",
            "/sys/x/",
            "/sys/é",
        ] {
            assert!(
                matches!(l.write(Path::new(path), "1"), Err(LineError::Path(_))),
                "{path:?}"
            );
        }
        for value in [
            "",
            "a b",
            "1\nf+ /x",
            "%h",
            "a\\n",
            "\"x\"",
            &"9".repeat(65),
        ] {
            assert!(
                matches!(
                    l.write(Path::new("/sys/x"), value),
                    Err(LineError::Value { .. })
                ),
                "{value:?}"
            );
        }
        assert_eq!(l.writes(), 2);
        assert_eq!(
            l.text,
            "# ASPM powersave: -3.00 +/- 0.40 W\n\
             w /sys/module/pcie_aspm/parameters/policy - - - - powersave\n\
             w /sys/devices/pci0000:00/0000:00:1c.0/power/control - - - - auto\n"
        );
    }

    /// Text as it may reach [`Lines`]: anything, printable ASCII, a path-like string with
    /// what tmpfiles.d reads as specifiers, escapes and quotes, and a line break with a
    /// line of another type after it.
    fn hostile() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::prop_oneof![
            proptest::prelude::any::<String>(),
            "[ -~]{0,40}",
            "/sys/[a-z0-9_:./%\\\\\"' -]{0,30}",
            "[a-z0-9_.:-]{1,70}",
            "[a-z ]{0,8}[\n\r\u{0}\u{85}\u{2028}\u{2029}]f\\+ /etc/sudoers.d/x 0440 root root - x",
        ]
    }

    proptest::proptest! {
        // 2,000 cases; more: PROPTEST_CASES=20000 cargo test -p wattson --lib tmpfiles::tests::fuzz
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000)
        ))]

        /// Hostile comments, paths and values: what [`Lines`] takes, read back line by line
        /// as systemd-tmpfiles reads it (a line ends at `\n`, `\r` or NUL), is exactly the
        /// comments and `w` lines taken, in order, each `w` line the path and value given.
        #[test]
        fn fuzz_every_line_is_a_comment_or_a_w_line_for_the_path_given(
            ops in proptest::collection::vec(
                (proptest::prelude::any::<bool>(), hostile(), hostile()),
                0..8,
            )
        ) {
            let ops: Vec<Op> = ops
                .into_iter()
                .map(|(comment, a, b)| if comment { Op::Comment(a) } else { Op::Write(a, b) })
                .collect();
            if let Err(e) = holds_only_what_was_taken(&ops) {
                proptest::prop_assert!(false, "{e}");
            }
        }
    }

    #[test]
    fn the_administrators_lines_below_wattsons_are_kept_and_an_empty_file_removed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(FILE_NAME);
        let mut ours = Lines::new();
        ours.comment("governor powersave").unwrap();
        ours.write(Path::new("/sys/x"), "powersave").unwrap();
        let none = Existing::read(dir.path()).unwrap();
        assert!(matches!(
            replace(dir.path(), &ours, &none).unwrap(),
            Outcome::Written(_)
        ));
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with(MARK) && text.ends_with(&format!("{END}\n")),
            "{text}"
        );
        std::fs::write(&file, format!("{text}d /run/mine 0755 root root -\n\n")).unwrap();
        let found = Existing::read(dir.path()).unwrap();
        assert_eq!(found.kept(), ["d /run/mine 0755 root root -"]);
        // wattson's lines go, the administrator's stay; then with them gone, the file.
        replace(dir.path(), &Lines::new(), &found).unwrap();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            format!("{MARK}\n{END}\nd /run/mine 0755 root root -\n")
        );
        std::fs::write(&file, format!("{MARK}\n{END}\n")).unwrap();
        let bare = Existing::read(dir.path()).unwrap();
        assert!(matches!(
            replace(dir.path(), &ours.clone(), &bare).unwrap(),
            Outcome::Written(_)
        ));
        assert!(matches!(
            replace(dir.path(), &Lines::new(), &bare).unwrap(),
            Outcome::Removed(_)
        ));
        assert!(!file.exists());
        assert!(matches!(
            replace(dir.path(), &Lines::new(), &bare).unwrap(),
            Outcome::Absent(_)
        ));
        // A file from before END: what follows its last `w` line.
        std::fs::write(
            &file,
            format!("{MARK}\n# old\nw /sys/x - - - - 1\n\nz /run/mine 0700 - - -\n"),
        )
        .unwrap();
        assert_eq!(
            Existing::read(dir.path()).unwrap().kept(),
            ["z /run/mine 0700 - - -"]
        );
        std::fs::write(&file, "w /sys/x - - - - 1\n").unwrap();
        assert!(matches!(
            Existing::read(dir.path()),
            Err(FileError::NotOurs(_))
        ));
    }
}
