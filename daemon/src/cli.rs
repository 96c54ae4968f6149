//! The command line: one subcommand per module under `commands/`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Power and efficiency monitor for home servers.
///
/// Reads an inline power meter over a serial port and the CPU's frequency, idle states and
/// utilisation; runs workload sweeps to find what idling and each extra loop cost at the
/// wall; stores everything in SQLite; publishes to MQTT / Home Assistant; and turns it into
/// the annual running cost of each machine and configuration.
#[derive(Debug, Parser)]
#[command(name = "wattson", version, propagate_version = true)]
pub struct Cli {
    /// Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it
    /// exists, else built-in defaults].
    #[arg(long, short = 'c', global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Log debug detail (RUST_LOG overrides).
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The daemon: collect, store and publish until stopped (systemd Type=notify).
    Run(RunArgs),
    /// The whole pipeline on this machine with a simulated meter: no hardware, no broker.
    Demo(DemoArgs),
    /// Current readings and today's energy and cost, from the database.
    Status(StatusArgs),
    /// Run workload loops against the meter and fit watts per loop, with confidence intervals.
    Sweep(crate::commands::sweep::SweepArgs),
    /// Annual cost per configuration and mode, comparisons, savings and payback.
    Report(crate::commands::report::ReportArgs),
    /// Serial meter tools: probe a port, or simulate a meter on a pseudo-terminal.
    #[command(subcommand)]
    Meter(MeterCommand),
    /// Configuration tools.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Fleet collector: store every host's MQTT state messages once (persistent session).
    Collect(crate::commands::collect::CollectArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Store into this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Stop after this long (e.g. `60s`) instead of running until SIGTERM.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg)]
    pub duration: Option<std::time::Duration>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// How long to run the whole demo.
    #[arg(long, value_name = "DURATION", default_value = "90s", value_parser = parse_duration_arg)]
    pub duration: std::time::Duration,
    /// Keep the database here instead of a temporary file.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Skip the short workload sweep.
    #[arg(long)]
    pub no_sweep: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Read this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Show this host's figures (a fleet collector's database holds several) [default:
    /// `[host] name`].
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum MeterCommand {
    /// Identify which supported meter answers on PORT.
    Probe(crate::commands::meter::ProbeArgs),
    /// Simulate a meter on a new pseudo-terminal and print its path.
    Simulate(crate::commands::meter::SimulateArgs),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration and print the effective config (secrets redacted).
    Check,
}

/// clap value parser for durations such as `90s` or `2m`.
pub fn parse_duration_arg(s: &str) -> Result<std::time::Duration, String> {
    crate::config::parse_duration(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }
}
