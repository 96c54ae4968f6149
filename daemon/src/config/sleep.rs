//! `[sleep]`: what sleeping when idle would save (see [`crate::analysis::sleep`]): the
//! thresholds an hour must meet to count as idle enough to sleep, and, until standby is
//! measured at the wall, where this machine's standby watts come from.

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::ConfigError;
use super::validate::Validator;
use crate::analysis::sleep::Thresholds;

/// Standby watts above this are not a sleeping machine's.
pub const MAX_STANDBY_WATTS: f64 = 1000.0;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileSleep {
    pub(super) standby_watts: Option<Spanned<f64>>,
    pub(super) config: Option<Spanned<String>>,
    pub(super) wake_wh: Option<Spanned<f64>>,
    pub(super) max_cpu_percent: Option<Spanned<f64>>,
    pub(super) max_watts_over_floor_percent: Option<Spanned<f64>>,
    pub(super) max_service_wakeups_per_s: Option<Spanned<f64>>,
    pub(super) min_idle_days_percent: Option<Spanned<f64>>,
    pub(super) min_window_hours: Option<Spanned<i64>>,
}

/// `[sleep]`, validated.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct SleepConfig {
    /// This machine's standby power, W, where given by hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standby_watts: Option<f64>,
    /// The `[[config]]` whose `standby` mode is this machine's [default: the one named as
    /// the host, else the only one with a standby mode].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// The energy of one resume, Wh, where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_wh: Option<f64>,
    /// What counts as idle enough to sleep.
    #[serde(flatten)]
    pub thresholds: Thresholds,
}

impl Validator<'_> {
    /// `[sleep]` over the defaults; `config` must name one of `manual`.
    pub(super) fn sleep(
        &self,
        s: FileSleep,
        manual: &[super::ManualConfig],
    ) -> Result<SleepConfig, ConfigError> {
        if let Some(c) = s
            .config
            .as_ref()
            .filter(|c| !manual.iter().any(|m| m.name == *c.get_ref()))
        {
            let names: Vec<&str> = manual.iter().map(|m| m.name.as_str()).collect();
            return Err(self.err(
                c.span(),
                "sleep.config",
                format!(
                    "{:?} names no [[config]] (there are: {}): name the one whose standby mode \
                     is this machine's",
                    c.get_ref(),
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        }
        let d = Thresholds::default();
        let number = |v: &Option<Spanned<f64>>,
                      key: &str,
                      (lo, hi): (f64, f64),
                      what: &str|
         -> Result<Option<f64>, ConfigError> {
            v.as_ref()
                .map(|v| {
                    let x = *v.get_ref();
                    if x.is_finite() && x >= lo && x <= hi {
                        Ok(x)
                    } else {
                        Err(self.err(
                            v.span(),
                            key,
                            format!("{x} must be from {lo} to {hi}: {what}"),
                        ))
                    }
                })
                .transpose()
        };
        let window = s
            .min_window_hours
            .as_ref()
            .map(|v| {
                usize::try_from(*v.get_ref())
                    .ok()
                    .filter(|h| (1..=24).contains(h))
                    .ok_or_else(|| {
                        self.err(
                            v.span(),
                            "sleep.min_window_hours",
                            "must be from 1 to 24 hours",
                        )
                    })
            })
            .transpose()?;
        Ok(SleepConfig {
            standby_watts: number(
                &s.standby_watts,
                "sleep.standby_watts",
                (0.0, MAX_STANDBY_WATTS),
                "this machine's power asleep at the wall, W",
            )?,
            config: s.config.map(Spanned::into_inner),
            wake_wh: number(
                &s.wake_wh,
                "sleep.wake_wh",
                (0.0, 1000.0),
                "the energy of one resume above idle, Wh",
            )?,
            thresholds: Thresholds {
                max_cpu_percent: number(
                    &s.max_cpu_percent,
                    "sleep.max_cpu_percent",
                    (0.0, 100.0),
                    "% of all CPUs busy",
                )?
                .unwrap_or(d.max_cpu_percent),
                max_watts_over_floor_percent: number(
                    &s.max_watts_over_floor_percent,
                    "sleep.max_watts_over_floor_percent",
                    (0.0, 1000.0),
                    "% above the quietest hour's power",
                )?
                .unwrap_or(d.max_watts_over_floor_percent),
                max_service_wakeups_per_s: number(
                    &s.max_service_wakeups_per_s,
                    "sleep.max_service_wakeups_per_s",
                    (0.0, 1e6),
                    "wake-ups per second of one service",
                )?
                .unwrap_or(d.max_service_wakeups_per_s),
                min_idle_days_percent: number(
                    &s.min_idle_days_percent,
                    "sleep.min_idle_days_percent",
                    (1.0, 100.0),
                    "% of the days an hour of the day must have been idle on",
                )?
                .unwrap_or(d.min_idle_days_percent),
                min_window_hours: window.unwrap_or(d.min_window_hours),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::Config;

    fn parse(text: &str) -> Result<Config, super::ConfigError> {
        Config::from_toml(text, Path::new("test.toml"))
    }

    #[test]
    fn sleep_takes_its_thresholds_and_refuses_what_is_out_of_range_naming_key_and_line() {
        let c = parse("").unwrap();
        assert_eq!(
            c.sleep.thresholds,
            crate::analysis::sleep::Thresholds::default()
        );
        let c = parse(
            "[sleep]\nstandby_watts = 3.5\nwake_wh = 2\nmax_cpu_percent = 2\nmin_window_hours = 4\n\
             [[config]]\nname = \"box\"\nmodes = { standby = 4.0, idle = 30.0 }\n",
        )
        .unwrap();
        assert_eq!(c.sleep.standby_watts, Some(3.5));
        assert_eq!(c.sleep.wake_wh, Some(2.0));
        assert_eq!(c.sleep.thresholds.max_cpu_percent, 2.0);
        assert_eq!(c.sleep.thresholds.min_window_hours, 4);
        for (text, key) in [
            (
                "[sleep]\n\nstandby_watts = -1\n",
                "test.toml:3: sleep.standby_watts:",
            ),
            (
                "[sleep]\nmin_idle_days_percent = 0\n",
                "test.toml:2: sleep.min_idle_days_percent:",
            ),
            (
                "[sleep]\nmin_window_hours = 25\n",
                "test.toml:2: sleep.min_window_hours:",
            ),
            ("[sleep]\nstandby = 4\n", "test.toml:2: sleep.standby"),
            ("[sleep]\nconfig = \"nas\"\n", "test.toml:2: sleep.config:"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.starts_with(key), "{text}: {err}");
        }
        let err = parse("[sleep]\nconfig = \"nas\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("names no [[config]] (there are: none)"),
            "{err}"
        );
    }
}
