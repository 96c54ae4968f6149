//! The summary table that leads the text, Markdown and HTML reports: the model's
//! [`Summary`] in rows of four cells (the answer, its figure, where it comes from, how sure
//! it is). Money is formatted here, never worked out.

use std::fmt::Write as _;

use super::{kwh, money_per_year, num};
use crate::ledger::price::format_money;
use crate::report::model::summary::{ChangeSummary, ConfigSummary, Origin, Summary, YearSummary};

/// The summary's title, as each format heads it.
pub const TITLE: &str = "Summary";

/// The table's header.
pub const HEADER: [&str; 4] = ["Answer", "Figure", "Where it comes from", "How sure"];

/// One row: [`HEADER`]'s four cells.
pub type Row = [String; 4];

/// "± GBP 1.82 (95 %)", or `none` where there is no interval.
fn interval(ci95: Option<f64>, cur: &str, none: &str) -> String {
    ci95.map_or_else(
        || none.to_owned(),
        |c| format!("± {} (95 %)", format_money(c, cur)),
    )
}

/// A year of this machine: energy and money, with the standing charge where there is one.
fn year_row(y: &YearSummary, cur: &str) -> Row {
    let mut figure = format!(
        "{}, {}",
        kwh(y.annual_kwh, None),
        money_per_year(y.annual_cost, None, cur)
    );
    if let (Some(standing), Some(all_in)) = (y.standing_charge, y.annual_cost_all_in) {
        let _ = write!(
            figure,
            "; {} with the standing charge ({})",
            money_per_year(all_in, None, cur),
            money_per_year(standing, None, cur)
        );
    }
    let mut sure = interval(y.annual_cost_ci95, cur, "interval not known");
    if y.under_a_day {
        sure.push_str(match y.origin {
            Origin::Estimated => "; under a day estimated",
            Origin::MeasuredAtTheWall | Origin::EnteredByHand => "; under a day measured",
        });
    }
    [
        "A year on your tariff".to_owned(),
        figure,
        y.from.clone(),
        sure,
    ]
}

/// A configuration: each mode's cost a year, the headline first.
fn config_row(c: &ConfigSummary, cur: &str) -> Row {
    let figure = c
        .modes
        .iter()
        .map(|m| format!("{} {}", m.mode, money_per_year(m.annual_cost, None, cur)))
        .collect::<Vec<_>>()
        .join("; ");
    // The headline's interval, else the first mode's that has one.
    let with_ci = c
        .modes
        .iter()
        .find_map(|m| m.annual_cost_ci95.map(|ci| (m, ci)));
    let sure = match (with_ci, c.origin) {
        (Some((m, ci)), _) => format!("± {} at {} (95 %)", format_money(ci, cur), m.mode),
        (None, Origin::EnteredByHand) => "as entered: no interval".to_owned(),
        (None, _) => "no interval".to_owned(),
    };
    [format!("{}, a year", c.name), figure, c.from.clone(), sure]
}

/// The change that saves the most: what it saves, what it costs and when that pays back.
fn change_row(ch: &ChangeSummary, cur: &str) -> Row {
    let mut figure = format!(
        "saves {}: {}",
        money_per_year(ch.annual_saving, None, cur),
        ch.change
    );
    match (ch.price, ch.payback_years) {
        (Some(p), Some(y)) => {
            let _ = write!(
                figure,
                "; {} to make, paid back in {} years",
                format_money(p, cur),
                num(y, 2)
            );
        }
        (Some(p), None) => {
            let _ = write!(figure, "; {} to make", format_money(p, cur));
        }
        (None, _) => {}
    }
    let of = if ch.saving_changes > 1 {
        format!(" (the most of {} changes that save)", ch.saving_changes)
    } else {
        String::new()
    };
    [
        "Cheapest change".to_owned(),
        figure,
        format!("{}{of}", ch.from),
        interval(ch.annual_saving_ci95, cur, "no interval"),
    ]
}

/// The summary's rows, each of [`HEADER`]'s four cells.
pub fn rows(s: &Summary, cur: &str) -> Vec<Row> {
    let mut out = Vec::new();
    if let Some(y) = &s.year {
        out.push(year_row(y, cur));
    } else if let Some(standing) = s.standing_charge {
        out.push([
            "Standing charge".to_owned(),
            format!(
                "{}, paid whatever runs: in no figure below",
                money_per_year(standing, None, cur)
            ),
            "entered by hand ([tariff])".to_owned(),
            "as entered".to_owned(),
        ]);
    }
    out.extend(s.configs.iter().map(|c| config_row(c, cur)));
    match (&s.cheapest_change, &s.no_change) {
        (Some(ch), _) => out.push(change_row(ch, cur)),
        (None, Some(why)) => out.push([
            "Cheapest change".to_owned(),
            why.clone(),
            String::new(),
            String::new(),
        ]),
        (None, None) => {}
    }
    for c in &s.checks {
        out.push([
            "What to check".to_owned(),
            c.text.clone(),
            format!("a warning on {}", c.about),
            "in full below".to_owned(),
        ]);
    }
    if s.more_checks > 0 {
        out.push([
            "What to check".to_owned(),
            format!(
                "{} more warning{}",
                s.more_checks,
                if s.more_checks == 1 { "" } else { "s" }
            ),
            "warnings on the figures above".to_owned(),
            "in full below".to_owned(),
        ]);
    }
    out
}
