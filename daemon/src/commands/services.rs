//! `wattson services`: what each systemd service, container, user session and machine
//! costs, estimated from the CPU time the daemon records per cgroup (see
//! [`crate::services`]), as a table or `--json`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use crate::ledger::costs;
use crate::services::{estimate, render};
use crate::store::{DAY_MS, HOUR_MS, floor_to};

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

pub fn run(args: &ServicesArgs, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config_path)?;
    let (_, store) = super::open_existing_database(args.db.as_deref(), &config)?;
    let host = args
        .host
        .clone()
        .unwrap_or_else(|| config.host.name.clone());
    let tariff = costs::tariff(&config.tariff)?;
    let now = chrono::Utc::now().timestamp_millis();
    let to = floor_to(now, HOUR_MS) + HOUR_MS;
    let from = to - i64::from(args.days) * DAY_MS;
    let e = estimate(&store, &host, &tariff, from, to)?;
    if args.json {
        crate::output::println(&serde_json::to_string_pretty(&e)?);
    } else {
        let mut text = format!(
            "What each service costs on {host} (last {} days)\n",
            args.days
        );
        text.push_str(&render::text(&e));
        if e.is_empty() && !config.services.enabled {
            text.push_str("[services] enabled = false in the config: the daemon records no CPU time per service\n");
        }
        crate::output::print(&text);
    }
    Ok(ExitCode::SUCCESS)
}
