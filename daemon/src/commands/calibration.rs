//! `wattson calibration`: a model of the wall draw from ordinary running, for when the
//! meter has moved on ([`crate::calibration`]).
//!
//! - `fit`: from this host's history with the meter in; stored in `wall_model`;
//! - `show`: the calibration the estimate uses (the newest from ordinary running, else a
//!   sweep's fit);
//! - `estimate`: the wall energy of a stretch of history from it, beside the wall where a
//!   meter was there;
//! - `export --format powercalc|prometheus|file`, `import FILE`.
//!
//! Too little history, a hostile or foreign file, a model that cannot be exported in a form
//! exit 65 and write nothing.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use chrono::Utc;

use crate::calibration::export::{self, MAX_FILE_BYTES};
use crate::calibration::model::{Feature, Hardware, Origin, WallModel};
use crate::calibration::{CalibrationError, persist, priced, refit};
use crate::cli::calibration::{
    CalibrationCommand, EstimateArgs, ExportArgs, ExportFormat, FitArgs, ImportArgs,
};
use crate::config::Config;
use crate::report::request::{When, resolve_when};
use crate::store::{DAY_MS, Store};
use crate::zone::Zone;

impl CalibrationError {
    /// 65 for what the history or a file does not allow, 74 for the database.
    pub fn exit_status(&self) -> Option<u8> {
        match self {
            CalibrationError::Store(_) | CalibrationError::Sqlite { .. } => {
                Some(crate::store::EXIT_STORE)
            }
            CalibrationError::NotEnough(_) | CalibrationError::BadInput(_) => {
                Some(crate::candidate::EXIT_DATA)
            }
            CalibrationError::Ledger(e) => e.exit_status(),
        }
    }
}

pub fn run(cmd: &CalibrationCommand, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config_path)?;
    match cmd {
        CalibrationCommand::Fit(a) => fit_history(&config, a),
        CalibrationCommand::Show(a) => {
            let (_, store) = super::open_existing_database(a.db.as_deref(), &config)?;
            let model = newest(&store, &config)?;
            crate::output::print(&if a.json {
                serde_json::to_string_pretty(&model)? + "\n"
            } else {
                describe(&model)
            });
            Ok(ExitCode::SUCCESS)
        }
        CalibrationCommand::Estimate(a) => estimate_history(&config, a),
        CalibrationCommand::Export(a) => export_model(&config, a),
        CalibrationCommand::Import(a) => import_file(&config, a),
    }
}

fn zone(config: &Config) -> Zone {
    crate::report::input::tariff_from_config(&config.tariff).map_or(Zone::UTC, |t| t.tz())
}

/// `[since, until)` in UTC ms, `default_span` back from `until` without --since.
fn window(
    config: &Config,
    since: Option<When>,
    until: Option<When>,
    default_span: i64,
) -> Result<(i64, i64), CalibrationError> {
    let now = Utc::now();
    let tz = zone(config);
    let to = until.map_or(now.timestamp_millis(), |w| resolve_when(w, now, tz, true));
    let from = since.map_or(to - default_span, |w| resolve_when(w, now, tz, false));
    if from >= to {
        return Err(CalibrationError::NotEnough(
            "--since is not before --until: the window holds no time".into(),
        ));
    }
    Ok((from, to))
}

/// This machine's hardware, as a calibration records it.
fn hardware(config: &Config) -> Hardware {
    refit::hardware(
        &wattson_collectors::SysRoot::new(&config.host.sysfs, &config.host.procfs),
        &config.host.name,
    )
}

fn newest(store: &Store, config: &Config) -> Result<WallModel, CalibrationError> {
    persist::latest(store, &config.host.name)?.ok_or_else(|| {
        CalibrationError::NotEnough(format!(
            "no calibration of {} in {}: fit one while the meter is in (`wattson calibration \
             fit`, or a sweep), or import one (`wattson calibration import FILE`)",
            config.host.name,
            store.path().display()
        ))
    })
}

