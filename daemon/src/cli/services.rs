//! `wattson services`' options.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct ServicesArgs {
    /// Read this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Show this host's groups [default: `[host] name`].
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// How many days back the figures look, 1 to the raw retention (hours are kept that long).
    #[arg(long, value_name = "DAYS", default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub days: u32,
}
