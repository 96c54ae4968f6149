//! `wattson meter probe` and `wattson meter simulate`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use wattson_collectors::SysRoot;
use wattson_collectors::meter::{self, Protocol};

use crate::cli::{MeterCommand, ProbeArgs, SimulateArgs};
use crate::sources::simulated_power::PowerModel;

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
    if let Some(w) = args
        .faults
        .iter()
        .find(|w| !w.fault.applies(args.protocol.is_polled()))
    {
        anyhow::bail!(
            "--fault {w}: a {} meter streams records; exception and wrong-address are faults \
             of Modbus replies (pzem004t, pzem017, sdm120, sdm230, sdm630)",
            args.protocol.as_str()
        );
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
        energy_wh: args.energy_wh,
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
        meter::faults::FaultScript {
            windows: args.faults.clone(),
            cycle_ms: args.fault_cycle.map(|d| d.as_millis() as u64),
        },
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
        let mut signals = crate::runtime::signals::Signals::stop()?;
        let until = async {
            match args.duration {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = signals.stopped() => {}
            () = until => {}
        }
        anyhow::Ok(())
    })?;
    sim.stop();
    Ok(ExitCode::SUCCESS)
}