fn fit_history(config: &Config, a: &FitArgs) -> anyhow::Result<ExitCode> {
    let db = a.db.clone().unwrap_or_else(|| config.storage.path.clone());
    let store = Store::open(&db, &crate::store::StoreOptions::default())
        .with_context(|| format!("opening {}", db.display()))?;
    let host = &config.host.name;
    let (from_ms, to_ms) = window(config, a.since, a.until, 30 * DAY_MS)?;
    let mut features = Vec::new();
    for name in &a.features {
        features.push(Feature::parse(name).ok_or_else(|| {
            CalibrationError::BadInput(format!(
                "--feature {name:?}: name a signal as source/metric/channel, e.g. \
                 cpu/cpu_busy/all or rapl/power/package-0"
            ))
        })?);
    }
    let request = refit::Request {
        features,
        wall: a.wall.clone(),
        from_ms,
        to_ms,
        holdout: a.holdout,
    };
    let model = refit::from_history(
        &store,
        host,
        &request,
        hardware(config),
        Utc::now().timestamp_millis(),
    )?;
    persist::save(&store, host, &model)?;
    crate::output::print(&if a.json {
        serde_json::to_string_pretty(&model)? + "\n"
    } else {
        describe(&model)
    });
    Ok(ExitCode::SUCCESS)
}

fn minutes(n: usize) -> String {
    if n == 1 {
        "1 minute".into()
    } else {
        format!("{n} minutes")
    }
}

fn time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.format("%Y-%m-%d %H:%M UTC").to_string(),
    )
}

/// A calibration as `fit` and `show` print it.
fn describe(m: &WallModel) -> String {
    let mut s = String::new();
    let wall = |s: &mut String| {
        if let Some(w) = m.wall_span {
            let _ = write!(s, "; wall {:.1} to {:.1} W", w.min, w.max);
        }
    };
    match m.origin {
        Origin::Running => {
            let _ = writeln!(s, "calibration of {} against {}", m.host, m.wall_source);
            let _ = writeln!(s, "  model      {}", m.model.describe());
            let _ = write!(
                s,
                "  fitted on  {} minutes, {} to {}",
                m.minutes,
                time(m.from_ms),
                time(m.to_ms)
            );
        }
        Origin::Sweep { levels, .. } => {
            let _ = writeln!(s, "calibration of {} from a sweep", m.host);
            let _ = writeln!(s, "  model      {}", m.model.describe());
            let _ = write!(
                s,
                "  fitted on  {levels} levels of a sweep ended {}",
                time(m.to_ms)
            );
        }
    }
    wall(&mut s);
    s.push('\n');
    for (f, sp) in m.model.features.iter().zip(&m.feature_spans) {
        let _ = writeln!(
            s,
            "  saw        {} from {:.4} to {:.4} {}",
            f.name(),
            sp.min,
            sp.max,
            f.unit()
        );
    }
    if !m.range_recorded() {
        let _ = writeln!(
            s,
            "  saw        not recorded by that sweep: its estimates are withheld nowhere; \
             sweep again to record it"
        );
    }
    match m.origin {
        Origin::Running => {
            let _ = writeln!(
                s,
                "  held out   {} minutes from {}: rms {:.2} W a minute, energy {:+.2} %",
                m.heldout_minutes,
                time(m.heldout_from_ms),
                m.heldout_rms_w,
                m.heldout_energy_error_pct
            );
        }
        Origin::Sweep { r2, .. } => {
            let _ = writeln!(
                s,
                "  error      rms {:.2} W over its levels (r2 {r2:.3}); nothing held out",
                m.heldout_rms_w
            );
        }
    }
    let _ = writeln!(
        s,
        "  interval   +/- {:.2} % of an estimated energy (95 %)",
        m.interval_pct
    );
    let _ = writeln!(s, "  shown as   \"{}\"", m.provenance());
    if m.considered.len() > 1 {
        let _ = writeln!(s, "  considered (held-out rms a minute):");
        for (d, rms) in &m.considered {
            let _ = writeln!(s, "    {rms:8.2} W  {d}");
        }
    }
    s
}

