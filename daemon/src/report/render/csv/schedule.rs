//! Rows of kind `schedule`: each configuration's modes on a week's schedule (`--schedule`);
//! and of kind `away`: the standby and off measured at the wall, which a schedule's
//! `standby` prices.

use super::{Rows, money, num};
use crate::report::model::Report;

/// One row per configuration (mode `schedule`): its year on the schedule, the standing
/// charge apart; `warnings` holds the basis, or why there is no figure.
pub(super) fn schedule_rows(out: &mut Rows, r: &Report) {
    let Some(s) = &r.schedule else { return };
    for c in &s.configs {
        let opt = |x: Option<f64>, f: &dyn Fn(f64) -> String| x.map_or_else(String::new, f);
        let price = c
            .annual_kwh
            .zip(c.annual_cost)
            .filter(|(k, _)| *k > 0.0)
            .map(|(k, cost)| cost / k);
        let row = [
            String::from(&c.config),
            "schedule".to_owned(),
            "schedule".to_owned(),
            String::new(),
            String::new(),
            opt(c.annual_kwh, &|k| num(k, 3)),
            String::new(),
            opt(c.annual_cost, &money),
            String::new(),
            String::from(&r.currency),
            opt(price, &|p| num(p, 6)),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::from(&c.basis),
        ];
        out.row(row);
    }
}

/// One row per kind of time away measured at the wall (config = the wall source, mode
/// `standby` or `off`): its watts and their 95 % band; `price_per_kwh` the mean price its
/// energy was priced at; `warnings` the basis, the energy and what it cost.
pub(super) fn away_rows(out: &mut Rows, r: &Report) {
    let Some(m) = &r.measured else { return };
    let source = m
        .source
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    for a in &m.away {
        let price = (a.wh > 0.0).then(|| a.cost / (a.wh / 1000.0));
        let row = [
            String::from(&source),
            "away".to_owned(),
            a.mode.to_owned(),
            num(a.watts, 2),
            a.ci95_watts.map_or_else(String::new, |c| num(c, 2)),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::from(&r.currency),
            price.map_or_else(String::new, |p| num(p, 6)),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::from(&format!(
                "{}; {} Wh, {}",
                a.basis,
                num(a.wh, 2),
                money(a.cost)
            )),
        ];
        out.row(row);
    }
}
