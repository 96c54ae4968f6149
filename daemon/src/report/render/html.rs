//! One self-contained HTML file: inline CSS, the summary table, the mode-by-configuration
//! table, the report's sections, inline SVG charts (see [`super::charts`]: each drawn for a
//! desktop's width and a phone's, a media query showing one) and the report JSON embedded in
//! `<script type="application/json" id="wattson-report">`. It makes no external requests:
//! no scripts, fonts, styles or images are fetched.

use std::fmt::Write as _;

use super::{RenderError, cell, charts, grid, json, sections, summary, title};
use crate::report::model::Report;

/// The `id` of the embedded JSON block.
pub const JSON_ID: &str = "wattson-report";

const STYLE: &str = "
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 70rem; color: #222; padding: 0 1rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { border: 1px solid #ccc; padding: 0.35rem 0.7rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td { font-variant-numeric: tabular-nums; white-space: nowrap; }
.meta { color: #555; }
figure { margin: 1.5rem 0; }
figure.chart svg { display: block; width: 100%; height: auto; }
figure.chart .wide svg { max-width: 760px; }
figure.chart .narrow { display: none; }
figure.chart .narrow svg { max-width: 480px; }
@media (max-width: 639px) { figure.chart .wide { display: none; } figure.chart .narrow { display: block; } }
.scroll { overflow-x: auto; }
table.summary td, table.summary th { white-space: normal; overflow-wrap: break-word; }
@media (max-width: 639px) {
  table.summary, table.summary thead, table.summary tbody, table.summary tr, table.summary th, table.summary td { display: block; }
  table.summary thead { display: none; }
  table.summary tr { border: 1px solid #ccc; margin: 0 0 0.5rem; }
  table.summary th, table.summary td { border: 0; padding: 0.2rem 0.6rem; }
  table.summary td[data-label]::before { content: attr(data-label) ': '; color: #555; }
  table.summary td:empty { display: none; }
}
li { overflow-wrap: anywhere; }
";

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The summary that leads the report: a table in its own sideways-scrolling box, its
/// cells wrapping at words; on a phone's width each row is a block of its own, its cells
/// one under the other, each named (see [`STYLE`]). A sum of money or energy never breaks.
fn summary_table(out: &mut String, r: &Report) {
    let rows = summary::rows(&crate::report::model::summary(r), &r.currency);
    if rows.is_empty() {
        return;
    }
    let cur = r.currency.as_str();
    let cell = |s: &str| {
        esc(s)
            .replace("± ", "±\u{a0}")
            .replace(&format!("{cur} "), &format!("{cur}\u{a0}"))
            .replace(" kWh", "\u{a0}kWh")
            .replace("95 %", "95\u{a0}%")
    };
    let _ = write!(
        out,
        "<h2>{}</h2>\n<div class=\"scroll\">\n<table class=\"summary\">\n<thead><tr>",
        summary::TITLE
    );
    for h in summary::HEADER {
        let _ = write!(out, "<th scope=\"col\">{}</th>", esc(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for [answer, figure, from, sure] in &rows {
        let _ = writeln!(
            out,
            "<tr><th scope=\"row\">{}</th><td>{}</td><td data-label=\"{}\">{}</td>\
             <td data-label=\"{}\">{}</td></tr>",
            cell(answer),
            cell(figure),
            esc(summary::HEADER[2]),
            cell(from),
            esc(summary::HEADER[3]),
            cell(sure)
        );
    }
    out.push_str("</tbody>\n</table>\n</div>\n");
}

/// The report as one HTML document.
pub fn render(r: &Report) -> Result<String, RenderError> {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n\
         <p class=\"meta\">Generated {}{}.</p>\n",
        esc(&title(r)),
        esc(&title(r)),
        esc(&r.generated_at),
        r.host
            .as_ref()
            .map_or_else(String::new, |h| format!(" on {}", esc(h)))
    );
    summary_table(&mut out, r);
    if !r.configs.is_empty() {
        // On a phone the table scrolls sideways in its own box; its figures never wrap.
        out.push_str(
            "<h2>Annual running cost by mode and configuration</h2>\n<div class=\"scroll\">\n\
             <table>\n<tr><th>Mode \\ Config</th>",
        );
        for c in &r.configs {
            let _ = write!(out, "<th>{}</th>", esc(&c.name));
        }
        out.push_str("</tr>\n");
        for (name, cells) in grid(r) {
            let _ = write!(out, "<tr><th>{}</th>", esc(&name));
            for c in cells {
                let text = c.map_or_else(|| "-".to_string(), |m| cell(m, &r.currency));
                let _ = write!(out, "<td>{}</td>", esc(&text));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n</div>\n");
    }
    for s in sections(r) {
        let _ = writeln!(out, "<h2>{}</h2>\n<ul>", esc(&s.title));
        for l in &s.lines {
            let _ = writeln!(out, "<li>{}</li>", esc(l.trim_start()));
        }
        out.push_str("</ul>\n");
    }
    let wide = charts::all(r, charts::Layout::Wide)?;
    let narrow = charts::all(r, charts::Layout::Narrow)?;
    out.push_str("<h2>Charts</h2>\n");
    if wide.is_empty() {
        out.push_str(
            "<p class=\"meta\">Nothing to chart yet: no configuration, sweep or measured history \
             (run <code>wattson run</code> or <code>wattson sweep</code>, or add a \
             <code>[[config]]</code>).</p>\n",
        );
    }
    // Each chart drawn for a desktop's width and a phone's: the page shows the one that
    // fits, so neither is scaled down past legible.
    for (w, n) in wide.iter().zip(&narrow) {
        let _ = writeln!(
            out,
            "<figure class=\"chart\">\n<div class=\"wide\">\n{w}\n</div>\n\
             <div class=\"narrow\">\n{n}\n</div>\n</figure>"
        );
    }
    // `<` only occurs inside JSON strings, where `\u003c` means the same; escaping it keeps
    // `</script>` in a configuration name from ending the block.
    let data = json::render(r)?.replace('<', "\\u003c");
    let _ = write!(
        out,
        "<script type=\"application/json\" id=\"{JSON_ID}\">\n{data}</script>\n</body>\n</html>\n"
    );
    Ok(out)
}
