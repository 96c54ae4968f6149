//! Writes a calibration file for the host a configuration describes, as `wattson
//! calibration export --format file` would after a day with the meter in: the wall fitted as
//! 40 W + 30 W x the CPUs' busy share (`cpu/cpu_busy/all`) on 10 synthetic hours, with this
//! host's hardware under the configuration's `[host]` roots, so that `wattson calibration
//! import` takes it. For `tests/bench/selfcost.sh METERLESS=1`, which measures the daemon
//! estimating the wall without a meter. Run with
//! `cargo run --release -p wattson --example calibration_file -- CONFIG OUT`.
#![allow(clippy::print_stderr)]

use std::path::Path;
use std::process::ExitCode;

use wattson::calibration::history::Table;
use wattson::calibration::model::Feature;
use wattson::calibration::{choose, export, refit};
use wattson::config::Config;
use wattson_collectors::{SourceId, SysRoot};

const MINUTE_MS: i64 = 60_000;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, config, out] = args.as_slice() else {
        eprintln!("usage: calibration_file CONFIG OUT");
        return ExitCode::from(2);
    };
    let config = match Config::load(Some(Path::new(config))) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{config}: {}", wattson_collectors::ErrorChain(&e));
            return ExitCode::from(78);
        }
    };
    let root = SysRoot::new(&config.host.sysfs, &config.host.procfs);
    let hardware = refit::hardware(&root, &config.host.name);
    // Ten hours a minute apart, the busy share sweeping 0..1 and back every 97 minutes.
    let start = wattson_collectors::now_ms() - 24 * 60 * MINUTE_MS;
    let minutes: Vec<i64> = (0..600).map(|m| start + m * MINUTE_MS).collect();
    let busy: Vec<f64> = (0..600)
        .map(|m| (f64::from(m % 97) / 48.5 - 1.0).abs())
        .collect();
    let wall = busy.iter().map(|b| 40.0 + 30.0 * b).collect();
    let table = Table {
        minutes,
        wall,
        columns: vec![busy],
    };
    let Some(feature) = Feature::parse("cpu/cpu_busy/all") else {
        eprintln!("the CPU's busy share is not a feature this build knows");
        return ExitCode::FAILURE;
    };
    let model = match choose::calibrate(
        &config.host.name,
        &SourceId::meter("wall").to_string(),
        &table,
        &[feature],
        0.3,
        hardware,
        wattson_collectors::now_ms(),
    ) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("fitting: {}", wattson_collectors::ErrorChain(&e));
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = std::fs::write(out, export::file(&model)) {
        eprintln!("{out}: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
