//! `wattson idle --apply` and `--revert` ([`crate::idle::apply`]): what is kept, printed as
//! written; the error counters watched afterwards; and undoing it.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use wattson_collectors::SysRoot;
use wattson_collectors::idle::errors;
use wattson_collectors::idle::settings;

use super::super::interrupt::SignalWatch;
use crate::cli::IdleArgs;
use crate::config::Config;
use crate::idle::apply::{self, ApplyError, Keep};
use crate::idle::catalogue::Catalogue;
use crate::idle::store as idle_store;
use crate::idle::tmpfiles::{self, Existing, Outcome};
use crate::store::Store;

/// How often the error counters are read while watching.
const WATCH_EVERY: Duration = Duration::from_secs(1);

fn open(config: &Config, db: &Path) -> anyhow::Result<Store> {
    if !crate::store::database_exists(db)? {
        anyhow::bail!(
            "no database at {}: `wattson idle --measure` stores what each setting saves there \
             first",
            db.display()
        );
    }
    Store::open(db, &crate::sources::wiring::store_options(config))
        .with_context(|| format!("opening the database {}", db.display()))
}

fn now_text() -> String {
    chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string()
}

/// `wattson idle --apply`.
#[allow(
    clippy::disallowed_methods,
    reason = "the tmpfiles.d file: never a database"
)]
pub(super) fn apply(args: &IdleArgs, config: &Config, db: &Path) -> anyhow::Result<ExitCode> {
    let root = SysRoot::new(&config.host.sysfs, &config.host.procfs);
    let store = open(config, db)?;
    let effects = idle_store::latest_effects(&store, &config.host.name)?;
    let (keeps, notes) = apply::plan(&effects, &settings::read_all(&root), &args.only)?;
    let catalogue = Catalogue::of(&root);
    for n in &notes {
        crate::output::println(n);
    }
    if keeps.is_empty() {
        anyhow::bail!("nothing to apply on this machine now (see above)");
    }
    for (path, _) in keeps.iter().flat_map(|k| &k.writes) {
        if let Err(e) = crate::safe_open::open_setting(path, &root) {
            if e.kind() == std::io::ErrorKind::PermissionDenied && e.raw_os_error().is_some() {
                anyhow::bail!(
                    "wattson idle --apply changes power settings and cannot write {}: run it \
                     as root; nothing was changed",
                    path.display()
                );
            }
            anyhow::bail!("cannot write {}: {e}; nothing was changed", path.display());
        }
    }
    // A file of the same name that is not wattson's is refused before anything is stored.
    Existing::read(&args.tmpfiles_dir).map_err(ApplyError::from)?;
    let before = errors::read_all(&root);
    apply::record(&store, &keeps, chrono::Utc::now().timestamp_millis())?;
    match rewrite(&store, &catalogue, config, &args.tmpfiles_dir)? {
        Outcome::Written(file) => {
            crate::output::println(&format!("wrote {}:\n", file.display()));
            crate::output::print(&std::fs::read_to_string(&file).unwrap_or_default());
        }
        Outcome::Removed(file) | Outcome::Absent(file) => crate::output::println(&format!(
            "no setting file of the catalogue to keep in {}",
            file.display()
        )),
    }
    let failed = apply::write_now(&keeps, &catalogue);
    if !failed.is_empty() {
        anyhow::bail!(
            "the file is written, but applying now failed: {}; `wattson idle --revert` puts \
             back what was changed",
            failed.join("; ")
        );
    }
    crate::output::println(&format!(
        "\napplied now: {}",
        keeps
            .iter()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    watch(args.watch, &keeps, before, &store, &catalogue, config, args)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes wattson's lines of the tmpfiles.d file from what the database holds as kept,
/// with the lines the file held below wattson's; removes the file when neither has one.
fn rewrite(
    store: &Store,
    catalogue: &Catalogue,
    config: &Config,
    dir: &Path,
) -> anyhow::Result<Outcome> {
    let existing = Existing::read(dir).map_err(ApplyError::from)?;
    let kept = apply::applied(store)?;
    let lines = apply::file_lines(&kept, catalogue, &config.host.name, &now_text())
        .map_err(|e| ApplyError::from(tmpfiles::FileError::from(e)))?;
    Ok(tmpfiles::replace(dir, &lines, &existing).map_err(ApplyError::from)?)
}

/// Reads the error counters every [`WATCH_EVERY`] for `how_long` (until Ctrl-C), putting
/// back each kept setting whose counters rise.
fn watch(
    how_long: Duration,
    keeps: &[Keep],
    mut before: Vec<errors::Counter>,
    store: &Store,
    catalogue: &Catalogue,
    config: &Config,
    args: &IdleArgs,
) -> anyhow::Result<()> {
    let mut watched: Vec<&Keep> = keeps
        .iter()
        .filter(|k| !apply::watched_by(k.kind).is_empty())
        .collect();
    if how_long.is_zero() || watched.is_empty() {
        return Ok(());
    }
    let root = catalogue.root().clone();
    crate::output::println(&format!(
        "watching {} error counter(s) for {} (Ctrl-C stops watching; what was applied stays)",
        before.len(),
        humantime(how_long)
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let _signals = SignalWatch::start(stop.clone(), || {})?;
    let end = Instant::now() + how_long;
    let mut put_back = 0;
    while Instant::now() < end && !stop.load(Ordering::SeqCst) && !watched.is_empty() {
        std::thread::sleep(WATCH_EVERY.min(end.saturating_duration_since(Instant::now())));
        let now = errors::read_all(&root);
        let risen = errors::risen(&before, &now);
        for (counter, was) in &risen {
            let guilty: Vec<String> = watched
                .iter()
                .filter(|k| apply::answers_for(k.kind, counter))
                .map(|k| k.setting.clone())
                .collect();
            if guilty.is_empty() {
                continue;
            }
            let (_, failed) = apply::put_back(store, catalogue, Some(&guilty))?;
            rewrite(store, catalogue, config, &args.tmpfiles_dir)?;
            for k in watched.iter().filter(|k| guilty.contains(&k.setting)) {
                crate::output::println(&format!(
                    "put back {}: {} rose from {was} to {} after it was applied{}",
                    k.name,
                    counter.label(),
                    counter.value,
                    if failed.is_empty() {
                        String::new()
                    } else {
                        format!(" (not every file: {})", failed.join("; "))
                    }
                ));
                put_back += 1;
            }
            watched.retain(|k| !guilty.contains(&k.setting));
        }
        before = now;
    }
    if stop.load(Ordering::SeqCst) {
        crate::output::println("stopped watching; what was applied stays");
    } else if put_back == 0 {
        crate::output::println(&format!("no error counter rose in {}", humantime(how_long)));
    }
    Ok(())
}

fn humantime(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 && s.is_multiple_of(60) {
        format!("{} min", s / 60)
    } else {
        format!("{:.0} s", d.as_secs_f64())
    }
}

/// `wattson idle --revert`.
pub(super) fn revert(args: &IdleArgs, config: &Config, db: &Path) -> anyhow::Result<ExitCode> {
    let root = SysRoot::new(&config.host.sysfs, &config.host.procfs);
    let store = open(config, db)?;
    let catalogue = Catalogue::of(&root);
    let (done, failed) = apply::put_back(&store, &catalogue, None)?;
    let outcome = rewrite(&store, &catalogue, config, &args.tmpfiles_dir)?;
    let file = args.tmpfiles_dir.join(tmpfiles::FILE_NAME);
    crate::output::println(&format!(
        "put back {} setting file(s){}{}",
        done.len(),
        if done.is_empty() {
            String::new()
        } else {
            format!(
                ": {}",
                done.iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        match &outcome {
            Outcome::Removed(file) => format!("; removed {}", file.display()),
            Outcome::Written(file) if failed.is_empty() => format!(
                "; took wattson's lines out of {}, keeping the lines below them",
                file.display()
            ),
            Outcome::Written(_) | Outcome::Absent(_) => String::new(),
        }
    ));
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        anyhow::bail!(
            "{} file(s) not put back, kept in {} and {}: {}",
            failed.len(),
            file.display(),
            db.display(),
            failed.join("; ")
        )
    }
}
