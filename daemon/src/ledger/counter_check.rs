//! The meter's own energy counter against the ledger's integral, and the readings each
//! source rejected as implausible.
//!
//! The energy of record is the integral of power ([`super::energy`]): it exists for every
//! source (meters without a counter, plugs, fleet hosts, RAPL), has a known support (covered
//! time) and gap rule, and is what status, reports and Home Assistant agree on. A meter's
//! counter integrates internally at its own rate, so it also sees load changes between two
//! polls; but it counts in coarse steps (1 Wh on a PZEM, 10 Wh on an Eastron display), resets
//! and wraps, and keeps counting while wattson is not looking. So it is the cross-check:
//! [`cross_check`] sums the steps of the monotonic counter total (`energy_total`, which the
//! collectors bound by the measured power) over the window and reports how far it is from
//! the integral. Counter steps are classified by [`wattson_collectors::counter`], the one
//! owner of counter accounting.
//!
//! Units: Wh, ms.

use serde::Serialize;
use wattson_collectors::Metric;
use wattson_collectors::SourceId;
use wattson_collectors::counter::{self, Movement};
use wattson_collectors::plausibility::Reason;

use super::energy::Energy;
use crate::store::{SeriesFilter, Store, StoreError, integrate};

/// The counter's energy over a window beside the integral's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterCheck {
    /// Wh the counter moved by over the covered pairs of the window.
    pub counter_wh: f64,
    /// Wh of the integral over the same window.
    pub integral_wh: f64,
    /// `integral - counter`, Wh.
    pub difference_wh: f64,
    /// The difference as a share of the counter, percent (`None` when it moved by 0).
    pub difference_percent: Option<f64>,
    /// The smallest step the counter took in the window, Wh (its resolution, as far as the
    /// window shows it; `None` when it did not move).
    pub step_wh: Option<f64>,
}

impl CounterCheck {
    /// Whether the difference is more than counting in steps explains: a counter that moved
    /// N steps counted between N - 1 and N + 1 steps' worth, so a difference within one
    /// step says nothing about either figure.
    pub fn beyond_its_steps(&self) -> bool {
        self.step_wh
            .is_none_or(|step| self.difference_wh.abs() > step * (1.0 + 1e-9))
    }

    /// The comparison in words: "the integral is 61.1 % above it, within the counter's
    /// 1 Wh step".
    pub fn describe(&self) -> String {
        let Some(p) = self.difference_percent else {
            return "the counter did not move".to_owned();
        };
        let side = if p >= 0.0 { "above" } else { "below" };
        let step = self.step_wh.map_or_else(String::new, |s| {
            let within = if self.beyond_its_steps() {
                "more than"
            } else {
                "within"
            };
            format!(", {within} the counter's {} Wh step", trim_wh(s))
        });
        format!("the integral is {:.1} % {side} it{step}", p.abs())
    }
}

