//! The one MQTT driver every client uses: the publisher, the smart plugs and the fleet
//! collector. It owns rumqttc's event loop in a task of its own and gives the client a
//! [`Connection`]: a handle to publish, a stream of [`Event`]s, acknowledgements, a forced
//! reconnect and a clean close.
//!
//! What it does for every client alike:
//! - One reconnect policy: after every connection error it sleeps a [`Backoff`] step (0.5 s
//!   doubling to 60 s, each step drawn from its upper half) and logs one line naming the
//!   broker and the reason. The backoff goes back to its first step only after a connection
//!   that stayed up [`STABLE_CONNECTION`]: a broker that accepts and at once drops a client
//!   sees the same growing delays from all three.
//! - Subscriptions are made again on every connection (a broker that lost the session still
//!   serves the client).
//! - Packet limits: each client names the largest payload it accepts; a larger message is
//!   replaced on the way in by the [`relay`] (see [`frames`]), counted, logged once per
//!   topic with its size, and acknowledged, so it neither drops the connection nor comes
//!   back; rumqttc's own limit is set above anything the relay passes.
//! - Cancellation: [`Connection::close`] sends DISCONNECT after what the client queued and
//!   waits (within a budget) until it has left; dropping the connection stops the task.

mod backoff;
pub mod frames;
mod log;
mod relay;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rumqttc::{
    AsyncClient, ConnectionError, Event as RumqttEvent, EventLoop, LastWill, MqttOptions, Outgoing,
    Packet, PubAck, Publish, QoS, Request, StateError, Subscribe, SubscribeFilter, Transport,
};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Broker, MqttError};
use crate::config::MqttConfig;
pub use backoff::{Backoff, STABLE_CONNECTION};
use log::SkipLog;
pub use log::{describe_error, is_auth_error};
use relay::{Relay, Upstream};

/// Longest wait for TCP, TLS and the broker's CONNACK.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What a client is and what it may receive.
pub struct ClientSpec {
    /// Names the client in log lines: `MQTT` (the publisher), `plugs`, `collector`.
    pub role: &'static str,
    pub client_id: String,
    /// Topic filters, subscribed on every connection at `qos`.
    pub subscriptions: Vec<String>,
    pub qos: QoS,
    /// The largest payload accepted, bytes; larger messages are skipped.
    pub max_payload: usize,
    /// The largest payload this client publishes, bytes.
    pub max_outgoing: usize,
    /// Keep the session on the broker (clean session off): it queues QoS 1 messages while
    /// the client is away.
    pub persistent_session: bool,
    /// The client acknowledges each QoS 1 message itself ([`Connection::ack`]).
    pub manual_acks: bool,
    pub last_will: Option<LastWill>,
    /// Requests (publishes, acknowledgements) rumqttc queues for the broker.
    pub queue: usize,
    /// Where the connection's counters go.
    pub stats: Arc<ConnectionStats>,
}

/// What the driver tells its client.
#[derive(Debug)]
pub enum Event {
    /// CONNACK accepted; the subscriptions are on their way.
    Connected { session_present: bool },
    /// The connection was lost; the driver is backing off and will reconnect.
    Disconnected,
    /// A message within the client's limit.
    Message(Message),
}

/// A received message.
#[derive(Debug)]
pub struct Message {
    publish: Publish,
    /// The connection it came on (1 for the first), for [`Connection::reconnect`].
    connection: u64,
}

impl Message {
    pub fn topic(&self) -> &str {
        &self.publish.topic
    }

    pub fn payload(&self) -> &[u8] {
        &self.publish.payload
    }

    pub fn retained(&self) -> bool {
        self.publish.retain
    }
}

/// Counters of one client's connection.
#[derive(Debug, Default)]
pub struct ConnectionStats {
    /// Successful connections (CONNACK accepted).
    pub connects: AtomicU64,
    /// Connection errors, each of which logged one line and slept one backoff step.
    pub connection_errors: AtomicU64,
    /// Messages skipped because they were larger than the client accepts.
    pub oversized: AtomicU64,
    /// Messages the client could not read ([`Connection::skip`]).
    pub malformed: AtomicU64,
    /// Connections dropped on the client's request, so that the broker delivers again
    /// what was not acknowledged ([`Connection::reconnect`]).
    pub redelivery_requests: AtomicU64,
}

