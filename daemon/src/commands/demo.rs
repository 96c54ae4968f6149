//! `wattson demo`: the whole pipeline on this machine with no hardware and no broker.
//!
//! A simulated PZEM-004T on a pseudo-terminal draws 40 W plus 15 W per busy CPU of this
//! machine's real load (with noise and a 1 s ramp); a short sweep fits watts per loop; then
//! `wattson run` stores it and the CPU telemetry into a temporary (or `--db`) database for
//! the rest of `--duration` (so the whole demo keeps to it however early the sweep's levels
//! converge); and a cost summary closes.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use wattson_collectors::SourceId;

use anyhow::Context as _;
use wattson_collectors::meter::Protocol;
use wattson_collectors::{Metric, SysRoot};

use crate::cli::{DemoArgs, SweepArgs};
use crate::commands::sweep::sweep_with_config;
use crate::config::{Config, MeterConfig};
use crate::ledger::price::{annual_cost, format_money};
use crate::runtime::daemon::{self, RunOptions};
use crate::sources::simulated_power::PowerModel;
use crate::sweep::workload::LoopKind;

/// The simulated meter's id.
const DEMO_METER: &str = "demo";

/// The shortest demo: a two-level sweep needs about 6 s a level, and collecting a few more.
const MIN_DURATION: Duration = Duration::from_secs(20);
/// The share of the demo the sweep may take; collecting fills the rest, so the whole demo
/// keeps to `--duration` however early the sweep's levels converge.
const SWEEP_SHARE: f64 = 0.65;
/// What a sweep level should be given at least, s.
const MIN_LEVEL_S: f64 = 6.0;
/// Kept back at the end for stopping the daemon and the cost summary, s.
const CLOSING_S: f64 = 0.6;
/// The shortest collecting phase, s.
const MIN_COLLECT_S: f64 = 3.0;

pub fn run(args: &DemoArgs, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    if args.duration < MIN_DURATION {
        anyhow::bail!(
            "--duration {}: the demo needs at least {} s (a two-level sweep and some collecting)",
            crate::config::format_duration(args.duration),
            MIN_DURATION.as_secs()
        );
    }
    // The user's config supplies the host name, sysfs roots and tariff; meters and storage
    // are the demo's own.
    let mut config = match config_path {
        Some(_) => super::load_config(config_path)?,
        None => Config::load(None).unwrap_or_else(|_| Config::defaults()),
    };
    let tmp = tempfile::Builder::new()
        .prefix("wattson-demo-")
        .tempdir()
        .context("creating a temporary directory")?;
    let db = args
        .db
        .clone()
        .unwrap_or_else(|| tmp.path().join("wattson.db"));
    let root = SysRoot::new(&config.host.sysfs, &config.host.procfs);
    let model = PowerModel {
        idle_w: 40.0,
        per_cpu_w: 15.0,
        follow_cpu: true,
        noise_sd_w: 1.0,
        ramp_s: 1.0,
        ..PowerModel::default()
    };
    let sim = crate::sources::meters::simulate(Protocol::Pzem004t, &[1], model, &root, 42)?;
    config.meters = vec![demo_meter(sim.path.clone())];
    config.storage.path.clone_from(&db);
    config.storage.flush_interval = Duration::from_secs(1);
    config.mqtt = None;

    let total = args.duration.as_secs_f64();
    let say = |s: &str| crate::output::println(s);
    say(&format!(
        "wattson demo: a simulated PZEM-004T on {} draws 40 W + 15 W per busy CPU of this machine\n\
         database: {}\nabout {total:.0} s in all",
        sim.path.display(),
        db.display(),
    ));

    let sweep_ok = if args.no_sweep {
        say("\n1/3 sweep skipped (--no-sweep)");
        true
    } else {
        sweep(&config, &db, total)?
    };

    if sweep_ok {
        let left = total - started.elapsed().as_secs_f64() - CLOSING_S;
        let collect = Duration::from_secs_f64(left.max(MIN_COLLECT_S));
        say(&format!(
            "\n2/3 collecting wall power and CPU telemetry for {:.0} s (wattson run)",
            collect.as_secs_f64()
        ));
        collect_with_progress(&config, collect)?;
    }
    sim.stop();

    say("\n3/3 running cost");
    say(&summary(&config, &db)?);
    if args.db.is_none() {
        say("(the database was temporary; pass --db PATH to keep it)");
    } else {
        // The progress bar read the database while the collecting closed it, so SQLite left
        // the write-ahead log beside it: the file kept is to hold everything on its own.
        let folded = crate::store::Store::open(&db, &crate::store::StoreOptions::default())
            .is_ok_and(|s| s.fold_log());
        if !folded {
            tracing::warn!(
                "{}: part of what the demo stored is still in {}-wal beside it: keep the two \
                 together",
                db.display(),
                db.display()
            );
        }
    }
    say(&format!(
        "demo finished in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(if sweep_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(130)
    })
}

/// The simulated meter: a PZEM-004T at address 1 on `port`.
fn demo_meter(port: PathBuf) -> MeterConfig {
    MeterConfig {
        id: DEMO_METER.into(),
        protocol: Protocol::Pzem004t,
        port,
        baud: None,
        parity: None,
        stop_bits: None,
        address: Some(1),
        // Two readings a second: short sweep levels still get enough of them.
        interval: Duration::from_millis(500),
        timeout: None,
        line: None,
        bidirectional: false,
    }
}

