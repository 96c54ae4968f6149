//! Real MQTT brokers for tests: rumqttd embedded, or `mosquitto` as a child process when it
//! is installed. Ports are found by binding `127.0.0.1:0`; nothing uses a fixed port.

use std::fmt::Write as _;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use tokio_util::sync::CancellationToken;

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

/// True when `mosquitto` is on PATH (or in /usr/sbin, where Debian puts it).
pub fn mosquitto_path() -> Option<PathBuf> {
    for dir in std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .chain(["/usr/sbin", "/usr/local/sbin"])
    {
        let p = Path::new(dir).join("mosquitto");
        if p.is_file() {
            return Some(p);
        }
    }
    None
}

/// Wait until something accepts TCP connections on `port`.
pub fn wait_listening(port: u16, timeout: Duration) -> bool {
    wait_until(timeout, || TcpStream::connect(("127.0.0.1", port)).is_ok())
}

/// Poll `cond` every 20 ms until it holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Async [`wait_until`].
pub async fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Which broker implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Rumqttd,
    Mosquitto,
}

/// True under continuous integration (`CI=true`), where `.ci/run` installs every package a
/// test needs: a missing one is a failure there, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The brokers available here: rumqttd always, mosquitto when installed (under CI it must
/// be).
pub fn kinds() -> Vec<Kind> {
    let mut k = vec![Kind::Rumqttd];
    if mosquitto_path().is_some() {
        k.push(Kind::Mosquitto);
    } else {
        assert!(
            !in_ci(),
            "mosquitto is not installed (CI=true): .ci/run installs it (apt-get install mosquitto)"
        );
        eprintln!("mosquitto not installed: testing against rumqttd only");
    }
    k
}

/// True when mosquitto is installed. Without it `test` is skipped with a note, except
/// under CI, where it fails.
pub fn have_mosquitto(test: &str) -> bool {
    if mosquitto_path().is_some() {
        return true;
    }
    assert!(
        !in_ci(),
        "{test} needs mosquitto, which is not installed (CI=true): .ci/run installs it"
    );
    eprintln!("skipped {test}: needs mosquitto (apt-get install mosquitto)");
    false
}

/// Extra broker settings.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// user -> password; anonymous logins are refused when set.
    pub users: Vec<(String, String)>,
    /// (CA, server cert, server key) PEM files: the listener speaks TLS (mosquitto only).
    pub tls: Option<(PathBuf, PathBuf, PathBuf)>,
}

/// A running broker. Dropping it stops a mosquitto child; rumqttd runs until the test
/// process exits (it has no shutdown), on its own port.
pub struct TestBroker {
    pub kind: Kind,
    pub port: u16,
    child: Option<Child>,
    conf: Option<PathBuf>,
    dir: tempfile::TempDir,
}

impl TestBroker {
    pub fn start(kind: Kind, opts: &Options) -> TestBroker {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let mut b = TestBroker {
            kind,
            port,
            child: None,
            conf: None,
            dir,
        };
        match kind {
            Kind::Rumqttd => b.start_rumqttd(opts),
            Kind::Mosquitto => {
                b.write_mosquitto_conf(opts);
                b.spawn_mosquitto();
            }
        }
        assert!(
            wait_listening(port, Duration::from_secs(10)),
            "{kind:?} not listening on {port}"
        );
        b
    }

    fn start_rumqttd(&mut self, opts: &Options) {
        assert!(opts.tls.is_none(), "TLS tests use mosquitto");
        let mut conns = serde_json::json!({
            // 16 MiB: the oversized-message tests send 10 MB through it.
            "connection_timeout_ms": 60000, "max_payload_size": 16 << 20,
            "max_inflight_count": 200, "dynamic_filters": true,
        });
        if !opts.users.is_empty() {
            let auth: serde_json::Map<String, serde_json::Value> = opts
                .users
                .iter()
                .map(|(u, p)| (u.clone(), serde_json::Value::String(p.clone())))
                .collect();
            conns["auth"] = serde_json::Value::Object(auth);
        }
        let cfg = serde_json::json!({
            "id": 0,
            "router": {"max_connections": 1000, "max_outgoing_packet_count": 200,
                       "max_segment_size": 104_857_600, "max_segment_count": 10},
            "v4": {"1": {"name": "v4-1", "listen": format!("127.0.0.1:{}", self.port),
                         "next_connection_delay_ms": 1, "connections": conns}},
        });
        let cfg: rumqttd::Config = serde_json::from_value(cfg).expect("rumqttd config");
        std::thread::spawn(move || {
            let mut broker = rumqttd::Broker::new(cfg);
            let _ = broker.start();
        });
    }