fn estimate_history(config: &Config, a: &EstimateArgs) -> anyhow::Result<ExitCode> {
    let (_, store) = super::open_existing_database(a.db.as_deref(), config)?;
    let model = newest(&store, config)?;
    let (from, to) = window(config, a.since, a.until, DAY_MS)?;
    // Each hour at its own price, projected to a year from the minutes estimated, the
    // model's interval carried into the money.
    let tariff = crate::ledger::costs::tariff_with_series(
        &config.tariff,
        &store,
        Utc::now().timestamp_millis(),
    )?;
    let p = priced::priced(&store, &config.host.name, &model, &tariff, from, to)?;
    if a.json {
        crate::output::print(&(serde_json::to_string_pretty(&p)? + "\n"));
        return Ok(ExitCode::SUCCESS);
    }
    let e = &p.estimate;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} from {} to {}",
        config.host.name,
        time(from),
        time(to)
    );
    if e.minutes == 0 {
        let _ = writeln!(
            s,
            "  estimated  nothing: no minute the model can vouch for ({})",
            e.provenance
        );
    } else {
        let _ = writeln!(
            s,
            "  estimated  {:.1} Wh +/- {:.1} Wh over {} ({}){}",
            e.energy_wh,
            e.interval_wh,
            minutes(e.minutes),
            e.provenance,
            e.mean_w
                .map(|w| format!(", {w:.1} W on average"))
                .unwrap_or_default()
        );
    }
    if let Some(line) = priced::cost_line(&p) {
        let _ = writeln!(s, "  cost       {line}");
    }
    for w in &e.withheld {
        let _ = writeln!(
            s,
            "  withheld   {} from {}: {}",
            minutes(w.minutes),
            time(w.from_ms),
            w.reason
        );
    }
    if e.minutes_without_signals > 0 {
        let _ = writeln!(
            s,
            "  gap        {} with a signal the model reads missing",
            minutes(e.minutes_without_signals)
        );
    }
    if let Some(w) = &e.wall {
        let _ = writeln!(
            s,
            "  wall       {:.1} Wh measured by {} over {} of those minutes, estimate {:.1} Wh: \
             drift {:+.2} % ({})",
            w.wall_wh,
            w.wall_source,
            w.minutes,
            w.estimated_wh,
            w.drift_pct,
            if w.outside_interval {
                "outside the interval: fit again with `wattson calibration fit`"
            } else {
                "within the interval"
            }
        );
    }
    crate::output::print(&s);
    Ok(ExitCode::SUCCESS)
}

fn export_model(config: &Config, a: &ExportArgs) -> anyhow::Result<ExitCode> {
    let (_, store) = super::open_existing_database(a.db.as_deref(), config)?;
    let model = newest(&store, config)?;
    let host = &config.host.name;
    let text = match a.format {
        ExportFormat::Powercalc => crate::publish::calibration::powercalc(&model, host)?,
        ExportFormat::Prometheus => crate::publish::calibration::prometheus_rule(&model, host)?,
        ExportFormat::File => {
            export::lendable(&model).map_err(|e| CalibrationError::BadInput(e.to_string()))?;
            export::file(&model)
        }
    };
    crate::output::print(&text);
    Ok(ExitCode::SUCCESS)
}

#[allow(
    clippy::disallowed_methods,
    reason = "a calibration file to import: never a database"
)]
fn import_file(config: &Config, a: &ImportArgs) -> anyhow::Result<ExitCode> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(&a.file)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| CalibrationError::BadInput(format!("{}: {e}", a.file.display())))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(CalibrationError::BadInput(format!(
            "{}: over {} KiB, no calibration file is that large",
            a.file.display(),
            MAX_FILE_BYTES / 1024
        ))
        .into());
    }
    let model = export::import(&text, &config.host.name, &hardware(config))
        .map_err(|e| anyhow::Error::from(e).context(format!("{}", a.file.display())))?;
    let db = a.db.clone().unwrap_or_else(|| config.storage.path.clone());
    let store = Store::open(&db, &crate::store::StoreOptions::default())
        .with_context(|| format!("opening {}", db.display()))?;
    persist::save(&store, &config.host.name, &model)?;
    crate::output::print(&format!(
        "imported the calibration of {} ({}) as {}'s: {}\n",
        model.borrowed_from.as_deref().unwrap_or(&model.host),
        model.model.describe(),
        config.host.name,
        model.provenance()
    ));
    Ok(ExitCode::SUCCESS)
}
