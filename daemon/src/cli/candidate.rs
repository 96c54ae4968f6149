//! `wattson candidate`'s subcommands and their options.

use std::path::PathBuf;

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum CandidateCommand {
    /// Import SPECpower_ssj2008 results (CSV, one row per result) as candidates.
    ///
    /// The header names the columns (case and spacing do not matter): `System` (the
    /// candidate's name), `Hardware Vendor`, `Processor`, `# Cores`, `# Threads`, `Memory
    /// (GB)`, `Published`, `ssj_ops @ N% of target load`, `Average watts @ N% of target
    /// load` for N = 10 ... 100 and `Average watts @ active idle` (the published curve), or
    /// only `avg. watts @ 100%` and `avg. watts @ active idle` (the two-point form, which
    /// is interpolated linearly and says so), and `Result (overall ssj_ops/watt)`. Every
    /// file is checked whole first: a bad row imports nothing and is named by line and
    /// column (exit 65). Candidates of the same name are replaced.
    #[command(after_help = super::examples::CANDIDATE_IMPORT)]
    Import(CandidateImportArgs),
    /// Enter a machine by hand: its watts at active idle and at shares of its maximum
    /// throughput (100 % required; straight lines between the points).
    #[command(after_help = super::examples::CANDIDATE_ADD)]
    Add(CandidateAddArgs),
    /// Take a configuration wattson swept, on this host or another, as a candidate.
    ///
    /// Its curve is the sweep's watts at the wall: active idle, and k busy loops of N CPUs
    /// at k/N of its maximum (the sweep must reach every CPU). Its throughput over this
    /// machine's is measured from the two sweeps' loop rates with every CPU busy where this
    /// host has a sweep of the same loop kind, unless --perf-ratio gives it.
    #[command(after_help = super::examples::CANDIDATE_FROM_SWEEP)]
    FromSweep(CandidateFromSweepArgs),
    /// Set what a stored candidate costs to buy, or its throughput against this machine.
    #[command(after_help = super::examples::CANDIDATE_SET)]
    Set(CandidateSetArgs),
    /// The stored candidates: curve, where it came from, price.
    #[command(after_help = super::examples::CANDIDATE_LIST)]
    List(CandidateListArgs),
    /// One candidate: every curve point, and a hand table's stated figures checked.
    #[command(after_help = super::examples::CANDIDATE_SHOW)]
    Show(CandidateShowArgs),
    /// Delete a candidate.
    #[command(after_help = super::examples::CANDIDATE_REMOVE)]
    Remove(CandidateRemoveArgs),
}

#[derive(Debug, Args)]
pub struct CandidateImportArgs {
    /// SPECpower CSV files.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Write into this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A curve point as typed: `50%=110` (110 W at 50 % of the maximum throughput).
pub fn parse_at(s: &str) -> Result<(f64, f64), String> {
    let (load, watts) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: give LOAD%=WATTS, e.g. 50%=110"))?;
    let pct = load
        .trim()
        .strip_suffix('%')
        .ok_or_else(|| format!("{s:?}: the load is a percentage of maximum throughput (50%)"))?;
    let pct: f64 = pct
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: {pct:?} is not a percentage"))?;
    let watts: f64 = watts
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: {watts:?} is not watts"))?;
    Ok((pct / 100.0, watts))
}

#[derive(Debug, Args)]
pub struct CandidateAddArgs {
    /// The candidate's name (no commas).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Watts at active idle.
    #[arg(long, value_name = "WATTS", allow_hyphen_values = true)]
    pub idle: f64,
    /// Watts at a share of maximum throughput, `LOAD%=WATTS`; repeat it; 100% is required.
    #[arg(long = "at", value_name = "LOAD%=WATTS", value_parser = parse_at, required = true)]
    pub at: Vec<(f64, f64)>,
    /// What buying it costs, in the tariff's currency.
    #[arg(long, value_name = "AMOUNT", allow_hyphen_values = true)]
    pub price: Option<f64>,
    /// Its throughput over this machine's (1.8: it does the same work at 1/1.8 of its
    /// maximum) [default: 1, assumed].
    #[arg(long, value_name = "RATIO", allow_hyphen_values = true)]
    pub perf_ratio: Option<f64>,
    /// A hand table's own annual cost of this machine at idle, to check its arithmetic.
    #[arg(long, value_name = "AMOUNT", allow_hyphen_values = true)]
    pub stated_annual_cost: Option<f64>,
    /// The price per kWh that table says it used.
    #[arg(long, value_name = "PRICE", allow_hyphen_values = true)]
    pub stated_price: Option<f64>,
    /// Write into this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Print the candidate as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CandidateFromSweepArgs {
    /// The candidate's name (no commas).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The swept configuration, as `wattson sweep --list` names it.
    #[arg(long, value_name = "CONFIG")]
    pub configuration: String,
    /// The database that holds the sweep: another host's store (a copy of its file) or this
    /// host's [default: the database written into].
    #[arg(long, value_name = "PATH")]
    pub from: Option<PathBuf>,
    /// The loop kind whose levels make the curve [default: spin, or the one it was swept with].
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// This machine's sweep to measure the throughput ratio against [default: the newest
    /// complete sweep in the database written into with the same loop kind at every CPU].
    #[arg(long, value_name = "CONFIG")]
    pub against: Option<String>,
    /// What buying it costs, in the tariff's currency.
    #[arg(long, value_name = "AMOUNT", allow_hyphen_values = true)]
    pub price: Option<f64>,
    /// Its throughput over this machine's, instead of the one the loop rates give.
    #[arg(long, value_name = "RATIO", allow_hyphen_values = true)]
    pub perf_ratio: Option<f64>,
    /// Write into this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Print the candidate as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CandidateSetArgs {
    /// The candidate (as `wattson candidate list` names it).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// What buying it costs, in the tariff's currency.
    #[arg(long, value_name = "AMOUNT", allow_hyphen_values = true)]
    pub price: Option<f64>,
    /// Its throughput over this machine's.
    #[arg(long, value_name = "RATIO", allow_hyphen_values = true)]
    pub perf_ratio: Option<f64>,
    /// Write into this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CandidateListArgs {
    /// Read this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CandidateShowArgs {
    /// The candidate (as `wattson candidate list` names it).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Read this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CandidateRemoveArgs {
    /// The candidate (as `wattson candidate list` names it).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Write into this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}

impl CandidateCommand {
    /// The database this command works on, where its `--db` names one.
    pub fn db(&self) -> Option<PathBuf> {
        match self {
            CandidateCommand::Import(a) => a.db.clone(),
            CandidateCommand::Add(a) => a.db.clone(),
            CandidateCommand::FromSweep(a) => a.db.clone(),
            CandidateCommand::Set(a) => a.db.clone(),
            CandidateCommand::List(a) => a.db.clone(),
            CandidateCommand::Show(a) => a.db.clone(),
            CandidateCommand::Remove(a) => a.db.clone(),
        }
    }
}
