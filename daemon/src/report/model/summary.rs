//! The summary that leads every text format of the report: its answers in one table, each
//! figure restated from the report (nothing is priced here), with where it came from and
//! how sure it is. A year of this machine on the tariff (measured at the wall, else
//! estimated from its calibration), what each configuration costs a year in each mode, the
//! change that saves the most a year (of the comparisons, the candidate machines, the idle
//! settings measured and sleeping when idle), and what to check: the warnings those figures
//! rest on, each in a short clause (in full in the sections below).
//!
//! Units: kWh per year, the tariff's currency per year, years, hours.

use serde::Serialize;

use super::{DUTY_CYCLE, Report};
use crate::report::input::{ConfigKind, ConfigStatus};

/// At most this many checks in the summary; the rest are counted (`more_checks`).
pub const MAX_CHECKS: usize = 5;

/// A check's clause is cut at a word to at most this many characters, marked with "…".
const CHECK_CHARS: usize = 90;

/// Where a figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Read at the wall by a meter (a sweep, the recorded history, `idle --measure`).
    MeasuredAtTheWall,
    /// Worked out from something else: a calibration, a candidate's published curve.
    Estimated,
    /// Typed in by hand (`[[config]]`, `[sleep] standby_watts`, a flag).
    EnteredByHand,
}

impl Origin {
    /// "measured at the wall", "estimated", "entered by hand".
    pub fn words(self) -> &'static str {
        match self {
            Origin::MeasuredAtTheWall => "measured at the wall",
            Origin::Estimated => "estimated",
            Origin::EnteredByHand => "entered by hand",
        }
    }
}

/// The report's answers, restated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// A year of this machine on the tariff, where the report has a measured or estimated
    /// history.
    pub year: Option<YearSummary>,
    /// The tariff's standing charge a year, paid whatever runs (in no running cost), where
    /// it has one.
    pub standing_charge: Option<f64>,
    /// What each configuration costs a year, in each mode.
    pub configs: Vec<ConfigSummary>,
    /// The change that saves the most a year, where one saves anything.
    pub cheapest_change: Option<ChangeSummary>,
    /// Why no change is named, where none is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_change: Option<String>,
    /// What the figures above rest on, most important first, at most [`MAX_CHECKS`].
    pub checks: Vec<Check>,
    /// Checks left out of `checks` (every one is in the report's sections and `notes`).
    pub more_checks: usize,
}

/// A year of this machine on the tariff.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct YearSummary {
    pub annual_kwh: f64,
    pub annual_kwh_ci95: Option<f64>,
    /// Energy only.
    pub annual_cost: f64,
    pub annual_cost_ci95: Option<f64>,
    /// The tariff's standing charge a year, and the year's bill with it, where it has one.
    pub standing_charge: Option<f64>,
    pub annual_cost_all_in: Option<f64>,
    pub origin: Origin,
    /// Where the figure comes from, in words.
    pub from: String,
    /// Hours measured (or estimated) that the year is projected from.
    pub covered_hours: f64,
    /// Less than a day: a day's pattern is not in the figure.
    pub under_a_day: bool,
}

/// One configuration's cost a year in each mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigSummary {
    pub name: String,
    pub origin: Origin,
    pub from: String,
    /// The comparisons' headline first where the configuration has it, then the others in
    /// the report's order.
    pub modes: Vec<ModeCost>,
}

/// A mode's cost a year.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeCost {
    /// A mode, or "duty cycle".
    pub mode: String,
    pub annual_cost: f64,
    pub annual_cost_ci95: Option<f64>,
    /// The comparisons' headline is at this mode.
    pub headline: bool,
}

/// What kind of change saves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Moving from one configuration to another (the comparisons).
    Configuration,
    /// Buying a candidate machine instead of keeping this one.
    Candidate,
    /// A setting `wattson idle --measure` measured.
    IdleSetting,
    /// Sleeping in the idle hours of the week.
    Sleep,
}

