//! One module per subcommand.

pub mod calibration;
pub mod candidate;
pub mod collect;
pub mod config_check;
pub mod demo;
pub mod idle;
pub mod interrupt;
pub mod meter;
pub mod report;
pub mod run;
pub mod services;
pub mod status;
pub mod sweep;
pub mod tariff;

use std::process::ExitCode;

use crate::cli::{Cli, Command, ConfigCommand};
use crate::config::{Config, ConfigError, EXIT_CONFIG};

/// Run the command the user asked for, after restoring what a crashed `wattson idle
/// --measure` left changed.
pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    let config_path = cli.config.clone();
    recover_idle_settings(&cli);
    match cli.command {
        Command::Config(ConfigCommand::Check) => config_check::run(config_path.as_deref()),
        Command::Meter(cmd) => meter::run(cmd, config_path.as_deref()),
        Command::Sweep(args) => sweep::run(&args, config_path.as_deref()),
        Command::Report(args) => report::run(&args, config_path.as_deref()),
        Command::Run(args) => run::run(&args, config_path.as_deref()),
        Command::Status(args) => status::run(&args, config_path.as_deref()),
        Command::Demo(args) => demo::run(&args, config_path.as_deref()),
        Command::Collect(args) => collect::run(&args, config_path.as_deref()),
        Command::Services(args) => services::run(&args, config_path.as_deref()),
        Command::Tariff(cmd) => tariff::run(&cmd, config_path.as_deref()),
        Command::Candidate(cmd) => candidate::run(&cmd, config_path.as_deref()),
        Command::Calibration(cmd) => calibration::run(&cmd, config_path.as_deref()),
        Command::Idle(args) => idle::run(&args, config_path.as_deref()),
        Command::Help(args) => {
            crate::cli::print_help(&args)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The database a command works on (its `--db`, else `[storage] path`) and the machine's
/// sysfs and procfs roots (`[host]`, `/sys` and `/proc` when the file cannot be read).
fn database_of(cli: &Cli) -> Option<(std::path::PathBuf, wattson_collectors::SysRoot)> {
    let own = match &cli.command {
        Command::Run(a) => a.db.clone(),
        Command::Demo(a) => a.db.clone(),
        Command::Status(a) => a.db.clone(),
        Command::Sweep(a) => a.db.clone(),
        Command::Report(a) => a.db.clone(),
        Command::Collect(a) => a.db.clone(),
        Command::Idle(a) => a.db.clone(),
        Command::Services(a) => a.db.clone(),
        Command::Tariff(t) => t.db(),
        Command::Candidate(c) => c.db(),
        Command::Calibration(c) => c.db(),
        Command::Meter(_) | Command::Config(_) | Command::Help(_) => None,
    };
    let config = Config::load(cli.config.as_deref()).ok();
    let host = config
        .as_ref()
        .map_or_else(|| Config::defaults().host, |c| c.host.clone());
    let root = wattson_collectors::SysRoot::new(&host.sysfs, &host.procfs);
    Some((own.or(config.map(|c| c.storage.path))?, root))
}

/// Every command starts by putting back what a `wattson idle --measure` that died without
/// restoring (SIGKILL, a crash, a power cut) left changed; a measurement that is running
/// holds its lock and is left alone (see [`crate::idle::journal`]).
fn recover_idle_settings(cli: &Cli) {
    if matches!(&cli.command, Command::Idle(a) if a.measure || a.restore) {
        return;
    }
    if let Some((db, root)) = database_of(cli) {
        crate::idle::journal::recover_at_start(&db, &root);
    }
}

/// Load the configuration, or fail with an error that maps to exit status 78.
pub fn load_config(path: Option<&std::path::Path>) -> anyhow::Result<Config> {
    Ok(Config::load(path)?)
}

/// The process exit status for an error: 78 for configuration problems, 74 for the
/// database (cannot open or write it, another writer holds it, samples lost), 69 for a
/// service that cannot be reached, 65 for input data that cannot be used (a hostile
/// candidate file), 1 otherwise. Any error in the chain may say it; where several do, the
/// first of 78, 74, 69, 65 wins.
pub fn exit_code_for(e: &anyhow::Error) -> u8 {
    let said: Vec<u8> = e.chain().filter_map(exit_status_of).collect();
    [
        EXIT_CONFIG as u8,
        crate::store::EXIT_STORE,
        crate::publish::remote_write::engine::EXIT_UNAVAILABLE,
        crate::candidate::EXIT_DATA,
    ]
    .into_iter()
    .find(|code| said.contains(code))
    .unwrap_or(1)
}

/// The exit status one error of a chain stands for: the configuration's, the store's and
/// the candidate import's own errors, and the layers' error types, which wrap them
/// (transparently, so a wrapped one is not in the chain: each layer's `exit_status` says it).
fn exit_status_of(e: &(dyn std::error::Error + 'static)) -> Option<u8> {
    if e.is::<ConfigError>() {
        Some(EXIT_CONFIG as u8)
    } else if e.is::<crate::store::StoreError>() {
        Some(crate::store::EXIT_STORE)
    } else if e.is::<crate::candidate::BadInput>() {
        Some(crate::candidate::EXIT_DATA)
    } else if let Some(e) = e.downcast_ref::<crate::store::ExistingError>() {
        e.exit_status()
    } else if let Some(e) = e.downcast_ref::<crate::ledger::LedgerError>() {
        e.exit_status()
    } else if let Some(e) = e.downcast_ref::<crate::runtime::RuntimeError>() {
        e.exit_status()
    } else if let Some(e) = e.downcast_ref::<crate::idle::IdleError>() {
        e.exit_status()
    } else if let Some(e) = e.downcast_ref::<crate::services::ServicesError>() {
        e.exit_status()
    } else if let Some(e) = e.downcast_ref::<crate::report::ProduceError>() {
        e.exit_status()
    } else if let Some(e) = e.downcast_ref::<crate::calibration::CalibrationError>() {
        e.exit_status()
    } else if let Some(e) = e.downcast_ref::<crate::publish::remote_write::engine::EngineError>() {
        e.exit_status()
    } else {
        None
    }
}

/// The database a read-only command reads (its `--db`, else `[storage] path`), opened; a
/// database that does not exist is an error that says how to get one.
pub fn open_existing_database(
    db: Option<&std::path::Path>,
    config: &Config,
) -> anyhow::Result<(std::path::PathBuf, crate::store::Store)> {
    let given = db.is_some();
    let db = db.map_or_else(|| config.storage.path.clone(), std::path::Path::to_path_buf);
    if !crate::store::database_exists(&db)? {
        if given {
            anyhow::bail!(
                "no database at {} (--db): check the path; `wattson run` and `wattson demo --db \
                 PATH` make one",
                db.display()
            );
        }
        anyhow::bail!(
            "no database at {}: start the daemon (wattson run) or pass --db PATH",
            db.display()
        );
    }
    let store = crate::store::open_database(&db)?;
    Ok((db, store))
}

#[cfg(test)]
mod tests {
    use super::exit_code_for;
    use crate::ledger::LedgerError;
    use crate::store::{ExistingError, StoreError};
    use crate::tariff::TariffError;

    fn closed() -> StoreError {
        StoreError::Closed {
            path: "/x.db".into(),
        }
    }

    /// Each layer's error says its status through the transparent variants that hide what
    /// they wrap, and through a context over it.
    #[test]
    fn each_layers_error_keeps_the_status_of_what_it_wraps() {
        let code = |e: anyhow::Error| exit_code_for(&e);
        assert_eq!(code(LedgerError::Tariff(TariffError::NoPrices).into()), 78);
        assert_eq!(code(LedgerError::from(closed()).into()), 74);
        assert_eq!(code(ExistingError::from(closed()).into()), 74);
        assert_eq!(
            code(
                crate::services::ServicesError::from(LedgerError::Tariff(TariffError::NoPrices))
                    .into()
            ),
            78
        );
        assert_eq!(code(crate::report::ProduceError::from(closed()).into()), 74);
        assert_eq!(
            code(
                crate::report::ProduceError::Tariff {
                    what: "building the tariff from [tariff]".to_owned(),
                    source: TariffError::NoPrices,
                }
                .into()
            ),
            78
        );
        assert_eq!(
            code(crate::runtime::RuntimeError::Flush(Box::new(closed())).into()),
            74
        );
        assert_eq!(
            code(
                crate::idle::IdleError::OpenDatabase {
                    db: "/x.db".into(),
                    source: Box::new(closed()),
                }
                .into()
            ),
            74
        );
        assert_eq!(
            code(anyhow::Error::new(LedgerError::from(closed())).context("reading")),
            74
        );
        assert_eq!(
            code(
                ExistingError::Denied {
                    path: "/x.db".into(),
                    source: std::io::ErrorKind::PermissionDenied.into(),
                }
                .into()
            ),
            1
        );
    }
}