/// State shared between a [`Connection`] and its driver task.
struct Shared {
    role: &'static str,
    stats: Arc<ConnectionStats>,
    connected: AtomicBool,
    closing: AtomicBool,
    /// The connection number a reconnect was asked for.
    reconnect: AtomicU64,
    reconnect_now: Notify,
    skipped: SkipLog,
}

/// One client's connection to the broker; see the module documentation.
pub struct Connection {
    client: AsyncClient,
    events: mpsc::Receiver<Event>,
    shared: Arc<Shared>,
    stop: CancellationToken,
    join: Option<JoinHandle<()>>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Connection {
    /// Start the driver for `spec` on the broker of `cfg` (needs a tokio runtime). Fails
    /// at once on a bad URL or an unreadable password, CA or certificate file; connection
    /// problems are retried with backoff until the connection is closed.
    pub fn start(cfg: &MqttConfig, spec: ClientSpec) -> Result<Connection, MqttError> {
        let access = super::broker_access(cfg)?;
        let nonce: [u8; 16] = rand::random();
        let relay = Relay::start(
            Upstream {
                broker: access.broker.clone(),
                tls: access.tls,
                connect_timeout: CONNECT_TIMEOUT,
            },
            spec.max_payload,
            nonce,
        )
        .map_err(|source| MqttError::Relay { source })?;
        let mut opts = MqttOptions::new(spec.client_id.clone(), relay.path(), 0);
        opts.set_transport(Transport::Unix);
        opts.set_keep_alive(access.keepalive);
        if let Some((user, password)) = access.credentials {
            opts.set_credentials(user, password);
        }
        opts.set_clean_session(!spec.persistent_session);
        opts.set_manual_acks(spec.manual_acks);
        opts.set_max_packet_size(
            frames::Filter::max_client_packet(spec.max_payload),
            spec.max_outgoing + frames::MAX_PUBLISH_HEADER,
        );
        if let Some(will) = spec.last_will.clone() {
            opts.set_last_will(will);
        }
        let (client, mut eventloop) = AsyncClient::new(opts, spec.queue.max(1));
        let mut network = rumqttc::NetworkOptions::new();
        network.set_connection_timeout(CONNECT_TIMEOUT.as_secs());
        eventloop.set_network_options(network);
        let shared = Arc::new(Shared {
            role: spec.role,
            stats: spec.stats.clone(),
            connected: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            reconnect: AtomicU64::new(0),
            reconnect_now: Notify::new(),
            skipped: SkipLog::default(),
        });
        let (tx, events) = mpsc::channel(64);
        let stop = CancellationToken::new();
        let driver = Driver {
            eventloop,
            relay,
            nonce,
            spec,
            broker: access.broker,
            user: cfg.username.clone(),
            shared: shared.clone(),
            tx,
            stop: stop.clone(),
        };
        let join = tokio::spawn(driver.run());
        Ok(Connection {
            client,
            events,
            shared,
            stop,
            join: Some(join),
        })
    }

    /// The handle to publish with (`try_publish`, so the caller never waits on a slow
    /// broker).
    pub fn client(&self) -> &AsyncClient {
        &self.client
    }

    pub fn stats(&self) -> &Arc<ConnectionStats> {
        &self.shared.stats
    }

    /// The next event; `None` once the driver has stopped.
    pub async fn recv(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// The next event, or `None` once `cancel` is cancelled or the driver has ended: the
    /// receive loop of every subscribing client (plugs, the live price, the fleet collector).
    pub async fn next_event(&mut self, cancel: &CancellationToken) -> Option<Event> {
        tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            ev = self.recv() => ev,
        }
    }

    /// The next message, connection events passed over; `None` as for
    /// [`Connection::next_event`].
    pub async fn next_message(&mut self, cancel: &CancellationToken) -> Option<Message> {
        loop {
            if let Event::Message(m) = self.next_event(cancel).await? {
                return Some(m);
            }
        }
    }

    /// Acknowledge a QoS 1 message (manual-ack clients). False when rumqttc's queue is
    /// full: then [`Connection::reconnect`], and the broker delivers it again.
    pub fn ack(&self, message: &Message) -> bool {
        self.client.try_ack(&message.publish).is_ok()
    }

    /// Drop the connection `message` came on (if it is still the current one) and connect
    /// again after a backoff step: the broker then delivers again every QoS 1 message not
    /// acknowledged, on the client's persistent session.
    pub fn reconnect(&self, message: &Message) {
        self.shared
            .reconnect
            .store(message.connection, Ordering::Relaxed);
        self.shared.reconnect_now.notify_one();
    }

    /// Count a message the client cannot read and log it (once per topic) with its size.
    pub fn skip(&self, message: &Message, why: &dyn std::fmt::Display) {
        self.shared.stats.malformed.fetch_add(1, Ordering::Relaxed);
        self.shared.skipped.log(
            self.shared.role,
            "unreadable",
            message.topic(),
            message.payload().len() as u64,
            message.retained(),
            why,
        );
    }

    /// Send DISCONNECT after everything queued before it and wait until it has left
    /// (within `budget`), then stop the driver.
    pub async fn close(mut self, budget: Duration) {
        let deadline = tokio::time::Instant::now() + budget;
        self.shared.closing.store(true, Ordering::Relaxed);
        if self.shared.connected.load(Ordering::Relaxed) {
            let sent = tokio::time::timeout_at(deadline, self.client.disconnect()).await;
            if !matches!(sent, Ok(Ok(()))) {
                self.stop.cancel();
            }
        } else {
            self.stop.cancel();
        }
        if let Some(mut join) = self.join.take()
            && tokio::time::timeout_at(deadline, &mut join).await.is_err()
        {
            self.stop.cancel();
            let _ = join.await;
        }
    }
}

/// The task that owns rumqttc's event loop.
struct Driver {
    eventloop: EventLoop,
    relay: Relay,
    nonce: [u8; 16],
    spec: ClientSpec,
    broker: Broker,
    user: Option<String>,
    shared: Arc<Shared>,
    tx: mpsc::Sender<Event>,
    stop: CancellationToken,
}

/// What ended one turn of the driver's loop.
enum Turn {
    Event(Result<RumqttEvent, ConnectionError>),
    Reconnect,
    Stop,
}

/// Why a connection ended.
enum Lost {
    Error(ConnectionError),
    /// Dropped on the client's request ([`Connection::reconnect`]).
    OnRequest,
}

impl Driver {
    async fn run(mut self) {
        let mut backoff = Backoff::reconnect();
        let mut up_since: Option<Instant> = None;
        // Connections made so far; the current one's number.
        let mut connection = 0_u64;
        loop {
            let turn = tokio::select! {
                biased;
                () = self.stop.cancelled() => Turn::Stop,
                () = self.shared.reconnect_now.notified() => Turn::Reconnect,
                ev = self.eventloop.poll() => Turn::Event(ev),
            };
            let lost = match turn {
                Turn::Stop | Turn::Event(Err(ConnectionError::RequestsDone)) => break,
                Turn::Reconnect => {
                    let asked = self.shared.reconnect.load(Ordering::Relaxed);
                    if asked != connection || self.eventloop.network.is_none() {
                        continue;
                    }
                    // Unacknowledged messages stay in the broker's queue for this session;
                    // the acknowledgements still queued here are dropped with it.
                    self.eventloop.clean();
                    self.shared
                        .stats
                        .redelivery_requests
                        .fetch_add(1, Ordering::Relaxed);
                    Lost::OnRequest
                }
                Turn::Event(Err(e)) => Lost::Error(e),
                Turn::Event(Ok(RumqttEvent::Incoming(Packet::ConnAck(ack)))) => {
                    connection += 1;
                    up_since = Some(Instant::now());
                    if self.connected(ack.session_present).await {
                        continue;
                    }
                    break;
                }
                Turn::Event(Ok(RumqttEvent::Incoming(Packet::Publish(p)))) => {
                    if let Some(size) = frames::marker_size(&p.payload, &self.nonce) {
                        self.oversized(&p, size);
                        continue;
                    }
                    let m = Message {
                        publish: p,
                        connection,
                    };
                    if forward(&self.tx, &self.stop, Event::Message(m)).await {
                        continue;
                    }
                    break;
                }
                Turn::Event(Ok(RumqttEvent::Incoming(Packet::SubAck(_)))) => {
                    // Said once per connection, so a user (or a test) can see when a client
                    // is listening.
                    tracing::info!(
                        "{}: subscribed to {}",
                        self.shared.role,
                        self.spec.subscriptions.join(", ")
                    );
                    continue;
                }
                Turn::Event(Ok(RumqttEvent::Outgoing(Outgoing::Disconnect))) => {
                    if self.shared.closing.load(Ordering::Relaxed) {
                        break;
                    }
                    continue;
                }
                Turn::Event(Ok(_)) => continue,
            };
            if up_since
                .take()
                .is_some_and(|t| t.elapsed() >= STABLE_CONNECTION)
            {
                backoff.reset();
            }
            let was_up = self.shared.connected.swap(false, Ordering::Relaxed);
            if was_up && !forward(&self.tx, &self.stop, Event::Disconnected).await {
                break;
            }
            if self.shared.closing.load(Ordering::Relaxed) {
                break;
            }
            let delay = backoff.next_delay();
            self.log_lost(&lost, delay);
            tokio::select! {
                () = self.stop.cancelled() => break,
                () = tokio::time::sleep(delay) => {}
            }
        }
        self.shared.connected.store(false, Ordering::Relaxed);
        // Close the client's end; the relay then hands its last bytes to the broker.
        drop(self.eventloop);
        self.relay.finish(Duration::from_millis(300)).await;
    }

