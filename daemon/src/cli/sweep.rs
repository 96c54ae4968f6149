//! `wattson sweep`'s options.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::sweep::workload::LoopKind;

// Command-line flags are bools by nature.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Name of the configuration to store the results under (e.g. "basket, powersave");
    /// required, except with --list or --show.
    #[arg(
        long,
        value_name = "NAME",
        required_unless_present_any = ["list", "show"],
        value_parser = crate::config::names::parse_label
    )]
    pub name: Option<String>,
    /// Busy loops per level, comma-separated, each from 0 (idle) to the logical CPUs
    /// [default: 0, 1, ... up to the logical CPUs].
    #[arg(
        long,
        value_name = "N,...",
        value_delimiter = ',',
        value_parser = crate::parse::parse_count,
        allow_hyphen_values = true
    )]
    pub levels: Option<Vec<usize>>,
    /// Loop kinds: spin (compute-bound), memory (memory-bound), pause (spin-wait with the pause hint).
    #[arg(
        long,
        value_name = "KIND,...",
        value_delimiter = ',',
        default_value = "spin"
    )]
    pub kinds: Vec<LoopKind>,
    /// Repeat the sweep under each cpufreq governor (root only); originals are restored.
    #[arg(long, value_name = "GOVERNOR,...", value_delimiter = ',')]
    pub governors: Option<Vec<String>>,
    /// Which [[meter]] to read (its id) [default: the first].
    #[arg(long, value_name = "ID")]
    pub meter: Option<String>,
    /// Time cap of each level, settling included (measuring stops at the cap).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "90s",
        value_parser = crate::parse::parse_duration_arg,
        allow_hyphen_values = true
    )]
    pub max_level_time: Duration,
    /// Target half-width of each level's 95 % interval, W (the larger of this and --ci-percent).
    #[arg(
        long,
        value_name = "W",
        default_value_t = 0.5,
        value_parser = crate::parse::parse_non_negative,
        allow_hyphen_values = true
    )]
    pub ci_watts: f64,
    /// Target half-width of each level's 95 % interval, percent of the mean.
    #[arg(
        long,
        value_name = "PERCENT",
        default_value_t = 1.0,
        value_parser = crate::parse::parse_non_negative,
        allow_hyphen_values = true
    )]
    pub ci_percent: f64,
    /// How long the idle level waits for other load to go away before measuring anyway.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "30s",
        value_parser = crate::parse::parse_duration_arg,
        allow_hyphen_values = true
    )]
    pub idle_wait: Duration,
    /// Readings before a level's interval is trusted.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20,
        value_parser = crate::parse::parse_count,
        allow_hyphen_values = true
    )]
    pub min_samples: usize,
    /// Compare idle with the baseline (the newest complete sweep of --name that was not a
    /// regression) and store the verdict for the daemon and `wattson report`.
    #[arg(long)]
    pub regression_check: bool,
    /// List the stored sweeps.
    #[arg(long, conflicts_with = "show")]
    pub list: bool,
    /// Show one stored sweep.
    #[arg(long, value_name = "NAME")]
    pub show: Option<String>,
    /// Print --list/--show as JSON.
    #[arg(long)]
    pub json: bool,
    /// Database to store into [default: [storage] path]; while a daemon runs for it, the
    /// daemon stores the sweep.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// The caller prints its own summary (`wattson demo`): no level lines, calibrations or
    /// summary, only the progress spinner and warnings.
    #[arg(skip)]
    pub quiet: bool,
}
