//! The live publisher: availability, state and Home Assistant discovery for one host.
//!
//! Two tasks. The poller owns rumqttc's event loop, sleeps a [`Backoff`] step after every
//! error (one log line per step) and forwards the few events that matter. The publisher
//! runs once per `publish_interval` of sample time (woken by the sampler's pass through
//! [`LiveState::publish_due`]), takes the interval means from [`LiveState`] and hands
//! messages to rumqttc's bounded request queue with `try_publish`: when the broker is slow
//! or away, live updates are dropped (and counted), never queued without bound, and the
//! sampler, which only writes to `LiveState`, is never blocked.
//!
//! Topics: `<topic_prefix>/<host>/availability` (`online`/`offline`, retained, QoS 1, the
//! Last Will), `<topic_prefix>/<host>/state` (QoS 1, not retained, see [`super::state`]),
//! discovery as in [`super::discovery`]. The only topics it subscribes to are
//! `<discovery_prefix>/status` (re-send discovery on `online`) and its own retained
//! announced list: nothing received over MQTT changes settings or starts anything.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rumqttc::{AsyncClient, ConnectionError, Event, EventLoop, LastWill, Outgoing, Packet, QoS};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::discovery::{self, Entity};
use super::state::{self, StateExtras};
use super::{Backoff, Broker, MqttError};
use crate::config::MqttConfig;
use crate::runtime::live::LiveState;

/// How many requests rumqttc may hold for the broker; beyond this live updates are dropped.
const REQUEST_QUEUE: usize = 64;
/// A connection that stayed up this long resets the backoff to its shortest step.
const STABLE_CONNECTION: Duration = Duration::from_secs(10);
/// Budget for publishing `offline` and disconnecting on shutdown.
const SHUTDOWN_BUDGET: Duration = Duration::from_millis(800);

/// The daemon's figures from its store and live view, kept up to date by a feed of their
/// own ([`crate::runtime::ledger_feed`]): reading them never waits.
pub type Extras = tokio::sync::watch::Receiver<StateExtras>;

/// Counters a caller can watch (tests, `wattson status`).
#[derive(Debug, Default)]
pub struct PublisherStats {
    /// Successful connections (CONNACK accepted).
    pub connects: AtomicU64,
    /// Connection errors, each of which logged one line and slept one backoff step.
    pub connection_errors: AtomicU64,
    /// State messages handed to the client.
    pub states_published: AtomicU64,
    /// State messages dropped because the request queue was full or the broker away.
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
        let (mut opts, broker) = super::mqtt_options(&cfg, &cfg.client_id)?;
        let host_topic = super::topic_segment(&host);
        let availability = format!("{}/{host_topic}/availability", cfg.topic_prefix);
        opts.set_last_will(LastWill::new(
            availability.clone(),
            "offline",
            QoS::AtLeastOnce,
            true,
        ));
        opts.set_clean_session(true);
        let (client, eventloop) = AsyncClient::new(opts, REQUEST_QUEUE);
        let stats = Arc::new(PublisherStats::default());
        let (tx, rx) = mpsc::channel(64);
        let poll_stop = CancellationToken::new();
        let poller = tokio::spawn(poll_loop(
            eventloop,
            tx,
            poll_stop.clone(),
            broker,
            cfg.username.clone(),
            stats.clone(),
        ));
        let task = Task {
            state_topic: format!("{}/{host_topic}/state", cfg.topic_prefix),
            announced_topic: discovery::announced_topic(&cfg.topic_prefix, &host),
            status_topic: format!("{}/status", cfg.discovery_prefix),
            availability,
            cfg,
            host,
            client,
            live,
            extras,
            stats: stats.clone(),
            connected: false,
            entities: BTreeMap::new(),
            remote_announced: None,
            outbox: VecDeque::new(),
        };
        let join = tokio::spawn(task.run(rx, cancel, poll_stop, poller));
        Ok(PublisherHandle { join, stats })
    }
}

/// What the poller tells the publisher.
#[derive(Debug)]
enum PollEvent {
    Connected,
    Disconnected,
    Message { topic: String, payload: Vec<u8> },
    DisconnectSent,
}

/// An outgoing request waiting for room in the client's queue.
#[derive(Debug)]
enum Out {
    Publish {
        topic: String,
        payload: Vec<u8>,
        retain: bool,
        discovery: bool,
    },
    Subscribe(String),
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
    outbox: VecDeque<Out>,
}

