//! A candidate machine's power curve: average watts at active idle and at shares of its
//! maximum throughput, as SPECpower_ssj2008 publishes them (active idle, 10 %, 20 %, ...,
//! 100 % of the calibrated maximum ssj_ops), or as a user enters them by hand. Between two
//! points the curve is a straight line; it is never extrapolated beyond its points (idle at
//! 0 % and a point at 100 % are required).
//!
//! Units: load as a share of the machine's own maximum throughput (`0.0..=1.0`), W, ssj_ops.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The most watts a curve point may hold: a SPECpower result of many nodes draws a few
/// kW; a home server never does. A bigger figure is a unit mistake (mW, or a sum).
pub const MAX_WATTS: f64 = 20_000.0;

/// One point of a curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Share of the machine's maximum throughput, `0.0..=1.0` (0 is active idle).
    pub load: f64,
    /// Average W at that load.
    pub watts: f64,
    /// Throughput at that load, ssj_ops, where published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssj_ops: Option<f64>,
}

/// Where a curve's points come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CurveKind {
    /// A SPECpower result with its eleven points (active idle, 10 % ... 100 %).
    Spec,
    /// The widely shared two-point form of a SPECpower result (watts at active idle and at
    /// 100 %): linear between them, which a real curve is not.
    SpecTwoPoint,
    /// Entered by hand (`wattson candidate add`).
    Hand,
    /// Measured at the wall by a wattson sweep (idle and 1 .. N busy CPUs of N):
    /// `wattson candidate from-sweep`.
    Measured,
}

impl CurveKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CurveKind::Spec => "spec",
            CurveKind::SpecTwoPoint => "spec-two-point",
            CurveKind::Hand => "hand",
            CurveKind::Measured => "measured",
        }
    }

    pub fn parse(s: &str) -> Option<CurveKind> {
        [
            CurveKind::Spec,
            CurveKind::SpecTwoPoint,
            CurveKind::Hand,
            CurveKind::Measured,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// Why a curve is refused.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CurveError {
    #[error(
        "a load of {percent} % is not a share of maximum throughput between 0 % and 100 %",
        percent = .0 * 100.0
    )]
    Load(f64),
    #[error(
        "{watts} W at {percent} % is not a power a machine draws: above 0 W (a running machine draws \
         some even at idle) and at most {MAX_WATTS} W",
        percent = load * 100.0
    )]
    Watts { load: f64, watts: f64 },
    #[error("{ops} ssj_ops at {percent} % is not a throughput (finite, 0 or more)", percent = load * 100.0)]
    Ops { load: f64, ops: f64 },
    #[error("two points at {0} %")]
    Duplicate(f64),
    #[error("no watts at active idle (0 %): a curve starts there")]
    NoIdle,
    #[error("no watts at 100 %: a curve is not extrapolated beyond its last point")]
    NoFull,
}

/// Watts against load, sorted by load, from active idle to 100 %.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    points: Vec<CurvePoint>,
    kind: CurveKind,
}

impl Curve {
    /// A checked curve: every load in `0..=1` once, finite watts above 0 and at most
    /// `MAX_WATTS` (a curve of 0 W was ranked first, saving all this machine costs), idle
    /// and 100 % present.
    pub fn new(mut points: Vec<CurvePoint>, kind: CurveKind) -> Result<Curve, CurveError> {
        for p in &points {
            if !p.load.is_finite() || !(0.0..=1.0).contains(&p.load) {
                return Err(CurveError::Load(p.load));
            }
            if !p.watts.is_finite() || p.watts <= 0.0 || p.watts > MAX_WATTS {
                return Err(CurveError::Watts {
                    load: p.load,
                    watts: p.watts,
                });
            }
            if let Some(ops) = p.ssj_ops.filter(|o| !o.is_finite() || *o < 0.0) {
                return Err(CurveError::Ops { load: p.load, ops });
            }
        }
        points.sort_by(|a, b| a.load.total_cmp(&b.load));
        if let Some(w) = points.windows(2).find(|w| w[0].load == w[1].load) {
            return Err(CurveError::Duplicate(w[0].load * 100.0));
        }
        if points.first().is_none_or(|p| p.load != 0.0) {
            return Err(CurveError::NoIdle);
        }
        if points.last().is_none_or(|p| p.load != 1.0) {
            return Err(CurveError::NoFull);
        }
        Ok(Curve { points, kind })
    }

    pub fn points(&self) -> &[CurvePoint] {
        &self.points
    }

    pub fn kind(&self) -> CurveKind {
        self.kind
    }

