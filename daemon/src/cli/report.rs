//! `wattson report`'s options: the [`ReportRequest`] they ask for, and where it goes (`--out`).

use std::path::PathBuf;

use clap::Args;

use crate::report::{Format, ReportRequest, When, parse_when};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write the report to this file instead of stdout.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Configurations to show, in order, separated by commas (names may be shortened to a
    /// unique prefix); the first is the baseline the others are compared with [default:
    /// every configuration, the costliest first].
    #[arg(long, value_name = "NAME,...")]
    pub configs: Option<String>,
    /// Start of the measured window: a date (YYYY-MM-DD), a moment (RFC 3339, e.g.
    /// 2026-12-04T18:30:00Z) or a duration such as 30d (the last 30 days).
    #[arg(long, value_name = "WHEN", value_parser = parse_when, allow_hyphen_values = true)]
    pub since: Option<When>,
    /// End of the measured window: a date (YYYY-MM-DD, to the end of that day), a moment
    /// (RFC 3339) or a duration such as 1d (up to a day ago) [default: now].
    #[arg(long, value_name = "WHEN", value_parser = parse_when, allow_hyphen_values = true)]
    pub until: Option<When>,
    /// Compare at this mode (e.g. "idle", "2 loops") instead of idle or the measured duty
    /// cycle.
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,
    /// What the upgrade costs, in the tariff's currency: gives the payback time (overrides
    /// each target's `upgrade_cost`).
    #[arg(
        long,
        value_name = "AMOUNT",
        value_parser = crate::parse::parse_non_negative,
        allow_hyphen_values = true
    )]
    pub upgrade_cost: Option<f64>,
    /// Grid carbon intensity, g CO2 per kWh: adds CO2 per year and CO2 saved.
    #[arg(
        long,
        value_name = "G_PER_KWH",
        value_parser = crate::parse::parse_non_negative,
        allow_hyphen_values = true
    )]
    pub co2: Option<f64>,
    /// Price the measured energy under each of these tariffs, side by side, and say what
    /// the cheapest saves per year: `current` (what prices the ledger), `tariff` (the
    /// configured [tariff] alone), an [[tariff.alternative]] name, or an imported series'
    /// name (`wattson tariff list`), separated by commas.
    #[arg(long, value_name = "NAME,...")]
    pub tariffs: Option<String>,
    /// Read this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Read the host's history from a Prometheus-compatible engine's query API instead of
    /// a database: the series remote write sent there (`[prometheus] remote_write`), at
    /// this base URL (e.g. http://prometheus.lan:9090), priced as a database's would be.
    #[arg(long, value_name = "URL", conflicts_with = "db")]
    pub prometheus: Option<String>,
    /// The host whose measured history to report (a fleet collector's database holds
    /// several; with --prometheus, several separated by commas, one report each) [default:
    /// `[host] name`].
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// Candidate machines (`wattson candidate`) to price on this machine's load, in this
    /// order, separated by commas [default: the cheapest that carry the load].
    #[arg(long, value_name = "NAME,...")]
    pub candidates: Option<String>,
    /// How many of the cheapest candidates to show when --candidates names none.
    #[arg(long, value_name = "N", default_value_t = crate::report::model::DEFAULT_TOP_CANDIDATES)]
    pub candidates_top: usize,
    /// This machine's own ssj_ops at 100 % (a published SPECpower result of the same
    /// model): a candidate with its ssj_ops published and no --perf-ratio gets its ssj_ops
    /// over this as its perf ratio.
    #[arg(long, value_name = "OPS", value_parser = crate::parse::parse_positive)]
    pub this_ssj_ops: Option<f64>,
    /// Price each configuration's modes on a week's schedule, hour by hour at the tariff in
    /// force: entries separated by `;`, each MODE [DAYS] [HH:MM-HH:MM], one with neither
    /// days nor times being the mode at all other times, later entries winning, e.g.
    /// "standby 00:00-07:00; idle; 2 loops sun 02:00-03:00".
    #[arg(long, value_name = "SCHEDULE")]
    pub schedule: Option<crate::analysis::schedule::Schedule>,
    /// This machine's power asleep at the wall, W, for what sleeping when idle would save
    /// [default: `[sleep] standby_watts`, else the `standby` mode of this host's
    /// `[[config]]`]. The thresholds of an hour idle enough to sleep are `[sleep]`'s.
    #[arg(long, value_name = "W", value_parser = crate::parse::parse_non_negative)]
    pub standby_watts: Option<f64>,
}

impl ReportArgs {
    /// The report these options ask for (`--out` is where it goes, not what it is).
    pub fn request(&self) -> ReportRequest {
        ReportRequest {
            format: self.format,
            configs: self.configs.clone(),
            since: self.since,
            until: self.until,
            mode: self.mode.clone(),
            upgrade_cost: self.upgrade_cost,
            co2: self.co2,
            tariffs: self.tariffs.clone(),
            db: self.db.clone(),
            host: self.host.clone(),
            candidates: self.candidates.clone(),
            candidates_top: Some(self.candidates_top),
            this_ssj_ops: self.this_ssj_ops,
            schedule: self.schedule.clone(),
            standby_watts: self.standby_watts,
        }
    }
}
