//! Reading a configuration file: opened without blocking and bounded in size, parsed into
//! the file's structs with the key path and line of the first error.

use std::io::Read as _;
use std::path::Path;

use super::file::FileConfig;
use super::{ConfigError, MAX_CONFIG_BYTES};

/// Open `path` without blocking (a FIFO with no writer must not hang us), refuse anything
/// that is not a regular file or is larger than [`MAX_CONFIG_BYTES`], and read it as UTF-8.
#[allow(
    clippy::disallowed_methods,
    reason = "the configuration file: never a database"
)]
pub(super) fn read_config_file(path: &Path) -> Result<String, ConfigError> {
    use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
    let read_err = |source| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    let not_config = |message: String| ConfigError::NotAConfigFile {
        path: path.to_owned(),
        message,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(read_err)?;
    let meta = file.metadata().map_err(read_err)?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(not_config(format!(
            "is {what}, not a regular file: point --config or $WATTSON_CONFIG at a TOML file"
        )));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(not_config(format!(
            "is {} bytes; a config file is at most {MAX_CONFIG_BYTES} bytes",
            meta.len()
        )));
    }
    // The file may grow after the check: never read more than the limit.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(not_config(format!(
            "grew past {MAX_CONFIG_BYTES} bytes while being read"
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        not_config(format!(
            "is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Read `text` into the file structs. A bad value is named by its key path
/// (`meter.protocol`) and line; a TOML syntax error by its line.
pub(super) fn parse_file(text: &str, path: &Path) -> Result<FileConfig, ConfigError> {
    let syntax = |e: &toml::de::Error| ConfigError::Syntax {
        path: path.to_owned(),
        message: describe_toml_error(e, text),
    };
    let de = toml::Deserializer::parse(text).map_err(|e| syntax(&e))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let key = key_path(e.path());
        let inner = e.into_inner();
        match inner.span() {
            Some(span) if !key.is_empty() => ConfigError::Invalid {
                path: path.to_owned(),
                line: line_of(text, span.start),
                key,
                message: inner.message().trim().to_owned(),
            },
            _ => syntax(&inner),
        }
    })
}

/// `meter[0].protocol.$__serde_spanned_private_value` as the file names it:
/// `meter.protocol` (the line says which meter).
fn key_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut key = String::new();
    for segment in path {
        let name = match segment {
            Segment::Map { key } | Segment::Enum { variant: key } => key.as_str(),
            Segment::Seq { .. } | Segment::Unknown => continue,
        };
        if name.starts_with("$__") {
            continue;
        }
        if !key.is_empty() {
            key.push('.');
        }
        key.push_str(name);
    }
    key
}

/// Turn a TOML error into one message with the line number and the offending key.
fn describe_toml_error(e: &toml::de::Error, text: &str) -> String {
    let msg = e.message().trim().to_owned();
    match e.span() {
        Some(span) => {
            let line = line_of(text, span.start);
            let snippet = text.lines().nth(line - 1).unwrap_or("").trim();
            format!("line {line}: {msg} (at `{snippet}`)")
        }
        None => msg,
    }
}

pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}
