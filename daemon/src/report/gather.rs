//! What the database adds to a report: stored sweeps as configurations, this machine's
//! measured history (through the ledger), price and carbon series, GPUs and idle history.

use chrono::Utc;
use wattson_collectors::SourceId;
use wattson_collectors::source::channel;

use super::ProduceError;
use crate::report::{ConfigInput, GpuInput, GpuPoint, MeasuredInput};
use crate::store::{HOUR_MS, Store, floor_to};

/// What the database adds to a report: sweep configurations and this machine's measured
/// history over `from_ms..to_ms`.
#[derive(Debug, Default)]
pub struct StoreData {
    pub configs: Vec<ConfigInput>,
    pub measured: Option<MeasuredInput>,
    /// The newest idle-power regression check of each configuration, newest first.
    pub regression: Vec<crate::sweep::regression::Check>,
    /// Each GPU's raw samples over the window.
    pub gpus: Vec<GpuInput>,
    /// Every stored price series (applied or kept to compare), and whether it is applied,
    /// in precedence order, and the carbon-intensity series that apply.
    pub price_series: Vec<(crate::tariff::series::SlotSeries, bool)>,
    pub carbon: Option<crate::tariff::series::SeriesSet>,
    /// Package C-state history and measured idle settings.
    pub idle: crate::report::idle::IdleInput,
    /// Candidate machines (`wattson candidate`).
    pub candidates: Vec<crate::candidate::Candidate>,
    /// What the database held that could not be used, each with its reason, for the
    /// report's notes.
    pub set_aside: Vec<String>,
}

/// Reads sweeps, the wall source's energy (through the ledger), gaps and utilisation from
/// the database `store` (`None`: there is none, which is not an error: the report then
/// shows the config file's manual configurations only). `wall` names the configured wall source (see
/// [`crate::ledger::energy::wall_power_source`] for the default); `accuracy` is its
/// meter's, where known; `own` says whether `host` is this machine (whose meter the
/// database records). `split` says which hours a configured tariff (the report's, or
/// one it compares) may change price or date in: those are read by their minutes, and
/// every hour is where the database holds price or carbon series.
pub fn gather_from_store(
    store: Option<&Store>,
    host: &str,
    wall: Option<&SourceId>,
    accuracy: Option<wattson_collectors::meter::Accuracy>,
    own: bool,
    (from_ms, to_ms): (Option<i64>, Option<i64>),
    split: &dyn Fn(i64, i64) -> bool,
) -> Result<StoreData, ProduceError> {
    use crate::ledger::energy;

    let Some(store) = store else {
        return Ok(StoreData::default());
    };
    let mut data = StoreData::default();
    load_series(store, &mut data)?;
    data.candidates = crate::candidate::store::list(store.conn())?;
    for s in crate::sweep::persist::list(store)? {
        data.configs.push(sweep_config_input(&s));
        data.set_aside.extend(
            s.set_aside
                .iter()
                .map(|why| format!("configuration \"{}\": {why}", s.name)),
        );
    }
    data.regression = crate::sweep::regression::latest(store, None)?;
    // One wall source for the whole report: the measured history and the idle section's
    // watts alike.
    let source = energy::wall_power_source(
        store,
        host,
        &crate::ledger::PrimaryPower::new(wall.cloned()),
    )?;
    data.idle = crate::report::idle::load(
        store,
        host,
        source.as_ref(),
        from_ms.unwrap_or(0),
        to_ms.unwrap_or_else(|| Utc::now().timestamp_millis()),
    )?;
    data.gpus = gather_gpus(
        store,
        host,
        from_ms.unwrap_or(0),
        to_ms.unwrap_or_else(|| Utc::now().timestamp_millis()),
    )?;
    let Some(source) = source else {
        return Ok(data);
    };
    let to = to_ms.unwrap_or_else(|| Utc::now().timestamp_millis());
    // The window starts at `--since`, else at the source's first sample (its first stored
    // hour where the raw samples of that hour are gone), so a short history is not shown
    // as partly uncovered for the part of the hour before it began.
    let since = energy::total(store, host, &source)?.since_ms;
    let Some(first) = (match from_ms {
        Some(f) => Some(f),
        None => since.map(|hour| first_sample_ms(store, host, &source, hour)),
    }) else {
        return Ok(data);
    };
    // This machine's meter's accuracy as the database recorded it over the window; the
    // configuration's only for history from before it was recorded. Another host's meter is
    // not known on every path its history takes (remote write and the fleet collector do not
    // carry it), so none is claimed for it, on any.
    let accuracy = if own {
        crate::ledger::meter_protocols::stored_accuracy(store, host, &source, first, to)?
            .unwrap_or(accuracy)
    } else {
        None
    };
    let series = !data.price_series.is_empty() || data.carbon.is_some();
    data.measured = measured_input(store, host, source, (first, to), accuracy, series, split)?;
    Ok(data)
}

