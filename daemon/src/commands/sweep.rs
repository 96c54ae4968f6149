//! `wattson sweep`: workload loops against the meter, fitted into watts per loop.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use wattson_collectors::cpu::CpuCollector;
use wattson_collectors::cpu::topology::{pin_order, read_topology};
use wattson_collectors::{Collector, SysRoot};

use super::interrupt::SignalWatch;
use crate::cli::SweepArgs;
use crate::config::Config;
use crate::control::MeterLink;
use crate::control::messages::{Stored, SweepRecord, SweepSettings};
use crate::store::Store;
use crate::sweep::engine::{Instruments, LoopSlot, Progress, SweepPlan, run_sweep, stop_loops};
use crate::sweep::fingerprint;
use crate::sweep::governor::GovernorGuard;
use crate::sweep::outcome::{LevelResult, SweepOutcome};
use crate::sweep::persist;
use crate::sweep::record::{Finished, record};
use crate::sweep::workload::cpu_order;

pub fn run(args: &SweepArgs, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config_path)?;
    let db = args
        .db
        .clone()
        .unwrap_or_else(|| config.storage.path.clone());
    if args.list || args.show.is_some() {
        return show(args, &db);
    }
    let name = args.name.clone().unwrap_or_default();
    Ok(match sweep_until_signal(&config, args, &name, &db)? {
        None => ExitCode::SUCCESS,
        // 128 + the signal number, as a shell reports a command a signal ended: 130 after
        // Ctrl-C (SIGINT), 143 after SIGTERM. The completed levels are stored either way.
        Some(signal) => ExitCode::from(128u8.saturating_add(signal as u8)),
    })
}

