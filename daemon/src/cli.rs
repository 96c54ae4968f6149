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

    /// Log debug detail (RUST_LOG overrides).
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,

    #[command(subcommand)]
    pub command: Command,
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
    Sweep(crate::commands::sweep::SweepArgs),
    /// Annual cost per configuration and mode, comparisons, savings and payback.
    #[command(after_help = examples::REPORT)]
    Report(crate::commands::report::ReportArgs),
    /// Serial meter tools: probe a port, or simulate a meter on a pseudo-terminal.
    #[command(subcommand, after_help = examples::METER)]
    Meter(MeterCommand),
    /// Configuration tools.
    #[command(subcommand, after_help = examples::CONFIG_CHECK)]
    Config(ConfigCommand),
    /// Fleet collector: store every host's MQTT state messages once (persistent session).
    #[command(after_help = examples::COLLECT)]
    Collect(crate::commands::collect::CollectArgs),
    /// CPU share, estimated watts and money per systemd service, container and session.
    ///
    /// From the CPU time the daemon records per cgroup v2 group (`[services]`): the wall's
    /// power above this host's idle floor (its newest sweep fit) is shared by busy CPU time;
    /// the idle floor is shown apart, as the box being on. Every figure is an estimate with
    /// its interval; without a sweep there is CPU time only.
    #[command(after_help = examples::SERVICES)]
    Services(crate::commands::services::ServicesArgs),
    /// Price and carbon-intensity series: import Octopus Agile, day-ahead CSV, carbon data.
    #[command(subcommand, after_help = examples::TARIFF)]
    Tariff(crate::commands::tariff::TariffCommand),
    /// Why idle draws what it does: package and core C-states and the power settings that
    /// keep them shallow; --measure finds what each setting saves at the wall.
    #[command(after_help = examples::IDLE)]
    Idle(crate::commands::idle::IdleArgs),
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
pub enum MeterCommand {
    /// Identify which supported meter answers on PORT.
    #[command(after_help = examples::METER_PROBE)]
    Probe(crate::commands::meter::ProbeArgs),
    /// Simulate a meter on a new pseudo-terminal and print its path.
    #[command(after_help = examples::METER_SIMULATE)]
    Simulate(crate::commands::meter::SimulateArgs),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration and print the effective config (secrets redacted).
    #[command(after_help = examples::CONFIG_CHECK)]
    Check,
}

/// `wattson help [COMMAND...]`: the long help of wattson or of a subcommand.
pub fn print_help(args: &HelpArgs) -> anyhow::Result<()> {
    use clap::CommandFactory as _;
    let mut cmd = Cli::command();
    let mut path = vec!["wattson".to_owned()];
    for name in &args.command {
        let Some(sub) = cmd.find_subcommand(name).cloned() else {
            let known: Vec<String> = cmd
                .get_subcommands()
                .map(|c| c.get_name().to_owned())
                .collect();
            anyhow::bail!(
                "{} has no subcommand {name:?}: it has {}",
                path.join(" "),
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            );
        };
        path.push(name.clone());
        cmd = sub.bin_name(path.join(" "));
    }
    let text = cmd.render_long_help().to_string();
    crate::output::print(&text);
    Ok(())
}

/// The examples each `--help` ends with (and the man pages' EXAMPLES sections).
pub mod examples {
    pub const WATTSON: &str = "\
Examples:
  wattson demo                                  # the whole pipeline, no hardware needed
  wattson --config /etc/wattson/wattson.toml config check
  wattson status
  wattson report --format html --out report.html
  wattson help sweep                            # the help of one subcommand";

    pub const RUN: &str = "\
Examples:
  wattson run                                   # until SIGTERM or Ctrl-C (systemd: wattson.service)
  wattson run --config ./wattson.toml --db /tmp/test.db --duration 60s";

    pub const DEMO: &str = "\
Examples:
  wattson demo                                  # 90 s: collect, a short sweep, a cost summary
  wattson demo --duration 3m --db demo.db       # keep the database, then: wattson report --db demo.db
  wattson demo --no-sweep --duration 30s";

