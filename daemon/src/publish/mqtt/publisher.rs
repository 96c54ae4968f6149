//! The live publisher: availability, state and Home Assistant discovery for one host.
//!
//! One task, on a [`Connection`] of the MQTT [`driver`](super::driver) (which owns
//! rumqttc's event loop, reconnects with backoff and skips oversized messages). It runs
//! once per `publish_interval` of sample time (woken by the store's figures for the
//! sampler's pass that began it, or by [`LiveState::publish_due`]), takes the interval means from [`LiveState`] and hands
//! messages to rumqttc's bounded request queue with `try_publish`: when the broker is slow
//! or away, live updates are dropped (and counted), never queued without bound, and the
//! sampler, which only writes to `LiveState`, is never blocked. Retained messages waiting
//! for room (availability, discovery) are kept one per topic, the newest.
//!
//! Topics: `<topic_prefix>/<host>/availability` (`online`/`offline`, retained, QoS 1, the
//! Last Will), `<topic_prefix>/<host>/state` (QoS 1, not retained, see [`super::state`]),
//! discovery as in [`super::discovery`]. The only topics it subscribes to are
//! `<discovery_prefix>/status` (re-send discovery on `online`) and its own retained
//! announced list: nothing received over MQTT changes settings or starts anything. Each
//! accepts payloads of at most [`MAX_INCOMING_BYTES`]; of the announced list only the keys
//! of entities wattson creates are acted on (see [`discovery::parse_announced`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rumqttc::{AsyncClient, LastWill, QoS};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::MqttError;
use super::discovery::{self, Entity};
use super::driver::{ClientSpec, Connection, ConnectionStats, Event, Message};
use super::state::{self, MAX_STATE_BYTES, StateExtras};
use crate::config::MqttConfig;
use crate::live::LiveState;

/// How many requests rumqttc may hold for the broker; beyond this live updates are dropped.
const REQUEST_QUEUE: usize = 64;
/// Largest payload accepted on the subscribed topics, bytes: Home Assistant's status is
/// `online` or `offline`, and the announced list of a host with ten meters is about 2 KB.
pub const MAX_INCOMING_BYTES: usize = 16 * 1024;
/// Budget for publishing `offline` and disconnecting on shutdown.
const SHUTDOWN_BUDGET: Duration = Duration::from_millis(800);

/// The daemon's figures from its store and live view, kept up to date by a feed of their
/// own (`runtime::ledger_feed`): reading them never waits.
pub type Extras = tokio::sync::watch::Receiver<StateExtras>;

/// Counters a caller can watch (tests, `wattson status`).
#[derive(Debug, Default)]
pub struct PublisherStats {
    /// The connection's counters: connects, connection errors, skipped messages.
    pub connection: Arc<ConnectionStats>,
    /// State messages handed to the client.
    pub states_published: AtomicU64,
    /// State messages dropped because the request queue was full, the broker away, or the
    /// payload larger than a collector accepts ([`MAX_STATE_BYTES`]).
    pub states_dropped: AtomicU64,
    /// Discovery configs (and removals) handed to the client.
    pub discovery_sent: AtomicU64,
}

/// A running publisher.
#[derive(Debug)]
pub struct PublisherHandle {
    /// Finishes after cancellation, within about one second.
    pub join: JoinHandle<()>,
    pub stats: Arc<PublisherStats>,
}

/// The MQTT publisher; see the module documentation.
#[derive(Debug)]
pub struct Publisher;

impl Publisher {
    /// Start publishing for `host` on the current tokio runtime. Fails at once on a bad URL
    /// or an unreadable password, CA or client certificate file; connection problems are
    /// retried with backoff forever. On `cancel` it publishes `offline` (retained),
    /// disconnects cleanly and returns within about one second.
    pub fn spawn(
        cfg: MqttConfig,
        host: String,
        live: Arc<LiveState>,
        extras: Extras,
        cancel: CancellationToken,
    ) -> Result<PublisherHandle, MqttError> {
        let host_topic = super::topic_segment(&host);
        let availability = format!("{}/{host_topic}/availability", cfg.topic_prefix);
        let announced_topic = discovery::announced_topic(&cfg.topic_prefix, &host);
        let status_topic = format!("{}/status", cfg.discovery_prefix);
        let subscriptions = if cfg.discovery {
            vec![status_topic.clone(), announced_topic.clone()]
        } else {
            Vec::new()
        };
        let conn = Connection::start(
            &cfg,
            ClientSpec {
                role: "MQTT",
                client_id: cfg.client_id.clone(),
                subscriptions,
                qos: QoS::AtLeastOnce,
                max_payload: MAX_INCOMING_BYTES,
                max_outgoing: MAX_STATE_BYTES,
                persistent_session: false,
                manual_acks: false,
                last_will: Some(LastWill::new(
                    availability.clone(),
                    "offline",
                    QoS::AtLeastOnce,
                    true,
                )),
                queue: REQUEST_QUEUE,
                stats: Arc::default(),
            },
        )?;
        let stats = Arc::new(PublisherStats {
            connection: conn.stats().clone(),
            ..PublisherStats::default()
        });
        let task = Task {
            state_topic: format!("{}/{host_topic}/state", cfg.topic_prefix),
            announced_topic,
            status_topic,
            availability,
            cfg,
            host,
            client: conn.client().clone(),
            live,
            extras,
            stats: stats.clone(),
            connected: false,
            entities: BTreeMap::new(),
            remote_announced: None,
            outbox: VecDeque::new(),
            oversized_state_logged: false,
            foreign_logged: false,
        };
        let join = tokio::spawn(task.run(conn, cancel));
        Ok(PublisherHandle { join, stats })
    }
}