/// The wall `source`'s measured history over `first..to` (none where it stored nothing
/// there): its energy, covered time, gaps, power interval and counter, and the CPU
/// utilisation beside it. `series` says whether the database holds price or carbon series
/// (the energy is then read minute by minute throughout, else where `split` says).
fn measured_input(
    store: &crate::store::Store,
    host: &str,
    source: SourceId,
    (first, to): (i64, i64),
    accuracy: Option<wattson_collectors::meter::Accuracy>,
    series: bool,
    split: &dyn Fn(i64, i64) -> bool,
) -> Result<Option<MeasuredInput>, ProduceError> {
    use crate::ledger::{counter_check, energy, interval};

    let e = energy::energy(store, host, &source, first, to)?;
    if e.buckets.is_empty() {
        return Ok(None);
    }
    let (blocks, block) = energy::blocks(store, &e)?;
    let power = e
        .mean_watts()
        .map(|w| interval::power_interval(w, e.covered_ms, &blocks, block, accuracy));
    let counter = counter_check::cross_check(store, &e)?;
    let cpus = cpu_count(store, host)?;
    let utilisation = utilisation(store, host, (first, to), cpus)?;
    Ok(Some(MeasuredInput {
        from_ms: first,
        to_ms: to,
        // Minute by minute where a price, a carbon intensity or the local date may change
        // within an hour (series slots are often half-hours).
        energy: if series {
            e.minute_buckets(store)?
        } else {
            e.minute_buckets_where(store, split)?
        },
        covered_ms: e.covered_ms,
        // Sampled buckets only: what the counter counted over gaps covers no time, so it
        // would raise any mean over covered time (it is in `energy`).
        covered: e
            .buckets
            .iter()
            .filter(|b| !b.counted)
            .map(|b| (b.start_ms, b.end_ms, b.wh, b.covered_ms))
            .collect(),
        gaps: e
            .gaps
            .iter()
            .map(|g| (g.start_ms, g.end_ms, g.reason.clone()))
            .collect(),
        counted: e
            .gaps
            .iter()
            .filter_map(|g| Some((g.start_ms, g.end_ms, g.counted.clone()?)))
            .collect(),
        utilisation,
        cpus: cpus.max(1),
        config: None,
        source: Some(source),
        power,
        counter,
        approximate_hours: e.approximate_hours,
        away: crate::ledger::standby::spans_in_window(&e.gaps),
    }))
}

/// This machine's CPU count: its per-core busy series.
fn cpu_count(store: &crate::store::Store, host: &str) -> Result<u32, ProduceError> {
    use crate::store::SeriesFilter;
    use wattson_collectors::Metric;

    Ok(store
        .find_series(&SeriesFilter::all().host(host).metric(Metric::CpuBusy))?
        .iter()
        .filter(|s| channel::is_per_core(&s.channel))
        .count() as u32)
}

