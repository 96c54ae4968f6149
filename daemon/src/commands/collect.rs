//! `wattson collect`: the fleet collector. Subscribes to every host's state on the broker in
//! `[mqtt]` and stores each sample once, with its host, in the SQLite database
//! (`[storage] path` or `--db`), so `wattson report` and `status` can compare the machines of
//! a house; or, with `--jsonl`, appends JSON lines (one object per sample: `host`, `ts` (UTC
//! ms), `source`, `metric`, `channel`, `value` in the metric's unit).

use anyhow::Context as _;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;
use wattson_collectors::{Sample, SourceId};

use crate::cli::CollectArgs;
use crate::sources::FleetSink;
use crate::sources::fleet::{self, CollectorOptions, Committed, FleetStats, SinkError};

/// Stores each host's samples and commits them before the message is acknowledged, so a
/// collector killed mid-way loses nothing the broker kept. The store is opened without
/// timed flushes of its own (see `run`), so a commit's result covers this batch. A batch
/// whose commit failed stays with the writer, which retries it (`retry_interval`); the
/// message is delivered again too, and the store drops the second copy as not newer.
struct StoreSink {
    store: crate::store::StoreHandle,
    /// What each host's held sources were last declared with, so that a state repeating
    /// it queues nothing.
    held: std::collections::HashMap<(String, SourceId), i64>,
}

impl FleetSink for StoreSink {
    fn store(&mut self, host: &str, batch: Vec<Sample>) -> Result<Committed, SinkError> {
        // While the writer holds earlier batches for its own retries (a full disk), a
        // message is not added to them: the broker keeps it and delivers it again, and a
        // second copy would only take the writer's memory for held samples.
        let health = self.store.health();
        if let Some(failing) = health.failing.filter(|_| health.held_samples > 0) {
            return Err(SinkError(format!(
                "{} (the store is retrying what it holds; {} attempts so far)",
                failing.error, failing.attempts
            )));
        }
        // The store's errors name the database; SQLite's reason is their source.
        let why =
            |e: &crate::store::StoreError| SinkError(wattson_collectors::ErrorChain(e).to_string());
        self.store
            .insert_for_host(host, batch)
            .map_err(|e| why(&e))?;
        let flushed = self.store.flush().map_err(|e| why(&e))?;
        Ok(Committed {
            late: flushed.stale,
        })
    }

    fn held_means(&mut self, host: &str, source: &SourceId, max_ms: i64) -> Result<(), SinkError> {
        let key = (host.to_owned(), source.clone());
        if self.held.get(&key) == Some(&max_ms) {
            return Ok(());
        }
        self.store
            .declare_readings_for_host(
                host,
                source,
                crate::store::integrate::Readings::Mean,
                Some(max_ms),
            )
            .map_err(|e| SinkError(wattson_collectors::ErrorChain(&e).to_string()))?;
        self.held.insert(key, max_ms);
        Ok(())
    }

    fn known_hosts(&mut self) -> Vec<String> {
        let hosts = self.store.query(|s| {
            s.series()
                .map(|all| all.into_iter().map(|s| s.host).collect::<BTreeSet<_>>())
        });
        match hosts {
            Ok(Ok(hosts)) => hosts.into_iter().collect(),
            Ok(Err(e)) | Err(e) => {
                tracing::warn!("reading the hosts already stored: {e}");
                Vec::new()
            }
        }
    }
}

/// Writes samples as JSON lines.
struct JsonLines<W: Write + Send>(W);

impl<W: Write + Send> FleetSink for JsonLines<W> {
    fn store(&mut self, host: &str, batch: Vec<Sample>) -> Result<Committed, SinkError> {
        let failed = |e: std::io::Error| {
            SinkError(format!(
                "writing collected samples: {}",
                wattson_collectors::ErrorChain(&e)
            ))
        };
        for s in batch {
            let line = serde_json::json!({
                "host": host, "ts": s.ts_ms, "source": s.source,
                "metric": s.metric.as_str(), "channel": s.channel, "value": s.value,
            });
            writeln!(self.0, "{line}").map_err(failed)?;
        }
        self.0.flush().map_err(failed)?;
        Ok(Committed::default())
    }
}

#[allow(
    clippy::disallowed_methods,
    reason = "the --jsonl output file: never a database"
)]
pub fn run(args: &CollectArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    // Its lock file says so: `wattson status` then does not look for a daemon's socket.
    crate::store::lock::serve_no_socket();
    let cfg = super::load_config(config)?;
    // What `config check` checks beyond the file (the broker's URL, password file or
    // credential, TLS files), so that collect refuses with exit 78 what check refuses.
    for warning in crate::runtime::preflight::preflight(&cfg)? {
        tracing::warn!("{warning}");
    }
    let Some(mqtt) = cfg.mqtt.clone() else {
        return Err(crate::runtime::preflight::unusable(
            &cfg,
            "mqtt".to_owned(),
            "wattson collect needs an [mqtt] section with the broker's url".to_owned(),
        )
        .into());
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
            // Only the collector's own flushes commit, one per message, so a failed
            // commit is known to be that message's.
            let options = crate::store::StoreOptions {
                flush_interval: std::time::Duration::from_secs(24 * 3600),
                max_batch_samples: usize::MAX,
                // The configured intervals are of the meters this config reads; every host
                // collected here (this config's own host name among them) states its
                // publish interval in its states, or has its spacing learned.
                spacing_ms: std::collections::HashMap::new(),
                // Likewise how readings stand: each host's states declare it.
                readings: std::collections::HashMap::new(),
                // A message not committed is not acknowledged: the broker delivers it again.
                hold_failed: false,
                ..crate::sources::wiring::store_options(&cfg)
            };
            let (handle, thread) = crate::store::StoreHandle::spawn(&db, options)?;
            tracing::info!("collecting every host's samples into {}", db.display());
            store_thread = Some((handle.clone(), thread));
            Box::new(StoreSink {
                store: handle,
                held: std::collections::HashMap::new(),
            })
        }
    };
    // Two workers: the sink's commits block one (`block_in_place`) while the MQTT driver
    // keeps the connection alive on the other.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let stats = FleetStats::default();
    let mut signals = {
        let _rt = rt.enter();
        crate::runtime::signals::Signals::stop()
            .context("installing the SIGINT and SIGTERM handlers")?
    };
    rt.block_on(async {
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        tokio::spawn(async move {
            signals.stopped().await;
            stop.cancel();
        });
        let opts = CollectorOptions {
            client_id,
            max_hosts: args.max_hosts as usize,
        };
        fleet::run(&mqtt, &opts, sink.as_mut(), &stats, cancel).await
    })?;
    drop(sink);
    if let Some((handle, thread)) = store_thread {
        handle.close().context("flushing the database")?;
        let _ = thread.join();
    }
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    tracing::info!(
        "collector stopped: {} messages stored, {} duplicates, {} after a later state of their host ({} samples not stored), {} empty (no samples), {} malformed, {} oversized, {} from hosts beyond --max-hosts, {} samples of series beyond the per-host limit, {} failed commits (left to the broker to deliver again)",
        load(&stats.stored),
        load(&stats.duplicates),
        load(&stats.late),
        load(&stats.late_samples),
        load(&stats.empty),
        load(&stats.malformed),
        load(&stats.connection.oversized),
        load(&stats.refused_hosts),
        load(&stats.refused_series),
        load(&stats.not_stored)
    );
    Ok(ExitCode::SUCCESS)
}