impl Task {
    async fn run(
        mut self,
        mut rx: mpsc::Receiver<PollEvent>,
        cancel: CancellationToken,
        poll_stop: CancellationToken,
        poller: JoinHandle<()>,
    ) {
        let interval = self.cfg.publish_interval.max(Duration::from_millis(100));
        // The sampler's tick is the clock: a timer of our own would wake the runtime
        // several times per interval as tokio's timer wheel cascades towards it.
        let live = self.live.clone();
        live.publish_every(interval);
        loop {
            let retry_outbox = !self.outbox.is_empty() && self.connected;
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                ev = rx.recv() => match ev {
                    Some(ev) => self.on_event(ev),
                    None => break,
                },
                () = live.publish_due() => self.on_tick(interval),
                () = tokio::time::sleep(Duration::from_millis(50)), if retry_outbox => {}
            }
            self.flush_outbox();
        }
        self.shutdown(&mut rx).await;
        poll_stop.cancel();
        let _ = tokio::time::timeout(Duration::from_millis(150), poller).await;
    }

    async fn shutdown(&mut self, rx: &mut mpsc::Receiver<PollEvent>) {
        if !self.connected {
            return;
        }
        let deadline = tokio::time::Instant::now() + SHUTDOWN_BUDGET;
        let offline = self
            .client
            .publish(&self.availability, QoS::AtLeastOnce, true, "offline");
        if tokio::time::timeout_at(deadline, offline).await.is_err() {
            tracing::warn!("MQTT: could not queue the offline message before shutdown");
        }
        if tokio::time::timeout_at(deadline, self.client.disconnect())
            .await
            .is_err()
        {
            return;
        }
        // Wait until the poller has written DISCONNECT (so `offline` went out before it).
        while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, rx.recv()).await {
            if matches!(ev, PollEvent::DisconnectSent | PollEvent::Disconnected) {
                break;
            }
        }
    }

    fn on_event(&mut self, ev: PollEvent) {
        match ev {
            PollEvent::Connected => {
                self.connected = true;
                self.outbox.clear();
                self.outbox.push_back(Out::Publish {
                    topic: self.availability.clone(),
                    payload: b"online".to_vec(),
                    retain: true,
                    discovery: false,
                });
                if self.cfg.discovery {
                    self.outbox
                        .push_back(Out::Subscribe(self.status_topic.clone()));
                    self.outbox
                        .push_back(Out::Subscribe(self.announced_topic.clone()));
                    self.queue_all_discovery();
                }
            }
            PollEvent::Disconnected => self.connected = false,
            PollEvent::DisconnectSent => {}
            PollEvent::Message { topic, payload } => {
                if !self.cfg.discovery {
                    return;
                }
                if topic == self.status_topic {
                    if payload.trim_ascii() == b"online" {
                        tracing::info!("Home Assistant is online: re-sending discovery");
                        self.queue_all_discovery();
                    }
                } else if topic == self.announced_topic {
                    self.remote_announced = Some(discovery::parse_announced(&payload));
                    self.reconcile();
                }
            }
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
        let extras = self.extras.borrow().clone();
        let Some(snapshot) = state::build(&means, &latest, &extras, interval.as_secs_f64()) else {
            return;
        };
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

    fn queue_config(&mut self, e: &Entity) {
        let payload = discovery::config_payload(&self.ctx(), e).to_string();
        self.outbox.push_back(Out::Publish {
            topic: discovery::component_config_topic(
                &self.cfg.discovery_prefix,
                e.component,
                &self.host,
                &e.object_id,
            ),
            payload: payload.into_bytes(),
            retain: true,
            discovery: true,
        });
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
        self.outbox.push_back(Out::Publish {
            topic: self.announced_topic.clone(),
            payload,
            retain: true,
            discovery: false,
        });
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
            self.outbox.push_back(Out::Publish {
                topic: discovery::key_config_topic(&self.cfg.discovery_prefix, &self.host, gone),
                payload: Vec::new(),
                retain: true,
                discovery: true,
            });
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
            let result = match &out {
                Out::Publish {
                    topic,
                    payload,
                    retain,
                    ..
                } => self
                    .client
                    .try_publish(topic, QoS::AtLeastOnce, *retain, payload.clone()),
                Out::Subscribe(topic) => self.client.try_subscribe(topic, QoS::AtLeastOnce),
            };
            if result.is_err() {
                self.outbox.push_front(out);
                return;
            }
            if let Out::Publish {
                discovery: true, ..
            } = out
            {
                self.stats.discovery_sent.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Forward `ev` unless stopped; false when the publisher is gone or stopping.
async fn forward(tx: &mpsc::Sender<PollEvent>, stop: &CancellationToken, ev: PollEvent) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        r = tx.send(ev) => r.is_ok(),
    }
}

/// Drive rumqttc's event loop, with a backoff sleep after every error.
async fn poll_loop(
    mut eventloop: EventLoop,
    tx: mpsc::Sender<PollEvent>,
    stop: CancellationToken,
    broker: Broker,
    user: Option<String>,
    stats: Arc<PublisherStats>,
) {
    let mut backoff = Backoff::reconnect();
    let mut up_since: Option<Instant> = None;
    loop {
        let ev = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            ev = eventloop.poll() => ev,
        };
        let forwarded = match ev {
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                up_since = Some(Instant::now());
                stats.connects.fetch_add(1, Ordering::Relaxed);
                tracing::info!("MQTT: connected to {broker}");
                forward(&tx, &stop, PollEvent::Connected).await
            }
            Ok(Event::Incoming(Packet::Publish(p))) => {
                let msg = PollEvent::Message {
                    topic: p.topic,
                    payload: p.payload.to_vec(),
                };
                forward(&tx, &stop, msg).await
            }
            Ok(Event::Outgoing(Outgoing::Disconnect)) => {
                forward(&tx, &stop, PollEvent::DisconnectSent).await
            }
            Ok(_) => true,
            Err(ConnectionError::RequestsDone) => return,
            Err(e) => {
                if up_since.is_some_and(|t| t.elapsed() >= STABLE_CONNECTION) {
                    backoff.reset();
                }
                let was_up = up_since.take().is_some();
                if was_up && !forward(&tx, &stop, PollEvent::Disconnected).await {
                    return;
                }
                let delay = backoff.next_delay();
                stats.connection_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    "MQTT: {}; retrying in {:.1} s",
                    super::describe_error(&broker, user.as_deref(), &e),
                    delay.as_secs_f64()
                );
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(delay) => true,
                }
            }
        };
        if !forwarded {
            return;
        }
    }
}
