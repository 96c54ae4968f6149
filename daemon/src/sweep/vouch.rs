//! What a stored sweep must hold to be used: a database is input like any other, and a level
//! or fit that no sweep could have written (a mean of infinite watts, a fit that is not one)
//! is set aside with the reason, never priced, charted or compared. Watts are bounded as a
//! reading is (`wattson_collectors::plausibility`): a level is a mean of readings.

use wattson_collectors::plausibility::MAX_POWER_W as MAX_WATTS;

use super::persist::StoredLevel;

/// Most busy loops a level can have run (one per CPU; no machine wattson reads has more).
const MAX_LOOPS: i64 = 65_536;

/// Why a stored level or the stored fits cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum VouchError {
    #[error("{0} loops is not a level a sweep runs")]
    Loops(i64),
    #[error("it holds {0} readings")]
    Readings(i64),
    /// A level's watts (`what`: "its mean") no reading could have.
    #[error("{what} is {w} W, not a power between 0 and {MAX_WATTS} W")]
    Watts { what: &'static str, w: f64 },
    /// A level's figure (`what`: "its busy share") that is not finite and at least 0.
    #[error("{what} is {x}")]
    Figure { what: &'static str, x: f64 },
    /// The fits' column is not JSON.
    #[error("it is not JSON ({0})")]
    NotJson(serde_json::Error),
    #[error("it is not a list of fits")]
    NotAList,
    #[error("fit {fit} names no loop kind")]
    NoKind { fit: usize },
    /// Fit `fit`'s `key` (its intercept, slope or an interval) is `w` W, out of range.
    #[error("fit {fit}'s {key} is {w} W")]
    FitWatts {
        fit: usize,
        key: &'static str,
        w: f64,
    },
    #[error("fit {fit} has no {key}")]
    NoKey { fit: usize, key: &'static str },
    #[error("fit {fit}'s r2 is {r2}, not at most 1")]
    R2 { fit: usize, r2: f64 },
}

/// Why `level` cannot be used, where it cannot.
pub fn level(level: &StoredLevel) -> Result<(), VouchError> {
    if !(0..=MAX_LOOPS).contains(&level.loops) {
        return Err(VouchError::Loops(level.loops));
    }
    if level.n < 1 {
        return Err(VouchError::Readings(level.n));
    }
    watts("its mean", level.mean_w)?;
    for (what, w) in [("its lowest", level.min_w), ("its highest", level.max_w)] {
        if let Some(w) = w {
            watts(what, w)?;
        }
    }
    for (what, x) in [
        ("its standard deviation", level.sd_w),
        ("its 95 % interval", level.ci95_w),
        ("its mean frequency", level.mean_mhz),
        ("its busy share", level.busy),
        ("its operations per second", level.ops_per_s),
        ("its joules per operation", level.joules_per_op),
    ] {
        if let Some(x) = x.filter(|x| !x.is_finite() || *x < 0.0) {
            return Err(VouchError::Figure { what, x });
        }
    }
    Ok(())
}

fn watts(what: &'static str, w: f64) -> Result<(), VouchError> {
    if w.is_finite() && (0.0..=MAX_WATTS).contains(&w) {
        Ok(())
    } else {
        Err(VouchError::Watts { what, w })
    }
}

/// The fits stored as `text` (a JSON array, one per loop kind, as [`super::outcome::KindFit`]
/// writes them), where they can be used: each must name its kind and hold a straight line of
/// finite watts.
pub fn fits_of(text: &str) -> Result<serde_json::Value, VouchError> {
    let f = serde_json::from_str::<serde_json::Value>(text).map_err(VouchError::NotJson)?;
    fits(&f)?;
    Ok(f)
}

/// Why the stored fits cannot be used, where they cannot ([`fits_of`]).
fn fits(fits: &serde_json::Value) -> Result<(), VouchError> {
    let Some(fits) = fits.as_array() else {
        return Err(VouchError::NotAList);
    };
    for (i, f) in fits.iter().enumerate() {
        let fit = i + 1;
        if f.get("kind").and_then(serde_json::Value::as_str).is_none() {
            return Err(VouchError::NoKind { fit });
        }
        let line = f.get("loops");
        let number = |key: &str| {
            line.and_then(|l| l.get(key))
                .and_then(serde_json::Value::as_f64)
        };
        for key in ["intercept", "slope"] {
            match number(key) {
                Some(w) if w.abs() <= MAX_WATTS => {}
                Some(w) => return Err(VouchError::FitWatts { fit, key, w }),
                None => return Err(VouchError::NoKey { fit, key }),
            }
        }
        // A fit of levels all alike has no r2 (stored as null).
        if let Some(r2) = number("r2").filter(|r2| *r2 > 1.0) {
            return Err(VouchError::R2 { fit, r2 });
        }
        for key in ["intercept_ci95", "slope_ci95"] {
            if let Some(w) = number(key).filter(|x| !(0.0..=MAX_WATTS).contains(x)) {
                return Err(VouchError::FitWatts { fit, key, w });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn good_level() -> StoredLevel {
        StoredLevel {
            kind: "spin".into(),
            loops: 1,
            n: 60,
            mean_w: 55.0,
            sd_w: Some(1.0),
            ci95_w: Some(0.4),
            min_w: Some(50.0),
            max_w: Some(60.0),
            mean_mhz: Some(2000.0),
            busy: Some(0.5),
            residency: None,
            ops_per_s: Some(1e6),
            joules_per_op: None,
            warnings: None,
        }
    }

    #[test]
    fn a_level_a_sweep_could_have_written_is_used_and_others_say_why_not() {
        level(&good_level()).unwrap();
        let bad = |f: fn(&mut StoredLevel)| {
            let mut l = good_level();
            f(&mut l);
            level(&l).unwrap_err().to_string()
        };
        assert!(bad(|l| l.mean_w = f64::INFINITY).contains("its mean is inf W"));
        assert!(bad(|l| l.mean_w = f64::NAN).contains("its mean is NaN W"));
        assert!(bad(|l| l.mean_w = -1.0).contains("its mean is -1 W"));
        assert!(bad(|l| l.max_w = Some(1e9)).contains("its highest"));
        assert!(bad(|l| l.loops = -1).contains("-1 loops"));
        assert!(bad(|l| l.n = 0).contains("0 readings"));
        assert!(bad(|l| l.ci95_w = Some(f64::NAN)).contains("95 % interval"));
    }

    #[test]
    fn fits_must_name_their_kind_and_hold_a_line_of_finite_watts() {
        let line = |intercept: f64, r2: serde_json::Value| {
            json!([{"kind": "spin", "loops": {"intercept": intercept, "slope": 15.0,
                    "r2": r2, "intercept_ci95": 0.5, "slope_ci95": 0.2}}])
        };
        fits(&line(40.0, json!(0.99))).unwrap();
        // Levels all alike give no r2; that is a fit still.
        fits(&line(40.0, json!(null))).unwrap();
        assert!(
            fits(&line(1e300, json!(0.99)))
                .unwrap_err()
                .to_string()
                .contains("intercept")
        );
        assert!(
            fits(&line(40.0, json!(7.0)))
                .unwrap_err()
                .to_string()
                .contains("r2 is 7")
        );
        assert!(
            fits(&json!([1, 2, 3]))
                .unwrap_err()
                .to_string()
                .contains("names no loop kind")
        );
        assert!(
            fits(&json!({"kind": "spin"}))
                .unwrap_err()
                .to_string()
                .contains("not a list")
        );
        assert!(
            fits(&json!([{"kind": "spin", "loops": {}}]))
                .unwrap_err()
                .to_string()
                .contains("no intercept")
        );
    }
}
