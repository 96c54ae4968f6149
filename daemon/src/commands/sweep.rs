//! `wattson sweep`: workload loops against the meter, fitted into watts per loop.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Name of the configuration to store the results under.
    #[arg(long)]
    pub name: Option<String>,
}

pub fn run(_args: &SweepArgs, _config: Option<&Path>) -> anyhow::Result<ExitCode> {
    anyhow::bail!("wattson sweep is not available in this build yet")
}
