//! The terminal table: rows are modes, columns are configurations, each cell the watts,
//! annual kWh and annual cost (DESIGN.md's mode-by-configuration table with money beside
//! each figure), then fits, comparisons and measured against modelled as lines.

use std::fmt::Write as _;

use super::{Section, cell_parts, grid, sections, title};
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

fn write_sections(out: &mut String, sections: &[Section]) {
    for s in sections {
        let _ = writeln!(out, "{}:", s.title);
        for l in &s.lines {
            let _ = writeln!(out, "  {l}");
        }
        out.push('\n');
    }
}
