//! The daemon's lifecycle (`wattson run`): open the store, start the collectors, tell
//! systemd we are ready, serve until SIGTERM/SIGINT, reload on SIGHUP, then drain in order:
//! collectors, store flush, outputs. The sampling thread's start and stop are
//! `sampler_thread`'s, the systemd watchdog's pings `watchdog`'s.

use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;
use wattson_collectors::SourceId;

use tokio_util::sync::CancellationToken;

use super::RuntimeError;
use super::reload::reload;
use super::sampler::{self, Control, Heartbeat, Scheduled};
use super::signals::{Asked, Signals};
use crate::config::Config;
use crate::live::LiveState;
use crate::live::health::Health;
use crate::runtime::notify::Notifier;
use crate::sources::wiring::{
    build_collectors, estimate_collector, plug_collectors, store_options,
};
use crate::store::{StoreError, StoreHandle};

mod sampler_thread;
mod watchdog;

pub use sampler_thread::DRAIN_TIMEOUT;
use sampler_thread::SamplerThread;

/// What `wattson run` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stop after this long instead of waiting for a signal.
    pub duration: Option<Duration>,
    /// Path of the config file to re-read on SIGHUP (`None`: the usual lookup).
    pub config_path: Option<std::path::PathBuf>,
}

/// Run the daemon until a stop signal (or `opts.duration`). Returns when everything has
/// drained.
pub fn run(config: &Config, opts: &RunOptions) -> Result<(), RuntimeError> {
    super::heap::one_arena();
    let notifier = Notifier::from_env();
    let path = &config.storage.path;
    let (store, store_thread) = open_store(config)?;
    // Bound now, so that a port in use stops the start with its reason.
    let http_listener = config
        .http
        .as_ref()
        .map(|h| crate::publish::http::bind(h.listen))
        .transpose()?;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RuntimeError::AsyncRuntime)?;
    // `cancel` ends the watchdog with the serving loop; `outputs` ends the publisher and the
    // plug subscriptions last.
    let cancel = CancellationToken::new();
    let outputs = CancellationToken::new();
    let collectors = collectors(config, &rt, &outputs)?;
    let sources: Vec<SourceId> = collectors.iter().map(|c| c.source().clone()).collect();
    let names = sources
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let live = Arc::new(LiveState::default());
    live.hold_readings_of(
        config
            .plugs
            .iter()
            .filter_map(|p| Some((SourceId::meter(&p.id), p.held_ms()?))),
    );
    if let Some(wall) = crate::ledger::PrimaryPower::from_config(config).wall() {
        live.count_energy_of(wall.clone(), config.storage.flush_interval);
    }
    let heartbeat: Heartbeat = Arc::new(AtomicI64::new(sampler::now_ms()));
    let (control_tx, control_rx) = mpsc::channel::<Control>();
    let health = Health::for_daemon(config, &heartbeat, &store, &live);
    let feed = start_ledger_feed(config, &live, &store)?;
    let remote_write = crate::publish::remote_write::Stats::default();
    // Bound before READY=1, so a unit ordered after this one finds them.
    let http = match (http_listener, &feed) {
        (Some(listener), Some(feed)) => {
            let _in_runtime = rt.enter();
            Some(start_http(
                config,
                listener,
                (&live, &health, &remote_write),
                feed,
                &cancel,
            )?)
        }
        _ => None,
    };
    let control = start_control(
        config,
        &rt,
        &live,
        &store,
        &sources,
        http.as_ref().map(|h| h.addr),
        &cancel,
    );
    let sampler = SamplerThread::spawn(config, collectors, control_rx, &live, &heartbeat, &store)?;
    tracing::info!("collecting: {names}");
    notifier.ready();
    notifier.status(&format!("collecting {names} into {}", path.display()));

    let result = rt.block_on(serve(
        config,
        opts,
        &notifier,
        &control_tx,
        &health,
        &cancel,
        &outputs,
        &live,
        &store,
        feed,
        remote_write,
    ));

    // Drain in order: the control socket (its clients are told), collectors (the sampler
    // flushes its buffer), the store, then outputs.
    if let Some(control) = control {
        rt.block_on(control.stop());
    }
    if let Some(http) = http {
        rt.block_on(http.stop());
    }
    notifier.stopping();
    let stuck = sampler.stop(&control_tx);
    let board = store.clone();
    close_store(store, store_thread)?;
    // Outputs last: the publisher says `offline` and disconnects.
    outputs.cancel();
    if let Some(publisher) = result? {
        rt.block_on(async {
            if tokio::time::timeout(Duration::from_secs(2), publisher.join)
                .await
                .is_err()
            {
                tracing::warn!("the MQTT publisher did not stop within 2 s");
            }
        });
    }
    if let Some(what) = stuck {
        return Err(RuntimeError::SamplerStuck(what));
    }
    // A run that lost samples to the store does not end as a success, even after the store
    // recovered: systemd shows the unit failed, with this line.
    let losses = board.health().losses();
    if !losses.is_empty() {
        return Err(crate::store::StoreError::Lost {
            path: path.clone(),
            detail: format!("stopped after storage faults: {}", losses.join("; ")),
        }
        .into());
    }
    tracing::info!("stopped");
    Ok(())
}

