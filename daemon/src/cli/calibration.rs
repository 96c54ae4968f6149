//! `wattson calibration`'s subcommands and their options.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use crate::report::request::{When, parse_when};

#[derive(Debug, Subcommand)]
pub enum CalibrationCommand {
    /// Fit the wall meter's watts against the signals this host stores, and keep the best.
    ///
    /// From the minutes the meter and the signals were both stored (RAPL, hwmon, GPU, IPMI
    /// and UPS power, the CPU's busy share and mean frequency, package C-states, GPU
    /// utilisation), each candidate (a straight line, or a calibrate table over one signal;
    /// straight lines over several) is fitted on the earlier part and scored on the later
    /// part it did not see (--holdout); the best, fitted again on all of it, is stored with
    /// its signals, the range of each it saw and its held-out error. Too little history, or
    /// none that varied, exits 65 saying what is missing.
    #[command(after_help = super::examples::CALIBRATION_FIT)]
    Fit(FitArgs),
    /// The calibration the estimate uses (the newest fitted on ordinary running, else a
    /// sweep's fit): its model, what it saw, its error, where it came from.
    #[command(after_help = super::examples::CALIBRATION_SHOW)]
    Show(ShowArgs),
    /// Estimate the wall energy of a stretch of history from the calibration.
    ///
    /// Each minute whose signals lie inside what the model saw is estimated; the others are
    /// withheld, with the reason (never extrapolated). Where a wall meter was there too, the
    /// two are shown side by side with the drift, and whether it is outside the model's
    /// interval (then fit again).
    #[command(after_help = super::examples::CALIBRATION_ESTIMATE)]
    Estimate(EstimateArgs),
    /// Write the calibration for another tool, or another host of the same hardware.
    ///
    /// `powercalc`: a Home Assistant powercalc `linear` sensor (calibrate table) over the
    /// entity wattson publishes for the model's one signal (CPU utilisation or frequency);
    /// `prometheus`: a recording rule `wattson:estimated_wall_power_watts` over wattson's
    /// own metrics; `file`: the model for `wattson calibration import` on another host.
    /// Printed on standard output.
    #[command(after_help = super::examples::CALIBRATION_EXPORT)]
    Export(ExportArgs),
    /// Take a calibration file exported on another host of the same hardware (same CPU
    /// model and count, memory within 5 %) as this host's, marked as borrowed.
    #[command(after_help = super::examples::CALIBRATION_IMPORT)]
    Import(ImportArgs),
}

impl CalibrationCommand {
    /// The database the subcommand names with --db.
    pub fn db(&self) -> Option<PathBuf> {
        match self {
            CalibrationCommand::Fit(a) => a.db.clone(),
            CalibrationCommand::Show(a) => a.db.clone(),
            CalibrationCommand::Estimate(a) => a.db.clone(),
            CalibrationCommand::Export(a) => a.db.clone(),
            CalibrationCommand::Import(a) => a.db.clone(),
        }
    }
}

/// The share of the history held out: above 0 and at most 0.5.
fn parse_holdout(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a share such as 0.3"))?;
    if v > 0.0 && v <= 0.5 {
        Ok(v)
    } else {
        Err(format!(
            "{s}: hold out more than 0 and at most 0.5 of the history"
        ))
    }
}

#[derive(Debug, Args)]
pub struct FitArgs {
    /// Start of the history fitted: a date, a moment (RFC 3339) or a duration such as 7d
    /// [default: 30 days ago].
    #[arg(long, value_name = "WHEN", value_parser = parse_when, allow_hyphen_values = true)]
    pub since: Option<When>,
    /// End of the history fitted [default: now].
    #[arg(long, value_name = "WHEN", value_parser = parse_when, allow_hyphen_values = true)]
    pub until: Option<When>,
    /// The later share of the history scored, not fitted.
    #[arg(long, value_name = "SHARE", default_value = "0.3", value_parser = parse_holdout)]
    pub holdout: f64,
    /// Only these signals (`source/metric/channel`, e.g. `cpu/cpu_busy/all`,
    /// `rapl/power/package-0`; repeat for several) [default: every one stored].
    #[arg(long = "feature", value_name = "SIGNAL")]
    pub features: Vec<String>,
    /// The wall meter's source, e.g. `meter:wall` [default: the one with the most minutes].
    #[arg(long, value_name = "SOURCE")]
    pub wall: Option<String>,
    /// Read and write this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Print the stored calibration as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Read this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct EstimateArgs {
    /// Start of the stretch estimated [default: a day ago].
    #[arg(long, value_name = "WHEN", value_parser = parse_when, allow_hyphen_values = true)]
    pub since: Option<When>,
    /// End of the stretch estimated [default: now].
    #[arg(long, value_name = "WHEN", value_parser = parse_when, allow_hyphen_values = true)]
    pub until: Option<When>,
    /// Read this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    Powercalc,
    Prometheus,
    File,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// What to write.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Read this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// A file written by `wattson calibration export --format file`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Write into this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}
