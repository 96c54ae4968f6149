//! `wattson report`: annual cost per configuration and mode, comparisons and payback.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Output format.
    #[arg(long, default_value = "table")]
    pub format: String,
}

pub fn run(_args: &ReportArgs, _config: Option<&Path>) -> anyhow::Result<ExitCode> {
    anyhow::bail!("wattson report is not available in this build yet")
}