/// The change that saves the most a year.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangeSummary {
    pub kind: ChangeKind,
    /// The change in words: "2x Opteron -> Athlon 64 at idle".
    pub change: String,
    pub annual_saving: f64,
    pub annual_saving_ci95: Option<f64>,
    /// What making the change costs (an upgrade, a machine's price), where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payback_years: Option<f64>,
    pub origin: Origin,
    pub from: String,
    /// Changes priced in all that save something (this one included).
    pub saving_changes: usize,
}

/// Something a figure above rests on, in a short clause.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// The figure it weakens: "the year", "demo idle".
    pub about: String,
    pub text: String,
}

/// The summary of `r`.
pub fn summary(r: &Report) -> Summary {
    let (cheapest_change, no_change, change_warnings) = cheapest_change(r);
    let mut checks = checks(r, &change_warnings);
    let more_checks = checks.len().saturating_sub(MAX_CHECKS);
    checks.truncate(MAX_CHECKS);
    Summary {
        year: year(r),
        standing_charge: (r.standing_charge_per_year > 0.0).then_some(r.standing_charge_per_year),
        configs: r.configs.iter().map(|c| config(r, c)).collect(),
        cheapest_change,
        no_change,
        checks,
        more_checks,
    }
}

/// A year of this machine: its measured figure, else the one estimated from its calibration.
fn year(r: &Report) -> Option<YearSummary> {
    let standing = (r.standing_charge_per_year > 0.0).then_some(r.standing_charge_per_year);
    let all_in = |cost: f64| standing.map(|s| cost + s);
    if let Some(m) = r.measured.as_ref().filter(|m| m.covered_hours > 0.0) {
        return Some(YearSummary {
            annual_kwh: m.annual_kwh,
            annual_kwh_ci95: m.annual_kwh_ci95,
            annual_cost: m.annual_cost,
            annual_cost_ci95: m.annual_cost_ci95,
            standing_charge: standing,
            annual_cost_all_in: all_in(m.annual_cost),
            origin: Origin::MeasuredAtTheWall,
            from: format!(
                "measured at the wall ({}{} covered)",
                m.source
                    .as_ref()
                    .map_or_else(String::new, |s| format!("{s}, ")),
                crate::ledger::interval::hours_text(m.covered_hours)
            ),
            covered_hours: m.covered_hours,
            under_a_day: m.covered_hours < 24.0,
        });
    }
    let p = r.estimated.as_ref()?;
    let c = p.cost.as_ref()?;
    let hours = p.estimate.minutes as f64 / 60.0;
    Some(YearSummary {
        annual_kwh: c.kwh_per_year,
        annual_kwh_ci95: None,
        annual_cost: c.cost_per_year,
        annual_cost_ci95: c.cost_per_year_ci95,
        standing_charge: standing,
        annual_cost_all_in: all_in(c.cost_per_year),
        origin: Origin::Estimated,
        from: format!(
            "{} (no meter at the wall; {} estimated)",
            p.estimate.provenance,
            crate::ledger::interval::hours_text(hours)
        ),
        covered_hours: hours,
        under_a_day: hours < 24.0,
    })
}

/// Where a configuration's watts come from.
fn config_origin(c: &super::ConfigReport) -> (Origin, String) {
    let partial = if c.status == ConfigStatus::Partial {
        ", partial"
    } else {
        ""
    };
    match c.kind {
        ConfigKind::Manual => (Origin::EnteredByHand, "entered by hand ([[config]])".into()),
        ConfigKind::Sweep => (
            Origin::MeasuredAtTheWall,
            format!("measured at the wall (a sweep{partial})"),
        ),
        ConfigKind::IdleMeasure => (
            Origin::MeasuredAtTheWall,
            format!("measured at the wall (wattson idle --measure{partial})"),
        ),
    }
}

