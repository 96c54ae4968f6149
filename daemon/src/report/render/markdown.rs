//! Markdown: the mode-by-configuration table as a pipe table, then the same sections as
//! the terminal table in bullet lists.

use std::fmt::Write as _;

use super::{cell, grid, sections, summary, title};
use crate::report::model::Report;

/// `s` as Markdown text that reads as itself: `&`, `<` and `>` as entities (no HTML tag,
/// comment or autolink), a backslash before what would break a table cell or start
/// emphasis, code, strikethrough or a link, and a control character as `?` (a name never
/// ends a line or a row).
pub fn text(s: &str) -> String {
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

/// One row of a pipe table, `| a | b |`, each cell's text escaped ([`text`]): one line of
/// as many cells as `cells`, whatever they hold.
pub fn row<S: AsRef<str>>(cells: &[S]) -> String {
    let mut out = String::from("|");
    for c in cells {
        let _ = write!(out, " {} |", text(c.as_ref()));
    }
    out
}

/// The property of [`row`] that its fuzz target (`tests/fuzz`, `markdown_row`) and property
/// test check, for `cells` (at least one): the row as the report prints it (control
/// characters replaced) is one line; read as a GFM table row, by CommonMark's backslash
/// escapes and by cmark-gfm's rule that `\|` is a pipe in a cell, it has exactly as many
/// cells; in each, every character that Markdown or HTML would read as syntax is escaped,
/// and the cell reads back as its text (control characters as `?`, spaces at its ends
/// trimmed as a table trims them). `Err` says what broke it. Built for tests and with the
/// `fuzz` feature only.
#[cfg(any(test, feature = "fuzz"))]
pub fn row_holds<S: AsRef<str>>(cells: &[S]) -> Result<(), String> {
    let line = crate::output::without_controls(&row(cells)).into_owned();
    if line.contains(['\n', '\r']) || !line.starts_with('|') || !line.ends_with('|') {
        return Err(format!("not one row: {line:?}"));
    }
    let inner = &line[1..line.len() - 1];
    // cmark-gfm: a pipe after a backslash is in the cell, whatever is before that.
    let gfm = inner
        .char_indices()
        .filter(|&(i, c)| c == '|' && !inner[..i].ends_with('\\'))
        .count()
        + 1;
    // CommonMark: a backslash escapes the character after it.
    let mut read: Vec<String> = vec![String::new()];
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let escaped = chars.next().ok_or("a backslash ends the row")?;
                read.last_mut().ok_or("no cell")?.push(escaped);
            }
            '|' => read.push(String::new()),
            '*' | '_' | '`' | '[' | ']' | '~' | '<' | '>' => {
                return Err(format!("{c:?} unescaped in {line:?}"));
            }
            c => read.last_mut().ok_or("no cell")?.push(c),
        }
    }
    if read.len() != cells.len() || gfm != cells.len() {
        return Err(format!(
            "{} and {gfm} cells read for {}: {line:?}",
            read.len(),
            cells.len()
        ));
    }
    for (got, meant) in read.iter().zip(cells) {
        let meant: String = meant
            .as_ref()
            .chars()
            .map(|c| {
                if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                    '?'
                } else {
                    c
                }
            })
            .collect();
        let got = got
            .trim_matches(' ')
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&");
        if got != meant.trim_matches(' ') {
            return Err(format!("{got:?} read for {meant:?}: {line:?}"));
        }
    }
    Ok(())
}

/// The report as a Markdown document.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", text(&title(r)));
    let rows = summary::rows(&crate::report::model::summary(r), &r.currency);
    if !rows.is_empty() {
        let _ = writeln!(out, "## {}\n", summary::TITLE);
        let _ = writeln!(out, "{}\n|---|---|---|---|", row(&summary::HEADER));
        for cells in &rows {
            let _ = writeln!(out, "{}", row(cells));
        }
        out.push('\n');
    }
    if !r.configs.is_empty() {
        let _ = writeln!(out, "## Annual running cost by mode and configuration\n");
        let header: Vec<&str> = std::iter::once("Mode \\ Config")
            .chain(r.configs.iter().map(|c| c.name.as_str()))
            .collect();
        let _ = writeln!(out, "{}", row(&header));
        let _ = writeln!(out, "|---|{}", "---|".repeat(r.configs.len()));
        for (name, cells) in grid(r) {
            let cells: Vec<String> = std::iter::once(name)
                .chain(
                    cells
                        .into_iter()
                        .map(|c| c.map_or_else(|| "-".to_string(), |m| cell(m, &r.currency))),
                )
                .collect();
            let _ = writeln!(out, "{}", row(&cells));
        }
        out.push('\n');
    }
    for s in sections(r) {
        let _ = writeln!(out, "## {}\n", text(&s.title));
        for l in &s.lines {
            let _ = writeln!(out, "- {}", text(l.trim_start()));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::row_holds;
    use super::text as md;

    proptest::proptest! {
        // 2,000 cases; more: PROPTEST_CASES=20000 cargo test -p wattson --lib markdown::tests::fuzz
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000)
        ))]

        /// Candidate and configuration names of any text, of Markdown and HTML syntax and
        /// line breaks: a row stays one row of its cells, each reading as its name.
        #[test]
        fn fuzz_a_row_stays_one_row_of_its_cells(
            cells in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::any::<String>(),
                    "[ -~]{0,24}",
                    "[|\\\\`*_~<>&;\\[\\]() a-z#!:\n\r\u{85}\u{2028}]{0,24}",
                ],
                1..8,
            )
        ) {
            if let Err(e) = row_holds(&cells) {
                proptest::prop_assert!(false, "{e}");
            }
        }
    }

    #[test]
    fn html_and_markdown_in_a_name_read_as_text() {
        assert_eq!(
            md("<img src=x onerror=alert(1)> [a](http://x) `c` *b* a|b ~~s~~ &lt;\nx"),
            "&lt;img src=x onerror=alert(1)&gt; \\[a\\](http://x) \\`c\\` \\*b\\* a\\|b \\~\\~s\\~\\~ \
             &amp;lt;?x"
        );
    }
}
