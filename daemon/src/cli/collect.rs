//! `wattson collect`'s options.

use std::path::PathBuf;

use clap::Args;

use crate::sources::fleet;

#[derive(Debug, Args)]
pub struct CollectArgs {
    /// MQTT client id; fixed so the broker keeps this collector's session (and queues
    /// messages) while it is down [default: wattson-collect-<host>].
    #[arg(long, value_name = "ID")]
    pub client_id: Option<String>,
    /// Append samples as JSON lines to this file (`-` for standard output) instead of
    /// storing them in the database.
    #[arg(long, value_name = "PATH")]
    pub jsonl: Option<PathBuf>,
    /// Store into this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH", conflicts_with = "jsonl")]
    pub db: Option<PathBuf>,
    /// Most hosts taken (those already in the database first); messages of further hosts
    /// are acknowledged, counted and logged as refused.
    #[arg(long, value_name = "N", default_value_t = fleet::DEFAULT_MAX_HOSTS,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_hosts: u32,
}
