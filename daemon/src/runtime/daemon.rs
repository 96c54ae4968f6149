//! The daemon's lifecycle (`wattson run`): open the store, start the collectors, tell
//! systemd we are ready, serve until SIGTERM/SIGINT, reload on SIGHUP, then drain in order:
//! collectors, store flush, outputs.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use wattson_collectors::SysRoot;
use wattson_collectors::cpu::CpuCollector;

use super::live::LiveState;
use super::sampler::{self, Control, Heartbeat, SampleSink, Scheduled};
use crate::config::Config;
use crate::notify::Notifier;
use crate::store::{StoreHandle, StoreOptions};

/// What `wattson run` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stop after this long instead of waiting for a signal.
    pub duration: Option<Duration>,
    /// Path of the config file to re-read on SIGHUP (`None`: the usual lookup).
    pub config_path: Option<std::path::PathBuf>,
}

/// The store as the sampler's sink.
struct StoreSink(StoreHandle);

impl SampleSink for StoreSink {
    fn samples(&mut self, batch: Vec<wattson_collectors::Sample>) {
        if let Err(e) = self.0.insert(batch) {
            tracing::warn!("samples not stored: {e}");
        }
    }

    fn gap(&mut self, source: &str, start_ms: i64, end_ms: i64, reason: &str) {
        if let Err(e) = self.0.record_gap(source, start_ms, end_ms, reason) {
            tracing::warn!("gap not recorded: {e}");
        }
    }
}

/// Build the collector set the config asks for. Sources that cannot work here are logged
/// once and left out; a meter that is unplugged at start is kept (it reconnects).
pub fn build_collectors(config: &Config) -> anyhow::Result<Vec<Scheduled>> {
    let root = SysRoot::new(&config.host.sysfs, &config.host.procfs);
    let mut out = Vec::new();
    if config.cpu.enabled {
        let cpu = CpuCollector::new(root.clone());
        for (part, state) in cpu.availability() {
            if let Err(why) = state {
                tracing::info!("cpu {part}: unavailable: {why}");
            }
        }
        out.push(Scheduled::new(Box::new(cpu), config.cpu.interval));
    }
    for (meter, interval) in crate::meters::build_collectors(&config.meters)? {
        out.push(Scheduled::new(Box::new(meter), interval));
    }
    Ok(out)
}

/// Store options from the config.
pub fn store_options(config: &Config) -> StoreOptions {
    let expected = config
        .meters
        .iter()
        .map(|m| m.interval)
        .chain(std::iter::once(config.cpu.interval))
        .min()
        .unwrap_or(Duration::from_secs(1));
    StoreOptions {
        host: config.host.name.clone(),
        raw_retention_ms: config.storage.raw_retention.as_millis() as i64,
        detail_retention_ms: config.storage.detail_retention.as_millis() as i64,
        expected_interval_ms: expected.as_millis() as i64,
        ..StoreOptions::default()
    }
}