/// The hourly busy CPUs (of `cpus`) over the hours from `first`'s to `to`: (start, end,
/// busy CPUs), each hour cut to `first..to` (the history does not reach before the first
/// sample, and a window does not reach past its end).
fn utilisation(
    store: &crate::store::Store,
    host: &str,
    (first, to): (i64, i64),
    cpus: u32,
) -> Result<Vec<(i64, i64, f64)>, ProduceError> {
    use crate::store::{Resolution, SeriesFilter};
    use wattson_collectors::Metric;

    Ok(store
        .rollups(
            &SeriesFilter::all()
                .host(host)
                .metric(Metric::CpuBusy)
                .channel(channel::ALL),
            Resolution::Hour,
            floor_to(first, HOUR_MS),
            to,
        )?
        .into_iter()
        .flat_map(|(_, r)| r)
        .map(|r| {
            (
                r.bucket_ms.max(first),
                (r.bucket_ms + HOUR_MS).min(to),
                r.mean * f64::from(cpus.max(1)),
            )
        })
        .filter(|(start, end, _)| end > start)
        .collect())
}

/// Every price series (to compare, and the applied ones to price by) and the applied
/// carbon series.
fn load_series(store: &crate::store::Store, data: &mut StoreData) -> Result<(), ProduceError> {
    use crate::tariff::store::{self as prices, Kind};
    let now_ms = Utc::now().timestamp_millis();
    let mut infos = prices::list(store)?;
    // The live price first, then imports, the newest first: the ledger's precedence.
    infos.sort_by_key(|i| (i.format != "mqtt", std::cmp::Reverse(i.updated_ms)));
    for i in infos.iter().filter(|i| i.kind == Kind::Price) {
        match prices::load(store, &i.source, now_ms) {
            Ok(s) => data.price_series.push((s, i.applied)),
            Err(e) => crate::tariff::store::warn_once(format!(
                "price series {:?}: {}",
                i.source,
                wattson_collectors::ErrorChain(&e)
            )),
        }
    }
    let carbon = crate::tariff::carbon_series(store, now_ms)?;
    data.carbon = (!carbon.is_empty()).then_some(carbon);
    Ok(())
}

/// Every GPU power series of `host` (source `gpu`, channel `gpuN`) with its utilisation,
/// process count and SM clock from the same polls, raw samples in `[from_ms, to_ms)`
/// (so at most the raw retention back). Samples of one poll share a timestamp.
pub fn gather_gpus(
    store: &crate::store::Store,
    host: &str,
    from_ms: i64,
    to_ms: i64,
) -> Result<Vec<GpuInput>, ProduceError> {
    use std::collections::BTreeMap;

    use crate::store::SeriesFilter;
    use wattson_collectors::Metric;

    let power = store.find_series(&SeriesFilter::all().host(host).metric(Metric::Power))?;
    let mut out = Vec::new();
    for p in power
        .iter()
        .filter(|s| s.source == SourceId::Gpu)
        .filter(|s| channel::is_gpu(&s.channel))
    {
        let raw = |metric: Metric| -> Result<BTreeMap<i64, f64>, ProduceError> {
            let filter = SeriesFilter::all()
                .host(host)
                .source(&p.source)
                .metric(metric)
                .channel(&p.channel);
            Ok(store
                .raw(&filter, from_ms, to_ms)?
                .into_iter()
                .flat_map(|(_, pts)| pts)
                .collect())
        };
        let util = raw(Metric::GpuUtilisation)?;
        let procs = raw(Metric::GpuProcesses)?;
        let clock = raw(Metric::GpuClock)?;
        let points: Vec<GpuPoint> = raw(Metric::Power)?
            .into_iter()
            .map(|(ts_ms, watts)| GpuPoint {
                ts_ms,
                watts,
                utilisation: util.get(&ts_ms).copied(),
                processes: procs.get(&ts_ms).map(|n| n.max(0.0).round() as u32),
                sm_clock_mhz: clock.get(&ts_ms).copied(),
            })
            .collect();
        if !points.is_empty() {
            out.push(GpuInput {
                source: p.source.clone(),
                channel: p.channel.clone(),
                points,
            });
        }
    }
    Ok(out)
}

