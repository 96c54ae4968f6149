//! The command line: the clap definition of every subcommand and its options (one module
//! per subcommand with options of its own); `commands/` runs them.

pub mod calibration;
pub mod candidate;
pub mod collect;
pub mod examples;
pub mod idle;
pub mod meter;
pub mod report;
pub mod services;
pub mod sweep;
pub mod tariff;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::logging::Verbosity;

pub use calibration::CalibrationCommand;
pub use candidate::CandidateCommand;
pub use collect::CollectArgs;
pub use idle::IdleArgs;
pub use meter::{MeterCommand, ProbeArgs, SimulateArgs};
pub use report::ReportArgs;
pub use services::ServicesArgs;
pub use sweep::SweepArgs;
pub use tariff::{ImportArgs, ListArgs, RemoveArgs, TariffCommand};

/// Power and efficiency monitor for home servers.
///
/// Reads an inline power meter over a serial port and the CPU's frequency, idle states and
/// utilisation; runs workload sweeps to find what idling and each extra loop cost at the
/// wall; stores everything in SQLite; publishes to MQTT / Home Assistant; and turns it into
/// the annual running cost of each machine and configuration.
#[derive(Debug, Parser)]
#[command(
    name = "wattson",
    version,
    propagate_version = true,
    // Our own `help` subcommand, so that `wattson help --help` works like every other one.
    disable_help_subcommand = true,
    after_help = examples::WATTSON
)]
pub struct Cli {
    /// Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it
    /// exists, else built-in defaults].
    #[arg(long, short = 'c', global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Log debug detail. Without it, commands log only warnings; the daemon, the fleet
    /// collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides).
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,

    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// How much this invocation logs when `RUST_LOG` does not say: debug with `-v`; what a
    /// long-running process does for the daemon, the collector, a sweep and a simulated
    /// meter (and the demo when its output is not a terminal, where its own progress would
    /// say it); warnings only for every other command, whose output is what it prints.
    pub fn verbosity(&self) -> Verbosity {
        let long_running = match &self.command {
            Command::Run(_)
            | Command::Collect(_)
            | Command::Sweep(_)
            | Command::Meter(MeterCommand::Simulate(_)) => true,
            Command::Demo(_) => !std::io::IsTerminal::is_terminal(&std::io::stdout()),
            Command::Status(_)
            | Command::Report(_)
            | Command::Meter(MeterCommand::Probe(_))
            | Command::Config(_)
            | Command::Services(_)
            | Command::Tariff(_)
            | Command::Candidate(_)
            | Command::Calibration(_)
            | Command::Idle(_)
            | Command::Help(_) => false,
        };
        if self.verbose {
            Verbosity::Debug
        } else if long_running {
            Verbosity::Progress
        } else {
            Verbosity::Warnings
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The daemon: collect, store and publish until stopped (systemd Type=notify).
    #[command(after_help = examples::RUN)]
    Run(RunArgs),
    /// The whole pipeline on this machine with a simulated meter: no hardware, no broker.
    #[command(after_help = examples::DEMO)]
    Demo(DemoArgs),
    /// Current readings (live from the running daemon, else stored) and today's energy and cost.
    #[command(after_help = examples::STATUS)]
    Status(StatusArgs),
    /// Run workload loops against the meter and fit watts per loop, with confidence intervals.
    ///
    /// While `wattson run` runs for the database, the sweep reads the meter through the
    /// daemon's control socket (<database>.sock) and the daemon stores the results; with no
    /// daemon running, the sweep opens the meter and the database itself. The first line
    /// of its output says which.
    #[command(
        after_help = examples::SWEEP,
        override_usage = "wattson sweep --name <NAME> [OPTIONS]\n       \
                          wattson sweep --list [--json]\n       \
                          wattson sweep --show <NAME> [--json]"
    )]
    Sweep(SweepArgs),
    /// Annual cost per configuration and mode, comparisons, savings and payback.
    #[command(after_help = examples::REPORT)]
    Report(ReportArgs),
    /// Serial meter tools: probe a port, or simulate a meter on a pseudo-terminal.
    #[command(subcommand, after_help = examples::METER)]
    Meter(MeterCommand),
    /// Configuration tools.
    #[command(subcommand, after_help = examples::CONFIG_CHECK)]
    Config(ConfigCommand),
    /// Fleet collector: store every host's MQTT state messages once (persistent session).
    #[command(after_help = examples::COLLECT)]
    Collect(CollectArgs),
    /// CPU share, estimated watts and money per systemd service, container and session.
    ///
    /// From the CPU time the daemon records per cgroup v2 group (`[services]`): the wall's
    /// power above this host's idle floor (its newest sweep fit) is shared by busy CPU time;
    /// the idle floor is shown apart, as the box being on. Every figure is an estimate with
    /// its interval; without a sweep there is CPU time only.
    #[command(after_help = examples::SERVICES)]
    Services(ServicesArgs),
    /// Price and carbon-intensity series: import Octopus Agile, day-ahead CSV, carbon data.
    #[command(subcommand, after_help = examples::TARIFF)]
    Tariff(TariffCommand),
    /// Other machines to price on this one's measured load: SPECpower results or by hand.
    ///
    /// `wattson report` then shows what each would cost a year on this machine's own
    /// utilisation history (its power curve at the share of its throughput that load
    /// needs), what it saves against keeping this machine, and its payback.
    #[command(subcommand, after_help = examples::CANDIDATE)]
    Candidate(CandidateCommand),
    /// Model the wall from this host's own signals while the meter is in, to estimate it
    /// (with its interval) once the meter has moved on; export it to powercalc, Prometheus
    /// or another host of the same hardware.
    #[command(subcommand, after_help = examples::CALIBRATION)]
    Calibration(CalibrationCommand),
    /// Why idle draws what it does: package and core C-states and the power settings that
    /// keep them shallow; --measure finds what each setting saves at the wall.
    #[command(after_help = examples::IDLE)]
    Idle(IdleArgs),
    /// Print the help of wattson or of the given subcommand(s).
    #[command(after_help = examples::HELP)]
    Help(HelpArgs),
}

