//! `wattson idle`: why idle draws what it does, and (`--measure`) what each power setting
//! saves at the wall.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context as _;
use wattson_collectors::SysRoot;
use wattson_collectors::idle::settings::{self, SettingKind};

mod apply;
mod render;

use render::effect_line;
pub use render::render;

use super::interrupt::SignalWatch;
use crate::cli::IdleArgs;
use crate::config::Config;
use crate::control::MeterLink;
use crate::idle::explain;
use crate::idle::measure::{self, Outcome, Plan, Progress};
use crate::idle::store::{self as idle_store, Effect, describe_delta};
use crate::idle::trials::{self, Allowlist, Trial};
use crate::idle::{journal, keep_advice};
use crate::store::Store;
use crate::sweep::fingerprint::Fingerprint;

pub fn run(args: &IdleArgs, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config_path)?;
    let db = args
        .db
        .clone()
        .unwrap_or_else(|| config.storage.path.clone());
    if args.measure {
        return measure_all(args, &config, &db);
    }
    if args.restore {
        return restore(&config, &db);
    }
    if args.apply {
        return apply::apply(args, &config, &db);
    }
    if args.revert {
        return apply::revert(args, &config, &db);
    }
    if !args.only.is_empty() {
        anyhow::bail!("--only goes with --measure or --apply");
    }
    let store = if crate::store::database_exists(&db).unwrap_or(false) {
        crate::store::open_database(&db).ok()
    } else {
        None
    };
    let report = explain::gather(&config, store.as_ref(), args.sample, args.top);
    if args.json {
        crate::output::println(&serde_json::to_string_pretty(&report)?);
    } else {
        crate::output::print(&render(&report, &config));
    }
    Ok(ExitCode::SUCCESS)
}

/// `wattson idle --restore`.
fn restore(config: &Config, db: &Path) -> anyhow::Result<ExitCode> {
    if !crate::store::database_exists(db)? {
        anyhow::bail!("no database at {}: nothing to restore from", db.display());
    }
    let root = SysRoot::new(&config.host.sysfs, &config.host.procfs);
    let Some(done) = journal::restore_asked(db, &root)? else {
        anyhow::bail!(
            "a `wattson idle --measure` is running on {} now: it restores its own settings",
            db.display()
        );
    };
    crate::output::println(&format!(
        "restored {} setting file(s){}",
        done.restored.len(),
        if done.restored.is_empty() {
            String::new()
        } else {
            format!(
                ": {}",
                done.restored
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    ));
    if done.failed.is_empty() && done.refused.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        anyhow::bail!(
            "{} setting(s) not restored: {}",
            done.failed.len() + done.refused.len(),
            done.failed
                .iter()
                .chain(&done.refused)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        )
    }
}

/// Refuse `--measure` without write access to every file it would change.
#[allow(
    clippy::disallowed_methods,
    reason = "the sysfs and procfs settings files --measure changes: never a database"
)]
fn check_privilege(allow: &Allowlist) -> anyhow::Result<()> {
    for path in allow.files() {
        if let Err(e) = std::fs::OpenOptions::new().write(true).open(path) {
            let who = if nix::unistd::geteuid().is_root() {
                String::new()
            } else {
                format!(
                    "; these settings can be changed only by root (this is uid {}): run \
                     `sudo wattson idle --measure`",
                    nix::unistd::geteuid()
                )
            };
            anyhow::bail!(
                "wattson idle --measure changes power settings and puts them back, and cannot \
                 write {} ({e}){who}. Nothing was changed. `wattson idle` without --measure \
                 shows every setting and what it is.",
                path.display()
            );
        }
    }
    Ok(())
}