/// A stored sweep as a report configuration: its levels, and the fit of its first kind.
fn sweep_config_input(s: &crate::sweep::persist::StoredSweep) -> ConfigInput {
    use crate::report::input::{ConfigKind, ConfigStatus, FitInput, LevelInput};
    let fit = s
        .fit
        .as_ref()
        .and_then(|f| f.as_array())
        .and_then(|a| a.first())
        .map(|f| {
            let l = &f["loops"];
            FitInput {
                idle_watts: l["intercept"].as_f64().unwrap_or(f64::NAN),
                idle_ci95: l["intercept_ci95"].as_f64(),
                watts_per_loop: l["slope"].as_f64().unwrap_or(f64::NAN),
                watts_per_loop_ci95: l["slope_ci95"].as_f64(),
                r2: l["r2"].as_f64().unwrap_or(f64::NAN),
                notes: f["notes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect(),
                kind: f["kind"].as_str().unwrap_or("spin").to_owned(),
            }
        });
    let levels = s
        .levels
        .iter()
        .map(|l| LevelInput {
            kind: l.kind.clone(),
            loops: u32::try_from(l.loops).unwrap_or(0),
            mean_w: l.mean_w,
            ci95_w: l.ci95_w.unwrap_or(0.0),
            residency: l
                .residency
                .as_ref()
                .and_then(|r| serde_json::from_value(r.clone()).ok())
                .unwrap_or_default(),
            mean_mhz: l.mean_mhz,
            ops_per_s: l.ops_per_s,
            joules_per_op: l.joules_per_op,
            warnings: l
                .warnings
                .as_deref()
                .map(|w| {
                    w.split("; ")
                        .filter(|x| !x.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        })
        .map(|mut l: LevelInput| {
            // A sweep stored before levels were vetted against the step carries it here.
            let step = fit
                .as_ref()
                .filter(|f| f.kind == l.kind)
                .map_or(f64::NAN, |f| f.watts_per_loop.abs());
            if let Some(w) = crate::sweep::outcome::wider_than_step(l.ci95_w, step)
                && !l.warnings.contains(&w)
            {
                l.warnings.push(w);
            }
            l
        })
        .collect();
    let pairing = crate::idle::configs::Pairing::of_settings(s.settings.as_ref());
    let idle_measure = crate::idle::configs::describe(s.settings.as_ref(), &s.meter);
    ConfigInput {
        name: s.name.clone(),
        kind: if idle_measure.is_some() {
            ConfigKind::IdleMeasure
        } else {
            ConfigKind::Sweep
        },
        host: s.host.clone(),
        fingerprint: s.fingerprint.clone(),
        description: Some(
            idle_measure.unwrap_or_else(|| format!("swept with {} ({})", s.meter, s.kinds)),
        ),
        paired: pairing.map(|p| crate::report::Paired {
            against: p.against,
            against_watts: p.baseline_w,
            delta_watts: p.delta_w,
            delta_ci95_watts: p.delta_ci95_w,
        }),
        modes: Vec::new(),
        fit,
        levels,
        upgrade_cost: None,
        schedule: None,
        status: if s.status == "complete" {
            ConfigStatus::Complete
        } else {
            ConfigStatus::Partial
        },
    }
}

/// The time of the first power sample of `source` in the hour from `hour_ms`, or `hour_ms`
/// where that hour's raw samples are no longer kept.
fn first_sample_ms(
    store: &crate::store::Store,
    host: &str,
    source: &SourceId,
    hour_ms: i64,
) -> i64 {
    let filter = crate::store::SeriesFilter::all()
        .host(host)
        .source(source)
        .metric(wattson_collectors::Metric::Power)
        .channel("");
    store
        .raw(&filter, hour_ms, hour_ms + HOUR_MS)
        .ok()
        .and_then(|series| series.into_iter().flat_map(|(_, p)| p).map(|p| p.0).min())
        .unwrap_or(hour_ms)
}
