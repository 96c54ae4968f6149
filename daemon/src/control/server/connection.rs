//! One control-socket connection: the hello, then requests and (once subscribed) readings,
//! until the client leaves, falls behind, or the daemon stops.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use wattson_collectors::SourceId;

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{OwnedSemaphorePermit, broadcast};
use tokio_util::sync::CancellationToken;

use super::{Pass, Shared, vouch};
use crate::control::messages::{
    DaemonStatus, FIRST_REQUEST_WITHIN, Hello, MAX_CLIENTS, MAX_LINE_BYTES, Message, PROTOCOL,
    Reading, Request, SweepRecord, WRITE_TIMEOUT,
};

/// What the kernel may hold for a client that is not reading, bytes (it doubles it): about
/// 50 readings, so a client that stops reading is noticed within seconds, not minutes.
const SEND_BUFFER: usize = 8 * 1024;

/// Instants of the readings sent, kept to check a sweep's levels against: an hour at 10 Hz,
/// a day at 1 Hz.
const DELIVERED_KEPT: usize = 100_000;

/// A subscription and what it delivered.
pub(super) struct Subscription {
    pub source: SourceId,
    pub rx: broadcast::Receiver<Pass>,
    /// When it began, UTC ms.
    pub since_ms: i64,
    /// The source's interval, when known.
    pub interval: Option<Duration>,
    /// The instants of the readings sent, oldest first.
    pub delivered: VecDeque<i64>,
}

enum Event {
    Stop,
    Silent,
    Line(std::io::Result<LineRead>),
    Pass(Result<Pass, broadcast::error::RecvError>),
}

enum LineRead {
    Line,
    TooLong,
    End,
}

/// Why a connection ended early.
enum Dropped {
    /// The client left (or its socket failed): nothing to say.
    Gone,
    /// It did not take a line within the write timeout.
    Slow,
}

struct Connection {
    shared: Arc<Shared>,
    /// "pid 1234 uid 0", for the log.
    peer: String,
    writer: OwnedWriteHalf,
    subscription: Option<Subscription>,
}

/// Tell a connection over the limit so, and close it.
pub(super) async fn refuse_busy(mut stream: UnixStream) {
    let line = error_line(&format!(
        "busy: {MAX_CLIENTS} clients are connected, the most this daemon serves at once; try \
         again later"
    ));
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&line)).await;
    tracing::warn!(
        "control socket: refused {}: {MAX_CLIENTS} clients already connected",
        peer_text(&stream)
    );
}

/// Serve one connection until it ends or `cancel`.
pub(super) async fn serve(
    stream: UnixStream,
    shared: Arc<Shared>,
    _permit: OwnedSemaphorePermit,
    cancel: CancellationToken,
) {
    let peer = peer_text(&stream);
    shrink_send_buffer(&stream);
    let (reader, writer) = stream.into_split();
    let mut conn = Connection {
        shared,
        peer,
        writer,
        subscription: None,
    };
    tracing::debug!("control socket: {} connected", conn.peer);
    let hello = Message::Hello(Hello {
        protocol: PROTOCOL,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        pid: std::process::id(),
        database: conn.shared.ctx.config.storage.path.clone(),
        host: conn.shared.ctx.config.host.name.clone(),
    });
    if conn.send(&hello).await.is_err() {
        return;
    }
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    let silent = tokio::time::sleep(FIRST_REQUEST_WITHIN);
    tokio::pin!(silent);
    let mut heard = false;
    loop {
        let event = tokio::select! {
            () = cancel.cancelled() => Event::Stop,
            () = &mut silent, if !heard => Event::Silent,
            r = read_line(&mut reader, &mut line) => Event::Line(r),
            p = next_pass(conn.subscription.as_mut()) => Event::Pass(p),
        };
        let outcome = match event {
            Event::Stop => {
                let _ = tokio::time::timeout(
                    Duration::from_millis(100),
                    conn.say_error("the daemon is stopping"),
                )
                .await;
                break;
            }
            Event::Silent => {
                let _ = conn
                    .say_error(&format!(
                        "no request within {} s of connecting",
                        FIRST_REQUEST_WITHIN.as_secs()
                    ))
                    .await;
                break;
            }
            Event::Line(Ok(LineRead::Line)) => {
                heard = true;
                let text = std::mem::take(&mut line);
                conn.handle(&text).await
            }
            Event::Line(Ok(LineRead::TooLong)) => {
                let _ = conn
                    .say_error(&format!(
                        "a request longer than {MAX_LINE_BYTES} bytes: connection closed"
                    ))
                    .await;
                tracing::warn!(
                    "control socket: closed {}: a request longer than {MAX_LINE_BYTES} bytes",
                    conn.peer
                );
                break;
            }
            Event::Line(Ok(LineRead::End) | Err(_))
            | Event::Pass(Err(broadcast::error::RecvError::Closed)) => break,
            Event::Pass(Ok(pass)) => conn.deliver(&pass).await,
            Event::Pass(Err(broadcast::error::RecvError::Lagged(n))) => {
                tracing::warn!(
                    "control socket: dropped {}: {n} sampling passes behind (it does not read \
                     fast enough); sampling and storing go on",
                    conn.peer
                );
                let _ = tokio::time::timeout(
                    Duration::from_millis(100),
                    conn.say_error(&format!("dropped: {n} readings behind")),
                )
                .await;
                break;
            }
        };
        match outcome {
            Ok(()) => {}
            Err(Dropped::Gone) => break,
            Err(Dropped::Slow) => {
                tracing::warn!(
                    "control socket: dropped {}: it took no line for {} s (a client that does \
                     not read); sampling and storing go on",
                    conn.peer,
                    WRITE_TIMEOUT.as_secs()
                );
                break;
            }
        }
    }
    tracing::debug!("control socket: {} disconnected", conn.peer);
}

