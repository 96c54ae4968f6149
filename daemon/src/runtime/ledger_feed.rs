//! The ledger's figures for the MQTT state and the HTTP endpoints, computed on the store's
//! writer thread ([`crate::store::routine`]) and handed to the publisher and the HTTP server
//! through a watch channel.
//!
//! Store queries block, so they never run on the async runtime that drives MQTT, HTTP, the
//! plug subscriptions and the systemd watchdog: a slow store then delays only these figures,
//! which are served as they last were. Before each MQTT publish (asked by the sampler right
//! after it handed the store the pass that began it, so the read shares that batch's
//! wake-up of the writer) and when an HTTP request asks ([`Refresher::refresh`], at most
//! once per [`MIN_REFRESH`]), the feed reads today's, this
//! month's and all-time energy and cost, the annual projection, the idle-power regression
//! headline (at most once a minute) and the live mode and meter counters.

use std::sync::Arc;
use std::time::{Duration, Instant};
use wattson_collectors::SourceId;
use wattson_collectors::source::channel;

use tokio::sync::watch;
use wattson_collectors::Metric;

use crate::calibration::running::RunningEstimate;
use crate::config::Config;
use crate::ledger::costs;
use crate::ledger::running::RunningPeriods;
use crate::live::LiveState;
use crate::publish::http::Refresher;
use crate::publish::mqtt::StateExtras;
use crate::publish::mqtt::state::{EstimatedPayload, MeterCounters, ServiceState};
use crate::store::{Routine, RoutineId, StoreHandle};
use crate::tariff::{PriceSource, Tariff};

mod figures;
mod sleep;

use figures::{PROJECTION_RETRY, Projection, apply, read_figures, with_series};

/// How often the idle-power regression headline is read.
const REGRESSION_EVERY: Duration = Duration::from_secs(60);

/// Requests refresh the figures at most this often; more frequent ones get the last ones.
pub const MIN_REFRESH: Duration = Duration::from_millis(500);

/// A running feed: a routine on the store's writer thread; stops when dropped.
#[derive(Debug)]
pub struct LedgerFeed {
    store: StoreHandle,
    routine: RoutineId,
}

impl LedgerFeed {
    /// A handle that asks for fresh figures (the HTTP server's); the watch channel then
    /// changes (with the same figures when the last read is younger than [`MIN_REFRESH`]).
    pub fn refresher(&self) -> Refresher {
        Refresher::new(self.store.clone(), self.routine)
    }
}

impl Drop for LedgerFeed {
    fn drop(&mut self) {
        self.store.remove_routine(self.routine);
    }
}

/// How often the figures are read unasked: the publisher and the HTTP server ask for them.
const UNASKED_PERIOD: Duration = Duration::from_secs(3600);

/// Start the feed for `config`'s wall source, reading when asked ([`Refresher::refresh`]:
/// before each MQTT publish, on HTTP requests) and hourly; the receiver always holds the
/// newest figures.
pub fn spawn(
    config: &Config,
    live: Arc<LiveState>,
    store: StoreHandle,
) -> Result<(watch::Receiver<StateExtras>, LedgerFeed), crate::store::StoreError> {
    let tariff = costs::tariff(&config.tariff)
        .map_err(|e| {
            tracing::warn!(
                "no costs in the MQTT state: {}",
                wattson_collectors::ErrorChain(&e)
            );
        })
        .ok();
    let primary = crate::ledger::PrimaryPower::from_config(config);
    let wall = primary.wall().cloned();
    let accuracy = wall.as_ref().and_then(|w| costs::accuracy_of(config, w));
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let base = StateExtras {
        currency: config.tariff.currency.clone(),
        mode_options: (0..=cpus)
            .map(|n| crate::analysis::modes::level_name(n as u32))
            .collect(),
        primary,
        ..StateExtras::default()
    };
    let base = StateExtras {
        standing_charge_annual: tariff
            .as_ref()
            .map(|t| t.standing_charge_per_day() * crate::ledger::price::HOURS_PER_YEAR / 24.0),
        ..base
    };
    let (tx, rx) = watch::channel(base.clone());
    let feed = Feed {
        tx,
        base,
        live,
        tariff,
        wall,
        accuracy,
        host: config.host.name.clone(),
        cpus,
        read_at: None,
        running: RunningPeriods::default(),
        projection: (None, None),
        regression: (None, None),
        last_energy: None,
        services: (None, ServiceStates::default()),
        wakeups: (None, None),
        disks: (
            None,
            config.disks.iter().map(|d| d.name.clone()).collect(),
            Vec::new(),
        ),
        priced: None,
        estimated: (None, RunningEstimate::default(), None),
        raw_retention_ms: i64::try_from(config.storage.raw_retention.as_millis())
            .unwrap_or(i64::MAX),
        sleep: (
            None,
            crate::report::sleep::gather::Settings::of(config, true, None),
            None,
        ),
    };
    let routine = store.add_routine(Box::new(feed), UNASKED_PERIOD)?;
    Ok((rx, LedgerFeed { store, routine }))
}

