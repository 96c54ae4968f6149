//! `wattson services`: what each systemd service, container, user session and machine
//! costs, estimated from the CPU time the daemon records per cgroup (see
//! [`crate::services`]), as a table or `--json`.

use std::path::Path;
use std::process::ExitCode;

use crate::cli::ServicesArgs;
use crate::ledger::costs;
use crate::services::{estimate, render};
use crate::store::{DAY_MS, HOUR_MS, floor_to};

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
    let mut e = estimate(&store, &host, &tariff, from, to)?;
    // With nothing stored for this machine, say why where the machine cannot record it (a
    // cgroup v1 host never will), and what would make it work.
    let unrecordable = (e.is_empty() && config.services.enabled && host == config.host.name)
        .then(|| {
            let root = wattson_collectors::SysRoot::new(&config.host.sysfs, &config.host.procfs);
            wattson_collectors::cgroup::availability(&root)
                .err()
                .map(|e| e.to_string())
        })
        .flatten();
    if args.json {
        if let Some(why) = &unrecordable {
            e.warnings.push(format!(
                "per-service CPU time is not recorded on this machine: {why}"
            ));
        }
        crate::output::println(&serde_json::to_string_pretty(&e)?);
    } else {
        let mut text = format!(
            "What each service costs on {host} (last {} days)\n",
            args.days
        );
        text.push_str(&render::text(&e, unrecordable.as_deref()));
        if e.is_empty() && !config.services.enabled {
            text.push_str("[services] enabled = false in the config: the daemon records no CPU time per service\n");
        }
        crate::output::print(&text);
    }
    Ok(ExitCode::SUCCESS)
}
