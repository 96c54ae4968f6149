//! `wattson meter probe` and `wattson meter simulate`'s options.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use wattson_collectors::meter::Protocol;

/// A protocol by its config name; `--help` lists [`Protocol::ALL`].
fn protocol_parser() -> impl TypedValueParser<Value = Protocol> {
    PossibleValuesParser::new(Protocol::ALL.map(Protocol::as_str))
        .try_map(|name| name.parse::<Protocol>())
}

#[derive(Debug, Subcommand)]
pub enum MeterCommand {
    /// Identify which supported meter answers on PORT.
    #[command(after_help = super::examples::METER_PROBE)]
    Probe(ProbeArgs),
    /// Simulate a meter on a new pseudo-terminal and print its path.
    #[command(after_help = super::examples::METER_SIMULATE)]
    Simulate(SimulateArgs),
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Serial port to probe, e.g. /dev/ttyUSB0.
    #[arg(value_name = "PORT")]
    pub port: PathBuf,
    /// How long to wait for each protocol's answer.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "1500ms",
        value_parser = crate::parse::parse_duration_arg,
        allow_hyphen_values = true
    )]
    pub timeout: Duration,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Protocol to simulate.
    #[arg(long, value_name = "PROTOCOL", value_parser = protocol_parser())]
    pub protocol: Protocol,
    /// Watts with no load (or constant watts without --follow-cpu).
    #[arg(long, value_name = "W", default_value_t = 40.0, value_parser = crate::parse::parse_non_negative, allow_hyphen_values = true)]
    pub watts: f64,
    /// Follow this machine's CPU load: watts = --watts + --per-cpu x busy CPUs.
    #[arg(long)]
    pub follow_cpu: bool,
    /// With --follow-cpu, follow only this process's CPU time (all its threads, from
    /// /proc/PID/stat) rather than the whole machine's, so other load does not leak in.
    #[arg(long, value_name = "PID", requires = "follow_cpu")]
    pub follow_pid: Option<u32>,
    /// With --follow-pid, count the time its threads waited for a CPU as busy too: the CPUs
    /// the process asks for, so its loops read as whole CPUs on a machine shared with other
    /// work (benchmarks of the sweep's statistics on a loaded machine).
    #[arg(long, requires = "follow_pid")]
    pub follow_demand: bool,
    /// With --follow-demand, count only the process's threads whose name starts with this,
    /// e.g. `wattson-spin` for a sweep's spin loops.
    #[arg(long, value_name = "PREFIX", requires = "follow_demand")]
    pub follow_threads: Option<String>,
    /// Extra watts per fully busy CPU with --follow-cpu.
    #[arg(long, value_name = "W", default_value_t = 15.0, value_parser = crate::parse::parse_non_negative, allow_hyphen_values = true)]
    pub per_cpu: f64,
    /// Standard deviation of added noise, W.
    #[arg(long, value_name = "W", default_value_t = 0.5, value_parser = crate::parse::parse_non_negative, allow_hyphen_values = true)]
    pub noise: f64,
    /// Time constant of the ramp to a new level, s.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = crate::parse::parse_non_negative, allow_hyphen_values = true)]
    pub ramp: f64,
    /// Extra watts per busy CPU beyond the first (negative: later loops cheaper).
    #[arg(long, value_name = "W", default_value_t = 0.0, value_parser = crate::parse::parse_number, allow_hyphen_values = true)]
    pub curvature: f64,
    /// Modbus addresses to answer on (comma-separated), e.g. 1,2,3 for three meters on one bus.
    #[arg(
        long,
        value_name = "ADDRESS,...",
        value_delimiter = ',',
        default_value = "1",
        allow_hyphen_values = true
    )]
    pub address: Vec<u8>,
    /// Stop after this long instead of running until interrupted.
    #[arg(long, value_name = "DURATION", value_parser = crate::parse::parse_duration_arg, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Watts added while a file holds a value, FILE=VALUE:W (repeatable): e.g.
    /// /sys/module/pcie_aspm/parameters/policy=powersave:-3 for a machine that draws 3 W
    /// less with ASPM on, to try `wattson idle --measure` against a known answer.
    #[arg(long = "effect", value_name = "FILE=VALUE:W", value_parser = crate::sources::simulated_power::SettingEffect::parse, allow_hyphen_values = true)]
    pub effects: Vec<crate::sources::simulated_power::SettingEffect>,
    /// Play a fault over the replies or records, KIND@START+LENGTH from when the
    /// simulator starts (repeatable): exception:CODE (a Modbus exception reply in place of
    /// every reply), silence, wrong-address, corrupt, truncated, overlong, garbage; e.g.
    /// --fault exception:2@10s+3s. To try how wattson rides out a misbehaving meter.
    #[arg(
        long = "fault",
        value_name = "KIND@START+LENGTH",
        allow_hyphen_values = true
    )]
    pub faults: Vec<wattson_collectors::meter::faults::FaultWindow>,
    /// With --fault: repeat the faults every this long (a script of one cycle).
    #[arg(long, value_name = "DURATION", requires = "faults", value_parser = crate::parse::parse_duration_arg)]
    pub fault_cycle: Option<Duration>,
    /// Start the meter's energy counter at this many Wh, as a meter that has counted
    /// before: start a simulator again with its counter moved on by the energy of a time
    /// away (e.g. 28 for 7 h at 4 W) to try how wattson measures standby at the wall.
    #[arg(long, value_name = "WH", default_value_t = 0.0, value_parser = non_negative_wh)]
    pub energy_wh: f64,
    /// Random seed for the noise.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        allow_hyphen_values = true
    )]
    pub seed: u64,
}

/// A counter start: a finite number of Wh, not negative.
fn non_negative_wh(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(wh) if wh.is_finite() && wh >= 0.0 => Ok(wh),
        _ => Err(format!(
            "{s:?} is not a number of Wh at or above 0, e.g. 28"
        )),
    }
}
