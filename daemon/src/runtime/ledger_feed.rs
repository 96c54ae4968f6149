//! The ledger's figures for the MQTT state and the HTTP endpoints, computed on a thread of
//! their own and handed to the publisher and the HTTP server through a watch channel.
//!
//! Store queries block (they run on the store's writer thread, behind its flushes), so they
//! never run on the async runtime that drives MQTT, HTTP, the plug subscriptions and the
//! systemd watchdog: a slow store then delays only these figures, which are served as they
//! last were. Every `period` (the MQTT publish interval), and when an HTTP request asks
//! ([`Refresher::refresh`], at most once per [`MIN_REFRESH`]), the feed reads today's, this
//! month's and all-time energy and cost, the annual projection, the idle-power regression
//! headline (at most once a minute) and the live mode and meter counters.

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wattson_collectors::SourceId;
use wattson_collectors::source::channel;

use tokio::sync::watch;
use wattson_collectors::Metric;

use crate::analysis::tariff::{PriceSource, Tariff};
use crate::config::Config;
use crate::ledger::costs::{self, PeriodCost, RunningTotal};
use crate::live::LiveState;
use crate::publish::http::Refresher;
use crate::publish::mqtt::StateExtras;
use crate::publish::mqtt::state::{MeterCounters, ServiceState};
use crate::store::StoreHandle;
use crate::tariff::store::Kind;

/// How often the idle-power regression headline is read.
const REGRESSION_EVERY: Duration = Duration::from_secs(60);

/// Requests refresh the figures at most this often; more frequent ones get the last ones.
pub const MIN_REFRESH: Duration = Duration::from_millis(500);

/// What the feed's thread is told.
#[derive(Debug)]
enum FeedMessage {
    Refresh,
    Stop,
}

/// A running feed; stops when dropped.
#[derive(Debug)]
pub struct LedgerFeed {
    control: mpsc::Sender<FeedMessage>,
    thread: Option<JoinHandle<()>>,
}

impl LedgerFeed {
    /// A handle that asks for fresh figures (the HTTP server's); the watch channel then
    /// changes (with the same figures when the last read is younger than [`MIN_REFRESH`]).
    pub fn refresher(&self) -> Refresher {
        let control = self.control.clone();
        Refresher::new(move || {
            let _ = control.send(FeedMessage::Refresh);
        })
    }
}

