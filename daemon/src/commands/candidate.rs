//! `wattson candidate`: other machines to price on this one's measured load.
//!
//! - `import FILE...`: SPECpower CSV ([`crate::candidate::import`]); every file is read and
//!   checked before anything is written, then all of them go in one transaction.
//! - `add NAME`: a curve entered by hand.
//! - `from-sweep NAME`: a configuration swept on this host or another
//!   ([`crate::candidate::measured`]).
//! - `set NAME`: its purchase price or throughput ratio.
//! - `list`, `show NAME`, `remove NAME`.
//!
//! Bad input (a hostile file, an impossible curve, a name that is taken or unknown) exits
//! 65 (`EX_DATAERR`) and writes nothing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use serde::Serialize;

use crate::analysis::candidate::{Curve, CurveKind, CurvePoint};
use crate::candidate::{BadInput, Candidate, check_name, import, store as candidates};
use crate::cli::CandidateCommand;
use crate::cli::candidate::{CandidateAddArgs, CandidateFromSweepArgs, CandidateSetArgs};
use crate::config::Config;
use crate::ledger::candidate::{StatedCheck, stated_check};
use crate::ledger::price::format_money;
use crate::store::Store;

pub fn run(cmd: &CandidateCommand, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config_path)?;
    let db = |d: &Option<PathBuf>| d.clone().unwrap_or_else(|| config.storage.path.clone());
    match cmd {
        CandidateCommand::Import(a) => import_files(&db(&a.db), &a.files, a.json),
        CandidateCommand::Add(a) => add(&config, &db(&a.db), a),
        CandidateCommand::FromSweep(a) => from_sweep(&config, &db(&a.db), a),
        CandidateCommand::Set(a) => set(&db(&a.db), a),
        CandidateCommand::List(a) => list(&config, a.db.as_deref(), a.json),
        CandidateCommand::Show(a) => show(&config, a.db.as_deref(), &a.name, a.json),
        CandidateCommand::Remove(a) => {
            let db = db(&a.db);
            let store = open_for_writing(&db)?;
            if !candidates::remove(store.conn(), &a.name)? {
                return Err(BadInput(format!(
                    "no candidate {:?} in {} (`wattson candidate list` shows them)",
                    a.name,
                    db.display()
                ))
                .into());
            }
            crate::output::println(&format!("removed candidate {:?}", a.name));
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn open_for_writing(db: &Path) -> anyhow::Result<Store> {
    Store::open(db, &crate::store::StoreOptions::default())
        .with_context(|| format!("opening {}", db.display()))
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// What an import did, as printed.
#[derive(Debug, Serialize)]
struct Imported {
    files: Vec<String>,
    candidates: Vec<String>,
    replaced: usize,
    interpolated: Vec<String>,
}

fn import_files(db: &Path, files: &[PathBuf], json: bool) -> anyhow::Result<ExitCode> {
    // Every file is read and checked first: one bad row imports nothing.
    let mut all: Vec<Candidate> = Vec::new();
    for f in files {
        let text = import::read(f)?;
        let origin = f.file_name().map_or_else(
            || f.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let parsed = import::parse(&text, &origin)
            .map_err(|e| BadInput(format!("{}: {e}: nothing imported", f.display())))?;
        for c in parsed {
            if let Some(first) = all.iter().find(|x| x.name == c.name) {
                return Err(BadInput(format!(
                    "{}: {} and {} both name a candidate {:?}: nothing imported",
                    f.display(),
                    first.origin,
                    c.origin,
                    c.name
                ))
                .into());
            }
            all.push(c);
        }
    }
    let store = open_for_writing(db)?;
    let replaced = candidates::put(store.conn(), &all, now_ms())?;
    let out = Imported {
        files: files.iter().map(|f| f.display().to_string()).collect(),
        candidates: all.iter().map(|c| c.name.clone()).collect(),
        replaced,
        interpolated: all
            .iter()
            .filter(|c| c.curve.interpolated())
            .map(|c| c.name.clone())
            .collect(),
    };
    if json {
        crate::output::println(&serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = format!(
        "imported {} candidate(s) from {} into {}; {replaced} stored one(s) replaced\n",
        all.len(),
        out.files.join(", "),
        db.display()
    );
    for c in &all {
        let _ = writeln!(
            text,
            "  {}: {:.1} W at active idle, {:.1} W at 100 %; {}",
            c.name,
            c.curve.idle_watts(),
            c.curve.full_watts(),
            c.curve.describe()
        );
    }
    text.push_str("  `wattson report` prices them on this machine's measured load\n");
    crate::output::print(&text);
    Ok(ExitCode::SUCCESS)
}

fn check_price(what: &str, v: Option<f64>) -> Result<(), BadInput> {
    match v {
        Some(p) if !p.is_finite() || p < 0.0 => Err(BadInput(format!(
            "{what} {p} is not an amount: give 0 or more"
        ))),
        _ => Ok(()),
    }
}

fn check_ratio(v: Option<f64>) -> Result<(), BadInput> {
    match v {
        Some(r) if !r.is_finite() || r <= 0.0 || r > 1000.0 => Err(BadInput(format!(
            "--perf-ratio {r} is not a throughput ratio: give a number above 0 (1.8: the \
             candidate does 1.8 times this machine's work)"
        ))),
        _ => Ok(()),
    }
}

fn add(config: &Config, db: &Path, a: &CandidateAddArgs) -> anyhow::Result<ExitCode> {
    check_name(&a.name)?;
    check_price("--price", a.price)?;
    check_price("--stated-annual-cost", a.stated_annual_cost)?;
    check_price("--stated-price", a.stated_price)?;
    check_ratio(a.perf_ratio)?;
    if a.at.iter().any(|(l, _)| *l == 0.0) {
        return Err(BadInput("--at 0%=...: active idle is --idle".to_owned()).into());
    }
    let mut points = vec![CurvePoint {
        load: 0.0,
        watts: a.idle,
        ssj_ops: None,
    }];
    points.extend(a.at.iter().map(|&(load, watts)| CurvePoint {
        load,
        watts,
        ssj_ops: None,
    }));
    let curve = Curve::new(points, CurveKind::Hand)
        .map_err(|e| BadInput(format!("candidate {:?}: {e}", a.name)))?;
    let mut c = Candidate::new(a.name.clone(), curve, "hand".to_owned());
    c.price = a.price;
    c.perf_ratio = a.perf_ratio;
    c.stated_annual_cost = a.stated_annual_cost;
    c.stated_price_per_kwh = a.stated_price;
    let store = open_for_writing(db)?;
    if candidates::exists(store.conn(), &c.name)? {
        return Err(BadInput(format!(
            "a candidate {:?} is stored already: `wattson candidate remove {}` first, or `set` \
             its price",
            c.name, c.name
        ))
        .into());
    }
    candidates::put(store.conn(), std::slice::from_ref(&c), now_ms())?;
    print_one(config, &c, a.json, Some("added"))
}

fn from_sweep(config: &Config, db: &Path, a: &CandidateFromSweepArgs) -> anyhow::Result<ExitCode> {
    use crate::candidate::measured;
    use crate::sweep::persist;

    check_name(&a.name)?;
    check_price("--price", a.price)?;
    check_ratio(a.perf_ratio)?;
    let from = a.from.clone().unwrap_or_else(|| db.to_path_buf());
    let (from, source) = super::open_existing_database(Some(&from), config)?;
    let Some(sweep) = persist::load(&source, &a.configuration)? else {
        return Err(BadInput(format!(
            "no sweep of configuration {:?} in {} (`wattson sweep --list --db {}` names them)",
            a.configuration,
            from.display(),
            from.display()
        ))
        .into());
    };
    drop(source);
    let file = from.file_name().map_or_else(
        || from.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let (mut c, kind) = measured::candidate(&a.name, &sweep, a.kind.as_deref(), &file)?;
    c.price = a.price;
    let store = open_for_writing(db)?;
    if candidates::exists(store.conn(), &c.name)? {
        return Err(BadInput(format!(
            "a candidate {:?} is stored already: `wattson candidate remove {}` first, or `set` \
             its price",
            c.name, c.name
        ))
        .into());
    }
    if a.perf_ratio.is_some() {
        c.perf_ratio = a.perf_ratio;
    } else if let Some((ratio, basis)) = this_machines_rate(&store, &from, db, &sweep, a, &kind)?
        .and_then(|this| measured::loop_rate_ratio(&sweep, &this, &kind))
    {
        c.perf_ratio = Some(ratio);
        c.perf_ratio_basis = Some(basis);
    }
    candidates::put(store.conn(), std::slice::from_ref(&c), now_ms())?;
    print_one(config, &c, a.json, Some("added"))
}

/// This machine's sweep to measure a swept candidate's throughput against: `--against`, or
/// the newest complete sweep in `db` with `kind` loops at every CPU that is not the
/// candidate's own.
fn this_machines_rate(
    store: &Store,
    from: &Path,
    db: &Path,
    candidate: &crate::sweep::persist::StoredSweep,
    a: &CandidateFromSweepArgs,
    kind: &str,
) -> anyhow::Result<Option<crate::sweep::persist::StoredSweep>> {
    use crate::candidate::measured::has_full_rate;
    use crate::sweep::persist;

    if let Some(name) = &a.against {
        let this = persist::load(store, name)?.ok_or_else(|| {
            BadInput(format!(
                "--against {name:?}: no sweep of that configuration in {} (`wattson sweep \
                 --list` names them)",
                db.display()
            ))
        })?;
        if !has_full_rate(&this, kind) {
            return Err(BadInput(format!(
                "--against {name:?}: its sweep has no complete {kind} level with every CPU \
                 busy, so the loop rates cannot be compared"
            ))
            .into());
        }
        return Ok(Some(this));
    }
    let same_file = std::fs::canonicalize(from).ok() == std::fs::canonicalize(db).ok();
    Ok(persist::list(store)?
        .into_iter()
        .find(|s| !(same_file && s.name == candidate.name) && has_full_rate(s, kind)))
}

fn set(db: &Path, a: &CandidateSetArgs) -> anyhow::Result<ExitCode> {
    check_price("--price", a.price)?;
    check_ratio(a.perf_ratio)?;
    if a.price.is_none() && a.perf_ratio.is_none() {
        return Err(BadInput("give --price or --perf-ratio (or both)".to_owned()).into());
    }
    let store = open_for_writing(db)?;
    let Some(mut c) = candidates::get(store.conn(), &a.name)? else {
        return Err(BadInput(format!(
            "no candidate {:?} in {} (`wattson candidate list` shows them)",
            a.name,
            db.display()
        ))
        .into());
    };
    if a.price.is_some() {
        c.price = a.price;
    }
    if a.perf_ratio.is_some() {
        c.perf_ratio = a.perf_ratio;
        c.perf_ratio_basis = None;
    }
    candidates::put(store.conn(), std::slice::from_ref(&c), now_ms())?;
    crate::output::println(&format!("updated candidate {:?}", c.name));
    Ok(ExitCode::SUCCESS)
}

fn list(config: &Config, db: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let (_, store) = super::open_existing_database(db, config)?;
    let all = candidates::list(store.conn())?;
    if json {
        crate::output::println(&serde_json::to_string_pretty(
            &all.iter().map(|c| shown(config, c)).collect::<Vec<_>>(),
        )?);
        return Ok(ExitCode::SUCCESS);
    }
    if all.is_empty() {
        crate::output::println(
            "no candidates (`wattson candidate import FILE` or `wattson candidate add NAME`)",
        );
        return Ok(ExitCode::SUCCESS);
    }
    let cur = &config.tariff.currency;
    let mut text = String::new();
    for c in &all {
        let _ = writeln!(
            text,
            "{}: {:.1} W idle .. {:.1} W at 100 %, {}; {}{}",
            c.name,
            c.curve.idle_watts(),
            c.curve.full_watts(),
            c.curve.describe(),
            c.price
                .map_or_else(|| "no price".to_owned(), |p| format_money(p, cur)),
            c.perf_ratio
                .map_or_else(String::new, |r| format!(", perf ratio {r}")),
        );
    }
    crate::output::print(&text);
    Ok(ExitCode::SUCCESS)
}

/// A candidate as `show` and `list --json` print it.
#[derive(Debug, Serialize)]
struct Shown<'a> {
    #[serde(flatten)]
    candidate: &'a Candidate,
    curve_kind: CurveKind,
    interpolated: bool,
    curve_basis: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    stated: Option<StatedCheck>,
}

fn shown<'a>(_config: &Config, c: &'a Candidate) -> Shown<'a> {
    Shown {
        candidate: c,
        curve_kind: c.curve.kind(),
        interpolated: c.curve.interpolated(),
        curve_basis: c.curve.describe(),
        stated: c
            .stated_annual_cost
            .map(|cost| stated_check(c.curve.idle_watts(), cost, c.stated_price_per_kwh)),
    }
}

fn show(config: &Config, db: Option<&Path>, name: &str, json: bool) -> anyhow::Result<ExitCode> {
    let (db, store) = super::open_existing_database(db, config)?;
    let Some(c) = candidates::get(store.conn(), name)? else {
        return Err(BadInput(format!(
            "no candidate {name:?} in {} (`wattson candidate list` shows them)",
            db.display()
        ))
        .into());
    };
    print_one(config, &c, json, None)
}

fn print_one(
    config: &Config,
    c: &Candidate,
    json: bool,
    verb: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let s = shown(config, c);
    if json {
        crate::output::println(&serde_json::to_string_pretty(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    let cur = &config.tariff.currency;
    let mut text = match verb {
        Some(v) => format!("{v} candidate {:?} ({})\n", c.name, c.origin),
        None => format!("candidate {:?} ({})\n", c.name, c.origin),
    };
    for (k, v) in [
        ("vendor", c.vendor.clone()),
        ("system", c.system.clone()),
        ("processor", c.cpu.clone()),
        ("cores", c.cores.map(|n| n.to_string())),
        ("threads", c.threads.map(|n| n.to_string())),
        ("memory", c.memory_gb.map(|m| format!("{m} GB"))),
        ("published", c.published.clone()),
        (
            "overall score",
            c.overall_ssj_ops_per_watt.map(|s| format!("{s} ssj_ops/W")),
        ),
        ("price", c.price.map(|p| format_money(p, cur))),
        (
            "perf ratio",
            Some(match (c.perf_ratio, &c.perf_ratio_basis) {
                (None, _) => {
                    "not given: 1 assumed (the same throughput as this machine)".to_owned()
                }
                (Some(r), None) => format!("{r} (given)"),
                (Some(r), Some(basis)) => format!("{r:.3} (measured: {basis})"),
            }),
        ),
    ] {
        if let Some(v) = v {
            let _ = writeln!(text, "  {k}: {v}");
        }
    }
    let _ = writeln!(text, "  curve: {}", s.curve_basis);
    for p in c.curve.points() {
        let at = if p.load == 0.0 {
            "active idle".to_owned()
        } else {
            format!("{:.0} %", p.load * 100.0)
        };
        let _ = writeln!(
            text,
            "    {at:>11}  {:>8.1} W{}",
            p.watts,
            p.ssj_ops
                .map_or_else(String::new, |o| format!("  {o:.0} ssj_ops"))
        );
    }
    if let Some(st) = &s.stated {
        let _ = write!(
            text,
            "  stated: {} a year{}; {:.0} W all year is {:.1} kWh",
            format_money(st.stated_annual_cost, cur),
            st.stated_price_per_kwh
                .map_or_else(String::new, |p| format!(" at {p} per kWh")),
            st.watts,
            st.annual_kwh
        );
        if let Some(at) = st.cost_at_stated_price {
            let _ = write!(text, ", which at that price is {}", format_money(at, cur));
        }
        let _ = writeln!(
            text,
            "; the stated cost implies {:.3} per kWh",
            st.implied_price_per_kwh
        );
    }
    crate::output::print(&text);
    Ok(ExitCode::SUCCESS)
}