fn show(args: &SweepArgs, db: &Path) -> anyhow::Result<ExitCode> {
    if !crate::store::database_exists(db)? {
        anyhow::bail!(
            "no database at {}: run a sweep first, or pass --db",
            db.display()
        );
    }
    let store = crate::store::open_database(db)?;
    let sweeps = match &args.show {
        Some(n) => vec![
            persist::load(&store, n)?
                .with_context(|| format!("no sweep named {n:?} in {}", db.display()))?,
        ],
        None => persist::list(&store)?,
    };
    if args.json {
        crate::output::println(&serde_json::to_string_pretty(&sweeps)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    if sweeps.is_empty() {
        out.push_str("no sweeps stored yet\n");
    }
    for s in &sweeps {
        let when = chrono::DateTime::from_timestamp_millis(s.started_ms)
            .map(|d| d.format("%Y-%m-%d %H:%M UTC").to_string())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{} ({}, {}, {} on {})",
            s.name, s.status, when, s.kinds, s.meter
        );
        if args.show.is_some() {
            for l in &s.levels {
                let _ = writeln!(
                    out,
                    "  {:<7} {:<9} {:>8.2} W +/- {:<5.2} n={:<4} {}",
                    l.kind,
                    crate::analysis::modes::level_name(l.loops as u32),
                    l.mean_w,
                    l.ci95_w.unwrap_or(f64::NAN),
                    l.n,
                    l.warnings.as_deref().unwrap_or("")
                );
            }
        }
        if let Some(fits) = s.fit.as_ref().and_then(|f| f.as_array()) {
            for f in fits {
                let _ = writeln!(
                    out,
                    "  {}: idle {:.2} W, {:.2} W per loop, r2 {:.4}",
                    f["kind"].as_str().unwrap_or("?"),
                    f["loops"]["intercept"].as_f64().unwrap_or(f64::NAN),
                    f["loops"]["slope"].as_f64().unwrap_or(f64::NAN),
                    f["loops"]["r2"].as_f64().unwrap_or(f64::NAN)
                );
            }
        }
        for why in &s.set_aside {
            let _ = writeln!(out, "  warning: {why}");
        }
    }
    crate::output::print(&out);
    Ok(ExitCode::SUCCESS)
}

/// Run the sweep(s) the arguments ask for against the configured meter. Returns false when
/// interrupted (partial results are stored).
pub fn sweep_with_config(
    config: &Config,
    args: &SweepArgs,
    name: &str,
    db: &Path,
) -> anyhow::Result<bool> {
    Ok(sweep_until_signal(config, args, name, db)?.is_none())
}

/// As [`sweep_with_config`]; returns the number of the signal (`SIGINT` 2, `SIGTERM` 15) that
/// interrupted the sweep, or `None` when every level ran.
pub fn sweep_until_signal(
    config: &Config,
    args: &SweepArgs,
    name: &str,
    db: &Path,
) -> anyhow::Result<Option<i32>> {
    let root = SysRoot::new(&config.host.sysfs, &config.host.procfs);
    let topology = read_topology(&root).ok();
    let order = cpu_order(topology.as_ref().map(pin_order).as_deref());
    let physical = topology
        .as_ref()
        .map_or(order.len(), |t| t.physical_cores().max(1));
    let levels = args
        .levels
        .clone()
        .unwrap_or_else(|| (0..=order.len()).collect());
    check_levels(name, &levels, order.len())?;
    // Through the daemon when one runs for this database (it owns the meter and the
    // database's writer), else the meter and the database directly.
    let mut link = crate::control::open_meter(config, args.meter.as_deref(), db)?;
    if !args.quiet {
        crate::output::println(&format!("meter: {}", link.path.describe()));
    }
    let mut plan = SweepPlan::new(levels, args.kinds.clone(), order.clone(), physical);
    plan.max_level = args.max_level_time;
    plan.ci_abs_w = args.ci_watts;
    plan.ci_rel = args.ci_percent / 100.0;
    plan.min_samples = args.min_samples.max(2);
    plan.interval = link.config.interval;
    plan.idle_guard_wait = args.idle_wait;
    plan.sysfs.clone_from(&config.host.sysfs);

    let mut cpu = CpuCollector::new(root.clone());
    let mut components = component_collectors(&root);
    let destination = Destination::new(config, args, db, &root, &link, physical)?;

    let stop = Arc::new(AtomicBool::new(false));
    let slot: LoopSlot = Arc::new(Mutex::new(None));
    let signals = {
        let slot = slot.clone();
        SignalWatch::start(stop.clone(), move || {
            stop_loops(&slot);
            tracing::warn!("interrupted: loops stopped; keeping the completed levels");
        })?
    };

    let runs: Vec<(String, Option<String>)> = match &args.governors {
        None => vec![(name.to_owned(), None)],
        Some(gs) => gs
            .iter()
            .map(|g| (format!("{name} ({g})"), Some(g.clone())))
            .collect(),
    };
    let guard = match &args.governors {
        Some(_) => Some(GovernorGuard::capture(&root)?),
        None => None,
    };
    let mut all_complete = true;
    for (config_name, governor) in runs {
        if let (Some(g), Some(guard)) = (&governor, &guard) {
            guard.set(g)?;
            tracing::info!("governor {g} on every CPU");
        }
        let online = topology
            .as_ref()
            .map_or(order.len(), |t| t.online().len().max(1));
        let inst = Instruments {
            meter: link.meter.collector(),
            cpu: Some(&mut cpu),
            components: components
                .iter_mut()
                .map(|c| &mut **c as &mut dyn Collector)
                .collect(),
            online_cpus: online,
        };
        let (outcome, live_levels) = measure(&plan, inst, &stop, &slot, args.quiet);
        let outcome = outcome?;
        let settings = SweepSettings {
            levels: plan.levels.clone(),
            kinds: plan.kinds.clone(),
            ci_watts: plan.ci_abs_w,
            ci_percent: plan.ci_rel * 100.0,
            min_samples: plan.min_samples,
            max_level_s: plan.max_level.as_secs_f64(),
            governor,
            ci_method: "batch means (see docs)".into(),
        };
        if outcome.levels.is_empty() {
            tracing::warn!("no level completed: nothing stored for {config_name:?}");
        } else {
            let stored = destination.store(&link, &config_name, settings, &outcome)?;
            say_stored(
                &stored,
                &config_name,
                &outcome,
                args.quiet,
                live_levels,
                &link.path,
            );
        }
        all_complete &= outcome.complete;
        if !outcome.complete {
            break;
        }
    }
    if let Some(g) = guard {
        g.restore();
        tracing::info!("governors restored");
    }
    let signal = signals.received();
    drop(signals);
    Ok(match signal {
        Some(s) => Some(s),
        // Interrupted without a signal recorded cannot happen (only the watch sets `stop`);
        // call it an interrupt all the same.
        None if !all_complete => Some(libc::SIGINT),
        None => None,
    })
}

/// Refuses, before anything runs, a sweep with no name, no levels, a level given twice
/// (it could not be stored) or more loops than this machine's `cpus`.
fn check_levels(name: &str, levels: &[usize], cpus: usize) -> anyhow::Result<()> {
    if name.trim().is_empty() {
        anyhow::bail!(
            "--name is empty: name the configuration the results are stored under, e.g. \
             --name \"basket, powersave\""
        );
    }
    if levels.is_empty() {
        anyhow::bail!("--levels is empty");
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(twice) = levels.iter().find(|l| !seen.insert(**l)) {
        anyhow::bail!("--levels {twice} is given twice: each level is measured once");
    }
    if let Some(too_many) = levels.iter().find(|&&l| l > cpus) {
        anyhow::bail!(
            "--levels {too_many}: this machine has {cpus} logical CPUs, and each loop needs one \
             of its own, so levels go from 0 (idle) to {cpus}"
        );
    }
    Ok(())
}

/// The software power sources (RAPL, hwmon) polled beside the meter, for calibration.
fn component_collectors(root: &SysRoot) -> Vec<Box<dyn Collector>> {
    let mut components: Vec<Box<dyn Collector>> = Vec::new();
    if let Ok(r) = wattson_collectors::power::rapl::RaplCollector::new(root) {
        components.push(Box::new(r));
    }
    if let Ok(h) = wattson_collectors::power::hwmon::HwmonCollector::new(root) {
        components.push(Box::new(h));
    }
    components
}

/// One run of `plan` on `inst` with a progress spinner; and whether each level was printed
/// as it finished (live above the spinner on a terminal, and then not again in the summary).
fn measure(
    plan: &SweepPlan,
    mut inst: Instruments<'_>,
    stop: &AtomicBool,
    slot: &LoopSlot,
    quiet: bool,
) -> (anyhow::Result<SweepOutcome>, bool) {
    let bar = progress_bar();
    crate::logging::set_progress(Some(&bar));
    let live_levels = !bar.is_hidden() && !quiet;
    let mut on_progress = |p: Progress| report_progress(&bar, &p, live_levels);
    let outcome = run_sweep(plan, &mut inst, stop, slot, &mut on_progress);
    drop(inst);
    bar.finish_and_clear();
    crate::logging::set_progress(None);
    (outcome.map_err(anyhow::Error::from), live_levels)
}

/// Where each run's results are stored: the daemon stores what it measured for us; without
/// one, this process does, in its own `store`.
struct Destination<'a> {
    store: Option<Store>,
    db: &'a Path,
    root: &'a SysRoot,
    host: &'a str,
    meter_desc: String,
    source: wattson_collectors::SourceId,
    physical: usize,
    regression_check: bool,
}

impl<'a> Destination<'a> {
    fn new(
        config: &'a Config,
        args: &SweepArgs,
        db: &'a Path,
        root: &'a SysRoot,
        link: &MeterLink,
        physical: usize,
    ) -> anyhow::Result<Self> {
        let store = if link.meter.daemon().is_some() {
            None
        } else {
            if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            Some(
                Store::open(db, &crate::sources::wiring::store_options(config))
                    .with_context(|| format!("opening the database {}", db.display()))?,
            )
        };
        Ok(Destination {
            store,
            db,
            root,
            host: &config.host.name,
            meter_desc: crate::sweep::record::meter_description(&link.config),
            source: wattson_collectors::SourceId::meter(&link.config.id),
            physical,
            regression_check: args.regression_check,
        })
    }

    /// Stores the run `name`'s `outcome`, here or through the daemon `link` reaches.
    fn store(
        &self,
        link: &MeterLink,
        name: &str,
        settings: SweepSettings,
        outcome: &SweepOutcome,
    ) -> anyhow::Result<Stored> {
        Ok(match (&self.store, link.meter.daemon()) {
            (Some(store), _) => {
                let fp = fingerprint::gather(self.root, self.host, &self.meter_desc);
                let finished = Finished {
                    name,
                    fingerprint: &fp,
                    settings: &settings,
                    outcome,
                    regression_check: self.regression_check,
                };
                record(store, self.host, &finished)?.into_stored(self.db.to_owned())
            }
            (None, Some(daemon)) => daemon.store_sweep(SweepRecord {
                name: name.to_owned(),
                source: self.source.clone(),
                settings,
                physical_cores: self.physical,
                regression_check: self.regression_check,
                levels: outcome.levels.clone(),
                complete: outcome.complete,
                started_ms: outcome.started_ms,
                ended_ms: outcome.ended_ms,
            })?,
            (None, None) => anyhow::bail!("no database to store the sweep in"),
        })
    }
}

/// The stored sweep in words: calibrations, the fit, where it went, the regression verdict.
fn say_stored(
    stored: &Stored,
    name: &str,
    outcome: &SweepOutcome,
    quiet: bool,
    live_levels: bool,
    path: &crate::control::MeterPath,
) {
    if let Some(line) = &stored.regression {
        if stored.regression_detected {
            tracing::warn!("{line}");
        } else {
            tracing::info!("{line}");
        }
        crate::output::println(line);
    }
    if quiet {
        return;
    }
    for c in &stored.calibrations {
        crate::output::println(&format!(
            "calibration (an estimate): wall = {:.1} W + {:.3} x {} (r2 {:.3}, +/- {:.1} W rms)",
            c.intercept_w, c.slope, c.source, c.r2, c.rms_error_w
        ));
    }
    crate::output::print(&summarise(name, outcome, !live_levels));
    crate::output::println(&format!(
        "stored as configuration {name:?} (run {}, {}) in {}{}",
        stored.run_id,
        if outcome.complete {
            "complete"
        } else {
            "partial"
        },
        stored.database.display(),
        match path {
            crate::control::MeterPath::Daemon { .. } => " by the daemon",
            crate::control::MeterPath::Direct { .. } => "",
        }
    ));
}

fn progress_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {prefix} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

fn report_progress(bar: &indicatif::ProgressBar, p: &Progress, live_levels: bool) {
    match p {
        Progress::Level {
            kind,
            loops,
            index,
            total,
        } => {
            bar.set_prefix(format!(
                "[{index}/{total}] {} ({kind})",
                crate::analysis::modes::level_name(*loops as u32)
            ));
            bar.set_message("starting");
        }
        Progress::Waiting(m) => bar.set_message(m.clone()),
        Progress::Settling { elapsed_s, last_w } => {
            bar.set_message(format!("settling {elapsed_s:.0} s, {last_w:.1} W"));
        }
        Progress::Measuring {
            elapsed_s,
            mean_w,
            ci95_w,
            n,
        } => bar.set_message(match ci95_w {
            Some(c) => format!("measuring {elapsed_s:.0} s: {mean_w:.2} +/- {c:.2} W (n={n})"),
            None => format!("measuring {elapsed_s:.0} s: {mean_w:.2} W (n={n})"),
        }),
        Progress::Done(r) if live_levels => bar.println(level_line(r)),
        Progress::Done(_) => {}
    }
}

fn level_line(r: &LevelResult) -> String {
    let mut s = format!(
        "{:<9} {:<6} {:>8.2} W +/- {:.2} (n={}, settled in {:.0} s, measured {:.0} s)",
        crate::analysis::modes::level_name(r.loops as u32),
        r.kind.as_str(),
        r.mean_w,
        r.ci95_w,
        r.n,
        r.settle_s,
        r.measure_s()
    );
    if let Some(mhz) = r.mean_mhz {
        let _ = write!(s, ", {mhz:.0} MHz");
    }
    if let Some(b) = r.busy {
        let _ = write!(s, ", busy {:.1} %", b * 100.0);
    }
    for w in &r.warnings {
        let _ = write!(s, "\n          warning: {w}");
    }
    s
}

/// The fit of each kind in plain words, after each level's line when `with_levels` (not
/// when they were printed live).
pub fn summarise(name: &str, outcome: &SweepOutcome, with_levels: bool) -> String {
    let mut out = format!("\n{name}\n");
    for l in outcome.levels.iter().filter(|_| with_levels) {
        let _ = writeln!(out, "  {}", level_line(l));
    }
    for f in &outcome.fits {
        let ci = |c: Option<f64>| c.map(|c| format!(" +/- {c:.2}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {} fit: idle {:.2}{} W, {:.2}{} W per loop, r2 {:.4}",
            f.kind.as_str(),
            f.loops.intercept,
            ci(f.loops.intercept_ci95),
            f.loops.slope,
            ci(f.loops.slope_ci95),
            f.loops.r2
        );
        if let Some(fan) = &f.utilisation_fan {
            let _ = writeln!(
                out,
                "  {} against utilisation (Fan et al. 2007, r={:.1}): {:.1} W idle to {:.1} W busy, r2 {:.4}",
                f.kind.as_str(),
                fan.r.unwrap_or(crate::analysis::fit::FAN_R),
                fan.p_idle,
                fan.p_max,
                fan.r2
            );
        }
        for n in &f.notes {
            let _ = writeln!(out, "  note: {n}");
        }
    }
    out
}