/// A step size as the counter shows it: `1`, `10`, `0.01`.
fn trim_wh(wh: f64) -> String {
    let s = format!("{wh:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The counter's movement over `e`'s window (steps between consecutive `energy_total`
/// samples that are no further apart than the power series' spacing allows and cross no
/// gap; a drop is a new daemon run, whose first sample starts at 0), beside `e`'s integral.
/// `None` when the source reports no counter in the window.
pub fn cross_check(store: &Store, e: &Energy) -> Result<Option<CounterCheck>, StoreError> {
    let filter = SeriesFilter::all()
        .host(&e.host)
        .source(&e.source)
        .metric(Metric::EnergyTotal)
        .channel("");
    let mut points: Vec<(i64, f64)> = store
        .raw(&filter, e.from_ms, e.to_ms)?
        .into_iter()
        .flat_map(|(_, p)| p)
        .collect();
    if points.len() < 2 {
        return Ok(None);
    }
    points.sort_by_key(|p| p.0);
    let max_pair = integrate::max_pair_ms(e.spacing_ms.unwrap_or(1000));
    let gaps: Vec<(i64, i64)> = e.gaps.iter().map(|g| (g.start_ms, g.end_ms)).collect();
    let steps: Vec<f64> = points
        .windows(2)
        .filter(|w| integrate::continuous(w[0].0, w[1].0, max_pair, &gaps))
        .map(|w| match counter::movement(w[0].1, w[1].1, None) {
            Movement::Up(d) => d,
            // A new daemon run, whose first sample is 0: nothing counted across it.
            Movement::Wrapped(_) | Movement::Down => 0.0,
        })
        .collect();
    let counter_wh: f64 = steps.iter().sum();
    let step_wh = steps
        .iter()
        .copied()
        .filter(|d| *d > 0.0)
        .min_by(f64::total_cmp);
    let difference_wh = e.wh - counter_wh;
    Ok(Some(CounterCheck {
        counter_wh,
        integral_wh: e.wh,
        difference_wh,
        difference_percent: (counter_wh > 0.0).then(|| difference_wh / counter_wh * 100.0),
        step_wh,
    }))
}

/// Readings one source rejected, by reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceRejections {
    pub source: SourceId,
    /// `(reason, count)`, in the order of [`Reason::ALL`].
    pub counts: Vec<(String, u64)>,
}

/// The readings each source of `host` rejected as implausible over the raw samples kept
/// (the stored counts are per daemon run: a drop starts a new run).
pub fn rejections(store: &Store, host: &str) -> Result<Vec<SourceRejections>, StoreError> {
    let mut out: Vec<SourceRejections> = Vec::new();
    let filter = SeriesFilter::all().host(host).metric(Metric::Rejected);
    for (series, mut points) in store.raw(&filter, i64::MIN, i64::MAX)? {
        points.sort_by_key(|p| p.0);
        let mut n = 0.0;
        let mut prev: Option<f64> = None;
        for (_, v) in &points {
            n += counter::run_increase(prev, *v);
            prev = Some(*v);
        }
        if n <= 0.0 {
            continue;
        }
        let i = if let Some(i) = out.iter().position(|r| r.source == series.source) {
            i
        } else {
            out.push(SourceRejections {
                source: series.source.clone(),
                counts: Vec::new(),
            });
            out.len() - 1
        };
        out[i]
            .counts
            .push((series.channel.clone(), n.round() as u64));
    }
    for r in &mut out {
        r.counts.sort_by_key(|(reason, _)| {
            Reason::parse(reason).map_or(usize::MAX, |x| {
                Reason::ALL.iter().position(|y| *y == x).unwrap_or(0)
            })
        });
    }
    out.sort_by(|a, b| a.source.cmp(&b.source));
    Ok(out)
}

#[cfg(test)]
mod step_tests {
    use super::CounterCheck;

    fn check(counter_wh: f64, integral_wh: f64, step_wh: Option<f64>) -> CounterCheck {
        CounterCheck {
            counter_wh,
            integral_wh,
            difference_wh: integral_wh - counter_wh,
            difference_percent: (counter_wh > 0.0)
                .then(|| (integral_wh - counter_wh) / counter_wh * 100.0),
            step_wh,
        }
    }

    /// A PZEM counts in 1 Wh steps: a minute at 100 W moves it by 1 Wh against 1.611 Wh
    /// integrated, 61 % apart and within one step, which is no disagreement. The words say
    /// which figure is above the other.
    #[test]
    fn a_difference_within_one_counter_step_is_explained() {
        let short = check(1.0, 1.611, Some(1.0));
        assert!(!short.beyond_its_steps());
        assert_eq!(
            short.describe(),
            "the integral is 61.1 % above it, within the counter's 1 Wh step"
        );
        let off = check(100.0, 80.0, Some(1.0));
        assert!(off.beyond_its_steps());
        assert_eq!(
            off.describe(),
            "the integral is 20.0 % below it, more than the counter's 1 Wh step"
        );
        assert_eq!(check(0.0, 0.5, None).describe(), "the counter did not move");
    }
}
