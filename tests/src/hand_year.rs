//! A year of a candidate machine's curve on a stored load, by hand, as the report's
//! projection defines it: the load's hours as watts by hour of the week (UTC), the week's
//! hours not measured at the load's mean, summed over the 365 days from the UTC day the load
//! ends. (365 days are 52 weeks and one day, so the weekday the year starts on counts once
//! more: a hand mean x 8760 h is off by up to a day's share.)
//! Units: load as a share of maximum, W, kWh, UTC ms.

const HOUR_MS: i64 = 3_600_000;

/// The watts of the curve `points` (`(load share, W)`, sorted by load, from 0 to 1) at
/// `load` (capped at 1), linear between points.
pub fn curve_at(points: &[(f64, f64)], load: f64) -> f64 {
    let u = load.min(1.0);
    let i = points
        .iter()
        .position(|p| p.0 >= u)
        .expect("a curve reaching 100 %");
    if points[i].0 == u {
        return points[i].1;
    }
    let (a, b) = (points[i - 1], points[i]);
    a.1 + (b.1 - a.1) * (u - a.0) / (b.0 - a.0)
}

/// Annual kWh of `watts_at(load)` over `profile` (`(hours, load share)` in turn, from
/// `start` UTC ms, on the hour), a year by hour of the week.
pub fn year_kwh(profile: &[(i64, f64)], start: i64, watts_at: impl Fn(f64) -> f64) -> f64 {
    // Monday 1970-01-05 00:00 UTC is hour 0 of a week.
    let week_hour = |ms: i64| (ms / HOUR_MS - 4 * 24).rem_euclid(168) as usize;
    let mut week = [None; 168];
    let (mut t, mut wh, mut hours) = (start, 0.0, 0.0);
    for &(h, load) in profile {
        let w = watts_at(load);
        for _ in 0..h {
            week[week_hour(t)] = Some(w);
            t += HOUR_MS;
        }
        wh += h as f64 * w;
        hours += h as f64;
    }
    let mean = wh / hours;
    let year_start = t.div_euclid(24 * HOUR_MS) * 24 * HOUR_MS;
    (0..365 * 24)
        .map(|i| week[week_hour(year_start + i * HOUR_MS)].unwrap_or(mean))
        .sum::<f64>()
        / 1000.0
}
