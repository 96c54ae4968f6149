//! The terminal table: rows are modes, columns are configurations, each cell the watts,
//! annual kWh and annual cost (DESIGN.md's mode-by-configuration table with money beside
//! each figure), then fits, comparisons and measured against modelled as lines.

use std::fmt::Write as _;

use super::{Section, cell_parts, grid, sections, summary, title};
use crate::report::model::Report;

const CORNER: &str = "Mode \\ Config";

fn width(s: &str) -> usize {
    s.chars().count()
}

fn pad(s: &str, w: usize) -> String {
    format!("{s}{}", " ".repeat(w.saturating_sub(width(s))))
}

/// The report as aligned text.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}\n", title(r));
    write_summary(&mut out, r);
    let parts: Vec<(String, Vec<Option<[String; 3]>>)> = grid(r)
        .into_iter()
        .map(|(name, cells)| {
            let parts = cells
                .into_iter()
                .map(|c| c.map(|m| cell_parts(m, &r.currency)))
                .collect();
            (name, parts)
        })
        .collect();
    // Each part right-aligned within its configuration's column, so figures line up.
    let part_widths: Vec<[usize; 3]> = (0..r.configs.len())
        .map(|i| {
            let mut w = [0; 3];
            for (_, cells) in &parts {
                if let Some(p) = &cells[i] {
                    for k in 0..3 {
                        w[k] = w[k].max(width(&p[k]));
                    }
                }
            }
            w
        })
        .collect();
    let rows: Vec<(String, Vec<String>)> = parts
        .into_iter()
        .map(|(name, cells)| {
            let texts = cells
                .into_iter()
                .enumerate()
                .map(|(i, c)| match c {
                    None => "-".to_string(),
                    Some(p) => (0..3)
                        .map(|k| {
                            format!("{}{}", " ".repeat(part_widths[i][k] - width(&p[k])), p[k])
                        })
                        .collect::<Vec<_>>()
                        .join("  "),
                })
                .collect();
            (name, texts)
        })
        .collect();
    if r.configs.is_empty() {
        let _ = writeln!(
            out,
            "no configurations: add [[config]] sections to the config file or run `wattson sweep`\n"
        );
    } else {
        let first = rows
            .iter()
            .map(|(n, _)| width(n))
            .chain([width(CORNER)])
            .max()
            .unwrap_or(0);
        let widths: Vec<usize> = r
            .configs
            .iter()
            .enumerate()
            .map(|(i, c)| {
                rows.iter()
                    .map(|(_, cells)| width(&cells[i]))
                    .chain([width(&c.name)])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |first_cell: &str, cells: Vec<&str>| -> String {
            let mut l = pad(first_cell, first);
            for (c, w) in cells.iter().zip(&widths) {
                l.push_str("   ");
                l.push_str(&pad(c, *w));
            }
            l.trim_end().to_string()
        };
        let _ = writeln!(
            out,
            "{}",
            line(CORNER, r.configs.iter().map(|c| c.name.as_str()).collect())
        );
        let rule: usize = first + widths.iter().map(|w| w + 3).sum::<usize>();
        let _ = writeln!(out, "{}", "-".repeat(rule));
        for (name, cells) in &rows {
            let _ = writeln!(
                out,
                "{}",
                line(name, cells.iter().map(String::as_str).collect())
            );
        }
        out.push('\n');
    }
    write_sections(&mut out, &sections(r));
    out
}

/// The widest each summary column is before its cells wrap at words, in characters.
const SUMMARY_WIDTHS: [usize; 4] = [24, 60, 40, 32];

/// `s` in lines of at most `max` characters, broken after a `;` or `,` where a line can
/// hold whole clauses, else at spaces (a longer word on a line of its own, whole).
fn wrap(s: &str, max: usize) -> Vec<String> {
    let mut clauses: Vec<String> = vec![String::new()];
    for word in s.split(' ') {
        let last = clauses.last_mut().map(|c| {
            if !c.is_empty() {
                c.push(' ');
            }
            c.push_str(word);
        });
        if last.is_some() && word.ends_with(';') {
            clauses.push(String::new());
        }
    }
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut add = |line: &mut String, piece: &str| {
        if !line.is_empty() && width(line) + 1 + width(piece) > max {
            lines.push(std::mem::take(line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(piece);
    };
    for clause in clauses.iter().filter(|c| !c.is_empty()) {
        if width(clause) <= max {
            add(&mut line, clause);
        } else {
            for word in clause.split(' ') {
                add(&mut line, word);
            }
        }
    }
    lines.push(line);
    lines
}

/// The summary as an aligned table of its four columns under its title, each cell wrapped
/// at words to its column's width.
fn write_summary(out: &mut String, r: &Report) {
    let rows = summary::rows(&crate::report::model::summary(r), &r.currency);
    if rows.is_empty() {
        return;
    }
    let header = summary::HEADER.map(str::to_owned);
    let wrapped: Vec<Vec<Vec<String>>> = std::iter::once(&header)
        .chain(&rows)
        .map(|row| {
            row.iter()
                .zip(SUMMARY_WIDTHS)
                .map(|(c, max)| wrap(c, max))
                .collect()
        })
        .collect();
    let widths: Vec<usize> = (0..4)
        .map(|k| {
            wrapped
                .iter()
                .flat_map(|row| row[k].iter().map(|l| width(l)))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let _ = writeln!(out, "{}:", summary::TITLE);
    for (i, row) in wrapped.iter().enumerate() {
        let height = row.iter().map(Vec::len).max().unwrap_or(1);
        for k in 0..height {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(lines, w)| pad(lines.get(k).map_or("", String::as_str), *w))
                .collect();
            let _ = writeln!(out, "  {}", cells.join("   ").trim_end());
        }
        if i == 0 {
            let rule = widths.iter().sum::<usize>() + 3 * (widths.len() - 1);
            let _ = writeln!(out, "  {}", "-".repeat(rule));
        }
    }
    out.push('\n');
}

fn write_sections(out: &mut String, sections: &[Section]) {
    for s in sections {
        let _ = writeln!(out, "{}:", s.title);
        for l in &s.lines {
            let _ = writeln!(out, "  {l}");
        }
        out.push('\n');
    }
}
