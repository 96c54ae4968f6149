//! `wattson config check`: validate the configuration, check what `run` needs from this
//! machine as this user ([`crate::runtime::preflight`]), and print the effective config.

use std::path::Path;
use std::process::ExitCode;

use crate::runtime::preflight::{missing_ports, preflight};

/// Validate, check, print the effective configuration. Exit 78 for anything `run` would
/// refuse; warnings (a meter port that is not there yet) keep exit 0.
pub fn run(path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(path)?;
    for warning in preflight(&config)?
        .into_iter()
        .chain(missing_ports(&config))
    {
        tracing::warn!("{warning}");
    }
    crate::output::print(&config.to_effective_toml()?);
    Ok(ExitCode::SUCCESS)
}