    /// CONNACK: count, log, subscribe (ahead of anything queued), tell the client. False
    /// when the client is gone.
    async fn connected(&mut self, session_present: bool) -> bool {
        self.shared.connected.store(true, Ordering::Relaxed);
        self.shared.stats.connects.fetch_add(1, Ordering::Relaxed);
        let session = match (self.spec.persistent_session, session_present) {
            (false, _) => "",
            (true, true) => " (session resumed)",
            (true, false) => " (new session)",
        };
        tracing::info!(
            "{}: connected to {}{session}",
            self.shared.role,
            self.broker
        );
        if !self.spec.subscriptions.is_empty() {
            let filters = self
                .spec
                .subscriptions
                .iter()
                .map(|f| SubscribeFilter::new(f.clone(), self.spec.qos));
            self.eventloop
                .pending
                .push_front(Request::Subscribe(Subscribe::new_many(filters)));
        }
        forward(&self.tx, &self.stop, Event::Connected { session_present }).await
    }

    /// One log line per lost connection, naming the broker and the reason.
    fn log_lost(&self, lost: &Lost, delay: Duration) {
        let role = self.shared.role;
        if let Lost::Error(e) = lost {
            self.shared
                .stats
                .connection_errors
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                "{role}: {}; retrying in {:.1} s",
                self.describe(e),
                delay.as_secs_f64()
            );
        } else {
            tracing::warn!(
                "{role}: dropped the connection to {} so that it delivers again what was not acknowledged; reconnecting in {:.1} s",
                self.broker,
                delay.as_secs_f64()
            );
        }
    }

