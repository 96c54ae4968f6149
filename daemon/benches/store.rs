//! Store budgets (DESIGN.md "Budgets"): ingest >= 200,000 samples/s, a year's report
//! query <= 250 ms, <= 60 MB per host-year at default retention.
//!
//! `cargo bench -p wattson --bench store` runs the timed benchmarks;
//! `WATTSON_BENCH_SIZE=1 cargo bench -p wattson --bench store` builds a synthetic
//! host-year and prints its size instead; `WATTSON_BENCH_FLEET=PATH cargo bench -p wattson
//! --bench store` builds a fleet collector's year of 10 such hosts at PATH (`fleet.rs`;
//! `WATTSON_BENCH_FLEET_HOSTS=N` for another count), for `tests/bench/fleet-report.sh`.
//!
//! The synthetic host (BENCHMARKS.md): a PZEM-004T-like meter (power 0.1 W, voltage 0.1 V,
//! current 0.001 A, power factor 0.01, frequency 0.1 Hz, energy counter 1 Wh) and a
//! 4-core CPU (busy share per core and `all` from 1/100 s ticks, frequency per core and
//! `mean` in MHz from 6 P-states, C1/C3/C6 residency per core and `all/<state>` at 1e-4),
//! all at 1 Hz: 31 series, 31 samples a second. Timestamps are the scheduled tick on the
//! 1 s grid, as the daemon stamps them; 1 poll in 1000 (per source) is 300-700 ms late and
//! off the grid, and about every 6 hours the meter drops out for 3-30 s.

#![allow(clippy::unwrap_used, clippy::print_stderr, missing_docs)]

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use wattson::store::{
    DAY_MS, HOUR_MS, HourRollup, MINUTE_MS, MinuteRollup, Resolution, SeriesFilter, Store,
    StoreHandle, StoreOptions, Writer,
};
use wattson_collectors::{Metric, Sample};

#[path = "store/fleet.rs"]
mod fleet;

/// 2024-01-01T00:00:00Z.
const YEAR_START: i64 = 1_704_067_200_000;
const YEAR_MS: i64 = 365 * DAY_MS;
const HOST: &str = "synthetic";

/// A synthetic host, one second at a time.
struct Host {
    rng: StdRng,
    energy_wh: f64,
    volts_drift: f64,
    /// The meter is silent (a serial dropout) until this second.
    meter_gap_until_s: i64,
}

impl Host {
    fn new(seed: u64) -> Host {
        Host {
            rng: StdRng::seed_from_u64(seed),
            energy_wh: 12_345.0,
            volts_drift: 0.0,
            meter_gap_until_s: i64::MIN,
        }
    }

    /// The timestamp of a poll scheduled at second `t_s`, as the daemon stamps it
    /// (`runtime::sampler::grid_ms`): the tick itself, except for 1 poll in 1000 that runs
    /// 300-700 ms late and keeps its real time.
    fn stamp(&mut self, t_s: i64) -> i64 {
        if self.rng.random_range(0..1000) == 0 {
            t_s * 1000 + self.rng.random_range(300..700)
        } else {
            t_s * 1000
        }
    }

    /// Roughly normal noise with standard deviation `sd`.
    fn noise(&mut self, sd: f64) -> f64 {
        let s: f64 = (0..4).map(|_| self.rng.random::<f64>()).sum();
        (s - 2.0) * sd * (3.0_f64).sqrt()
    }

    /// Busy share of the CPU at second `t`: idle most of the time, a job now and then.
    fn load(t_s: i64) -> f64 {
        if (t_s / 60) % 17 < 3 { 0.8 } else { 0.02 }
    }