/// The feed's state between reads, on the store's writer thread.
struct Feed {
    tx: watch::Sender<StateExtras>,
    base: StateExtras,
    live: Arc<LiveState>,
    tariff: Option<Tariff>,
    wall: Option<SourceId>,
    accuracy: Option<wattson_collectors::meter::Accuracy>,
    host: String,
    cpus: usize,
    read_at: Option<Instant>,
    running: RunningPeriods,
    /// The annual projection and when it was computed: it rests on the last 7 days and a
    /// year of the tariff, so it is computed at most every [`PROJECTION_EVERY`].
    projection: Projection,
    regression: (Option<Instant>, Option<crate::sweep::regression::Check>),
    last_energy: Option<f64>,
    services: (Option<Instant>, ServiceStates),
    /// Who woke the CPUs over the last two hours, when last read.
    wakeups: (
        Option<Instant>,
        Option<crate::idle::wakeup_hours::StoredWakeups>,
    ),
    /// Each configured disk's spin state over the last 24 hours, when last read: the
    /// configured names, and their stored figures.
    disks: (
        Option<Instant>,
        Vec<String>,
        Vec<crate::idle::disk_hours::StoredDisk>,
    ),
    /// The tariff with the database's price series, and their revision: reloaded (and the
    /// running total recounted) when an import or the live price changes them.
    priced: Option<((i64, i64), Tariff)>,
    /// With no wall meter: the calibration's estimate kept hour by hour, when last read,
    /// and its figures.
    estimated: (Option<Instant>, RunningEstimate, Option<EstimatedPayload>),
    /// `[storage] raw_retention`: the estimate's kept hours go when their samples do.
    raw_retention_ms: i64,
    /// What sleeping when idle would save: when last read, how, and the figure.
    sleep: (
        Option<Instant>,
        crate::report::sleep::gather::Settings,
        Option<crate::publish::mqtt::state::SleepPayload>,
    ),
}

