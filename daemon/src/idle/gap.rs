//! The gap, explained: idle as measured now (the newest idle hour at the wall) against the
//! best idle seen (the lowest idle hour of the history), and that gap assigned to named
//! causes with watts and money: each setting `wattson idle --measure` found to save that is
//! not in effect now, at its measured saving and interval, and each disk spun up for more of
//! the newest hour than of the best, at its spun-up watts (measured, or the datasheet's) times
//! the difference in spun-up share. What the causes do not cover is
//! shown as unexplained; causes that add to more than the gap say that they overlap or that
//! the best hour differed in more than these settings.
//!
//! An hour is idle when the CPU's mean busy share was under [`super::history::IDLE_BUSY`].
//! Units: W, the tariff's currency, UTC ms.

use serde::Serialize;
use wattson_collectors::idle::settings::Setting;

use super::store::Effect;
use super::trials::kind_of;
use crate::ledger::price::annual_cost;
use crate::tariff::Tariff;

/// One idle hour: its start, UTC ms, and its mean wall power, W.
pub type IdleHourWatts = (i64, f64);

/// A disk's spin in the two hours the gap compares, with its watts spun up above standby.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskSpin {
    pub disk: String,
    pub watts: f64,
    /// 0 for a datasheet figure.
    pub watts_ci95: f64,
    /// `measured at the wall ...`, `the datasheet figure ...`.
    pub watts_from: String,
    /// Spun-up share of the newest idle hour and of the best, 0..1.
    pub now_share: f64,
    pub best_share: f64,
}

/// The newest idle hour and the lowest, the two the gap compares; `None` without two idle
/// hours.
pub fn now_and_best(idle_hours: &[IdleHourWatts]) -> Option<(IdleHourWatts, IdleHourWatts)> {
    if idle_hours.len() < 2 {
        return None;
    }
    let now = *idle_hours.iter().max_by_key(|h| h.0)?;
    let best = *idle_hours.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
    Some((now, best))
}

/// One named cause of the gap.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cause {
    /// `ASPM powersave`.
    pub name: String,
    /// Why it counts, in words.
    pub why: String,
    pub watts: f64,
    pub watts_ci95: f64,
    pub annual_cost: f64,
}

/// The gap and its causes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gap {
    pub now_watts: f64,
    /// Start of the newest idle hour (RFC 3339, UTC).
    pub now_hour: String,
    pub best_watts: f64,
    pub best_hour: String,
    pub gap_watts: f64,
    pub gap_annual_cost: f64,
    pub causes: Vec<Cause>,
    pub explained_watts: f64,
    /// The gap less the causes (negative where they add to more than it).
    pub unexplained_watts: f64,
    /// Of the gap, 0..1 (1 where the causes cover it all).
    pub explained_share: f64,
    pub notes: Vec<String>,
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// Whether `e`'s measured value is in effect now: every file of its kind reads it.
fn in_effect(e: &Effect, settings: &[Setting]) -> bool {
    let Some(kind) = kind_of(&e.trial) else {
        return false;
    };
    let of_kind: Vec<&Setting> = settings
        .iter()
        .filter(|s| s.kind == kind && !s.files.is_empty())
        .collect();
    !of_kind.is_empty() && of_kind.iter().all(|s| s.current == e.changed)
}