fn measure_all(args: &IdleArgs, config: &Config, db: &Path) -> anyhow::Result<ExitCode> {
    let root = SysRoot::new(&config.host.sysfs, &config.host.procfs);
    let (chosen, allow) = choose(args, config, &root)?;
    // Through the running daemon when it owns the meter, else opened here; a first reading
    // is taken either way before anything is changed.
    let mut link = crate::control::open_meter(config, args.meter.as_deref(), db)?;
    crate::output::println(&format!("meter: {}", link.path.describe()));
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let store = Store::open(db, &crate::sources::wiring::store_options(config))
        .with_context(|| format!("opening the database {}", db.display()))?;
    let _lock = journal::lock(db)?;
    let left = journal::restore_pending(&store, &crate::idle::catalogue::Catalogue::of(&root));
    if !left.is_empty() {
        anyhow::bail!(
            "an earlier measurement left settings changed that cannot be put back ({}): \
             nothing new was changed",
            left.join("; ")
        );
    }
    let mut plan = Plan::new(link.config.interval);
    plan.phases = args.phases;
    plan.phase = args.phase;
    let (run_id, fingerprint) = start_run(&store, config, &root, &link, &chosen, &plan)?;
    let journal = journal::Journal::record(&store, run_id, allow)?;
    let stop = Arc::new(AtomicBool::new(false));
    let signals = SignalWatch::start(stop.clone(), || {
        tracing::warn!("interrupted: putting the settings back");
    })?;
    crate::output::println(&format!(
        "measuring {} setting(s) against idle as found, {} phases of {:.0} s each (at most {:.0} \
         s per setting); every change is put back afterwards",
        chosen.len(),
        plan.phases,
        plan.phase.as_secs_f64(),
        chosen
            .iter()
            .map(|c| plan.for_trial(c).max_per_setting())
            .max()
            .unwrap_or_default()
            .as_secs_f64()
    ));
    let bar = progress_bar();
    crate::logging::set_progress(Some(&bar));
    let mut results: Vec<(Trial, Effect)> = Vec::new();
    let mut failure = None;
    for (i, c) in chosen.iter().enumerate() {
        bar.set_prefix(format!("[{}/{}] {}", i + 1, chosen.len(), c.name));
        let mut on_progress = |p: Progress| report_progress(&bar, &p);
        match measure::measure(
            &plan.for_trial(c),
            link.meter.collector(),
            &journal,
            &store,
            c,
            &stop,
            &mut on_progress,
        ) {
            Ok(Some(o)) => {
                let effect = effect_of(run_id, &config.host.name, c, &o)?;
                idle_store::save_effect(&store, &effect)?;
                crate::idle::configs::save(&store, &fingerprint, &effect, &o)?;
                say(&bar, &effect_line(&effect, config));
                for p in o.phases.iter().filter(|p| p.unsettled) {
                    say(
                        &bar,
                        &format!(
                            "  warning: a {} phase was still settling after {:.0} s; measured anyway",
                            p.phase, p.settle_s
                        ),
                    );
                }
                results.push((c.clone(), effect));
            }
            Ok(None) => break,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    bar.finish_and_clear();
    crate::logging::set_progress(None);
    let left = journal.restore(&store, None);
    let signal = signals.received();
    drop(signals);
    let status = match (&failure, signal, left.is_empty()) {
        (Some(_), _, _) | (_, _, false) => "failed",
        (None, Some(_), true) => "interrupted",
        (None, None, true) => "complete",
    };
    idle_store::end_run(
        &store,
        run_id,
        chrono::Utc::now().timestamp_millis(),
        status,
    )?;
    if !left.is_empty() {
        anyhow::bail!(
            "could not put every setting back: {}; the originals are in {} and the next wattson \
             command run as root retries",
            left.join("; "),
            db.display()
        );
    }
    if let Some(e) = failure {
        return Err(anyhow::Error::new(e).context("measuring stopped; every setting was put back"));
    }
    crate::output::print(&summary(&results, signal.is_some()));
    Ok(match signal {
        Some(s) => ExitCode::from(128u8.saturating_add(s as u8)),
        None => ExitCode::SUCCESS,
    })
}

/// Records the start of a run measuring `chosen` by `plan` with the meter `link` reaches;
/// returns its id and this machine's fingerprint.
fn start_run(
    store: &Store,
    config: &Config,
    root: &SysRoot,
    link: &MeterLink,
    chosen: &[Trial],
    plan: &Plan,
) -> anyhow::Result<(i64, Fingerprint)> {
    let meter_desc = crate::sweep::record::meter_description(&link.config);
    let started_ms = chrono::Utc::now().timestamp_millis();
    let plan_json = serde_json::json!({
        "candidates": chosen.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        "phases": plan.phases, "phase_s": plan.phase.as_secs_f64(),
        "max_settle_s": plan.max_settle.as_secs_f64(), "ci_method": "batch means, Welch-Satterthwaite",
    });
    let fingerprint = crate::sweep::fingerprint::gather(root, &config.host.name, &meter_desc);
    let run_id = idle_store::begin_run(
        store,
        &config.host.name,
        started_ms,
        &meter_desc,
        &plan_json,
    )?;
    Ok((run_id, fingerprint))
}

/// The settings `--measure` changes (`--only`, `--skip`) and the files it may write, checked
/// before anything is opened: the phases odd, something to change, every file inside
/// `[host]`'s roots and writable, and a wall meter to measure with.
fn choose(
    args: &IdleArgs,
    config: &Config,
    root: &SysRoot,
) -> anyhow::Result<(Vec<Trial>, Allowlist)> {
    if args.phases < 3 || args.phases.is_multiple_of(2) {
        anyhow::bail!(
            "--phases {}: give an odd number, 3 or more (A B A, A B A B A, ...), so each changed \
             phase has idle-as-found on both sides",
            args.phases
        );
    }
    let all = settings::read_all(root);
    let chosen = trials::select(trials::trials(&all), &args.only, &args.skip)?;
    if chosen.is_empty() {
        anyhow::bail!(
            "nothing to measure: every setting wattson can change is already at its lowest-power \
             value (or left out by --skip); `wattson idle` lists them"
        );
    }
    let allow = Allowlist::of(&chosen, root).map_err(|p| {
        anyhow::anyhow!(
            "{} is outside [host] sysfs and procfs: refusing to write it",
            p.display()
        )
    })?;
    check_privilege(&allow)?;
    if config.meters.is_empty() {
        anyhow::bail!(
            "wattson idle --measure needs a wall meter: add a [[meter]] to the configuration \
             (without --measure, `wattson idle` explains idle without one)"
        );
    }
    Ok((chosen, allow))
}

/// The stored effect of setting `c` from its measurement `o` in run `run_id`.
fn effect_of(run_id: i64, host: &str, c: &Trial, o: &Outcome) -> anyhow::Result<Effect> {
    Ok(Effect {
        run_id,
        host: host.to_owned(),
        trial: c.id.clone(),
        name: c.name.clone(),
        original: c.original.clone(),
        changed: c.changed.clone(),
        started_ms: o.started_ms,
        ended_ms: o.ended_ms,
        baseline_w: o.figures.baseline_w,
        changed_w: o.figures.changed_w,
        delta_w: o.figures.delta_w,
        delta_ci95_w: o.figures.delta_ci95_w,
        n: o.n,
        effect: o.has_effect(),
        phases: serde_json::to_value(&o.phases)?,
    })
}

/// Measured trials with their effects.
type Measured<'a> = Vec<&'a (Trial, Effect)>;

fn summary(results: &[(Trial, Effect)], interrupted: bool) -> String {
    let mut out = String::new();
    if interrupted {
        out.push_str(
            "interrupted: every setting was put back; the settings measured so far are stored\n",
        );
    } else {
        out.push_str("done: every setting was put back as it was\n");
    }
    let (disks, settings): (Measured, Measured) = results
        .iter()
        .partition(|(c, _)| c.kind == SettingKind::DiskStandby);
    for (c, e) in disks {
        let _ = writeln!(
            out,
            "{}: {}; `wattson idle` prices each spun-up hour of the disk at {}",
            c.name,
            describe_delta(e),
            if e.effect && e.delta_w < 0.0 {
                "these watts"
            } else {
                "its datasheet watts ([[disk]] spun_up_watts) where given, as this is no figure"
            }
        );
    }
    let savers: Vec<&(Trial, Effect)> = settings
        .into_iter()
        .filter(|(_, e)| e.effect && e.delta_w < 0.0)
        .collect();
    if savers.is_empty() {
        if results
            .iter()
            .any(|(c, _)| c.kind != SettingKind::DiskStandby)
        {
            out.push_str("no setting saved anything this meter can distinguish\n");
        }
        return out;
    }
    out.push_str(
        "\nwattson changed nothing for good. To keep what saved power, `sudo wattson idle \
         --apply` writes it into one file wattson owns and `--revert` undoes it; or by hand:\n",
    );
    for (c, e) in savers {
        let _ = writeln!(out, "  {} ({:+.2} W):", c.name, e.delta_w);
        for line in keep_advice::how_to_keep(c) {
            for l in line.lines() {
                let _ = writeln!(out, "    {l}");
            }
        }
    }
    out
}

/// A result line: above the progress line on a terminal, else on stdout.
fn say(bar: &indicatif::ProgressBar, line: &str) {
    if bar.is_hidden() {
        crate::output::println(line);
    } else {
        bar.println(line);
    }
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

fn report_progress(bar: &indicatif::ProgressBar, p: &Progress) {
    match p {
        Progress::Phase {
            index,
            total,
            changed,
        } => bar.set_message(format!(
            "phase {index}/{total} ({})",
            if *changed { "changed" } else { "as found" }
        )),
        Progress::Settling { last_w } => bar.set_message(format!("settling, {last_w:.1} W")),
        Progress::Measuring {
            elapsed_s,
            mean_w,
            n,
        } => bar.set_message(format!("measuring {elapsed_s:.0} s: {mean_w:.2} W (n={n})")),
    }
}