impl Drop for LedgerFeed {
    fn drop(&mut self) {
        let _ = self.control.send(FeedMessage::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What one store read says.
#[derive(Debug, Clone, Default)]
struct StoreFigures {
    summary: Option<costs::CostSummary>,
    newest_ms: Option<i64>,
    /// The price now (currency per kWh) and its source.
    price_now: Option<(f64, String)>,
}

/// The configured tariff with the store's price series, loaded again only when their
/// revision changed; a change resets the running total, whose closed hours were priced by
/// the old slots.
fn with_series(
    s: &crate::store::Store,
    base: Tariff,
    cached: &mut Option<((i64, i64), Tariff)>,
    running: &mut RunningTotal,
) -> Tariff {
    let Ok(rev) = crate::tariff::store::revision(s) else {
        return cached.as_ref().map_or(base, |c| c.1.clone());
    };
    // A live price's open slot holds until "now plus an hour" as loaded: reload hourly.
    let hour = chrono::Utc::now().timestamp_millis() / crate::store::HOUR_MS;
    let rev = (rev.0 * 1_000_003 + rev.1, hour);
    if let Some((r, t)) = cached.as_ref()
        && *r == rev
    {
        return t.clone();
    }
    let now_ms = chrono::Utc::now().timestamp_millis();
    let t = match crate::tariff::store::applied(s, Kind::Price, base.currency(), now_ms) {
        Ok(set) => base.with_series(set),
        Err(e) => {
            tracing::warn!(
                "reading the price series: {}",
                wattson_collectors::ErrorChain(&e)
            );
            base
        }
    };
    if cached.as_ref().is_some_and(|c| c.0.0 != rev.0) {
        *running = RunningTotal::default();
    }
    *cached = Some((rev, t.clone()));
    t
}

/// Start the feed for `config`'s wall source, reading every `period` (`None`: only when
/// asked); the receiver always holds the newest figures.
pub fn spawn(
    config: &Config,
    live: Arc<LiveState>,
    store: StoreHandle,
    period: Option<Duration>,
) -> std::io::Result<(watch::Receiver<StateExtras>, LedgerFeed)> {
    let tariff = costs::tariff(&config.tariff)
        .map_err(|e| tracing::warn!("no costs in the MQTT state: {e:#}"))
        .ok();
    let primary = crate::ledger::PrimaryPower::from_config(config);
    let wall = primary.wall().cloned();
    let accuracy = wall.as_ref().and_then(|w| costs::accuracy_of(config, w));
    let host = config.host.name.clone();
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let base = StateExtras {
        currency: config.tariff.currency.clone(),
        mode_options: (0..=cpus)
            .map(|n| crate::analysis::modes::level_name(n as u32))
            .collect(),
        primary,
        ..StateExtras::default()
    };
    let (tx, rx) = watch::channel(base.clone());
    let (control_tx, control_rx) = mpsc::channel::<FeedMessage>();
    let thread = std::thread::Builder::new()
        .name("wattson-ledger".to_owned())
        .spawn(move || {
            let mut running = RunningTotal::default();
            let mut regression: (Option<Instant>, Option<crate::sweep::regression::Check>) =
                (None, None);
            let mut last_energy: Option<f64> = None;
            let mut services: (Option<Instant>, ServiceStates) = (None, ServiceStates::default());
            // The tariff with the database's price series, and their revision: reloaded
            // (and the running total recounted) when an import or the live price changes
            // them.
            let mut priced: Option<((i64, i64), crate::analysis::tariff::Tariff)> = None;
            loop {
                let mut extras = base.clone();
                if let (Some(t), Some(source)) = (&tariff, &wall) {
                    let (t, source, host2) = (t.clone(), source.clone(), host.clone());
                    let mut r = std::mem::take(&mut running);
                    let mut p = priced.take();
                    let got = store.query(move |s| {
                        let t = with_series(s, t, &mut p, &mut r);
                        let mut figures = read_figures(s, &host2, &source, accuracy, &t, &mut r);
                        let now_ms = chrono::Utc::now().timestamp_millis();
                        let (price, _, from) = t.priced_segment(now_ms).unwrap_or((
                            f64::NAN,
                            now_ms,
                            PriceSource::Configured,
                        ));
                        figures.price_now = Some((price, t.source_name(from)));
                        (figures, r, p)
                    });
                    if let Ok((figures, r, p)) = got {
                        running = r;
                        priced = p;
                        apply(&mut extras, &figures, &mut last_energy);
                    }
                }
                if regression
                    .0
                    .is_none_or(|at| at.elapsed() >= REGRESSION_EVERY)
                {
                    let host = host.clone();
                    regression = (
                        Some(Instant::now()),
                        store
                            .query(move |s| {
                                crate::sweep::regression::latest(s, Some(host.as_str()))
                                    .map_err(|e| {
                                        tracing::warn!(
                                            "reading idle regression checks: {}",
                                            wattson_collectors::ErrorChain(&e)
                                        );
                                    })
                                    .ok()
                                    .and_then(|c| crate::sweep::regression::headline(&c).cloned())
                            })
                            .ok()
                            .flatten(),
                    );
                }
                extras.idle_regression.clone_from(&regression.1);
                if let Some(t) = &tariff
                    && services.0.is_none_or(|at| at.elapsed() >= REGRESSION_EVERY)
                {
                    let (t, host) = (t.clone(), host.clone());
                    services = (
                        Some(Instant::now()),
                        store
                            .query(move |s| service_states(s, &host, &t))
                            .unwrap_or_default(),
                    );
                }
                extras.services.clone_from(&services.1.0);
                extras.wattson_itself.clone_from(&services.1.1);
                live_figures(&mut extras, &live, wall.as_ref(), tariff.as_ref(), cpus);
                tx.send_replace(extras);
                let read_at = Instant::now();
                if !wait_for_next(&control_rx, period, read_at, &tx) {
                    break;
                }
            }
        })?;
    Ok((
        rx,
        LedgerFeed {
            control: control_tx,
            thread: Some(thread),
        },
    ))
}

/// The costliest groups and wattson itself, as published.
type ServiceStates = (Vec<ServiceState>, Option<ServiceState>);

/// On the store's thread: what each service costs over the last 7 days, for the state.
fn service_states(
    s: &crate::store::Store,
    host: &str,
    tariff: &crate::analysis::tariff::Tariff,
) -> ServiceStates {
    use crate::store::{DAY_MS, HOUR_MS, floor_to};
    let to = floor_to(chrono::Utc::now().timestamp_millis(), HOUR_MS) + HOUR_MS;
    let e = match crate::services::estimate(s, host, tariff, to - 7 * DAY_MS, to) {
        Ok(e) => e,
        Err(e) => {
            tracing::debug!("services for the MQTT state: {e:#}");
            return ServiceStates::default();
        }
    };
    let state = |g: &crate::services::estimate::GroupFigure| ServiceState {
        kind: g.kind.clone(),
        name: g.name.clone(),
        cpu_share: (g.cpu_share * 1000.0).round() / 10.0,
        watts: g.cost.as_ref().map(|c| c.watts),
        watts_ci95: g.cost.as_ref().and_then(|c| c.watts_ci95),
        cost_per_year: g.cost.as_ref().map(|c| c.cost_per_year),
    };
    (
        e.groups
            .iter()
            .take(crate::services::render::MQTT_GROUPS)
            .map(state)
            .collect(),
        e.wattson.as_ref().map(state),
    )
}

/// Waits until the next read is due: `period` after `read_at`, or a refresh request at least
/// [`MIN_REFRESH`] after it (earlier ones are answered with the figures as they are). `false`
/// when the feed is to stop.
fn wait_for_next(
    control: &mpsc::Receiver<FeedMessage>,
    period: Option<Duration>,
    read_at: Instant,
    tx: &watch::Sender<StateExtras>,
) -> bool {
    loop {
        let message = match period {
            Some(p) => control.recv_timeout(p.saturating_sub(read_at.elapsed())),
            None => control.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match message {
            Err(RecvTimeoutError::Timeout) => return true,
            Ok(FeedMessage::Stop) | Err(RecvTimeoutError::Disconnected) => return false,
            Ok(FeedMessage::Refresh) if read_at.elapsed() >= MIN_REFRESH => return true,
            Ok(FeedMessage::Refresh) => tx.send_modify(|_| {}),
        }
    }
}

/// On the store's thread: the summary (with the running total) and the newest sample.
fn read_figures(
    s: &crate::store::Store,
    host: &str,
    source: &SourceId,
    accuracy: Option<wattson_collectors::meter::Accuracy>,
    tariff: &crate::analysis::tariff::Tariff,
    running: &mut RunningTotal,
) -> StoreFigures {
    let now = chrono::Utc::now();
    let total = running
        .refresh(s, host, source, tariff, now.timestamp_millis())
        .map_err(|e| tracing::debug!("ledger total: {e:#}"))
        .ok()
        .map(|t| PeriodCost {
            from_ms: 0,
            to_ms: now.timestamp_millis(),
            kwh: t.kwh,
            cost: t.cost,
            covered_hours: t.covered_hours,
            mean_watts: None,
            gaps: 0,
            approximate_hours: 0,
        });
    let summary = costs::summary_with_total(s, host, source, accuracy, tariff, now, total)
        .map_err(|e| tracing::debug!("ledger summary: {e:#}"))
        .ok();
    let newest_ms = crate::ledger::energy::power_series(s, host, source)
        .ok()
        .flatten()
        .and_then(|series| s.newest_ms(&series).ok().flatten());
    StoreFigures {
        summary,
        newest_ms,
        price_now: None,
    }
}

/// The store's figures into the state; the published energy never goes down in a run.
fn apply(extras: &mut StateExtras, f: &StoreFigures, last_energy: &mut Option<f64>) {
    extras.price_now.clone_from(&f.price_now);
    let Some(s) = &f.summary else { return };
    let energy = last_energy.map_or(s.total.kwh, |l| l.max(s.total.kwh));
    *last_energy = Some(energy);
    extras.energy_total_kwh = Some(energy);
    extras.energy_ts_ms = f.newest_ms;
    extras.energy_today_kwh = Some(s.today.kwh);
    extras.cost_today = Some(s.today.cost);
    extras.cost_month = Some(s.month.cost);
    extras.cost_total = Some(s.total.cost);
    extras.annual_projection = s.annual_cost;
}

/// Mode and meter counters from the live view, and, until the store holds enough history
/// for a projection, a projection of the current draw (so the entity exists from the start).
fn live_figures(
    extras: &mut StateExtras,
    live: &LiveState,
    wall: Option<&SourceId>,
    tariff: Option<&crate::analysis::tariff::Tariff>,
    cpus: usize,
) {
    let latest = live.latest();
    extras.mode = latest
        .iter()
        .find(|r| r.metric == Metric::CpuBusy && r.channel == channel::ALL)
        .map(|r| {
            let busy = r.value * cpus as f64;
            crate::analysis::modes::level_name(busy.round().clamp(0.0, cpus as f64) as u32)
        });
    extras.meter_counters = live
        .counters()
        .into_iter()
        .map(|c| MeterCounters {
            id: c.id,
            good: c.good,
            crc_errors: c.crc_errors,
            timeouts: c.timeouts,
            implausible: c.implausible,
        })
        .collect();
    if extras.annual_projection.is_none()
        && let (Some(source), Some(t)) = (wall, tariff)
        && let Some(w) = latest
            .iter()
            .find(|r| r.source == *source && r.metric == Metric::Power && r.channel.is_empty())
    {
        extras.annual_projection =
            crate::analysis::cost::annual_cost(w.value, None, t, chrono::Utc::now().date_naive())
                .ok()
                .map(|f| f.cost);
    }
}