/// The gap between the newest and the lowest of `idle_hours` (hours at the wall, in any
/// order), with the measured savings of `effects` not in effect in `settings` and the disks
/// of `disks` spun up for more of the newest hour than of the best as causes; `None` without
/// two idle hours.
pub fn explain(
    idle_hours: &[IdleHourWatts],
    effects: &[Effect],
    settings: &[Setting],
    disks: &[DiskSpin],
    tariff: &Tariff,
    reference: chrono::NaiveDate,
) -> Option<Gap> {
    let (now, best) = now_and_best(idle_hours)?;
    let money = |w: f64| annual_cost(w, None, tariff, reference).map_or(0.0, |y| y.cost);
    let mut causes: Vec<Cause> = effects
        .iter()
        .filter(|e| e.effect && e.delta_w < 0.0 && !in_effect(e, settings))
        .filter(|e| super::trials::standby_disk(&e.trial).is_none())
        .map(|e| {
            let found: Vec<&str> = settings
                .iter()
                .filter(|s| kind_of(&e.trial) == Some(s.kind) && !s.files.is_empty())
                .map(|s| s.current.as_str())
                .collect();
            let mut now_values = found.clone();
            now_values.dedup();
            Cause {
                name: e.name.clone(),
                why: format!(
                    "measured to save {:.2} +/- {:.2} W; it is {} now, not {}",
                    -e.delta_w,
                    e.delta_ci95_w,
                    if now_values.is_empty() {
                        "absent".to_owned()
                    } else {
                        now_values.join("/")
                    },
                    e.changed
                ),
                watts: -e.delta_w,
                watts_ci95: e.delta_ci95_w,
                annual_cost: money(-e.delta_w),
            }
        })
        .collect();
    causes.extend(disks.iter().filter_map(|d| disk_cause(d, &money)));
    let gap_watts = (now.1 - best.1).max(0.0);
    let explained: f64 = causes.iter().map(|c| c.watts).sum();
    let mut notes = Vec::new();
    if explained > gap_watts + causes.iter().map(|c| c.watts_ci95).sum::<f64>() {
        notes.push(
            "the causes add to more than the gap: they overlap (a deeper package state needs \
             several of them at once), or the best hour differed in more than these settings"
                .to_owned(),
        );
    }
    if now.0 == best.0 {
        notes.push("the newest idle hour is the best seen: there is no gap".to_owned());
    }
    Some(Gap {
        now_watts: now.1,
        now_hour: rfc3339(now.0),
        best_watts: best.1,
        best_hour: rfc3339(best.0),
        gap_watts,
        gap_annual_cost: money(gap_watts),
        explained_watts: explained,
        unexplained_watts: gap_watts - explained,
        explained_share: if gap_watts > 0.0 {
            (explained / gap_watts).min(1.0)
        } else {
            1.0
        },
        causes,
        notes,
    })
}

/// A disk as a cause: what its longer spin in the newest hour costs, where it was spun up
/// for at least a hundredth more of it than of the best hour.
fn disk_cause(d: &DiskSpin, money: &impl Fn(f64) -> f64) -> Option<Cause> {
    let more = d.now_share - d.best_share;
    if more < 0.01 || d.watts.is_nan() || d.watts <= 0.0 {
        return None;
    }
    Some(Cause {
        name: format!("{} spun up", d.disk),
        why: format!(
            "spun up {:.0} % of the newest idle hour against {:.0} % of the best, at {:.1} W ({})",
            d.now_share * 100.0,
            d.best_share * 100.0,
            d.watts,
            d.watts_from
        ),
        watts: d.watts * more,
        watts_ci95: d.watts_ci95 * more,
        annual_cost: money(d.watts * more),
    })
}

/// Idle now against the best idle seen in `history`, priced at the configured tariff.
pub fn for_idle(
    config: &crate::config::Config,
    store: Option<&crate::store::Store>,
    history: Option<&super::history::IdleInput>,
    measured: &[super::store::Effect],
    all: &[Setting],
    disks: &[super::disk_hours::StoredDisk],
) -> Option<super::gap::Gap> {
    let tariff = crate::ledger::costs::tariff(&config.tariff).ok()?;
    let today = chrono::Local::now().date_naive();
    let idle_wall = &history?.idle_wall;
    let (now, best) = now_and_best(idle_wall)?;
    let spins = store
        .map(|s| super::disk_hours::spins(s, &config.host.name, disks, (now.0, best.0)))
        .transpose()
        .unwrap_or_else(|e| {
            tracing::warn!("disks: {}", wattson_collectors::ErrorChain(&e));
            None
        })
        .unwrap_or_default();
    explain(idle_wall, measured, all, &spins, &tariff, today)
}