    fn second(&mut self, t_s: i64) -> Vec<Sample> {
        // About once in 6 hours the meter drops out for 3-30 s.
        if self.rng.random_range(0..21_600) == 0 {
            self.meter_gap_until_s = t_s + self.rng.random_range(3..=30);
        }
        let meter_silent = t_s < self.meter_gap_until_s;
        let ts = self.stamp(t_s);
        let load = Host::load(t_s);
        let mut out = Vec::with_capacity(31);
        let round = |v: f64, step: f64| (v / step).round() * step;
        let watts = round(40.0 + 60.0 * load + self.noise(2.0), 0.1);
        self.volts_drift = (self.volts_drift + self.noise(0.05)).clamp(-3.0, 3.0);
        let volts = round(230.0 + self.volts_drift + self.noise(0.3), 0.1);
        let pf = round(0.6 + 0.2 * load + self.noise(0.01), 0.01);
        self.energy_wh += watts / 3600.0;
        let m = "meter:wall";
        out.push(Sample::new(ts, m, Metric::Power, "", watts));
        out.push(Sample::new(ts, m, Metric::Voltage, "", volts));
        out.push(Sample::new(
            ts,
            m,
            Metric::Current,
            "",
            round(watts / volts / pf, 0.001),
        ));
        out.push(Sample::new(ts, m, Metric::PowerFactor, "", pf));
        out.push(Sample::new(
            ts,
            m,
            Metric::Frequency,
            "",
            round(50.0 + self.noise(0.03), 0.1),
        ));
        out.push(Sample::new(
            ts,
            m,
            Metric::EnergyCounter,
            "",
            self.energy_wh.floor(),
        ));
        if meter_silent {
            out.clear();
        }
        let ts = self.stamp(t_s);
        let (mut busy_all, mut mhz_all) = (0.0, 0.0);
        let mut states_all = [0.0; 3];
        for core in 0..4 {
            let total = 100 + self.rng.random_range(-1..=1);
            let busy_ticks = (load * 100.0 + self.noise(3.0)).clamp(0.0, f64::from(total));
            let busy = busy_ticks.round() / f64::from(total);
            busy_all += busy / 4.0;
            let mhz = [800.0, 1200.0, 1600.0, 2200.0, 2800.0, 3400.0]
                [self.rng.random_range(if load > 0.5 { 3..6 } else { 0..3 })];
            mhz_all += mhz / 4.0;
            let idle = 1.0 - busy;
            let c6 = (idle * (0.85 + self.noise(0.03))).clamp(0.0, idle);
            let c1 = ((idle - c6) * self.rng.random::<f64>()).max(0.0);
            let c3 = (idle - c6 - c1).max(0.0);
            let cpu = format!("cpu{core}");
            out.push(Sample::new(ts, "cpu", Metric::CpuBusy, cpu.as_str(), busy));
            out.push(Sample::new(
                ts,
                "cpu",
                Metric::CoreFrequency,
                cpu.as_str(),
                mhz,
            ));
            for (i, (state, v)) in [("C1", c1), ("C3", c3), ("C6", c6)].into_iter().enumerate() {
                states_all[i] += v / 4.0;
                out.push(Sample::new(
                    ts,
                    "cpu",
                    Metric::IdleResidency,
                    format!("{cpu}/{state}"),
                    v,
                ));
            }
        }
        out.push(Sample::new(ts, "cpu", Metric::CpuBusy, "all", busy_all));
        out.push(Sample::new(
            ts,
            "cpu",
            Metric::CoreFrequency,
            "mean",
            mhz_all.round(),
        ));
        for (state, v) in ["C1", "C3", "C6"].into_iter().zip(states_all) {
            out.push(Sample::new(
                ts,
                "cpu",
                Metric::IdleResidency,
                format!("all/{state}"),
                v,
            ));
        }
        out
    }
}

fn options() -> StoreOptions {
    StoreOptions {
        host: HOST.to_owned(),
        ..StoreOptions::default()
    }
}

/// Writes hourly (and, for power, per-minute) rollups of `host` for `[from_ms, to_ms)`
/// directly, with statistics shaped like the synthetic host's, drawn from `seed`.
fn write_rollups(store: &Store, host: &str, seed: u64, from_ms: i64, to_ms: i64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let rolled: [(&str, Metric, &str, f64); 11] = [
        ("meter:wall", Metric::Power, "", 55.0),
        ("meter:wall", Metric::Voltage, "", 230.0),
        ("meter:wall", Metric::Current, "", 0.38),
        ("meter:wall", Metric::PowerFactor, "", 0.63),
        ("meter:wall", Metric::Frequency, "", 50.0),
        ("meter:wall", Metric::EnergyCounter, "", 1.0e4),
        ("cpu", Metric::CpuBusy, "all", 0.15),
        ("cpu", Metric::CoreFrequency, "mean", 1500.0),
        ("cpu", Metric::IdleResidency, "all/C1", 0.05),
        ("cpu", Metric::IdleResidency, "all/C3", 0.08),
        ("cpu", Metric::IdleResidency, "all/C6", 0.7),
    ];
    store.conn().execute_batch("BEGIN").unwrap();
    for (source, metric, channel, typical) in rolled {
        let series = store
            .ensure_series(host, &source.into(), metric, channel)
            .unwrap();
        let mut hour_ms = from_ms;
        while hour_ms < to_ms {
            let mut minutes = Vec::new();
            if metric == Metric::Power {
                for minute in 0..60u8 {
                    let t_s = (hour_ms + i64::from(minute) * MINUTE_MS) / 1000;
                    let mean = ((40.0 + 60.0 * Host::load(t_s) + rng.random_range(-0.5..0.5))
                        * 100.0)
                        .round()
                        / 100.0;
                    minutes.push(MinuteRollup {
                        minute,
                        n: 60,
                        mean,
                        min: ((mean - 4.0 - rng.random_range(0.0..2.0)) * 10.0).round() / 10.0,
                        max: ((mean + 4.0 + rng.random_range(0.0..2.0)) * 10.0).round() / 10.0,
                        energy_wh: (mean / 60.0 * 1000.0).round() / 1000.0,
                        covered_ms: Some(MINUTE_MS),
                    });
                }
            }
            let n = 3600;
            let mean = typical * (1.0 + rng.random_range(-0.05..0.05));
            store
                .put_hour_rollup(
                    &series,
                    &HourRollup {
                        hour_ms,
                        n,
                        mean,
                        min: mean * 0.9,
                        max: mean * 1.1,
                        energy_wh: (metric == Metric::Power)
                            .then(|| minutes.iter().map(|m| m.energy_wh).sum()),
                        covered_ms: (metric == Metric::Power).then_some(HOUR_MS),
                        approximate: false,
                        minutes,
                    },
                )
                .unwrap();
            hour_ms += HOUR_MS;
        }
    }
    store.conn().execute_batch("COMMIT").unwrap();
}