impl Routine for Feed {
    /// Reads the figures and publishes them; a request within [`MIN_REFRESH`] of the last
    /// read is answered with the figures as they are.
    fn run(&mut self, s: &crate::store::Store, asked: bool) -> bool {
        if asked && self.read_at.is_some_and(|at| at.elapsed() < MIN_REFRESH) {
            self.tx.send_modify(|_| {});
            return false;
        }
        self.read_at = Some(Instant::now());
        let mut extras = self.base.clone();
        extras.publishes = self.live.publishes();
        if let (Some(base), Some(source)) = (&self.tariff, &self.wall) {
            let t = with_series(
                s,
                base,
                &mut self.priced,
                &mut self.running,
                &mut self.projection,
            );
            let mut figures = read_figures(
                s,
                (&self.host, source),
                self.accuracy,
                t,
                &mut self.running,
                &mut self.projection,
                chrono::Utc::now(),
            );
            let now_ms = chrono::Utc::now().timestamp_millis();
            let (price, _, from) =
                t.priced_segment(now_ms)
                    .unwrap_or((f64::NAN, now_ms, PriceSource::Configured));
            figures.price_now = Some((price, t.source_name(from)));
            apply(&mut extras, &figures, &mut self.last_energy);
        }
        if self
            .regression
            .0
            .is_none_or(|at| at.elapsed() >= REGRESSION_EVERY)
        {
            let check = crate::sweep::regression::latest(s, Some(self.host.as_str()))
                .map_err(|e| {
                    tracing::warn!(
                        "reading idle regression checks: {}",
                        wattson_collectors::ErrorChain(&e)
                    );
                })
                .ok()
                .and_then(|c| crate::sweep::regression::headline(&c).cloned());
            self.regression = (Some(Instant::now()), check);
        }
        extras.idle_regression.clone_from(&self.regression.1);
        if let Some(base) = &self.tariff
            && self
                .services
                .0
                .is_none_or(|at| at.elapsed() >= REGRESSION_EVERY)
        {
            // Priced as the machine's own energy is: with the price series.
            let t = with_series(
                s,
                base,
                &mut self.priced,
                &mut self.running,
                &mut self.projection,
            )
            .clone();
            self.services = (Some(Instant::now()), service_states(s, &self.host, &t));
        }
        let every = if self.wakeups.1.is_some() {
            REGRESSION_EVERY
        } else {
            PROJECTION_RETRY
        };
        if self.wakeups.0.is_none_or(|at| at.elapsed() >= every) {
            let to = crate::store::floor_to(
                chrono::Utc::now().timestamp_millis(),
                crate::store::HOUR_MS,
            ) + crate::store::HOUR_MS;
            let w = crate::idle::wakeup_hours::load(
                s,
                &self.host,
                to - 2 * crate::store::HOUR_MS,
                to,
                crate::idle::wakeups::TOP,
            )
            .unwrap_or_else(|e| {
                tracing::debug!("wake-ups for /metrics: {e}");
                None
            });
            self.wakeups = (Some(Instant::now()), w);
        }
        extras.wakeups.clone_from(&self.wakeups.1);
        if !self.disks.1.is_empty()
            && self
                .disks
                .0
                .is_none_or(|at| at.elapsed() >= PROJECTION_RETRY)
        {
            self.disks = (
                Some(Instant::now()),
                std::mem::take(&mut self.disks.1),
                Vec::new(),
            );
            self.disks.2 = disk_states(s, &self.host, &self.disks.1, self.tariff.as_ref());
        }
        extras.disks.clone_from(&self.disks.2);
        self.estimate(s);
        extras.estimated.clone_from(&self.estimated.2);
        self.sleep(s);
        extras.sleep.clone_from(&self.sleep.2);
        extras.services.clone_from(&self.services.1.0);
        extras.wattson_itself.clone_from(&self.services.1.1);
        live_figures(
            &mut extras,
            &self.live,
            self.wall.as_ref(),
            self.tariff.as_ref(),
            self.cpus,
        );
        self.live.figures_answer(extras.publishes);
        self.tx.send_replace(extras);
        true
    }
}

impl Feed {
    /// With no wall meter and a tariff: the calibration's figures, read again every
    /// [`ESTIMATE_EVERY`] (every [`ESTIMATE_RETRY`] while there are none), each closed hour
    /// estimated once.
    fn estimate(&mut self, s: &crate::store::Store) {
        let Some(base) = self.tariff.as_ref().filter(|_| self.wall.is_none()) else {
            return;
        };
        let every = if self.estimated.2.is_some() {
            ESTIMATE_EVERY
        } else {
            ESTIMATE_RETRY
        };
        if self.estimated.0.is_some_and(|at| at.elapsed() < every) {
            return;
        }
        let t = with_series(
            s,
            base,
            &mut self.priced,
            &mut self.running,
            &mut self.projection,
        )
        .clone();
        let now = chrono::Utc::now();
        let oldest_ms = now.timestamp_millis().saturating_sub(self.raw_retention_ms);
        let figures = self
            .estimated
            .1
            .figures(s, &self.host, &t, now, oldest_ms)
            .unwrap_or_else(|e| {
                tracing::debug!(
                    "the calibration's estimate: {}",
                    wattson_collectors::ErrorChain(&e)
                );
                None
            });
        self.estimated.0 = Some(Instant::now());
        self.estimated.2 = figures.as_ref().map(estimated_payload);
    }
}