/// The gap in lines, for `wattson idle` and the report.
pub fn lines(g: &Gap, currency: &str) -> Vec<String> {
    use crate::ledger::price::format_money;
    let mut out = vec![format!(
        "idle now {:.1} W (the hour from {}) against the best idle seen {:.1} W (the hour from \
         {}): {:.1} W more, {} a year",
        g.now_watts,
        g.now_hour,
        g.best_watts,
        g.best_hour,
        g.gap_watts,
        format_money(g.gap_annual_cost, currency)
    )];
    for c in &g.causes {
        out.push(format!(
            "  {}: {:.1} +/- {:.1} W, {} a year ({})",
            c.name,
            c.watts,
            c.watts_ci95,
            format_money(c.annual_cost, currency),
            c.why
        ));
    }
    out.push(if g.unexplained_watts >= 0.0 {
        format!(
            "  unexplained: {:.1} W ({:.0} % of the gap explained by the causes above)",
            g.unexplained_watts,
            g.explained_share * 100.0
        )
    } else {
        format!(
            "  the causes above add to {:.1} W more than the gap",
            -g.unexplained_watts
        )
    });
    out.extend(g.notes.iter().map(|n| format!("  {n}")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use wattson_collectors::idle::settings::SettingKind;

    fn effect(id: &str, changed: &str, delta: f64) -> Effect {
        Effect {
            run_id: 1,
            host: "h".into(),
            trial: id.into(),
            name: format!("{id} {changed}"),
            original: "x".into(),
            changed: changed.into(),
            started_ms: 0,
            ended_ms: 1,
            baseline_w: 40.0,
            changed_w: 40.0 + delta,
            delta_w: delta,
            delta_ci95_w: 0.3,
            n: 100,
            effect: true,
            phases: serde_json::Value::Null,
        }
    }

    fn setting(kind: SettingKind, current: &str) -> Setting {
        Setting {
            kind,
            id: kind.as_str().into(),
            label: String::new(),
            current: current.into(),
            available: Vec::new(),
            lower: None,
            files: vec![PathBuf::from("/sys/x")],
            note: None,
        }
    }

    fn tariff() -> Tariff {
        Tariff::simple("GBP", 0.30, 0.0, Vec::new(), crate::zone::Zone::UTC).unwrap()
    }

    #[test]
    fn settings_measured_to_save_and_not_in_effect_explain_the_gap() {
        let hours = [(0, 35.5), (3_600_000, 40.1), (7_200_000, 40.0)];
        let effects = [
            effect("pcie_aspm", "powersave", -3.0),
            effect("sata_alpm", "med_power_with_dipm", -1.5),
        ];
        let found = [
            setting(SettingKind::PcieAspm, "performance"),
            setting(SettingKind::SataAlpm, "max_performance"),
        ];
        let day = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
        let g = explain(&hours, &effects, &found, &[], &tariff(), day).unwrap();
        assert!((g.gap_watts - 4.5).abs() < 1e-9, "{g:?}");
        assert_eq!(g.causes.len(), 2);
        assert!((g.explained_share - 1.0).abs() < 1e-9);
        assert!(
            (g.causes[0].annual_cost - 3.0 * 8.76 * 0.30).abs() < 0.01,
            "{g:?}"
        );
        // ASPM in effect: only SATA is a cause; 3 W unexplained.
        let applied = [
            setting(SettingKind::PcieAspm, "powersave"),
            setting(SettingKind::SataAlpm, "max_performance"),
        ];
        let g = explain(&hours, &effects, &applied, &[], &tariff(), day).unwrap();
        assert_eq!(g.causes.len(), 1);
        assert!((g.unexplained_watts - 3.0).abs() < 1e-9, "{g:?}");
        let text = lines(&g, "GBP").join("\n");
        assert!(
            text.contains("unexplained: 3.0 W (33 % of the gap"),
            "{text}"
        );
        assert!(explain(&hours[..1], &effects, &found, &[], &tariff(), day).is_none());
    }

    #[test]
    fn a_disk_spun_up_longer_than_in_the_best_hour_explains_its_part() {
        let hours = [(0, 40.0), (3_600_000, 43.0)];
        let disk = |now_share: f64, best_share: f64| DiskSpin {
            disk: "sda".into(),
            watts: 6.0,
            watts_ci95: 0.4,
            watts_from: "measured".into(),
            now_share,
            best_share,
        };
        let day = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
        let g = explain(&hours, &[], &[], &[disk(0.5, 0.0)], &tariff(), day).unwrap();
        assert_eq!(g.causes.len(), 1);
        assert_eq!(g.causes[0].name, "sda spun up");
        assert!((g.causes[0].watts - 3.0).abs() < 1e-9, "{g:?}");
        assert!((g.causes[0].watts_ci95 - 0.2).abs() < 1e-9, "{g:?}");
        assert!((g.explained_share - 1.0).abs() < 1e-9, "{g:?}");
        assert!(
            g.causes[0]
                .why
                .contains("spun up 50 % of the newest idle hour against 0 %"),
            "{g:?}"
        );
        // Spun up as long in both hours, or less now: no cause.
        for (now, best) in [(0.5, 0.5), (0.0, 0.3)] {
            let g = explain(&hours, &[], &[], &[disk(now, best)], &tariff(), day).unwrap();
            assert!(g.causes.is_empty(), "{g:?}");
        }
    }
}