    fn write_mosquitto_conf(&mut self, opts: &Options) {
        let dir = self.dir.path();
        // The fleet tests queue a thousand QoS 1 messages for one collector faster than it
        // stores them; mosquitto's default queue (1000) would drop the rest.
        let mut conf = format!(
            "listener {} 127.0.0.1\npersistence false\nlog_dest none\nmax_queued_messages 100000\n",
            self.port
        );
        if opts.users.is_empty() {
            conf.push_str("allow_anonymous true\n");
        } else {
            let pw = dir.join("passwd");
            let mut lines = String::new();
            for (u, p) in &opts.users {
                let _ = writeln!(lines, "{u}:{p}");
            }
            std::fs::write(&pw, lines).expect("write passwd");
            let ok = Command::new("mosquitto_passwd")
                .arg("-U")
                .arg(&pw)
                .status()
                .expect("mosquitto_passwd");
            assert!(ok.success());
            let _ = writeln!(
                conf,
                "allow_anonymous false\npassword_file {}",
                pw.display()
            );
        }
        if let Some((ca, cert, key)) = &opts.tls {
            let _ = writeln!(
                conf,
                "cafile {}\ncertfile {}\nkeyfile {}",
                ca.display(),
                cert.display(),
                key.display()
            );
        }
        let path = dir.join("mosquitto.conf");
        std::fs::write(&path, conf).expect("write mosquitto.conf");
        self.conf = Some(path);
    }