async fn next_pass(
    subscription: Option<&mut Subscription>,
) -> Result<Pass, broadcast::error::RecvError> {
    match subscription {
        Some(s) => s.rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Read one request line into `buf` (which keeps a partial line across cancellations), at
/// most [`MAX_LINE_BYTES`].
async fn read_line(
    reader: &mut BufReader<OwnedReadHalf>,
    buf: &mut Vec<u8>,
) -> std::io::Result<LineRead> {
    let room = (MAX_LINE_BYTES + 1).saturating_sub(buf.len()) as u64;
    let n = (&mut *reader).take(room).read_until(b'\n', buf).await?;
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(LineRead::Line);
    }
    if buf.len() > MAX_LINE_BYTES {
        return Ok(LineRead::TooLong);
    }
    // The end of the stream (a partial last line is dropped).
    let _ = n;
    Ok(LineRead::End)
}

impl Connection {
    async fn send(&mut self, message: &Message) -> Result<(), Dropped> {
        let mut line = serde_json::to_vec(message).map_err(|_| Dropped::Gone)?;
        line.push(b'\n');
        match tokio::time::timeout(WRITE_TIMEOUT, self.writer.write_all(&line)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Dropped::Gone),
            Err(_) => Err(Dropped::Slow),
        }
    }

    async fn say_error(&mut self, message: &str) -> Result<(), Dropped> {
        self.send(&Message::Error {
            message: message.to_owned(),
        })
        .await
    }

    async fn handle(&mut self, line: &[u8]) -> Result<(), Dropped> {
        let request = match serde_json::from_slice::<Request>(line) {
            Ok(r) => r,
            Err(e) => {
                return self
                    .say_error(&format!(
                        "not a request of control protocol {PROTOCOL} ({e}); the requests are \
                         status, subscribe and store_sweep"
                    ))
                    .await;
            }
        };
        match request {
            Request::Status {} => {
                let status = self.status();
                self.send(&Message::Status(Box::new(status))).await
            }
            Request::Subscribe { source } => self.subscribe(source).await,
            Request::StoreSweep(record) => self.store_sweep(*record).await,
        }
    }

    fn status(&self) -> DaemonStatus {
        let ctx = &self.shared.ctx;
        DaemonStatus {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            pid: std::process::id(),
            since_ms: self.shared.started_ms,
            database: ctx.config.storage.path.clone(),
            host: ctx.config.host.name.clone(),
            sources: ctx.sources.clone(),
            readings: ctx.live.latest(),
            meters: ctx.live.counters(),
            store: ctx.store.health(),
            clients: self.shared.clients(),
            http: ctx.http.map(crate::publish::http::url_of),
            estimate_basis: ctx.live.basis_of(&SourceId::Estimate),
        }
    }

    async fn subscribe(&mut self, source: SourceId) -> Result<(), Dropped> {
        let ctx = &self.shared.ctx;
        if let Some(s) = &self.subscription {
            let text = format!(
                "already subscribed to {}: one subscription a connection",
                s.source
            );
            return self.say_error(&text).await;
        }
        let mut known = ctx.sources.clone();
        for r in ctx.live.latest() {
            if !known.contains(&r.source) {
                known.push(r.source);
            }
        }
        if !known.contains(&source) {
            let known: Vec<String> = known.iter().map(ToString::to_string).collect();
            let text = format!(
                "no source {:?} in this daemon; it collects {}",
                source.to_string(),
                known.join(", ")
            );
            return self.say_error(&text).await;
        }
        let interval = source_interval(&ctx.config, &source);
        self.subscription = Some(Subscription {
            source: source.clone(),
            rx: ctx.live.feed().subscribe(),
            since_ms: wattson_collectors::now_ms(),
            interval,
            delivered: VecDeque::new(),
        });
        tracing::info!("control socket: {} subscribed to {source}", self.peer);
        self.send(&Message::Subscribed {
            source,
            interval_ms: interval.map(|d| d.as_millis() as u64),
        })
        .await
    }

    async fn deliver(&mut self, pass: &Pass) -> Result<(), Dropped> {
        let Some(s) = self.subscription.as_mut() else {
            return Ok(());
        };
        let readings = Reading::from_pass(&s.source, pass);
        for r in &readings {
            if s.delivered.len() >= DELIVERED_KEPT {
                s.delivered.pop_front();
            }
            s.delivered.push_back(r.ts_ms);
        }
        for r in readings {
            self.send(&Message::Reading(r)).await?;
        }
        Ok(())
    }

    async fn store_sweep(&mut self, record: SweepRecord) -> Result<(), Dropped> {
        if let Err(why) = vouch::check(&record, self.subscription.as_ref()) {
            tracing::warn!(
                "control socket: refused to store the sweep {:?} of {}: {why}",
                record.name,
                self.peer
            );
            return self.say_error(&format!("sweep not stored: {why}")).await;
        }
        let ctx = &self.shared.ctx;
        let root =
            wattson_collectors::SysRoot::new(&ctx.config.host.sysfs, &ctx.config.host.procfs);
        let host = ctx.config.host.name.clone();
        let meter = ctx
            .config
            .meters
            .iter()
            .find(|m| record.source.meter_id() == Some(m.id.as_str()))
            .map_or_else(
                || record.source.to_string(),
                crate::sweep::record::meter_description,
            );
        let database = ctx.config.storage.path.clone();
        let name = record.name.clone();
        let levels = record.levels.len();
        let result = ctx
            .store
            .query_async(move |store| store_record(store, &root, &host, &meter, &record))
            .await;
        match result {
            Ok(Ok(r)) => {
                tracing::info!(
                    "control socket: stored the sweep {name:?} of {} (run {}, {levels} levels){}",
                    self.peer,
                    r.run_id,
                    r.check
                        .as_ref()
                        .map(|c| format!("; {}", crate::sweep::regression::describe(c)))
                        .unwrap_or_default()
                );
                self.send(&Message::Stored(Box::new(r.into_stored(database))))
                    .await
            }
            Ok(Err(e)) => {
                let text = format!("sweep not stored: {}", wattson_collectors::ErrorChain(&e));
                tracing::warn!("control socket: {} : {text}", self.peer);
                self.say_error(&text).await
            }
            Err(e) => {
                let text = format!("sweep not stored: {}", wattson_collectors::ErrorChain(&e));
                self.say_error(&text).await
            }
        }
    }
}

