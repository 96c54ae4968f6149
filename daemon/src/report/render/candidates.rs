//! The candidate machines' section ([`candidate_lines`]): keeping this machine, then each
//! candidate with its saving and payback.

use std::fmt::Write as _;

use super::{energy, num};
use crate::ledger::price::format_money;

/// The candidates' section: what they are priced on, keeping this machine, then each
/// candidate (cheapest that carries the load first) with its saving and payback.
pub fn candidate_lines(c: &crate::report::model::CandidatesReport, cur: &str) -> Vec<String> {
    let mut lines = vec![format!("priced on {}", c.load_basis)];
    if let Some(k) = &c.keep {
        let co2 = k
            .annual_co2_kg
            .map_or_else(String::new, |c| format!(", {} kg CO2", num(c, 1)));
        lines.push(format!(
            "keep {}: {}, {} a year{co2} [{}]",
            k.name,
            energy(k.annual_kwh),
            format_money(k.annual_cost, cur),
            k.basis
        ));
    }
    for x in &c.candidates {
        let rank = x
            .rank
            .map_or_else(|| "not ranked".to_owned(), |n| format!("#{n}"));
        let mut line = format!(
            "{rank} {}: {} W mean, {}, {} a year",
            x.name,
            num(x.mean_watts, 1),
            energy(x.annual_kwh),
            format_money(x.annual_cost, cur)
        );
        if let Some(s) = x.annual_saving {
            if s >= 0.0 {
                let _ = write!(line, ", saves {} a year", format_money(s, cur));
            } else {
                let _ = write!(line, ", costs {} a year more", format_money(-s, cur));
            }
        }
        match (x.price, x.payback_years) {
            (Some(p), Some(y)) => {
                let _ = write!(
                    line,
                    "; at {} it pays for itself in {} years",
                    format_money(p, cur),
                    num(y, 1)
                );
            }
            (Some(p), None) if x.annual_saving.is_some() => {
                let _ = write!(
                    line,
                    "; at {} it never pays for itself",
                    format_money(p, cur)
                );
            }
            _ => {}
        }
        if let Some(co2) = x.annual_co2_kg {
            let _ = write!(line, "; {} kg CO2 a year", num(co2, 1));
            match x.annual_co2_saved_kg {
                Some(s) if s >= 0.0 => {
                    let _ = write!(
                        line,
                        ", {} kg CO2 less than keeping this machine",
                        num(s, 1)
                    );
                }
                Some(s) => {
                    let _ = write!(
                        line,
                        ", {} kg CO2 more than keeping this machine",
                        num(-s, 1)
                    );
                }
                None => {}
            }
        }
        if let Some(w) = x.cost_per_full_load_hour {
            let _ = write!(
                line,
                "; {} per hour of this machine's full-throughput work",
                format_money(w, cur)
            );
        }
        if let Some(b) = x.cost_per_billion_ssj_ops {
            let _ = write!(line, "; {} per 10^9 ssj_ops", format_money(b, cur));
        }
        lines.push(line);
        lines.push(format!(
            "  curve {}; perf ratio {} ({}); mean load {} % of its maximum, peak {} %",
            x.curve_basis,
            num(x.perf_ratio, 2),
            x.perf_ratio_from,
            num(x.mean_load * 100.0, 1),
            num(x.peak_load * 100.0, 1)
        ));
        for w in &x.warnings {
            lines.push(format!("  warning: {w}"));
        }
    }
    lines
}
