//! The socket each MQTT client talks through.
//!
//! rumqttc 0.25 dials the broker itself (TCP, TLS, WebSocket) or a Unix socket path, and has
//! no hook for the stream in between, where an oversized message has to be caught (see
//! [`super::frames`]). So each client dials a private abstract Unix socket of this process
//! (`\0wattson-mqtt-<pid>-<random>`: no file, nothing to clean up), and this relay carries
//! its bytes to the broker over TCP or TLS (rustls, the client's CA and certificates),
//! passing what the broker sends back through [`Filter`]. An abstract socket can be reached
//! from the whole network namespace, so a connection from any other process is refused
//! (`SO_PEERCRED`): nobody else gets a tunnel carrying wattson's TLS client certificate.
//!
//! One connection is relayed at a time: a new one from the client replaces the previous.
//! Why the last one failed or ended (refused, TLS, timed out, closed by the broker, a
//! malformed packet) is kept for the driver's log line, since rumqttc only sees the relay's
//! socket close.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rumqttc::tokio_rustls::TlsConnector;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::task::JoinHandle;

use super::frames::Filter;
use crate::publish::mqtt::Broker;

/// How to reach the broker.
pub(super) struct Upstream {
    pub broker: Broker,
    /// TLS settings for `mqtts://`; `None` for plain TCP.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Longest wait for TCP and TLS to be up.
    pub connect_timeout: Duration,
}

trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

#[derive(Default)]
struct Shared {
    /// Why the last relayed connection failed or ended.
    error: Mutex<Option<String>>,
    /// The connection being relayed now.
    link: Mutex<Option<JoinHandle<()>>>,
}

impl Shared {
    fn set_error(&self, why: String) {
        if let Ok(mut e) = self.error.lock() {
            *e = Some(why);
        }
    }
}

/// A running relay; stops when dropped.
pub(super) struct Relay {
    path: String,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Relay {
    /// Listen on a new abstract socket and relay each connection to `upstream`, passing
    /// PUBLISH payloads of up to `max_payload` bytes (larger ones are marked with `nonce`).
    /// Needs a tokio runtime.
    pub(super) fn start(
        upstream: Upstream,
        max_payload: usize,
        nonce: [u8; 16],
    ) -> std::io::Result<Relay> {
        let path = format!(
            "\0wattson-mqtt-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        );
        let listener = UnixListener::bind(&path)?;
        let shared = Arc::new(Shared::default());
        let accept = tokio::spawn(accept_loop(
            listener,
            Arc::new(upstream),
            shared.clone(),
            max_payload,
            nonce,
        ));
        Ok(Relay {
            path,
            shared,
            accept,
        })
    }

    /// The socket the client dials (an abstract name: it starts with NUL).
    pub(super) fn path(&self) -> &str {
        &self.path
    }

    /// Why the last relayed connection failed or ended, once.
    pub(super) fn take_error(&self) -> Option<String> {
        self.shared.error.lock().ok().and_then(|mut e| e.take())
    }

    /// Wait (at most `within`) until the bytes the client wrote before closing its end have
    /// been handed to the broker's socket: the publisher's `offline` and DISCONNECT.
    pub(super) async fn finish(&self, within: Duration) {
        let link = self.shared.link.lock().ok().and_then(|mut l| l.take());
        if let Some(mut link) = link
            && tokio::time::timeout(within, &mut link).await.is_err()
        {
            link.abort();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
        if let Some(link) = self.shared.link.lock().ok().and_then(|mut l| l.take()) {
            link.abort();
        }
    }
}

async fn accept_loop(
    listener: UnixListener,
    upstream: Arc<Upstream>,
    shared: Arc<Shared>,
    max_payload: usize,
    nonce: [u8; 16],
) {
    let me = i32::try_from(std::process::id()).ok();
    let mut refused = 0_u64;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("MQTT relay: accepting a connection: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let peer = stream.peer_cred().ok().and_then(|c| c.pid());
        if peer.is_none() || peer != me {
            refused += 1;
            // The first few: another local process must not be able to flood the log.
            if refused <= 3 {
                tracing::warn!(
                    "refused a connection to wattson's MQTT relay socket from process {}: only wattson itself may use it ({refused} refused)",
                    peer.map_or_else(|| "unknown".to_owned(), |p| p.to_string())
                );
            }
            continue;
        }
        if let Ok(mut e) = shared.error.lock() {
            *e = None;
        }
        let task = tokio::spawn(link(
            stream,
            upstream.clone(),
            shared.clone(),
            Filter::new(max_payload, nonce),
        ));
        if let Ok(mut l) = shared.link.lock()
            && let Some(old) = l.replace(task)
        {
            old.abort();
        }
    }
}

/// Relay one client connection until either side ends it.
async fn link(client: UnixStream, upstream: Arc<Upstream>, shared: Arc<Shared>, filter: Filter) {
    let broker = match tokio::time::timeout(upstream.connect_timeout, dial(&upstream)).await {
        Ok(Ok(broker)) => broker,
        Ok(Err(why)) => return shared.set_error(why.to_string()),
        Err(_) => {
            return shared.set_error(format!(
                "connection timed out after {} s",
                upstream.connect_timeout.as_secs_f64()
            ));
        }
    };
    let (from_client, to_client) = client.into_split();
    let (from_broker, to_broker) = tokio::io::split(broker);
    tokio::select! {
        () = client_to_broker(from_client, to_broker) => {}
        () = broker_to_client(from_broker, to_client, filter, &shared) => {}
    }
}

/// Why the broker could not be reached.
#[derive(Debug, thiserror::Error)]
enum DialError {
    #[error("{0}")]
    Connect(std::io::Error),
    /// The broker's host is no name a certificate can be checked against.
    #[error("TLS: {0}")]
    ServerName(rustls::pki_types::InvalidDnsNameError),
    #[error("TLS: {0}")]
    Tls(std::io::Error),
}

async fn dial(upstream: &Upstream) -> Result<Box<dyn Io>, DialError> {
    let b = &upstream.broker;
    let tcp = TcpStream::connect((b.host.as_str(), b.port))
        .await
        .map_err(DialError::Connect)?;
    // Small packets (a state a second, acknowledgements) go out at once.
    let _ = tcp.set_nodelay(true);
    let Some(tls) = &upstream.tls else {
        return Ok(Box::new(tcp));
    };
    let name =
        rustls::pki_types::ServerName::try_from(b.host.clone()).map_err(DialError::ServerName)?;
    let stream = TlsConnector::from(tls.clone())
        .connect(name, tcp)
        .await
        .map_err(DialError::Tls)?;
    Ok(Box::new(stream))
}

/// Everything the client writes, until it closes its end; then the broker's end is shut
/// down (TLS close_notify) after the last byte.
async fn client_to_broker(mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin) {
    let mut buf = vec![0u8; 4096];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
    let _ = to.shutdown().await;
}

/// What the broker sends, filtered, until it closes, errs or breaks the protocol; records why.
async fn broker_to_client(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut filter: Filter,
    shared: &Shared,
) {
    let mut buf = vec![0u8; 8192];
    let mut out = Vec::with_capacity(8192);
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) => return shared.set_error("the broker closed the connection".to_owned()),
            Ok(n) => n,
            Err(e) => return shared.set_error(e.to_string()),
        };
        out.clear();
        if let Err(e) = filter.feed(&buf[..n], &mut out) {
            return shared.set_error(e.to_string());
        }
        if !out.is_empty() && to.write_all(&out).await.is_err() {
            return;
        }
    }
}