/// Ingests synthetic hosts for `[from_ms, to_ms)` through a [`Writer`], second by second
/// (each host's samples with its name, `None` for the writer's own host), flushing every
/// `flush_s` seconds of data. Returns the samples written.
fn ingest(
    writer: &mut Writer,
    hosts: &mut [(Option<String>, Host)],
    from_ms: i64,
    to_ms: i64,
    flush_s: i64,
) -> usize {
    let mut n = 0;
    let mut t_s = from_ms / 1000;
    while t_s * 1000 < to_ms {
        for (name, host) in hosts.iter_mut() {
            let samples = host.second(t_s);
            n += samples.len();
            writer.push(name.clone(), samples);
        }
        t_s += 1;
        if t_s % flush_s == 0 {
            writer.flush().unwrap();
        }
        if (t_s * 1000) % HOUR_MS == 0 {
            // The daemon prunes every 10 minutes; hourly is close enough.
            writer.prune(t_s * 1000).unwrap();
        }
    }
    writer.flush().unwrap();
    writer.prune(t_s * 1000).unwrap();
    n
}

/// A host-year at default retention (30 days raw, 3 days raw for per-core CPU series):
/// rollups for the year, the last 30 days (+1, so the first day is pruned and its pages
/// reused) ingested as raw samples at 1 Hz, pruned hourly.
fn build_year(path: &Path, raw_days: i64) -> usize {
    let raw_from = YEAR_START + YEAR_MS - raw_days * DAY_MS;
    let store = Store::open(path, &options()).unwrap();
    write_rollups(&store, HOST, 7, YEAR_START, raw_from);
    let mut writer = Writer::new(store, options());
    ingest(
        &mut writer,
        &mut [(None, Host::new(1))],
        raw_from,
        YEAR_START + YEAR_MS,
        60,
    )
}

fn size_report() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("year.db");
    let start = Instant::now();
    let samples = build_year(&path, 31);
    let took = start.elapsed();
    let store = Store::open(&path, &options()).unwrap();
    store
        .conn()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let q = |sql: &str| -> i64 { store.conn().query_row(sql, [], |r| r.get(0)).unwrap() };
    let file = std::fs::metadata(&path).unwrap().len();
    let pages = q("PRAGMA page_count");
    let free = q("PRAGMA freelist_count");
    let raw_payload = q("SELECT coalesce(sum(length(data)), 0) FROM raw_chunk")
        + q("SELECT coalesce(sum(length(data)), 0) FROM raw_detail_chunk")
        + q("SELECT coalesce(sum(length(data)), 0) FROM raw_open");
    let raw_samples = q("SELECT coalesce(sum(n), 0) FROM raw_chunk")
        + q("SELECT coalesce(sum(n), 0) FROM raw_detail_chunk")
        + q("SELECT coalesce(sum(n), 0) FROM raw_open");
    let chunks = q("SELECT count(*) FROM raw_chunk") + q("SELECT count(*) FROM raw_detail_chunk");
    let minute_payload = q("SELECT coalesce(sum(length(minutes)), 0) FROM rollup_hour");
    let hours = q("SELECT count(*) FROM rollup_hour");
    eprintln!("synthetic host-year: {samples} samples ingested (31 days) in {took:.1?}");
    eprintln!(
        "file: {file} bytes = {:.1} MB ({pages} pages, {free} free)",
        file as f64 / 1e6
    );
    eprintln!(
        "raw: {raw_samples} samples kept in {chunks} closed chunks, payload {raw_payload} bytes = {:.3} bytes/sample",
        raw_payload as f64 / raw_samples as f64
    );
    eprintln!("rollups: {hours} hour rows, minute payload {minute_payload} bytes");
    let mut stmt = store
        .conn()
        .prepare(
            "SELECT name, count(*), sum(pgsize), sum(unused) FROM dbstat
             GROUP BY name ORDER BY sum(pgsize) DESC",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (name, pages, bytes, unused) = row.unwrap();
        eprintln!(
            "  {name:<24} {pages:>5} pages {:>6.1} MB, {:>5.1} MB unused",
            bytes as f64 / 1e6,
            unused as f64 / 1e6
        );
    }
    let mut stmt = store
        .conn()
        .prepare(
            "SELECT s.metric, s.channel LIKE 'cpu%', sum(length(c.data)), sum(c.n)
             FROM (SELECT series_id, data, n FROM raw_chunk
                   UNION ALL SELECT series_id, data, n FROM raw_detail_chunk) c
             JOIN series s ON s.id = c.series_id GROUP BY 1, 2 ORDER BY 1, 2",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, bool>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (metric, per_core, bytes, n) = row.unwrap();
        let kind = if per_core { "per-core" } else { "aggregate" };
        eprintln!(
            "  {metric:<16} {kind:<9} {:>6.1} MB  {:.3} bytes/sample",
            bytes as f64 / 1e6,
            bytes as f64 / n as f64
        );
    }
}

