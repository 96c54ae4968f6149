//! Markdown: the mode-by-configuration table as a pipe table, then the same sections as
//! the terminal table in bullet lists.

use std::fmt::Write as _;

use super::{cell, grid, sections, title};
use crate::report::model::Report;

/// `s` as Markdown text that reads as itself: `&`, `<` and `>` as entities (no HTML tag,
/// comment or autolink), a backslash before what would break a table cell or start
/// emphasis, code, strikethrough or a link, and a control character as `?` (a name never
/// ends a line or a row).
fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '|' | '*' | '_' | '`' | '[' | ']' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => out.push('?'),
            c => out.push(c),
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::md;

    #[test]
    fn html_and_markdown_in_a_name_read_as_text() {
        assert_eq!(
            md("<img src=x onerror=alert(1)> [a](http://x) `c` *b* a|b ~~s~~ &lt;\nx"),
            "&lt;img src=x onerror=alert(1)&gt; \\[a\\](http://x) \\`c\\` \\*b\\* a\\|b \\~\\~s\\~\\~ \
             &amp;lt;?x"
        );
    }
}