    /// W at `load` (clamped to `0..=1`): straight lines between the points.
    pub fn watts_at(&self, load: f64) -> f64 {
        let u = if load.is_nan() {
            0.0
        } else {
            load.clamp(0.0, 1.0)
        };
        let i = self.points.partition_point(|p| p.load <= u);
        if i >= self.points.len() {
            return self.points[self.points.len() - 1].watts;
        }
        let (a, b) = (self.points[i - 1], self.points[i]);
        a.watts + (b.watts - a.watts) * (u - a.load) / (b.load - a.load)
    }

    /// W at active idle.
    pub fn idle_watts(&self) -> f64 {
        self.points[0].watts
    }

    /// W at 100 %.
    pub fn full_watts(&self) -> f64 {
        self.points[self.points.len() - 1].watts
    }

    /// ssj_ops at 100 %, where published.
    pub fn max_ssj_ops(&self) -> Option<f64> {
        self.points[self.points.len() - 1].ssj_ops
    }

    /// Whether the curve is only its two ends, so every watt between them is a straight
    /// line's, not a measurement's.
    pub fn interpolated(&self) -> bool {
        self.points.len() == 2
    }

    /// In words, as every surface prints it: "SPECpower curve (11 points)", "interpolated
    /// linearly between active idle and 100 % (two-point SPECpower figures)".
    pub fn describe(&self) -> String {
        match (self.kind, self.interpolated()) {
            (CurveKind::SpecTwoPoint, _) => "interpolated linearly between active idle and \
                                             100 % (two-point SPECpower figures)"
                .to_owned(),
            (CurveKind::Hand, true) => {
                "interpolated linearly between active idle and 100 % (entered by hand)".to_owned()
            }
            (CurveKind::Spec, true) => {
                "interpolated linearly between active idle and 100 % (SPECpower)".to_owned()
            }
            (CurveKind::Spec, false) => format!(
                "SPECpower curve ({} points, linear between them)",
                self.points.len()
            ),
            (CurveKind::Hand, false) => format!(
                "entered by hand ({} points, linear between them)",
                self.points.len()
            ),
            (CurveKind::Measured, true) => "interpolated linearly between active idle and \
                                            100 % (a sweep's two levels, measured at the wall)"
                .to_owned(),
            (CurveKind::Measured, false) => format!(
                "measured at the wall by a sweep ({} levels, linear between them)",
                self.points.len()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(load: f64, watts: f64) -> CurvePoint {
        CurvePoint {
            load,
            watts,
            ssj_ops: None,
        }
    }

    #[test]
    fn watts_are_straight_lines_between_points_and_held_at_the_ends() {
        let c = Curve::new(
            vec![p(1.0, 180.0), p(0.0, 62.0), p(0.5, 110.0)],
            CurveKind::Hand,
        )
        .unwrap();
        assert_eq!(c.watts_at(0.0), 62.0);
        assert!((c.watts_at(0.25) - 86.0).abs() < 1e-12);
        assert_eq!(c.watts_at(0.5), 110.0);
        assert!((c.watts_at(0.75) - 145.0).abs() < 1e-12);
        assert_eq!(c.watts_at(1.0), 180.0);
        assert_eq!(c.watts_at(1.7), 180.0);
        assert_eq!(c.watts_at(-1.0), 62.0);
        assert!(!c.interpolated());
        let two = Curve::new(vec![p(0.0, 60.0), p(1.0, 200.0)], CurveKind::SpecTwoPoint).unwrap();
        assert!(two.interpolated());
        assert!(
            two.describe().contains("interpolated"),
            "{}",
            two.describe()
        );
        assert!((two.watts_at(0.3) - 102.0).abs() < 1e-12);
    }

    #[test]
    fn a_curve_without_its_ends_or_with_impossible_points_is_refused() {
        assert_eq!(
            Curve::new(vec![p(0.5, 1.0), p(1.0, 2.0)], CurveKind::Hand),
            Err(CurveError::NoIdle)
        );
        assert_eq!(
            Curve::new(vec![p(0.0, 1.0), p(0.5, 2.0)], CurveKind::Hand),
            Err(CurveError::NoFull)
        );
        assert_eq!(
            Curve::new(vec![p(0.0, 1.0), p(1.0, 2.0), p(1.0, 3.0)], CurveKind::Hand),
            Err(CurveError::Duplicate(100.0))
        );
        assert!(matches!(
            Curve::new(vec![p(0.0, f64::NAN), p(1.0, 2.0)], CurveKind::Hand),
            Err(CurveError::Watts { .. })
        ));
        assert!(matches!(
            Curve::new(vec![p(0.0, 1.0), p(1.0, 1e9)], CurveKind::Hand),
            Err(CurveError::Watts { .. })
        ));
        assert_eq!(
            Curve::new(vec![p(0.0, 1.0), p(1.5, 2.0)], CurveKind::Hand),
            Err(CurveError::Load(1.5))
        );
    }
}