/// A retained message waiting for room in the client's queue.
#[derive(Debug)]
struct Out {
    topic: String,
    payload: Vec<u8>,
    discovery: bool,
}

struct Task {
    cfg: MqttConfig,
    host: String,
    client: AsyncClient,
    live: Arc<LiveState>,
    extras: Extras,
    stats: Arc<PublisherStats>,
    availability: String,
    state_topic: String,
    announced_topic: String,
    status_topic: String,
    connected: bool,
    /// Every entity announced this run, by announced-list key (grows; never shrinks
    /// mid-run).
    entities: BTreeMap<String, Entity>,
    /// The announced list read back from the broker, not yet reconciled.
    remote_announced: Option<BTreeSet<String>>,
    /// At most one message per topic, in the order first queued.
    outbox: VecDeque<Out>,
    oversized_state_logged: bool,
    /// Entries of the announced list naming entities wattson does not create were logged.
    foreign_logged: bool,
}

impl Task {
    async fn run(mut self, mut conn: Connection, cancel: CancellationToken) {
        let interval = self.cfg.publish_interval.max(Duration::from_millis(100));
        // The sampler's tick is the clock: a timer of our own would wake the runtime
        // several times per interval as tokio's timer wheel cascades towards it.
        let live = self.live.clone();
        live.publish_every(interval);
        // A publish goes out when the store's figures read after the sampler handed over
        // the pass that began it arrive (their watch channel wakes this task: one wake-up
        // per publish), or when the sampler says they are late (`publish_due`).
        let mut published = live.publishes();
        let mut extras_open = true;
        loop {
            let retry_outbox = !self.outbox.is_empty() && self.connected;
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                ev = conn.recv() => match ev {
                    Some(ev) => self.on_event(ev),
                    None => break,
                },
                changed = self.extras.changed(), if extras_open => {
                    extras_open = changed.is_ok();
                    let answered = self.extras.borrow().publishes;
                    if answered > published {
                        published = answered;
                        self.on_tick(interval);
                    }
                }
                () = live.publish_due() => {
                    let due = live.publishes();
                    if due > published {
                        tracing::debug!("MQTT: the store's figures are late; publishing them as they were");
                        published = due;
                        self.on_tick(interval);
                    }
                }
                () = tokio::time::sleep(Duration::from_millis(50)), if retry_outbox => {}
            }
            self.flush_outbox();
        }
        self.shutdown(conn).await;
    }

    async fn shutdown(&mut self, conn: Connection) {
        let deadline = tokio::time::Instant::now() + SHUTDOWN_BUDGET;
        if self.connected {
            let offline =
                self.client
                    .publish(&self.availability, QoS::AtLeastOnce, true, "offline");
            if tokio::time::timeout_at(deadline, offline).await.is_err() {
                tracing::warn!("MQTT: could not queue the offline message before shutdown");
            }
        }
        // DISCONNECT goes out after `offline`; the close waits until both have left.
        conn.close(deadline.saturating_duration_since(tokio::time::Instant::now()))
            .await;
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Connected { .. } => {
                self.connected = true;
                self.outbox.clear();
                self.queue(self.availability.clone(), b"online".to_vec(), false);
                if self.cfg.discovery {
                    self.queue_all_discovery();
                }
            }
            Event::Disconnected => self.connected = false,
            Event::Message(m) => self.on_message(&m),
        }
    }

    /// A message on one of the two subscribed topics.
    fn on_message(&mut self, m: &Message) {
        if !self.cfg.discovery {
            return;
        }
        if m.topic() == self.status_topic {
            if discovery::is_online(m.payload()) {
                tracing::info!("Home Assistant is online: re-sending discovery");
                self.queue_all_discovery();
            }
        } else if m.topic() == self.announced_topic {
            let (keys, foreign) = discovery::parse_announced(m.payload());
            if !foreign.is_empty() && !std::mem::replace(&mut self.foreign_logged, true) {
                let shown: Vec<String> = foreign.iter().take(5).map(|k| format!("{k:?}")).collect();
                tracing::warn!(
                    "MQTT: the announced list on {:?} has {} entries that name no entity wattson creates ({}{}): left alone",
                    m.topic(),
                    foreign.len(),
                    shown.join(", "),
                    if foreign.len() > shown.len() {
                        ", ..."
                    } else {
                        ""
                    }
                );
            }
            self.remote_announced = Some(keys);
            self.reconcile();
        }
    }

    fn on_tick(&mut self, interval: Duration) {
        // Means are taken every interval even while disconnected, so each published mean
        // covers one interval, not the whole outage.
        let means = self.live.take_means();
        if !self.connected {
            if !means.is_empty() {
                self.stats.states_dropped.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        let latest = self.live.latest();
        let extras = state::with_live_energy(&self.extras.borrow(), &self.live);
        let Some(snapshot) = state::build(&means, &latest, &extras, interval.as_secs_f64()) else {
            return;
        };
        let snapshot = state::with_held(snapshot, &self.live.held());
        if self.cfg.discovery {
            let mut changed = false;
            for e in discovery::entities(&snapshot.json, &extras) {
                if self.entities.get(&e.key()) != Some(&e) {
                    self.queue_config(&e);
                    self.entities.insert(e.key(), e);
                    changed = true;
                }
            }
            if changed {
                self.queue_announced_list();
            }
            self.reconcile();
        }
        self.flush_outbox();
        let payload = snapshot.json.to_string();
        if payload.len() > MAX_STATE_BYTES {
            // rumqttc would refuse the packet and drop the connection; a collector would
            // skip it anyway.
            self.stats.states_dropped.fetch_add(1, Ordering::Relaxed);
            if !std::mem::replace(&mut self.oversized_state_logged, true) {
                tracing::warn!(
                    "MQTT: not publishing a {}-byte state on {}: larger than the {MAX_STATE_BYTES} bytes a collector accepts",
                    payload.len(),
                    self.state_topic
                );
            }
            return;
        }
        match self
            .client
            .try_publish(&self.state_topic, QoS::AtLeastOnce, false, payload)
        {
            Ok(()) => self.stats.states_published.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.stats.states_dropped.fetch_add(1, Ordering::Relaxed),
        };
    }

    fn ctx(&self) -> discovery::Context<'_> {
        discovery::Context {
            host: &self.host,
            topic_prefix: &self.cfg.topic_prefix,
            discovery_prefix: &self.cfg.discovery_prefix,
        }
    }

    /// Queue a retained message, replacing one still waiting on the same topic.
    fn queue(&mut self, topic: String, payload: Vec<u8>, discovery: bool) {
        if !rumqttc::valid_topic(&topic) {
            // Never queued: it could never be sent and would hold up everything behind it.
            tracing::warn!("MQTT: not publishing on {topic:?}: not a valid topic name");
            return;
        }
        self.outbox.retain(|o| o.topic != topic);
        self.outbox.push_back(Out {
            topic,
            payload,
            discovery,
        });
    }

    fn queue_config(&mut self, e: &Entity) {
        let payload = discovery::config_payload(&self.ctx(), e).to_string();
        let topic = discovery::component_config_topic(
            &self.cfg.discovery_prefix,
            e.component,
            &self.host,
            &e.object_id,
        );
        self.queue(topic, payload.into_bytes(), true);
    }

    fn queue_all_discovery(&mut self) {
        if self.entities.is_empty() {
            return;
        }
        let es: Vec<Entity> = self.entities.values().cloned().collect();
        for e in &es {
            self.queue_config(e);
        }
        self.queue_announced_list();
    }

    fn queue_announced_list(&mut self) {
        let ids: Vec<&String> = self.entities.keys().collect();
        let payload = serde_json::to_vec(&ids).unwrap_or_default();
        self.queue(self.announced_topic.clone(), payload, false);
    }

    /// Remove entities a previous run announced that this run does not have. Runs once the
    /// first state has shown what exists, so a daemon that just started removes nothing.
    fn reconcile(&mut self) {
        if self.entities.is_empty() {
            return;
        }
        let Some(remote) = self.remote_announced.take() else {
            return;
        };
        let current: BTreeSet<String> = self.entities.keys().cloned().collect();
        for gone in remote.difference(&current) {
            tracing::info!("removing Home Assistant entity {gone} (no longer measured)");
            let topic = discovery::key_config_topic(&self.cfg.discovery_prefix, &self.host, gone);
            self.queue(topic, Vec::new(), true);
        }
        if remote != current {
            self.queue_announced_list();
        }
    }

    fn flush_outbox(&mut self) {
        if !self.connected {
            return;
        }
        while let Some(out) = self.outbox.pop_front() {
            let result =
                self.client
                    .try_publish(&out.topic, QoS::AtLeastOnce, true, out.payload.clone());
            if result.is_err() {
                // The queue is full (topics are checked when queued): try again shortly.
                self.outbox.push_front(out);
                return;
            }
            if out.discovery {
                self.stats.discovery_sent.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
