//! Rows of kind `schedule`: each configuration's modes on a week's schedule (`--schedule`).

use std::fmt::Write as _;

use super::{field, money, num};
use crate::report::model::Report;

/// One row per configuration (mode `schedule`): its year on the schedule, the standing
/// charge apart; `warnings` holds the basis, or why there is no figure.
pub(super) fn schedule_rows(out: &mut String, r: &Report) {
    let Some(s) = &r.schedule else { return };
    for c in &s.configs {
        let opt = |x: Option<f64>, f: &dyn Fn(f64) -> String| x.map_or_else(String::new, f);
        let price = c
            .annual_kwh
            .zip(c.annual_cost)
            .filter(|(k, _)| *k > 0.0)
            .map(|(k, cost)| cost / k);
        let row = [
            field(&c.config),
            "schedule".to_owned(),
            "schedule".to_owned(),
            String::new(),
            String::new(),
            opt(c.annual_kwh, &|k| num(k, 3)),
            String::new(),
            opt(c.annual_cost, &money),
            String::new(),
            field(&r.currency),
            opt(price, &|p| num(p, 6)),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            field(&c.basis),
        ];
        let _ = writeln!(out, "{}", row.join(","));
    }
}
