//! `wattson meter probe` and `wattson meter simulate`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use wattson_collectors::SysRoot;
use wattson_collectors::meter::{self, Protocol};

use crate::cli::MeterCommand;
use crate::sources::power_model::PowerModel;

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
    /// Protocol to simulate: pzem004t, pzem017, sdm120, sdm230, sdm630, wattsup, cse7766,
    /// hlw8032, line.
    #[arg(long, value_name = "PROTOCOL")]
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
    #[arg(long = "effect", value_name = "FILE=VALUE:W", value_parser = crate::sources::power_model::SettingEffect::parse, allow_hyphen_values = true)]
    pub effects: Vec<crate::sources::power_model::SettingEffect>,
    /// Random seed for the noise.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        allow_hyphen_values = true
    )]
    pub seed: u64,
}

pub fn run(cmd: MeterCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    match cmd {
        MeterCommand::Probe(args) => probe(&args),
        MeterCommand::Simulate(args) => simulate(&args, config),
    }
}

fn probe(args: &ProbeArgs) -> anyhow::Result<ExitCode> {
    match meter::probe(&args.port, args.timeout) {
        Ok(found) => {
            let mut text = format!(
                "{}: {} ({})",
                args.port.display(),
                found.protocol.as_str(),
                found.protocol.default_serial()
            );
            match found.address {
                Some(_) if found.general_address => {
                    let _ = write!(
                        text,
                        ", answers on the general address 0xF8 (it did not say its own address)"
                    );
                }
                Some(a) => {
                    let _ = write!(text, ", address {a}");
                }
                None => {}
            }
            if let Some(r) = found.reading {
                let fmt = |v: Option<f64>, unit: &str| {
                    v.map(|x| format!(" {x:.2} {unit}")).unwrap_or_default()
                };
                let _ = write!(
                    text,
                    "\n  reading:{}{}{}{}{}{}",
                    fmt(r.power_w, "W"),
                    fmt(r.voltage_v, "V"),
                    fmt(r.current_a, "A"),
                    fmt(r.power_factor, "PF"),
                    fmt(r.frequency_hz, "Hz"),
                    fmt(r.energy_wh, "Wh")
                );
            }
            let _ = write!(
                text,
                "\n  config:\n    [[meter]]\n    id = \"wall\"\n    protocol = \"{}\"\n    port = \"{}\"{}",
                found.protocol.as_str(),
                args.port.display(),
                match found.address {
                    // No `address`: a PZEM's default is the general address, which works
                    // only while it is alone on the line.
                    Some(_) if found.general_address => "\n    # no address: the general \
                         address 0xF8, for a meter alone on its line"
                        .to_owned(),
                    Some(a) => format!("\n    address = {a}"),
                    None => String::new(),
                }
            );
            crate::output::println(&text);
            Ok(ExitCode::SUCCESS)
        }
        Err(meter::probe::ProbeError::Port(e)) => {
            anyhow::bail!("{}; no meter was tried", e.explain(false))
        }
        Err(e @ meter::probe::ProbeError::NothingAnswered { .. }) => anyhow::bail!(
            "{e}: check that the meter is powered and wired (RS-485 A/B, or TX/RX crossed); a \
             meter at other settings than its factory ones needs them in a [[meter]] section \
             (protocol, baud, address), and a text-line meter (protocol \"line\") cannot be \
             recognised without its column map"
        ),
    }
}

fn simulate(args: &SimulateArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    if !args.watts.is_finite() || args.watts < 0.0 || args.noise < 0.0 || args.ramp < 0.0 {
        anyhow::bail!("--watts, --noise and --ramp must be 0 or more");
    }
    let cfg = super::load_config(config)?;
    let root = SysRoot::new(&cfg.host.sysfs, &cfg.host.procfs);
    let model = PowerModel {
        idle_w: args.watts,
        per_cpu_w: args.per_cpu,
        follow_cpu: args.follow_cpu,
        follow_pid: args.follow_pid,
        follow_demand: args.follow_demand,
        follow_threads: args.follow_threads.clone(),
        noise_sd_w: args.noise,
        ramp_s: args.ramp,
        curvature_w: args.curvature,
        effects: args.effects.clone(),
        ..PowerModel::default()
    };
    let line = (args.protocol == Protocol::Line).then(meter::line::LineFormat::default);
    let sim = crate::sources::meters::simulate_with(
        args.protocol,
        &args.address,
        model,
        &root,
        args.seed,
        line,
    )?;
    crate::output::println(&sim.path.display().to_string());
    tracing::info!(
        "simulated {} meter on {} ({}); Ctrl-C to stop",
        args.protocol.as_str(),
        sim.path.display(),
        if args.follow_cpu {
            format!("{} W + {} W per busy CPU", args.watts, args.per_cpu)
        } else {
            format!("{} W", args.watts)
        }
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let until = async {
            match args.duration {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
            () = until => {}
        }
        anyhow::Ok(())
    })?;
    sim.stop();
    Ok(ExitCode::SUCCESS)
}
