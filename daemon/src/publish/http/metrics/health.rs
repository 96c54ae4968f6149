//! Meter and daemon health in `/metrics`: each meter's replies by outcome, readings refused,
//! the idle-power regression verdict, and whether each part does its job.

use wattson_collectors::Metric;

use super::{Families, Snapshot};

/// Meter and daemon health, and the regression verdict.
pub(super) fn families(f: &mut Families<'_>, s: &Snapshot) {
    let host = || ("host", s.host.clone());
    let mut frames = Vec::new();
    for c in &s.extras.meter_counters {
        for (outcome, n) in [
            ("good", c.good),
            ("crc_error", c.crc_errors),
            ("timeout", c.timeouts),
            ("implausible", c.implausible),
            ("exception", c.exceptions),
        ] {
            frames.push((
                vec![
                    host(),
                    ("meter", c.id.clone()),
                    ("outcome", outcome.to_owned()),
                ],
                n as f64,
            ));
        }
    }
    f.counter(
        "meter_frames",
        "Each meter's replies since the daemon started, by outcome",
        None,
        frames,
    );
    f.counter(
        "readings_rejected",
        "Readings refused as implausible since the daemon started, by source and reason",
        None,
        s.readings
            .iter()
            .filter(|r| r.metric == Metric::Rejected)
            .map(|r| {
                (
                    vec![
                        host(),
                        ("source", r.source.to_string()),
                        ("reason", r.channel.clone()),
                    ],
                    r.value,
                )
            })
            .collect(),
    );
    let regression = s.extras.idle_regression.as_ref();
    let labels = |c: &crate::sweep::regression::Check| vec![host(), ("config", c.config.clone())];
    f.gauge(
        "idle_regression_detected",
        "1 when the latest idle-power regression check found idle power above its baseline",
        None,
        regression
            .map(|c| vec![(labels(c), f64::from(u8::from(c.verdict.detected)))])
            .unwrap_or_default(),
    );
    f.gauge(
        "idle_regression_delta",
        "Latest idle power minus the baseline's, from the latest regression check",
        Some("watts"),
        regression
            .map(|c| vec![(labels(c), c.verdict.delta_w)])
            .unwrap_or_default(),
    );
    f.gauge(
        "healthy",
        "1 while the part does its job (the sampler completes its passes, the store writes, the wall meter is read), as /healthz",
        None,
        [("sampler", &s.health.sampler), ("store", &s.health.store)]
            .into_iter()
            .chain(s.health.wall.as_ref().map(|w| ("wall", w)))
            .map(|(part, p)| {
                (
                    vec![host(), ("part", part.to_owned())],
                    f64::from(u8::from(p.healthy)),
                )
            })
            .collect(),
    );
}
