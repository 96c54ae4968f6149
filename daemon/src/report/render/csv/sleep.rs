//! Rows of kind `sleep`: what sleeping when idle would save (see the module documentation).

use super::{Rows, money, num, opt};
use crate::report::model::Report;

/// The rows: `saving` (config = the proposed windows), `wake`, then one `interrupted` per
/// thing the windows would have slept through.
pub(super) fn sleep_rows(out: &mut Rows, r: &Report) {
    let Some(s) = &r.sleep else { return };
    let config = if s.windows.is_empty() {
        "no window".to_owned()
    } else {
        s.windows.join(", ")
    };
    let mut row = |mode: &str, watts: String, kwh: Option<f64>, cost: Option<f64>, warn: String| {
        let price = kwh
            .zip(cost)
            .filter(|(k, _)| k.abs() > 1e-12)
            .map(|(k, c)| c / k);
        let cells = [
            String::from(&config),
            "sleep".to_owned(),
            String::from(mode),
            watts,
            opt(s.standby_ci95_watts.filter(|_| mode == "saving"), 3),
            opt(kwh, 3),
            String::new(),
            cost.map_or_else(String::new, money),
            String::new(),
            String::from(&r.currency),
            opt(price, 6),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::from(&warn),
        ];
        out.row(cells);
    };
    let mut why: Vec<String> = vec![format!("from {}", s.history)];
    why.extend(
        s.unavailable
            .iter()
            .map(|u| format!("no window proposed: {u}")),
    );
    why.extend(s.schedule.iter().map(|x| format!("schedule \"{x}\"")));
    why.push(format!("{} h a week asleep", num(s.hours_a_week, 1)));
    why.push(format!("standby: {}", s.standby_from));
    why.extend(s.saving_basis.clone());
    why.push(format!("thresholds: {}", s.thresholds_text));
    why.extend(s.warnings.iter().cloned());
    let saved_w = s.idle_watts.zip(s.standby_watts).map(|(i, w)| i - w);
    row(
        "saving",
        opt(saved_w, 3),
        s.annual_kwh_saved,
        s.annual_saving,
        why.join("; "),
    );
    row(
        "wake",
        String::new(),
        s.annual_wake_cost
            .and(s.wake_wh)
            .map(|wh| wh * s.wakes_a_year / 1000.0),
        s.annual_wake_cost,
        format!("{:.0} resumes a year; {}", s.wakes_a_year, s.wake_from),
    );
    for i in &s.interrupted {
        row("interrupted", String::new(), None, None, i.text.clone());
    }
}
