//! `wattson demo`: the whole pipeline on this machine with no hardware and no broker.
//!
//! A simulated PZEM-004T on a pseudo-terminal draws 40 W plus 15 W per busy CPU of this
//! machine's real load (with noise and a 1 s ramp); `wattson run` stores it and the CPU
//! telemetry into a temporary (or `--db`) database; a short sweep fits watts per loop; and a
//! cost summary closes.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use wattson_collectors::SysRoot;
use wattson_collectors::meter::Protocol;

use crate::analysis::cost::{annual_cost, format_money};
use crate::cli::DemoArgs;
use crate::commands::sweep::{SweepArgs, sweep_with_config};
use crate::config::{Config, MeterConfig};
use crate::runtime::daemon::{self, RunOptions};
use crate::sources::power_model::PowerModel;
use crate::sweep::workload::LoopKind;

pub fn run(args: &DemoArgs, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
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
    config.meters = vec![MeterConfig {
        id: "demo".into(),
        protocol: Protocol::Pzem004t,
        port: sim.path.clone(),
        baud: None,
        parity: None,
        stop_bits: None,
        address: Some(1),
        interval: Duration::from_secs(1),
        timeout: None,
        line: None,
    }];
    config.storage.path.clone_from(&db);
    config.storage.flush_interval = Duration::from_secs(1);
    config.mqtt = None;

    let total = args.duration.max(Duration::from_secs(20));
    let sweep_share = if args.no_sweep { 0.0 } else { 0.7 };
    let collect = Duration::from_secs_f64((total.as_secs_f64() * (1.0 - sweep_share)).max(10.0));
    let say = |s: &str| crate::output::println(s);
    say(&format!(
        "wattson demo: a simulated PZEM-004T on {} draws 40 W + 15 W per busy CPU of this machine\n\
         database: {}\n\n1/3 collecting wall power and CPU telemetry for {:.0} s (wattson run)...",
        sim.path.display(),
        db.display(),
        collect.as_secs_f64()
    ));
    daemon::run(
        &config,
        &RunOptions {
            duration: Some(collect),
            config_path: None,
        },
    )?;

    let mut sweep_ok = true;
    if args.no_sweep {
        say("\n2/3 sweep skipped (--no-sweep)");
    } else {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let levels: Vec<usize> = (0..=cpus.min(4)).collect();
        let left = total.saturating_sub(started.elapsed()).as_secs_f64();
        let per_level = (left / levels.len() as f64 - 6.0).clamp(8.0, 90.0);
        say(&format!(
            "\n2/3 sweeping levels {levels:?} (idle, then busy loops), about {per_level:.0} s each..."
        ));
        let sweep = SweepArgs {
            name: Some("demo".into()),
            levels: Some(levels),
            kinds: vec![LoopKind::Spin],
            governors: None,
            meter: None,
            max_level_time: Duration::from_secs_f64(per_level),
            ci_watts: 0.5,
            ci_percent: 1.0,
            min_samples: 8,
            idle_wait: Duration::from_secs(5),
            regression_check: false,
            list: false,
            show: None,
            json: false,
            db: Some(db.clone()),
        };
        sweep_ok = sweep_with_config(&config, &sweep, "demo", &db)?;
    }
    sim.stop();

    say("\n3/3 running cost");
    say(&summary(&config, &db)?);
    if args.db.is_none() {
        say("(the database was temporary; pass --db PATH to keep it)");
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

fn summary(config: &Config, db: &Path) -> anyhow::Result<String> {
    let store = super::open_database(db)?;
    let tariff = crate::ledger::costs::tariff(&config.tariff)?;
    let currency = tariff.currency().to_owned();
    let today = chrono::Utc::now();
    let mut out = String::new();
    let c = crate::ledger::costs::summary(
        &store,
        &config.host.name,
        "meter:demo",
        1000,
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