    pub const STATUS: &str = "\
Examples:
  wattson status
  wattson status --json | jq .cost
  wattson status --db /var/lib/wattson/wattson.db";

    pub const SERVICES: &str = "\
Examples:
  wattson services
  wattson services --days 1
  wattson services --json | jq '.groups[] | {name, watts_now, cost}'";

    pub const SWEEP: &str = "\
Examples:
  wattson sweep --name \"basket, powersave\"      # idle, then 1 .. N loops of the spin kind
  wattson sweep --name basket --levels 0,1,2,4 --kinds spin,memory,pause
  sudo wattson sweep --name basket --governors powersave,performance
  wattson sweep --name monthly --levels 0,1 --regression-check
  wattson sweep --list
  wattson sweep --show \"basket, powersave\" --json";

    pub const REPORT: &str = "\
Examples:
  wattson report                                # aligned table on the terminal
  wattson report --upgrade-cost 300 --co2 200   # payback time and CO2 saved
  wattson report --configs \"athlon,2x opteron\"  # these, in this order (prefixes will do)
  wattson report --mode \"2 loops\"
  wattson report --since 30d --format html --out report.html
  wattson report --tariffs current,agile,economy7   # the measured energy under each tariff";

    pub const METER: &str = "\
Examples:
  wattson meter probe /dev/ttyUSB0
  wattson meter simulate --protocol sdm630 --watts 60";

    pub const METER_PROBE: &str = "\
Examples:
  wattson meter probe /dev/ttyUSB0              # which meter answers, its address and a reading
  wattson meter probe /dev/wattson-meter --timeout 3s";

    pub const METER_SIMULATE: &str = "\
Examples:
  wattson meter simulate --protocol sdm630 --watts 60            # prints a pty path: use it as `port`
  wattson meter simulate --protocol pzem004t --follow-cpu --address 1,2,3
  wattson meter simulate --protocol cse7766 --duration 10m";

    pub const CONFIG_CHECK: &str = "\
Examples:
  wattson config check
  wattson --config ./wattson.toml config check  # exit 78 and the key and line when it is wrong";

    pub const COLLECT: &str = "\
Examples:
  wattson collect --db fleet.db                 # every host's state from [mqtt]'s broker
  wattson collect --jsonl - | head";

    pub const TARIFF: &str = "\
Examples:
  wattson tariff import agile.json              # Octopus unit rates, priced per half-hour
  wattson tariff import day-ahead.csv --name nordpool --compare-only
  wattson tariff list
  wattson report --tariffs current,agile,economy7";

    pub const TARIFF_IMPORT: &str = "\
Examples:
  curl -o agile.json 'https://api.octopus.energy/v1/products/AGILE-24-10-01/electricity-tariffs/E-1R-AGILE-24-10-01-C/standard-unit-rates/?period_from=2026-11-29T00:00Z&period_to=2026-11-30T00:00Z'
  wattson tariff import agile.json              # inc VAT, series \"octopus\"
  wattson tariff import page1.json page2.json --exc-vat --name agile
  wattson tariff import entsoe.csv --name de-lu --compare-only   # EUR/MWh, converted to EUR/kWh
  wattson tariff import prices.csv --format csv --currency EUR   # start,end,price_per_kwh
  wattson tariff import carbon.json             # GB carbon intensity API: CO2 per slot";

    pub const TARIFF_LIST: &str = "\
Examples:
  wattson tariff list
  wattson tariff list --json | jq '.[].source'";

    pub const TARIFF_REMOVE: &str = "\
Examples:
  wattson tariff remove agile";
    pub const IDLE: &str = "\
Examples:
  wattson idle                                  # package and core C-states, every setting, in words
  wattson idle --json | jq .findings
  sudo wattson idle --measure                   # what each setting saves at the wall, then puts it back
  sudo wattson idle --measure --only pcie_aspm,sata_alpm
  sudo wattson idle --measure --skip runtime_pm_usb --phase 40s";

    pub const HELP: &str = "\
Examples:
  wattson help
  wattson help meter probe";
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
