//! Power models for simulated meters: a constant, or watts that follow this machine's CPU
//! load (`idle + per_cpu x busy CPUs`), with a first-order ramp and Gaussian noise; plus
//! setting effects: watts added while a file (a power setting in a fixture tree) holds a
//! value, so `wattson idle --measure` can be checked against a known answer.

use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How a simulated meter's watts are produced.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerModel {
    /// Watts with no load.
    pub idle_w: f64,
    /// Extra watts per fully busy CPU (only with `follow_cpu`).
    pub per_cpu_w: f64,
    /// Follow the machine's CPU load.
    pub follow_cpu: bool,
    /// With `follow_cpu`, follow only this process's CPU time (tests measuring their own
    /// loops on a shared machine); `None` follows the whole machine.
    pub follow_pid: Option<u32>,
    /// With `follow_pid`, count the time its threads waited for a CPU as busy too (on-CPU
    /// plus run-queue time from `/proc/<pid>/task/*/schedstat`): the CPUs the process asked
    /// for, so a loop on a machine shared with other work still reads as one whole CPU.
    pub follow_demand: bool,
    /// With `follow_demand`, count only the threads whose name starts with this (a sweep's
    /// loops are `wattson-spin-<cpu>`, `wattson-memory-<cpu>`, ...), so the process's own
    /// bookkeeping threads do not add watts.
    pub follow_threads: Option<String>,
    /// Standard deviation of the added noise, W.
    pub noise_sd_w: f64,
    /// Time constant of the ramp towards a new level, s (about 1 s, as real supplies show).
    pub ramp_s: f64,
    /// Extra watts per busy CPU beyond the first, to model non-linearity (negative: later
    /// loops cheaper). 0 for a linear machine.
    pub curvature_w: f64,
    /// Mains voltage, V.
    pub volts: f64,
    /// Power factor.
    pub power_factor: f64,
    /// Watts added while a file holds a value (a setting's effect on the idle draw).
    pub effects: Vec<SettingEffect>,
    /// Where the meter's energy counter starts, Wh (a meter that has counted before).
    pub energy_wh: f64,
}

/// `delta_w` watts more (negative: fewer) while `path` holds `value`: its bracketed entry
/// for a kernel list file, else its trimmed text.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingEffect {
    pub path: PathBuf,
    pub value: String,
    pub delta_w: f64,
}

impl SettingEffect {
    /// Parse `FILE=VALUE:W` (`/sys/module/pcie_aspm/parameters/policy=powersave:-3`). The
    /// watts follow the last `:`, the value the last `=` before them, so a file name may hold
    /// either (PCI addresses do).
    pub fn parse(text: &str) -> Result<SettingEffect, String> {
        let bad = || {
            format!(
                "{text:?}: give FILE=VALUE:WATTS, e.g. /sys/module/pcie_aspm/parameters/policy=powersave:-3"
            )
        };
        let (left, watts) = text.rsplit_once(':').ok_or_else(bad)?;
        let (path, value) = left.rsplit_once('=').ok_or_else(bad)?;
        let delta_w: f64 = watts.trim().parse().map_err(|_| bad())?;
        if path.is_empty() || value.is_empty() || !delta_w.is_finite() {
            return Err(bad());
        }
        Ok(SettingEffect {
            path: PathBuf::from(path),
            value: value.to_owned(),
            delta_w,
        })
    }

    /// Whether the file holds the value now (an unreadable file does not).
    pub fn active(&self) -> bool {
        std::fs::read_to_string(&self.path)
            .is_ok_and(|t| wattson_collectors::idle::settings::current_of_list(&t) == self.value)
    }
}

impl Default for PowerModel {
    fn default() -> Self {
        PowerModel {
            idle_w: 40.0,
            per_cpu_w: 15.0,
            follow_cpu: false,
            follow_pid: None,
            follow_demand: false,
            follow_threads: None,
            noise_sd_w: 0.0,
            ramp_s: 1.0,
            curvature_w: 0.0,
            volts: 230.0,
            power_factor: 0.95,
            effects: Vec::new(),
            energy_wh: 0.0,
        }
    }
}

/// A running model: call [`ModelState::watts`] with the time and current busy CPUs.
#[derive(Debug)]
pub struct ModelState {
    model: PowerModel,
    current: Option<f64>,
    last_ms: i64,
    rng: StdRng,
}