/// On the writer's thread: the host's fingerprint, the fits, and the record.
fn store_record(
    store: &crate::store::Store,
    root: &wattson_collectors::SysRoot,
    host: &str,
    meter: &str,
    record: &SweepRecord,
) -> Result<crate::sweep::record::Recorded, crate::sweep::SweepError> {
    let fingerprint = crate::sweep::fingerprint::gather(root, host, meter);
    let mut levels = record.levels.clone();
    let fits =
        crate::sweep::outcome::fits(&record.settings.kinds, &mut levels, record.physical_cores);
    let outcome = crate::sweep::outcome::SweepOutcome {
        levels,
        fits,
        complete: record.complete,
        started_ms: record.started_ms,
        ended_ms: record.ended_ms,
    };
    crate::sweep::record::record(
        store,
        host,
        &crate::sweep::record::Finished {
            name: &record.name,
            fingerprint: &fingerprint,
            settings: &record.settings,
            outcome: &outcome,
            regression_check: record.regression_check,
        },
    )
}

/// The polling interval of `source` in `config`.
fn source_interval(config: &crate::config::Config, source: &SourceId) -> Option<Duration> {
    if *source == SourceId::Cpu {
        return Some(config.cpu.interval);
    }
    config
        .meters
        .iter()
        .find(|m| source.meter_id() == Some(m.id.as_str()))
        .map(|m| m.interval)
}

fn error_line(message: &str) -> Vec<u8> {
    let mut line = serde_json::to_vec(&Message::Error {
        message: message.to_owned(),
    })
    .unwrap_or_default();
    line.push(b'\n');
    line
}

/// "pid 1234 uid 0" from the peer's credentials.
fn peer_text(stream: &UnixStream) -> String {
    match stream.peer_cred() {
        Ok(c) => match c.pid() {
            Some(pid) => format!("client pid {pid} uid {}", c.uid()),
            None => format!("client uid {}", c.uid()),
        },
        Err(_) => "a client".to_owned(),
    }
}

fn shrink_send_buffer(stream: &UnixStream) {
    use nix::sys::socket::{setsockopt, sockopt};
    let _ = setsockopt(stream, sockopt::SndBuf, &SEND_BUFFER);
}