#[derive(Debug, Args)]
pub struct HelpArgs {
    /// The subcommand to describe, e.g. `sweep` or `meter probe` [default: wattson itself].
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Store into this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Stop after this long (e.g. `60s`) instead of running until SIGTERM.
    #[arg(long, value_name = "DURATION", value_parser = crate::parse::parse_duration_arg, allow_hyphen_values = true)]
    pub duration: Option<std::time::Duration>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// How long to run the whole demo, 20 s or more (kept to within 5 %).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "90s",
        value_parser = crate::parse::parse_duration_arg,
        allow_hyphen_values = true
    )]
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
pub enum ConfigCommand {
    /// Validate the configuration and print the effective config (secrets redacted).
    #[command(after_help = examples::CONFIG_CHECK)]
    Check,
}

/// `wattson help` names a subcommand there is none of.
#[derive(Debug, thiserror::Error)]
#[error("{path} has no subcommand {name:?}: it has {known}")]
pub struct NoSuchSubcommand {
    /// The command asked about so far: "wattson meter".
    pub path: String,
    pub name: String,
    /// Its subcommands, or "none".
    pub known: String,
}

/// `wattson help [COMMAND...]`: the long help of wattson or of a subcommand.
pub fn print_help(args: &HelpArgs) -> Result<(), NoSuchSubcommand> {
    use clap::CommandFactory as _;
    let mut cmd = Cli::command();
    // Built, as parsing builds it: the global options (--config, --verbose, --version) reach
    // every subcommand, so its help lists them as `wattson CMD --help` does.
    cmd.build();
    let mut path = vec!["wattson".to_owned()];
    for name in &args.command {
        let Some(sub) = cmd.find_subcommand(name).cloned() else {
            let known: Vec<String> = cmd
                .get_subcommands()
                .map(|c| c.get_name().to_owned())
                .collect();
            return Err(NoSuchSubcommand {
                path: path.join(" "),
                name: name.clone(),
                known: if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                },
            });
        };
        path.push(name.clone());
        cmd = sub.bin_name(path.join(" "));
    }
    let text = cmd.render_long_help().to_string();
    crate::output::print(&text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_subcommand_has_examples() {
        fn walk(cmd: &clap::Command, path: &str) {
            for sub in cmd.get_subcommands() {
                let path = format!("{path} {}", sub.get_name());
                let after = sub.get_after_help().map(ToString::to_string);
                assert!(
                    after.is_some_and(|a| a.contains("Examples:")),
                    "{path}: no examples"
                );
                walk(sub, &path);
            }
        }
        walk(&Cli::command(), "wattson");
    }
}