fn config(r: &Report, c: &super::ConfigReport) -> ConfigSummary {
    let (origin, from) = config_origin(c);
    let cost = |name: &str, m: &super::ModeReport| ModeCost {
        mode: name.to_owned(),
        annual_cost: m.annual_cost,
        annual_cost_ci95: m.annual_cost_ci95,
        headline: name == r.headline_mode,
    };
    let mut modes: Vec<ModeCost> = (c.modes.iter().map(|m| cost(&m.name, m)))
        .chain(c.duty_cycle.iter().map(|m| cost(DUTY_CYCLE, m)))
        .collect();
    modes.sort_by_key(|m| !m.headline);
    ConfigSummary {
        name: c.name.clone(),
        origin,
        from,
        modes,
    }
}

/// A configuration's origin in words, or "" where it is not in the report.
fn words(o: Option<&(Origin, String)>) -> &str {
    o.map_or("", |o| o.1.as_str())
}

/// A change that saves, with the warnings it rests on.
struct Saving {
    change: ChangeSummary,
    warnings: Vec<String>,
}

/// Each change the report prices that saves something a year.
fn savings(r: &Report) -> Vec<Saving> {
    let mut out: Vec<Saving> = Vec::new();
    let origin_of = |name: &str| r.configs.iter().find(|c| c.name == name).map(config_origin);
    for c in r.comparisons.iter().filter(|c| c.annual_saving > 0.0) {
        let (from, to) = (origin_of(&c.from), origin_of(&c.to));
        let origin = [&from, &to]
            .iter()
            .filter_map(|o| o.as_ref().map(|o| o.0))
            .max()
            .unwrap_or(Origin::EnteredByHand);
        let (from_words, to_words) = (words(from.as_ref()), words(to.as_ref()));
        let from_text = if from_words == to_words {
            format!("both {to_words}")
        } else {
            format!("{}: {from_words}; {}: {to_words}", c.from, c.to)
        };
        out.push(Saving {
            change: ChangeSummary {
                kind: ChangeKind::Configuration,
                change: format!("{} -> {} at {}", c.from, c.to, c.mode),
                annual_saving: c.annual_saving,
                annual_saving_ci95: c.annual_saving_ci95,
                price: c.upgrade_cost,
                payback_years: c.payback_years,
                origin,
                from: from_text,
                saving_changes: 0,
            },
            warnings: Vec::new(),
        });
    }
    if let Some(cs) = &r.candidates {
        let keep = cs.keep.as_ref().map_or("this machine", |k| k.name.as_str());
        for x in cs.candidates.iter().filter(|x| x.carries) {
            let Some(saving) = x.annual_saving.filter(|s| *s > 0.0) else {
                continue;
            };
            out.push(Saving {
                change: ChangeSummary {
                    kind: ChangeKind::Candidate,
                    change: format!("buy {} instead of keeping {keep}", x.name),
                    annual_saving: saving,
                    annual_saving_ci95: None,
                    price: x.price,
                    payback_years: x.payback_years,
                    origin: Origin::Estimated,
                    from: format!("estimated: its power curve on {}", cs.load_basis),
                    saving_changes: 0,
                },
                warnings: x.warnings.clone(),
            });
        }
    }
    if let Some(idle) = &r.idle {
        for s in idle
            .settings
            .iter()
            .filter(|s| s.effect && s.annual_cost_change < 0.0)
        {
            out.push(Saving {
                change: ChangeSummary {
                    kind: ChangeKind::IdleSetting,
                    change: format!("{} ({} -> {})", s.name, s.original, s.changed),
                    annual_saving: -s.annual_cost_change,
                    annual_saving_ci95: Some(s.annual_cost_change_ci95),
                    price: None,
                    payback_years: None,
                    origin: Origin::MeasuredAtTheWall,
                    from: format!(
                        "measured at the wall (wattson idle --measure, {})",
                        s.measured_at.get(..10).unwrap_or(&s.measured_at)
                    ),
                    saving_changes: 0,
                },
                warnings: Vec::new(),
            });
        }
    }
    if let Some(s) = &r.sleep {
        let saving = s.annual_net_saving.or(s.annual_saving).filter(|x| *x > 0.0);
        if let Some(saving) = saving {
            let standby = first_clause(&s.standby_from);
            let origin = if s.standby_from.starts_with("measured") {
                Origin::MeasuredAtTheWall
            } else {
                Origin::EnteredByHand
            };
            out.push(Saving {
                change: ChangeSummary {
                    kind: ChangeKind::Sleep,
                    change: format!(
                        "sleep {}{}",
                        s.windows.join(", "),
                        if s.annual_net_saving.is_some() {
                            ""
                        } else {
                            " (before the cost of waking)"
                        }
                    ),
                    annual_saving: saving,
                    annual_saving_ci95: None,
                    price: None,
                    payback_years: None,
                    origin,
                    from: format!(
                        "measured at the wall (the stored history's idle hours); standby {standby}"
                    ),
                    saving_changes: 0,
                },
                warnings: s.warnings.clone(),
            });
        }
    }
    out
}