    /// A message the relay replaced: count, log once per topic, acknowledge.
    fn oversized(&mut self, p: &Publish, size: u64) {
        self.shared.stats.oversized.fetch_add(1, Ordering::Relaxed);
        self.shared.skipped.log(
            self.shared.role,
            "oversized",
            &p.topic,
            size,
            p.retain,
            &format_args!(
                "larger than the {} bytes this client accepts",
                self.spec.max_payload
            ),
        );
        if self.spec.manual_acks && p.qos == QoS::AtLeastOnce {
            self.eventloop
                .pending
                .push_back(Request::PubAck(PubAck::new(p.pkid)));
        }
    }

    /// One line for the log: no secrets; the relay's reason where rumqttc saw only its
    /// socket close.
    fn describe(&self, e: &ConnectionError) -> String {
        let relayed = self.relay.take_error();
        let transport = matches!(
            e,
            ConnectionError::Io(_)
                | ConnectionError::NetworkTimeout
                | ConnectionError::MqttState(
                    StateError::Io(_)
                        | StateError::ConnectionAborted
                        | StateError::Deserialization(rumqttc::Error::Io(_))
                )
        );
        match relayed {
            Some(why) if transport => format!("{}: {why}", self.broker),
            _ => describe_error(&self.broker, self.user.as_deref(), e),
        }
    }
}

/// Hand `ev` to the client; false when the client is gone or the driver stopping. (A free
/// function: the driver itself is not `Sync`, so no `&self` may be held across an await.)
async fn forward(tx: &mpsc::Sender<Event>, stop: &CancellationToken, ev: Event) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        r = tx.send(ev) => r.is_ok(),
    }
}
