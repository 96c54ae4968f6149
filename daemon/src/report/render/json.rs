//! JSON: the report object, pretty-printed (the `wattson report --format json` contract),
//! with `summary`: the summary table's figures restated from the report's own
//! ([`crate::report::model::summary`]).

use serde::Serialize;

use super::RenderError;
use crate::report::model::{Report, Summary, summary};

/// The report's fields, then `summary`.
#[derive(Serialize)]
struct WithSummary<'a> {
    #[serde(flatten)]
    report: &'a Report,
    summary: Summary,
}

/// The report as pretty JSON with a trailing newline.
pub fn render(r: &Report) -> Result<String, RenderError> {
    let mut s = serde_json::to_string_pretty(&WithSummary {
        report: r,
        summary: summary(r),
    })?;
    s.push('\n');
    Ok(s)
}
