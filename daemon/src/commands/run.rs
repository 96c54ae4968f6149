//! `wattson run`: the daemon.

use std::path::Path;
use std::process::ExitCode;

use crate::cli::RunArgs;
use crate::runtime::daemon::{self, RunOptions};

pub fn run(args: &RunArgs, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut config = super::load_config(config_path)?;
    // What `config check` checks beyond the file, so that run refuses what check refuses.
    for warning in crate::runtime::preflight::preflight(&config)? {
        tracing::warn!("{warning}");
    }
    if let Some(db) = &args.db {
        config.storage.path.clone_from(db);
    }
    daemon::run(
        &config,
        &RunOptions {
            duration: args.duration,
            config_path: config_path.map(Path::to_owned),
        },
    )?;
    Ok(ExitCode::SUCCESS)
}