/// The published figures of `f`, rounded as the state's numbers are.
fn estimated_payload(f: &crate::calibration::priced::EstimatedFigures) -> EstimatedPayload {
    let round = |v: f64| (v * 1e6).round() / 1e6;
    let week = &f.last_7_days;
    let year = week.cost.as_ref();
    EstimatedPayload {
        basis: f.provenance.clone(),
        energy_today: round(f.today.estimate.energy_wh / 1000.0),
        cost_today: f.today.window_cost.map(round),
        power: week.estimate.mean_w.map(round),
        power_ci95: year.and_then(|c| c.watts_ci95).map(round),
        cost_annual: year.map(|c| round(c.cost_per_year)),
        cost_annual_ci95: year.and_then(|c| c.cost_per_year_ci95).map(round),
        minutes: week.estimate.minutes,
        minutes_withheld: week.estimate.withheld.iter().map(|w| w.minutes).sum(),
    }
}

/// How often the calibration's estimate is read again: it moves with the minutes added.
const ESTIMATE_EVERY: Duration = Duration::from_secs(300);
/// How often it is tried while there is none (no calibration yet, or nothing estimated).
const ESTIMATE_RETRY: Duration = Duration::from_secs(60);

/// The costliest groups and wattson itself, as published.
type ServiceStates = (Vec<ServiceState>, Option<ServiceState>);

/// The configured disks' spin state over the stored hours of the last 24, priced at
/// `tariff` where there is one (for `/metrics`).
fn disk_states(
    s: &crate::store::Store,
    host: &str,
    names: &[String],
    tariff: Option<&Tariff>,
) -> Vec<crate::idle::disk_hours::StoredDisk> {
    use crate::store::{HOUR_MS, floor_to};
    let to = floor_to(chrono::Utc::now().timestamp_millis(), HOUR_MS) + HOUR_MS;
    let mut disks =
        crate::idle::disk_hours::load(s, host, to - 24 * HOUR_MS, to).unwrap_or_else(|e| {
            tracing::debug!("disks for /metrics: {e}");
            Vec::new()
        });
    disks.retain(|d| names.contains(&d.disk));
    if let Some(t) = tariff {
        crate::idle::disk_hours::price(&mut disks, t, chrono::Local::now().date_naive());
    }
    disks
}

/// On the store's thread: what each service costs over the last 7 days, for the state.
fn service_states(
    s: &crate::store::Store,
    host: &str,
    tariff: &crate::tariff::Tariff,
) -> ServiceStates {
    use crate::store::{DAY_MS, HOUR_MS, floor_to};
    let to = floor_to(chrono::Utc::now().timestamp_millis(), HOUR_MS) + HOUR_MS;
    let e = match crate::services::estimate(s, host, tariff, to - 7 * DAY_MS, to) {
        Ok(e) => e,
        Err(e) => {
            tracing::debug!(
                "services for the MQTT state: {}",
                wattson_collectors::ErrorChain(&e)
            );
            return ServiceStates::default();
        }
    };
    let state = |g: &crate::services::attribution::GroupFigure| ServiceState {
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

/// Mode and meter counters from the live view, and, until the store holds enough history
/// for a projection, a projection of the current draw (so the entity exists from the start).
fn live_figures(
    extras: &mut StateExtras,
    live: &LiveState,
    wall: Option<&SourceId>,
    tariff: Option<&crate::tariff::Tariff>,
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
            exceptions: c.exceptions,
        })
        .collect();
    if extras.annual_projection.is_none()
        && let (Some(source), Some(t)) = (wall, tariff)
        && let Some(w) = latest
            .iter()
            .find(|r| r.source == *source && r.metric == Metric::Power && r.channel.is_empty())
    {
        let flat = crate::ledger::load_shape::LoadShape::flat(w.value);
        let now_ms = chrono::Utc::now().timestamp_millis();
        if let Ok(Some(f)) = crate::ledger::annual::on_tariff(&flat, t, now_ms, None, "") {
            extras.annual_projection = Some(f.cost);
            extras.annual_basis = Some(format!(
                "the current draw of {:.1} W for a year on your tariff, until the last {} days \
                 have history ({} on average)",
                w.value,
                crate::ledger::annual::PROJECTION_DAYS,
                crate::ledger::annual::price_text(f.price_per_kwh, t.currency())
            ));
        }
    }
}