fn bench_ingest(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ingest.db");
    let (handle, join) = StoreHandle::spawn(&path, options()).unwrap();
    let mut host = Host::new(3);
    // One hour of the synthetic host in 60-second batches, generated up front.
    let mut hours: Vec<Vec<Vec<Sample>>> = Vec::new();
    let mut t_s = YEAR_START / 1000;
    for _ in 0..4 {
        let mut batches = Vec::new();
        for _ in 0..60 {
            let mut batch = Vec::new();
            for _ in 0..60 {
                batch.extend(host.second(t_s));
                t_s += 1;
            }
            batches.push(batch);
        }
        hours.push(batches);
    }
    let per_hour: usize = hours[0].iter().map(Vec::len).sum();
    let mut group = c.benchmark_group("store");
    group.throughput(Throughput::Elements(per_hour as u64));
    group.sample_size(10);
    let mut next = 0usize;
    let mut offset = 0i64;
    group.bench_function("ingest_one_host_hour", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut batches = hours[next % hours.len()].clone();
                // Later copies of the same data move on in time.
                let shift = offset;
                for s in batches.iter_mut().flatten() {
                    s.ts_ms += shift;
                }
                next += 1;
                if next.is_multiple_of(hours.len()) {
                    offset += 4 * HOUR_MS;
                }
                let start = Instant::now();
                for batch in batches {
                    handle.insert(batch).unwrap();
                }
                handle.flush().unwrap();
                total += start.elapsed();
            }
            total
        });
    });
    group.finish();
    handle.close().unwrap();
    join.join().unwrap().unwrap();
}

fn bench_year_query(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("year.db");
    build_year(&path, 30);
    let store = Store::open_read_only(&path).unwrap();
    // Edges off the hour and minute grid, so every path (hours, minutes, raw) is used.
    let from = YEAR_START + 17 * MINUTE_MS + 12_345;
    let to = YEAR_START + YEAR_MS - 43 * MINUTE_MS - 6_789;
    let mut group = c.benchmark_group("store");
    group.sample_size(20);
    group.bench_function("year_report_query", |b| {
        b.iter(|| {
            let wh = wattson::ledger::energy::energy(&store, HOST, &"meter:wall".into(), from, to)
                .unwrap()
                .wh;
            let hourly = store
                .rollups(
                    &SeriesFilter::all().host(HOST).metric(Metric::Power),
                    Resolution::Hour,
                    from,
                    to,
                )
                .unwrap();
            let busy = store
                .rollups(
                    &SeriesFilter::all()
                        .host(HOST)
                        .metric(Metric::CpuBusy)
                        .channel("all"),
                    Resolution::Hour,
                    from,
                    to,
                )
                .unwrap();
            black_box((wh, hourly[0].1.len(), busy[0].1.len()))
        });
    });
    group.finish();
}

fn main() {
    if let Some(path) = std::env::var_os("WATTSON_BENCH_FLEET") {
        let hosts = std::env::var("WATTSON_BENCH_FLEET_HOSTS")
            .map_or(fleet::FLEET_HOSTS, |n| n.parse().unwrap());
        fleet::build(Path::new(&path), hosts);
        return;
    }
    if std::env::var_os("WATTSON_BENCH_SIZE").is_some() {
        size_report();
        return;
    }
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1))
        .configure_from_args();
    bench_ingest(&mut c);
    bench_year_query(&mut c);
    c.final_summary();
}
