//! `wattson collect`: the fleet collector. Subscribes to every host's state on the broker in
//! `[mqtt]` and stores each sample once, with its host, in the SQLite database
//! (`[storage] path` or `--db`), so `wattson report` and `status` can compare the machines of
//! a house; or, with `--jsonl`, appends JSON lines (one object per sample: `host`, `ts` (UTC
//! ms), `source`, `metric`, `channel`, `value` in the metric's unit).

use anyhow::Context as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use tokio_util::sync::CancellationToken;
use wattson_collectors::Sample;

use crate::sources::FleetSink;
use crate::sources::fleet::{self, FleetStats};

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
}

/// Stores each host's samples; a message is acknowledged to the broker only after its
/// samples are committed, so a collector killed mid-way loses nothing the broker kept.
struct StoreSink(crate::store::StoreHandle);

impl FleetSink for StoreSink {
    fn samples(&mut self, host: &str, batch: Vec<Sample>) {
        if let Err(e) = self.0.insert_for_host(host, batch) {
            tracing::error!(
                "storing samples of {host}: {}",
                wattson_collectors::ErrorChain(&e)
            );
            return;
        }
        if let Err(e) = self.0.flush() {
            tracing::error!(
                "committing samples of {host}: {}",
                wattson_collectors::ErrorChain(&e)
            );
        }
    }
}

/// Writes samples as JSON lines.
struct JsonLines<W: Write + Send>(W);

impl<W: Write + Send> FleetSink for JsonLines<W> {
    fn samples(&mut self, host: &str, batch: Vec<Sample>) {
        for s in batch {
            let line = serde_json::json!({
                "host": host, "ts": s.ts_ms, "source": s.source,
                "metric": s.metric.as_str(), "channel": s.channel, "value": s.value,
            });
            if let Err(e) = writeln!(self.0, "{line}") {
                tracing::error!(
                    "writing collected samples: {}",
                    wattson_collectors::ErrorChain(&e)
                );
                return;
            }
        }
        let _ = self.0.flush();
    }
}

pub fn run(args: &CollectArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let cfg = super::load_config(config)?;
    let Some(mqtt) = cfg.mqtt.clone() else {
        anyhow::bail!("wattson collect needs an [mqtt] section with the broker's url");
    };
    let client_id = args
        .client_id
        .clone()
        .unwrap_or_else(|| format!("wattson-collect-{}", cfg.host.name));
    let mut store_thread = None;
    let mut sink: Box<dyn FleetSink> = match &args.jsonl {
        Some(path) if path.as_os_str() == "-" => Box::new(JsonLines(std::io::stdout())),
        Some(path) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?;
            Box::new(JsonLines(std::io::BufWriter::new(f)))
        }
        None => {
            let db = args.db.clone().unwrap_or_else(|| cfg.storage.path.clone());
            if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            // Its errors name the database (and the other writer, or why it is read-only).
            let (handle, thread) =
                crate::store::StoreHandle::spawn(&db, crate::runtime::daemon::store_options(&cfg))?;
            tracing::info!("collecting every host's samples into {}", db.display());
            store_thread = Some((handle.clone(), thread));
            Box::new(StoreSink(handle))
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let stats = FleetStats::default();
    rt.block_on(async {
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            stop.cancel();
        });
        #[cfg(unix)]
        {
            let stop = cancel.clone();
            if let Ok(mut term) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            {
                tokio::spawn(async move {
                    term.recv().await;
                    stop.cancel();
                });
            }
        }
        fleet::run(&mqtt, &client_id, sink.as_mut(), &stats, cancel).await
    })?;
    drop(sink);
    if let Some((handle, thread)) = store_thread {
        handle.close().context("flushing the database")?;
        let _ = thread.join();
    }
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    tracing::info!(
        "collector stopped: {} messages stored, {} duplicates, {} malformed",
        load(&stats.stored),
        load(&stats.duplicates),
        load(&stats.malformed)
    );
    Ok(ExitCode::SUCCESS)
}