    fn spawn_mosquitto(&mut self) {
        let exe = mosquitto_path().expect("mosquitto");
        let conf = self.conf.as_ref().expect("conf");
        let child = Command::new(exe)
            .arg("-c")
            .arg(conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn mosquitto");
        self.child = Some(child);
    }

    /// Kill the broker (SIGKILL: no goodbye to clients). Mosquitto only.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert!(wait_until(Duration::from_secs(5), || {
            TcpStream::connect(("127.0.0.1", self.port)).is_err()
        }));
    }

    /// Start it again on the same port. Mosquitto only.
    pub fn restart(&mut self) {
        assert_eq!(self.kind, Kind::Mosquitto);
        self.spawn_mosquitto();
        assert!(wait_listening(self.port, Duration::from_secs(10)));
    }

    pub fn url(&self, tls: bool) -> String {
        let scheme = if tls { "mqtts" } else { "mqtt" };
        format!("{scheme}://localhost:{}", self.port)
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A received message.
#[derive(Debug, Clone, PartialEq)]
pub struct Msg {
    pub topic: String,
    pub payload: Vec<u8>,
    pub retain: bool,
}

/// A watching client: subscribes to `filters` and records everything.
pub struct Watcher {
    pub msgs: Arc<Mutex<Vec<Msg>>>,
    pub client: AsyncClient,
    cancel: CancellationToken,
}

impl Watcher {
    pub fn start(port: u16, id: &str, filters: &[&str]) -> Watcher {
        let mut opts = MqttOptions::new(id, "127.0.0.1", port);
        opts.set_keep_alive(Duration::from_secs(5));
        opts.set_max_packet_size(1 << 20, 1 << 20);
        let (client, mut el) = AsyncClient::new(opts, 100);
        let msgs = Arc::new(Mutex::new(Vec::new()));
        let cancel = CancellationToken::new();
        let (m, c, cl) = (msgs.clone(), cancel.clone(), client.clone());
        let filters: Vec<String> = filters.iter().map(|s| (*s).to_owned()).collect();
        tokio::spawn(async move {
            loop {
                let ev = tokio::select! {
                    () = c.cancelled() => break,
                    ev = el.poll() => ev,
                };
                match ev {
                    Ok(Event::Incoming(Packet::ConnAck(_))) => {
                        for f in &filters {
                            let _ = cl.try_subscribe(f, QoS::AtLeastOnce);
                        }
                    }
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        m.lock().unwrap().push(Msg {
                            topic: p.topic,
                            payload: p.payload.to_vec(),
                            retain: p.retain,
                        });
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        });
        Watcher {
            msgs,
            client,
            cancel,
        }
    }

    pub fn on(&self, topic: &str) -> Vec<Msg> {
        self.msgs
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m.topic == topic)
            .cloned()
            .collect()
    }

    pub fn last(&self, topic: &str) -> Option<Msg> {
        self.on(topic).pop()
    }

    pub fn clear(&self) {
        self.msgs.lock().unwrap().clear();
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// How long [`publish_acked`] waits for the next acknowledgement before it connects again
/// (once), then fails.
const STALL: Duration = Duration::from_secs(30);

/// Connect as `client_id`, publish every `(topic, payload)` at QoS 1 (retained if
/// `retain`) and return once the broker has acknowledged them all. Packets up to 16 MiB.
/// `pace`: one message per `pace` (a host publishing on its interval) instead of as fast
/// as the broker takes them.
///
/// The session is persistent (clean session off), as a publisher that must not lose a
/// message keeps it: after a reset connection rumqttc sends again what was not
/// acknowledged only when the broker says it kept the session; with a clean session it
/// drops those messages and waits for acknowledgements that never come.
pub async fn publish_acked<P: Into<Vec<u8>> + Send + 'static>(
    port: u16,
    client_id: String,
    msgs: Vec<(String, P)>,
    retain: bool,
    pace: Option<Duration>,
) {
    let mut opts = MqttOptions::new(client_id.clone(), "127.0.0.1", port);
    opts.set_keep_alive(Duration::from_secs(5));
    opts.set_max_packet_size(16 << 20, 16 << 20);
    opts.set_clean_session(false);
    let (client, mut el) = AsyncClient::new(opts, 16);
    let n = msgs.len();
    let sender = tokio::spawn(async move {
        let mut ticks = pace.map(tokio::time::interval);
        for (topic, payload) in msgs {
            if let Some(t) = ticks.as_mut() {
                t.tick().await;
            }
            client
                .publish(topic, QoS::AtLeastOnce, retain, payload)
                .await
                .unwrap();
        }
        client
    });
    let mut acked = 0;
    let mut errors = 0;
    let mut stalls = 0;
    let mut reconnecting = false;
    // Pings keep the event loop busy on an idle connection, so the deadline runs from the
    // last acknowledgement, not the last event: a broker that drops an acknowledgement fails
    // the test with what it was waiting for instead of hanging the suite.
    let mut progress = tokio::time::Instant::now();
    // Until every message was sent and as many acknowledged: after a reconnect a message
    // may be acknowledged twice, and the sender must not be left waiting on a queue that
    // nobody drains.
    while acked < n || !sender.is_finished() {
        match tokio::time::timeout_at(progress + STALL, el.poll()).await {
            Ok(Ok(Event::Incoming(Packet::PubAck(_)))) => {
                acked += 1;
                progress = tokio::time::Instant::now();
            }
            Ok(Ok(Event::Incoming(Packet::ConnAck(c)))) if reconnecting => {
                reconnecting = false;
                assert!(
                    c.session_present,
                    "publisher {client_id}: the broker did not keep the session across a \
                     reconnect, so the {} unacknowledged messages are lost",
                    n.saturating_sub(acked)
                );
            }
            Ok(Ok(_)) => {}
            // A broker under load may reset a connection: rumqttc connects again on the
            // next poll and sends what was not acknowledged (the collector drops repeats).
            Ok(Err(e)) if errors < 3 => {
                errors += 1;
                reconnecting = true;
                eprintln!("publisher {client_id}: {e}; connecting again");
            }
            Ok(Err(e)) => panic!("publisher {client_id}: {e}"),
            // A connection that answers pings but acknowledges nothing: connect again once,
            // sending what was not acknowledged, before giving up.
            Err(tokio::time::error::Elapsed { .. }) if stalls == 0 => {
                stalls += 1;
                reconnecting = true;
                progress = tokio::time::Instant::now();
                eprintln!(
                    "publisher {client_id}: {acked} of {n} messages acknowledged, none in the \
                     last {STALL:?}; connecting again"
                );
                el.clean();
            }
            Err(tokio::time::error::Elapsed { .. }) => panic!(
                "publisher {client_id} on 127.0.0.1:{port}: {acked} of {n} messages \
                 acknowledged, none in the last {STALL:?}, after connecting again"
            ),
        }
    }
    let client = sender.await.unwrap();
    let _ = client.disconnect().await;
    let _ = tokio::time::timeout(Duration::from_millis(200), el.poll()).await;
}