/// The store at `storage.path` (its directory made), its writer thread started and the
/// downtime since the last run recorded as gaps.
fn open_store(
    config: &Config,
) -> Result<(StoreHandle, JoinHandle<Result<(), StoreError>>), RuntimeError> {
    use std::os::unix::fs::DirBuilderExt as _;
    let path = &config.storage.path;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // Made writable by its owner alone, as the database's directory must be
        // (`store::directory`), whatever the umask.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|source| RuntimeError::DatabaseDir {
                dir: dir.to_owned(),
                source,
            })?;
    }
    // Its errors name the database (and the other writer, or why it is read-only).
    let (store, store_thread) = StoreHandle::spawn(path, store_options(config))?;
    tracing::info!("storing into {}", path.display());
    let root = wattson_collectors::SysRoot::new(&config.host.sysfs, &config.host.procfs);
    let clock = wattson_collectors::kernel_clock::read(&root)
        .inspect_err(|e| {
            tracing::debug!("the kernel's clocks: {e}; time asleep or off not recorded");
        })
        .ok();
    super::downtime::record(&store, &config.host.name, clock.as_ref());
    crate::ledger::meter_protocols::record_at_start(&store, config);
    Ok((store, store_thread))
}

/// Flushes and closes the store, then waits for its writer thread.
fn close_store(
    store: StoreHandle,
    store_thread: JoinHandle<Result<(), StoreError>>,
) -> Result<(), RuntimeError> {
    let _stats = store
        .close()
        .map_err(|e| RuntimeError::Flush(Box::new(e)))?;
    match store_thread.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!("database writer: {}", wattson_collectors::ErrorChain(&e)),
        Err(_) => tracing::error!("the database writer panicked"),
    }
    Ok(())
}

/// Every configured collector: meters, CPU, power, UPSes, services, the estimate, and the
/// smart plugs (subscribed on `rt`, until `outputs`).
fn collectors(
    config: &Config,
    rt: &tokio::runtime::Runtime,
    outputs: &CancellationToken,
) -> Result<Vec<Scheduled>, RuntimeError> {
    // A many-core machine's CPU files are held open between polls (one `pread` each).
    if let Some(limit) = wattson_collectors::cpu::raise_open_file_limit() {
        tracing::debug!("open-file limit: {limit}");
    }
    let mut collectors = build_collectors(config)?;
    collectors.extend(estimate_collector(config));
    {
        let _in_runtime = rt.enter();
        collectors.extend(plug_collectors(config, outputs)?);
    }
    let collectors: Vec<Scheduled> = collectors.into_iter().map(Scheduled::from).collect();
    if collectors.is_empty() {
        tracing::warn!("nothing to collect: no [[meter]] configured and [cpu] disabled");
    }
    Ok(collectors)
}

/// Serve `[http]` on `listener` until `cancel`; called within the runtime.
fn start_http(
    config: &Config,
    listener: std::net::TcpListener,
    (live, health, remote_write): (
        &Arc<LiveState>,
        &Health,
        &crate::publish::remote_write::Stats,
    ),
    (extras, feed): &LedgerFeedParts,
    cancel: &CancellationToken,
) -> Result<crate::publish::http::HttpHandle, RuntimeError> {
    let ctx = crate::publish::http::HttpContext {
        config: config.clone(),
        live: live.clone(),
        health: health.clone(),
        extras: extras.clone(),
        refresher: feed.refresher(),
        started_ms: sampler::now_ms(),
        stale_after: stale_after(config),
        remote_write: remote_write.clone(),
    };
    crate::publish::http::start(ctx, listener, cancel.child_token())
        .map_err(RuntimeError::ServeHttp)
}

/// The ledger's figures for MQTT (read every publish interval) and HTTP (read when a request
/// asks), on a thread of their own: the runtime never waits on the store. `None` with
/// neither configured.
fn start_ledger_feed(
    config: &Config,
    live: &Arc<LiveState>,
    store: &StoreHandle,
) -> Result<Option<LedgerFeedParts>, RuntimeError> {
    if config.mqtt.is_none() && config.http.is_none() {
        return Ok(None);
    }
    let parts = super::ledger_feed::spawn(config, live.clone(), store.clone())
        .map_err(|e| RuntimeError::LedgerFeed(Box::new(e)))?;
    // Each MQTT publish asks for figures that count the pass which began it.
    let refresher = parts.1.refresher();
    live.before_publish(move || refresher.refresh());
    Ok(Some(parts))
}

