//! JSON: the report object, pretty-printed (the `wattson report --format json` contract).

use super::RenderError;
use crate::report::model::Report;

/// The report as pretty JSON with a trailing newline.
pub fn render(r: &Report) -> Result<String, RenderError> {
    let mut s = serde_json::to_string_pretty(r)?;
    s.push('\n');
    Ok(s)
}
