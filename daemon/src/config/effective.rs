//! The effective configuration printed by `wattson config check`: the typed [`Config`]
//! serialised as TOML, which parses back into the same [`Config`]. The serde attributes on
//! the types say how each value is written; the helpers here write the values whose file
//! form differs from their type (durations are in [`super::duration`]). Secrets never reach
//! it: the config holds only the names of the files and credentials that hold them, and a
//! URL is printed with any password redacted.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};
use wattson_collectors::meter::line::{Layout, LineFormat};

use super::Config;
use super::meter::field_name;

impl Config {
    /// The effective configuration as TOML, with secrets redacted.
    pub fn to_effective_toml(&self) -> Result<String, toml::ser::Error> {
        let body = toml::to_string(self)?;
        let mut out = format!(
            "# effective configuration{}\n",
            self.source.as_ref().map_or_else(
                || " (built-in defaults: no config file found)".to_owned(),
                |s| format!(" from {}", s.display())
            )
        );
        for line in body.lines() {
            out.push_str(line);
            if line.starts_with("password_file = ") {
                out.push_str("  # contents not shown");
            }
            out.push('\n');
        }
        Ok(out)
    }
}

/// Hide a password embedded in a URL (`mqtt://user:secret@host`).
pub fn redact_url(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://")
        && let Some((userinfo, host)) = rest.split_once('@')
        && let Some((user, _)) = userinfo.split_once(':')
    {
        return format!("{scheme}://{user}:<redacted>@{host}");
    }
    url.to_owned()
}

/// A time-of-use period's start or end, `"HH:MM"`.
#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `serialize_with` passes a reference
pub(super) fn time_of_day<S: Serializer>(t: &chrono::NaiveTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.format("%H:%M").to_string())
}

/// A manual configuration's modes as the `[config.modes]` table, in their order.
pub(super) fn modes<S: Serializer>(modes: &[(String, f64)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(modes.iter().map(|(mode, watts)| (mode, watts)))
}

/// Where a line field is: a CSV column or a key.
#[derive(Serialize)]
#[serde(untagged)]
enum Locator<'a> {
    Column(usize),
    Key(&'a str),
}

/// `[meter.line]` as the file writes it.
#[derive(Serialize)]
struct LineTable<'a> {
    format: &'static str,
    separator: String,
    fields: BTreeMap<&'static str, Locator<'a>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    scale: BTreeMap<&'static str, f64>,
}

/// A line meter's [`LineFormat`] as `[meter.line]` (`format`, `separator`, `fields`, `scale`).
#[allow(clippy::ref_option)] // serde's `serialize_with` passes a reference to the field
pub(super) fn line_format<S: Serializer>(
    line: &Option<LineFormat>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let Some(line) = line else {
        return s.serialize_none();
    };
    let (format, separator) = match line.layout {
        Layout::Csv { separator } => ("csv", separator),
        Layout::KeyValue { pair_separator, .. } => ("kv", pair_separator),
    };
    let mut table = LineTable {
        format,
        separator: separator.to_string(),
        fields: BTreeMap::new(),
        scale: BTreeMap::new(),
    };
    for f in &line.fields {
        let name = field_name(f.field);
        let at = match (&f.key, f.column) {
            (Some(key), _) => Locator::Key(key),
            (None, column) => Locator::Column(column.unwrap_or_default()),
        };
        table.fields.insert(name, at);
        if f.scale != 1.0 {
            table.scale.insert(name, f.scale);
        }
    }
    table.serialize(s)
}