/// Run the daemon until a stop signal (or `opts.duration`). Returns when everything has
/// drained.
pub fn run(config: &Config, opts: &RunOptions) -> anyhow::Result<()> {
    let notifier = Notifier::from_env();
    let path = &config.storage.path;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the database directory {}", dir.display()))?;
    }
    let (store, store_thread) = StoreHandle::spawn(path, store_options(config))
        .with_context(|| format!("opening the database {}", path.display()))?;
    tracing::info!("storing into {}", path.display());

    let collectors = build_collectors(config)?;
    if collectors.is_empty() {
        tracing::warn!("nothing to collect: no [[meter]] configured and [cpu] disabled");
    }
    let names: Vec<String> = collectors.iter().map(|c| c.name().to_owned()).collect();
    let live = Arc::new(LiveState::default());
    let heartbeat: Heartbeat = Arc::new(AtomicI64::new(sampler::now_ms()));
    let (control_tx, control_rx) = mpsc::channel::<Control>();
    let sampler_thread = {
        let live = live.clone();
        let heartbeat = heartbeat.clone();
        let sink = Box::new(StoreSink(store.clone()));
        let flush = config.storage.flush_interval;
        std::thread::Builder::new()
            .name("wattson-sampler".to_owned())
            .spawn(move || sampler::run(collectors, sink, &control_rx, flush, &live, &heartbeat))
            .context("starting the sampling thread")?
    };
    tracing::info!("collecting: {}", names.join(", "));
    notifier.ready();
    notifier.status(&format!(
        "collecting {} into {}",
        names.join(", "),
        path.display()
    ));

    let max_interval = config
        .meters
        .iter()
        .map(|m| m.interval)
        .chain(std::iter::once(config.cpu.interval))
        .max()
        .unwrap_or(Duration::from_secs(1));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let cancel = CancellationToken::new();
    let result = rt.block_on(serve(
        config,
        opts,
        &notifier,
        &control_tx,
        &heartbeat,
        max_interval,
        &cancel,
        &live,
        &store,
    ));

    // Drain in order: collectors (the sampler flushes its buffer), the store, then outputs.
    notifier.stopping();
    let _ = control_tx.send(Control::Stop);
    if sampler_thread.join().is_err() {
        tracing::error!("the sampling thread panicked");
    }
    let stats = store.close().context("flushing the database")?;
    match store_thread.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!("database writer: {e}"),
        Err(_) => tracing::error!("the database writer panicked"),
    }
    tracing::info!("stopped; last flush stored {} samples", stats.samples);
    cancel.cancel();
    result
}

#[allow(clippy::too_many_arguments)]
async fn serve(
    config: &Config,
    opts: &RunOptions,
    notifier: &Notifier,
    control: &mpsc::Sender<Control>,
    heartbeat: &Heartbeat,
    max_interval: Duration,
    cancel: &CancellationToken,
    _live: &Arc<LiveState>,
    _store: &StoreHandle,
) -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    let watchdog = crate::notify::watchdog_interval();
    let watchdog_task = watchdog.map(|interval| {
        let heartbeat = heartbeat.clone();
        let cancel = cancel.clone();
        let notifier = Notifier::from_env();
        // Healthy: the sampler completed a pass within three of its longest intervals.
        let stale_ms = (max_interval.as_millis() as i64 * 3).max(3000);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval / 2);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut warned = false;
            loop {
                tokio::select! {
                    () = cancel.cancelled() => break,
                    _ = tick.tick() => {
                        let age = sampler::now_ms() - heartbeat.load(Ordering::Relaxed);
                        if age <= stale_ms {
                            notifier.watchdog();
                            warned = false;
                        } else if !warned {
                            tracing::error!("sampling loop stalled for {age} ms: withholding watchdog pings");
                            warned = true;
                        }
                    }
                }
            }
        })
    });
    let deadline = async {
        match opts.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = term.recv() => { tracing::info!("SIGTERM: stopping"); break; }
            _ = int.recv() => { tracing::info!("SIGINT: stopping"); break; }
            () = &mut deadline => { tracing::info!("run duration reached: stopping"); break; }
            _ = hup.recv() => reload(config, opts, notifier, control),
        }
    }
    cancel.cancel();
    if let Some(t) = watchdog_task {
        let _ = t.await;
    }
    Ok(())
}

/// SIGHUP: re-read the config; replace the collectors; settings that need a restart are
/// named in a warning. A bad file leaves everything as it was.
fn reload(
    current: &Config,
    opts: &RunOptions,
    notifier: &Notifier,
    control: &mpsc::Sender<Control>,
) {
    notifier.reloading();
    let path = opts.config_path.clone().or_else(|| current.source.clone());
    let new = match Config::load(path.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("reload refused, keeping the running configuration: {e}");
            notifier.ready();
            return;
        }
    };
    if new.storage != current.storage || new.host != current.host {
        tracing::warn!("[host] and [storage] changes take effect after a restart");
    }
    match build_collectors(&new) {
        Ok(collectors) => {
            let _ = control.send(Control::Replace(collectors));
        }
        Err(e) => tracing::error!("reload refused, keeping the running collectors: {e:#}"),
    }
    notifier.ready();
}