type LedgerFeedParts = (
    tokio::sync::watch::Receiver<crate::publish::mqtt::StateExtras>,
    super::ledger_feed::LedgerFeed,
);

/// How old a reading may be before `/metrics` and the live page leave it out: three of the
/// longest interval any source is polled at, at least 3 s.
fn stale_after(config: &Config) -> Duration {
    let power = [config.power.interval]
        .into_iter()
        .chain(config.power.ipmi.then_some(config.power.ipmi_interval));
    config
        .meters
        .iter()
        .map(|m| m.interval)
        .chain(config.ups.iter().map(|u| u.interval))
        .chain(power)
        .chain(std::iter::once(config.cpu.interval))
        .max()
        .unwrap_or(Duration::from_secs(1))
        .saturating_mul(3)
        .max(Duration::from_secs(3))
}

/// Serve the control socket (see [`crate::control`]) until `cancel`. A socket that cannot be
/// bound is logged and the daemon goes on without it.
fn start_control(
    config: &Config,
    rt: &tokio::runtime::Runtime,
    live: &Arc<LiveState>,
    store: &StoreHandle,
    sources: &[SourceId],
    http: Option<std::net::SocketAddr>,
    cancel: &CancellationToken,
) -> Option<crate::control::server::ControlHandle> {
    let _in_runtime = rt.enter();
    let ctx = crate::control::server::ControlContext {
        config: config.clone(),
        live: live.clone(),
        store: store.clone(),
        sources: sources.to_vec(),
        http,
    };
    crate::control::server::start(ctx, cancel.child_token())
        .map_err(|e| tracing::error!("{}", wattson_collectors::ErrorChain(&e)))
        .ok()
}

#[allow(clippy::too_many_arguments)]
async fn serve(
    config: &Config,
    opts: &RunOptions,
    notifier: &Notifier,
    control: &mpsc::Sender<Control>,
    health: &Health,
    cancel: &CancellationToken,
    outputs: &CancellationToken,
    live: &Arc<LiveState>,
    store: &StoreHandle,
    feed: Option<LedgerFeedParts>,
    remote_write: crate::publish::remote_write::Stats,
) -> Result<Option<crate::publish::mqtt::publisher::PublisherHandle>, RuntimeError> {
    let publisher = match (&config.mqtt, &feed) {
        (Some(mqtt), Some((extras, _))) => Some(
            crate::publish::mqtt::Publisher::spawn(
                mqtt.clone(),
                config.host.name.clone(),
                live.clone(),
                extras.clone(),
                outputs.child_token(),
            )
            .map_err(RuntimeError::Publisher)?,
        ),
        _ => None,
    };
    // The live price of [tariff] price_topic, stored as slots as it arrives.
    let _price = match &config.mqtt {
        Some(mqtt) => crate::sources::price_topic::spawn(
            mqtt,
            &config.tariff,
            store.clone(),
            cancel.child_token(),
        )
        .map_err(RuntimeError::PriceTopic)?,
        None => None,
    };
    let feed = feed.map(|(_, f)| f);
    let mut signals = Signals::stop_or_reload().map_err(RuntimeError::Signals)?;
    let mut current = config.clone();
    let watchdog_task = watchdog::spawn(health, cancel);
    let heap = crate::runtime::heap::spawn(cancel.child_token(), store.clone());
    let wakeups = super::wakeups::spawn(config, store.clone(), cancel.child_token());
    let _refit = super::calibration_refit::spawn(config, store);
    let sender = match &config.prometheus {
        Some(p) => Some(
            crate::publish::remote_write::spawn(
                p,
                store.clone(),
                crate::ledger::PrimaryPower::from_config(config)
                    .wall()
                    .cloned(),
                remote_write,
                cancel.child_token(),
            )
            .map_err(RuntimeError::RemoteWrite)?,
        ),
        None => None,
    };
    let disks = super::disks::spawn(config, store, &cancel.child_token());
    let deadline = async {
        match opts.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            asked = signals.recv() => match asked {
                Asked::Stop(_) => { tracing::info!("{}: stopping", asked.name()); break; }
                Asked::Reload => reload(&mut current, opts, notifier, control),
            },
            () = &mut deadline => { tracing::info!("run duration reached: stopping"); break; }
        }
    }
    cancel.cancel();
    if let Some(t) = watchdog_task {
        let _ = t.await;
    }
    let _ = heap.await;
    if let Some(w) = wakeups {
        let _ = w.await;
    }
    if let Some(s) = sender {
        let _ = s.await;
    }
    if let Some(d) = disks {
        let _ = d.await;
    }
    // The feed stops (and joins) here; a query still running finishes on the store's own
    // thread first, so run it off the runtime.
    if let Some(f) = feed {
        let _ = tokio::task::spawn_blocking(move || drop(f)).await;
    }
    Ok(publisher)
}