impl ModelState {
    pub fn new(model: PowerModel, seed: u64) -> ModelState {
        ModelState {
            model,
            current: None,
            last_ms: 0,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    pub fn model(&self) -> &PowerModel {
        &self.model
    }

    /// The noiseless target for `busy_cpus` busy CPUs (a real number: 1.5 = one and a half).
    pub fn target(&self, busy_cpus: f64) -> f64 {
        let m = &self.model;
        if !m.follow_cpu {
            return m.idle_w;
        }
        let b = busy_cpus.max(0.0);
        let extra = m.curvature_w * (b - 1.0).max(0.0) * (b - 1.0).max(0.0) / b.max(1.0);
        m.idle_w + m.per_cpu_w * b + extra
    }

    /// The watts the setting effects add now (read from their files).
    pub fn effects_w(&self) -> f64 {
        self.model
            .effects
            .iter()
            .filter(|e| e.active())
            .map(|e| e.delta_w)
            .sum()
    }

    /// Watts at `now_ms`, ramping from the previous value towards the target with noise.
    pub fn watts(&mut self, now_ms: i64, busy_cpus: f64) -> f64 {
        let target = self.target(busy_cpus) + self.effects_w();
        let next = match self.current {
            None => target,
            Some(prev) => {
                let dt = ((now_ms - self.last_ms).max(0) as f64) / 1000.0;
                let k = if self.model.ramp_s > 0.0 {
                    1.0 - (-dt / self.model.ramp_s).exp()
                } else {
                    1.0
                };
                prev + (target - prev) * k
            }
        };
        self.current = Some(next);
        self.last_ms = now_ms;
        (next + self.gaussian() * self.model.noise_sd_w).max(0.0)
    }

    /// A standard normal deviate (Box-Muller).
    fn gaussian(&mut self) -> f64 {
        let u1: f64 = self.rng.random_range(f64::EPSILON..1.0);
        let u2: f64 = self.rng.random_range(0.0..1.0);
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_load_with_a_ramp() {
        let model = PowerModel {
            follow_cpu: true,
            ..PowerModel::default()
        };
        let mut s = ModelState::new(model, 1);
        assert_eq!(s.watts(0, 0.0), 40.0);
        // One second after the load steps to 2 CPUs: 1 - 1/e of the way to 70 W.
        let w = s.watts(1000, 2.0);
        assert!(
            (w - (40.0 + 30.0 * (1.0 - (-1.0f64).exp()))).abs() < 1e-9,
            "{w}"
        );
        let w = s.watts(20_000, 2.0);
        assert!((w - 70.0).abs() < 1e-3, "{w}");
    }

    #[test]
    fn noise_has_the_asked_spread() {
        let model = PowerModel {
            noise_sd_w: 2.0,
            ramp_s: 0.0,
            ..PowerModel::default()
        };
        let mut s = ModelState::new(model, 7);
        let xs: Vec<f64> = (0..20_000).map(|i| s.watts(i * 1000, 0.0)).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let sd =
            (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt();
        assert!((mean - 40.0).abs() < 0.1, "{mean}");
        assert!((sd - 2.0).abs() < 0.1, "{sd}");
    }

    #[test]
    fn a_setting_effect_applies_while_its_file_holds_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("0000:03:00.0=x");
        std::fs::write(&policy, "default [performance] powersave\n").unwrap();
        let effect = SettingEffect::parse(&format!("{}=powersave:-3", policy.display())).unwrap();
        assert_eq!(effect.path, policy);
        assert_eq!(effect.delta_w, -3.0);
        let model = PowerModel {
            effects: vec![effect],
            ramp_s: 0.0,
            ..PowerModel::default()
        };
        let mut s = ModelState::new(model, 1);
        assert_eq!(s.watts(0, 0.0), 40.0);
        std::fs::write(&policy, "powersave").unwrap();
        assert_eq!(s.watts(1000, 0.0), 37.0);
        assert!(SettingEffect::parse("policy=powersave").is_err());
        assert!(SettingEffect::parse("policy:-3").is_err());
    }

    #[test]
    fn negative_curvature_makes_later_loops_cheaper() {
        let model = PowerModel {
            follow_cpu: true,
            curvature_w: -5.0,
            ..PowerModel::default()
        };
        let s = ModelState::new(model, 1);
        let first = s.target(1.0) - s.target(0.0);
        let fourth = s.target(4.0) - s.target(3.0);
        assert_eq!(first, 15.0);
        assert!(fourth < first - 2.0, "{fourth}");
    }
}
