//! Rows of kind `candidate`: keeping this machine, then each candidate machine on this
//! machine's load, with its saving, payback, curve basis, perf ratio and rank (see the parent
//! module's documentation).

use super::{Rows, money, num, opt, price_of};
use crate::report::model::{CandidatesReport, Report};

/// The candidate-machine rows (see the module documentation).
pub(super) fn candidate_rows(out: &mut Rows, c: &CandidatesReport, r: &Report) {
    let blank = String::new;
    let mut rows: Vec<[String; 18]> = Vec::new();
    if let Some(k) = &c.keep {
        rows.push([
            String::from(&k.name),
            "candidate".to_string(),
            "keep".to_string(),
            num(k.annual_kwh * 1000.0 / r.year_hours, 2),
            blank(),
            num(k.annual_kwh, 3),
            blank(),
            money(k.annual_cost),
            blank(),
            String::from(&r.currency),
            num(price_of(k.annual_kwh, k.annual_cost, r), 6),
            blank(),
            blank(),
            blank(),
            blank(),
            blank(),
            blank(),
            String::from(&match k.annual_co2_kg {
                Some(c) => format!("{}; CO2 {} kg a year", k.basis, num(c, 1)),
                None => k.basis.clone(),
            }),
        ]);
    }
    let mode = if c.load_hours > 0.0 {
        "on this load"
    } else {
        "active idle"
    };
    for x in &c.candidates {
        let mut notes = vec![
            format!("curve {}", x.curve_basis),
            format!("perf ratio {} {}", num(x.perf_ratio, 2), x.perf_ratio_from),
        ];
        notes.push(match x.rank {
            Some(n) => format!("rank {n}"),
            None => "not ranked: cannot carry this load".to_owned(),
        });
        notes.extend(x.warnings.iter().cloned());
        notes.push(x.annual_basis.clone());
        if let Some(c) = x.annual_co2_kg {
            notes.push(match x.annual_co2_saved_kg {
                Some(s) => format!(
                    "CO2 {} kg a year, {} kg a year saved against keeping this machine",
                    num(c, 1),
                    num(s, 1)
                ),
                None => format!("CO2 {} kg a year", num(c, 1)),
            });
        }
        rows.push([
            String::from(&x.name),
            "candidate".to_string(),
            mode.to_string(),
            num(x.mean_watts, 2),
            blank(),
            num(x.annual_kwh, 3),
            blank(),
            money(x.annual_cost),
            blank(),
            String::from(&r.currency),
            num(price_of(x.annual_kwh, x.annual_cost, r), 6),
            opt(x.annual_kwh_saved, 3),
            x.annual_saving.map_or_else(String::new, money),
            opt(x.payback_years, 2),
            blank(),
            blank(),
            blank(),
            String::from(&notes.join("; ")),
        ]);
    }
    for row in rows {
        out.row(row);
    }
}
