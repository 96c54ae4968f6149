//! `wattson meter probe` and `wattson meter simulate`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use crate::cli::MeterCommand;

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Serial port to probe, e.g. /dev/ttyUSB0.
    pub port: PathBuf,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Protocol to simulate.
    #[arg(long)]
    pub protocol: String,
}

pub fn run(_cmd: MeterCommand, _config: Option<&Path>) -> anyhow::Result<ExitCode> {
    anyhow::bail!("meter tools are not available in this build yet")
}