/// The change that saves the most a year, why none is named, and the warnings it rests on.
fn cheapest_change(r: &Report) -> (Option<ChangeSummary>, Option<String>, Vec<String>) {
    let all = savings(r);
    let n = all.len();
    let best = all
        .into_iter()
        .max_by(|a, b| a.change.annual_saving.total_cmp(&b.change.annual_saving));
    match best {
        Some(mut s) => {
            s.change.saving_changes = n;
            (Some(s.change), None, s.warnings)
        }
        None => (
            None,
            Some(
                "none found: nothing priced here is cheaper (another configuration to \
                 compare, `wattson candidate`, `wattson idle --measure`)"
                    .to_owned(),
            ),
            Vec::new(),
        ),
    }
}

/// The warnings the summary's figures rest on, most important first: the year's, the
/// change's, each configuration's modes' and fit's, and an idle-power regression.
fn checks(r: &Report, change_warnings: &[String]) -> Vec<Check> {
    let mut out: Vec<Check> = Vec::new();
    let mut push = |about: String, text: &str| {
        let text = short(text);
        if !out.iter().any(|c| c.about == about && c.text == text) {
            out.push(Check { about, text });
        }
    };
    if let Some(m) = &r.measured {
        for w in &m.warnings {
            push("the year".to_owned(), w);
        }
    }
    for w in change_warnings {
        push("the change".to_owned(), w);
    }
    for c in &r.configs {
        // One warning on several modes is said once, naming them.
        let mut texts: Vec<(String, Vec<&str>)> = Vec::new();
        for m in &c.modes {
            for w in &m.warnings {
                let w = short(w);
                match texts.iter_mut().find(|(t, _)| *t == w) {
                    Some((_, modes)) => modes.push(&m.name),
                    None => texts.push((w, vec![&m.name])),
                }
            }
        }
        for (w, modes) in texts {
            push(format!("{} {}", c.name, modes.join(", ")), &w);
        }
        for n in c.fit.iter().flat_map(|f| &f.notes) {
            push(format!("{}'s fit", c.name), n);
        }
    }
    if r.regression.status == super::RegressionStatus::Detected {
        push(
            "idle power".to_owned(),
            "it has risen since the baseline sweep",
        );
    }
    out
}

/// The clause before the first ": " (where that leaves something to read), else the whole.
fn first_clause(s: &str) -> &str {
    match s.find(": ") {
        Some(i) if i >= 12 => &s[..i],
        _ => s,
    }
}

/// A warning as the summary says it: its first clause, cut at a word to at most
/// [`CHECK_CHARS`] characters and marked "…" where cut.
pub fn short(warning: &str) -> String {
    let clause = first_clause(warning.trim());
    if clause.chars().count() <= CHECK_CHARS {
        return clause.to_owned();
    }
    let mut out = String::new();
    for word in clause.split(' ') {
        if out.chars().count() + word.chars().count() + 1 > CHECK_CHARS - 1 {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.is_empty() {
        out = clause.chars().take(CHECK_CHARS - 1).collect();
    }
    out.push('…');
    out
}
