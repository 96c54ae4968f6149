//! Markdown: the mode-by-configuration table as a pipe table, then the same sections as
//! the terminal table in bullet lists.

use std::fmt::Write as _;

use super::{cell, grid, sections, title};
use crate::report::model::Report;

/// Escapes the characters that would break a table cell or start emphasis.
fn md(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace('*', "\\*")
        .replace('_', "\\_")
}

/// The report as a Markdown document.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", md(&title(r)));
    if !r.configs.is_empty() {
        let _ = write!(out, "| Mode \\\\ Config |");
        for c in &r.configs {
            let _ = write!(out, " {} |", md(&c.name));
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "|---|{}", "---|".repeat(r.configs.len()));
        for (name, cells) in grid(r) {
            let _ = write!(out, "| {} |", md(&name));
            for c in cells {
                let text = c.map_or_else(|| "-".to_string(), |m| cell(m, &r.currency));
                let _ = write!(out, " {} |", md(&text));
            }
            let _ = writeln!(out);
        }
        out.push('\n');
    }
    for s in sections(r) {
        let _ = writeln!(out, "## {}\n", md(&s.title));
        for l in &s.lines {
            let _ = writeln!(out, "- {}", md(l.trim_start()));
        }
        out.push('\n');
    }
    out
}