/// The demo's short sweep (`wattson sweep`), in its share of the `total` seconds. Returns
/// false when interrupted.
fn sweep(config: &Config, db: &Path, total: f64) -> anyhow::Result<bool> {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let budget = total * SWEEP_SHARE;
    // As many levels (idle, 1, 2, ... loops, up to 4) as get MIN_LEVEL_S each.
    let fit = ((budget / MIN_LEVEL_S).floor() as usize).max(2);
    let levels: Vec<usize> = (0..=cpus.min(4)).take(fit).collect();
    let per_level = (budget / levels.len() as f64).min(90.0);
    crate::output::println(&format!(
        "\n1/3 sweeping levels {levels:?} (idle, then busy loops), at most {per_level:.0} s each \
         (wattson sweep)"
    ));
    let sweep = SweepArgs {
        name: Some("demo".into()),
        levels: Some(levels),
        kinds: vec![LoopKind::Spin],
        governors: None,
        meter: None,
        max_level_time: Duration::from_secs_f64(per_level),
        // A level of a few seconds holds about ten of the simulated meter's readings (1 W
        // sd, two a second): +/- 2 W is what that many can show on a machine that is busy
        // with other work too, so the demo stops there instead of at its time cap. A real
        // sweep aims at the DESIGN's 0.5 W and takes minutes per level.
        ci_watts: 2.0,
        ci_percent: 2.0,
        min_samples: 6,
        idle_wait: Duration::from_secs_f64((per_level / 3.0).min(5.0)),
        regression_check: false,
        list: false,
        show: None,
        json: false,
        db: Some(db.to_owned()),
        quiet: true,
    };
    sweep_with_config(config, &sweep, "demo", db)
}

/// `wattson run` for `collect`, with a progress bar of the time and the latest wall watts.
fn collect_with_progress(config: &Config, collect: Duration) -> anyhow::Result<()> {
    let tenths = (collect.as_secs_f64() * 10.0).round() as u64;
    let bar = indicatif::ProgressBar::new(tenths.max(1));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    crate::logging::set_progress(Some(&bar));
    let done = std::sync::atomic::AtomicBool::new(false);
    let result = std::thread::scope(|scope| {
        let daemon = scope.spawn(|| {
            let r = daemon::run(
                config,
                &RunOptions {
                    duration: Some(collect),
                    config_path: None,
                },
            )
            .map_err(anyhow::Error::from);
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            r
        });
        let t0 = Instant::now();
        let demo = SourceId::meter(DEMO_METER);
        let mut store = None;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            bar.set_position(((t0.elapsed().as_secs_f64() * 10.0) as u64).min(tenths));
            if store.is_none() && config.storage.path.exists() {
                store = crate::store::Store::open_read_only(&config.storage.path).ok();
            }
            let watts = store.as_ref().and_then(|s| {
                s.latest(&config.host.name)
                    .ok()?
                    .into_iter()
                    .find(|l| l.series.source == demo && l.series.metric == Metric::Power)
            });
            bar.set_message(match watts {
                Some(l) => format!("{:.1} W at the wall", l.value),
                None => "starting".to_owned(),
            });
            std::thread::sleep(Duration::from_millis(100));
        }
        daemon
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the collecting thread panicked")))
    });
    bar.finish_and_clear();
    crate::logging::set_progress(None);
    result
}

fn summary(config: &Config, db: &Path) -> anyhow::Result<String> {
    let store = crate::store::open_database(db)?;
    let tariff = crate::ledger::costs::tariff(&config.tariff)?;
    let currency = tariff.currency().to_owned();
    let today = chrono::Utc::now();
    let mut out = String::new();
    let c = crate::ledger::costs::summary(
        &store,
        &config.host.name,
        &SourceId::meter(DEMO_METER),
        crate::ledger::costs::accuracy_of(config, &SourceId::meter(DEMO_METER)),
        &tariff,
        today,
    )?;
    if let (Some(w), Some(kwh), Some(cost)) = (c.mean_watts, c.annual_kwh, c.annual_cost) {
        let _ = writeln!(
            out,
            "  measured: {w:.1} W on average over the run -> {kwh:.0} kWh and {} per year at {currency} {}/kWh",
            format_money(cost, &currency),
            config.tariff.price_per_kwh
        );
    }
    if let Some(s) = crate::sweep::persist::load(&store, "demo")? {
        let _ = writeln!(out, "\n  mode        watts            per year");
        for l in s.levels.iter().filter(|l| l.kind == "spin") {
            let fig = annual_cost(l.mean_w, l.ci95_w, &tariff, today.date_naive())?;
            let _ = writeln!(
                out,
                "  {:<10} {:>6.1} +/- {:<4.1} W  {:>7.0} kWh  {}",
                crate::analysis::modes::level_name(l.loops as u32),
                l.mean_w,
                l.ci95_w.unwrap_or(0.0),
                fig.kwh,
                format_money(fig.cost, &currency)
            );
            for w in l.warnings.iter().flat_map(|w| w.split("; ")) {
                let _ = writeln!(out, "             warning: {w}");
            }
        }
        if let Some(f) = s
            .fit
            .as_ref()
            .and_then(|f| f.as_array())
            .and_then(|a| a.first())
        {
            let idle = f["loops"]["intercept"].as_f64().unwrap_or(f64::NAN);
            let slope = f["loops"]["slope"].as_f64().unwrap_or(f64::NAN);
            let r2 = f["loops"]["r2"].as_f64().unwrap_or(f64::NAN);
            let per_loop = annual_cost(slope.max(0.0), None, &tariff, today.date_naive())?;
            let _ = writeln!(
                out,
                "\n  fit: idle {idle:.1} W, {slope:.1} W per busy loop (r2 {r2:.3}); each always-busy core costs {} per year",
                format_money(per_loop.cost, &currency)
            );
            for n in f["notes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n.as_str())
            {
                let _ = writeln!(out, "  note: {n}");
            }
        }
    }
    let _ = writeln!(
        out,
        "\n  (the simulated meter follows this machine's whole CPU load, so other programs running now show up too)"
    );
    Ok(out)
}
