//! The client side of the control socket: find the daemon of a database ([`locate`]), and
//! talk to it ([`Client`]): status, a subscription to a source's readings, storing a sweep.
//!
//! A reader thread takes every line the daemon sends: readings go to a bounded queue (the
//! oldest dropped when the caller falls behind), replies to the caller waiting for one.

use std::collections::VecDeque;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use wattson_collectors::SourceId;

use super::messages::{
    DaemonStatus, Hello, MAX_LINE_BYTES, Message, PROTOCOL, Reading, Request, Stored, SweepRecord,
};

mod lookup;

pub use lookup::{Located, locate};

/// How long a client waits for the daemon's hello.
const HELLO_WITHIN: Duration = Duration::from_secs(5);
/// How long a client waits for a reply.
const REPLY_WITHIN: Duration = Duration::from_secs(30);
/// Readings a client keeps for its caller.
const READINGS_KEPT: usize = 256;

/// Why the daemon's control socket could not be used. Each names the socket and says what
/// to do.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(
        "cannot connect to the daemon's control socket {socket}: {reason}; it belongs to the \
         service's user and group (mode 0660): run this as root (sudo) or as the service \
         (systemctl start wattson-sweep.service runs the monthly sweep)"
    )]
    Permission { socket: PathBuf, reason: String },
    #[error(
        "the daemon that writes the database ({holder}) does not answer on its control socket \
         {socket}: {reason}; see `systemctl status wattson` and its log (journalctl -u wattson)"
    )]
    NotAnswering {
        socket: PathBuf,
        holder: String,
        reason: String,
    },
    #[error(
        "the daemon on {socket} (wattson {version}) speaks control protocol {theirs}, this \
         wattson ({ours}) speaks {PROTOCOL}: run the same version of both (after an upgrade, \
         restart the daemon: systemctl restart wattson)",
        ours = env!("CARGO_PKG_VERSION")
    )]
    Protocol {
        socket: PathBuf,
        theirs: u64,
        version: String,
    },
    #[error("{socket} is not a wattson control socket: {detail}")]
    NotWattson { socket: PathBuf, detail: String },
    #[error(
        "the daemon on {socket} writes {theirs}, not {ours}: pass the same --db to both, or \
         none"
    )]
    WrongDatabase {
        socket: PathBuf,
        theirs: PathBuf,
        ours: PathBuf,
    },
    #[error("control socket {socket}: {what}: {reason}")]
    Io {
        socket: PathBuf,
        what: &'static str,
        reason: String,
    },
    #[error("the daemon closed its control connection on {socket}: {detail}")]
    Closed { socket: PathBuf, detail: String },
    #[error("the daemon on {socket} refused: {message}")]
    Refused { socket: PathBuf, message: String },
    #[error("the daemon on {socket} sent no {what} within {} s", within.as_secs())]
    Timeout {
        socket: PathBuf,
        what: &'static str,
        within: Duration,
    },
}

#[derive(Debug, Default)]
struct InboxState {
    readings: VecDeque<Reading>,
    replies: VecDeque<Message>,
    /// Set when the connection ended: why.
    closed: Option<String>,
}

#[derive(Debug, Default)]
struct Inbox {
    state: Mutex<InboxState>,
    changed: Condvar,
}

impl Inbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, InboxState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A connection to the daemon.
#[derive(Debug)]
pub struct Client {
    socket: PathBuf,
    hello: Hello,
    writer: Mutex<UnixStream>,
    inbox: Arc<Inbox>,
}

impl Client {
    /// Read and check the hello on a new connection, then start the reader thread.
    fn greet(stream: UnixStream, socket: PathBuf, db: &Path) -> Result<Client, ControlError> {
        let io = |what: &'static str| {
            let socket = socket.clone();
            move |e: std::io::Error| ControlError::Io {
                socket,
                what,
                reason: crate::store::error_chain(&e),
            }
        };
        stream
            .set_read_timeout(Some(HELLO_WITHIN))
            .map_err(io("setting a timeout"))?;
        stream
            .set_write_timeout(Some(super::messages::WRITE_TIMEOUT))
            .map_err(io("setting a timeout"))?;
        let mut reader = BufReader::new(stream.try_clone().map_err(io("cloning"))?);
        let line = match read_line(&mut reader) {
            Ok(Some(line)) => line,
            Ok(None) => {
                return Err(ControlError::Closed {
                    socket,
                    detail: "before its hello".into(),
                });
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(ControlError::Timeout {
                    socket,
                    what: "hello",
                    within: HELLO_WITHIN,
                });
            }
            Err(e) => return Err(io("reading its hello")(e)),
        };
        let hello = parse_hello(&socket, &line)?;
        let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => a == b,
        };
        if !same(&hello.database, db) {
            return Err(ControlError::WrongDatabase {
                socket,
                theirs: hello.database,
                ours: db.to_owned(),
            });
        }
        reader
            .get_ref()
            .set_read_timeout(None)
            .map_err(io("setting a timeout"))?;
        let inbox = Arc::new(Inbox::default());
        let thread_inbox = inbox.clone();
        std::thread::Builder::new()
            .name("wattson-control".into())
            .spawn(move || read_messages(reader, &thread_inbox))
            .map_err(io("starting its reader"))?;
        Ok(Client {
            socket,
            hello,
            writer: Mutex::new(stream),
            inbox,
        })
    }

    /// The control socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The daemon's hello: its pid, version, database and host.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// "the daemon (pid 1234, wattson 0.1.0) on /var/lib/wattson/wattson.db.sock".
    pub fn describe(&self) -> String {
        format!(
            "the daemon (pid {}, wattson {}) on {}",
            self.hello.pid,
            self.hello.version,
            self.socket.display()
        )
    }

    /// The daemon's state and latest readings.
    pub fn status(&self) -> Result<DaemonStatus, ControlError> {
        match self.request(&Request::Status {}, REPLY_WITHIN)? {
            Message::Status(s) => Ok(*s),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Subscribe to every reading of `source`; returns its polling interval when the daemon
    /// knows it. Readings then arrive for [`Client::next_reading`].
    pub fn subscribe(&self, source: &SourceId) -> Result<Option<Duration>, ControlError> {
        let request = Request::Subscribe {
            source: source.to_owned(),
        };
        match self.request(&request, REPLY_WITHIN)? {
            Message::Subscribed { interval_ms, .. } => Ok(interval_ms.map(Duration::from_millis)),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Have the daemon store a sweep measured on this connection's readings.
    pub fn store_sweep(&self, record: SweepRecord) -> Result<Stored, ControlError> {
        match self.request(&Request::StoreSweep(Box::new(record)), REPLY_WITHIN)? {
            Message::Stored(s) => Ok(*s),
            other => Err(self.unexpected(&other)),
        }
    }

    /// The oldest reading taken at or after `from_ms` (older ones are dropped), waiting at
    /// most `within` for one.
    pub fn next_reading(&self, from_ms: i64, within: Duration) -> Result<Reading, ControlError> {
        self.wait(within, "reading", |state| {
            while state.readings.front().is_some_and(|r| r.ts_ms < from_ms) {
                state.readings.pop_front();
            }
            state.readings.pop_front().map(Ok)
        })
    }

    /// Wait at most `within` until `take` finds what the caller waits for in the inbox (or
    /// the connection ends).
    fn wait<T>(
        &self,
        within: Duration,
        what: &'static str,
        mut take: impl FnMut(&mut InboxState) -> Option<Result<T, ControlError>>,
    ) -> Result<T, ControlError> {
        let deadline = Instant::now() + within;
        let mut state = self.inbox.lock();
        loop {
            if let Some(found) = take(&mut state) {
                return found;
            }
            if let Some(why) = &state.closed {
                return Err(ControlError::Closed {
                    socket: self.socket.clone(),
                    detail: why.clone(),
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ControlError::Timeout {
                    socket: self.socket.clone(),
                    what,
                    within,
                });
            }
            state = self
                .inbox
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    fn request(&self, request: &Request, within: Duration) -> Result<Message, ControlError> {
        let mut line = serde_json::to_string(request).map_err(|e| ControlError::Io {
            socket: self.socket.clone(),
            what: "writing a request",
            reason: e.to_string(),
        })?;
        line.push('\n');
        {
            let mut w = self
                .writer
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            w.write_all(line.as_bytes())
                .and_then(|()| w.flush())
                .map_err(|e| ControlError::Io {
                    socket: self.socket.clone(),
                    what: "sending a request",
                    reason: crate::store::error_chain(&e),
                })?;
        }
        self.wait(within, "reply", |state| {
            state.replies.pop_front().map(|m| match m {
                Message::Error { message } => Err(ControlError::Refused {
                    socket: self.socket.clone(),
                    message,
                }),
                m => Ok(m),
            })
        })
    }

    fn unexpected(&self, m: &Message) -> ControlError {
        ControlError::NotWattson {
            socket: self.socket.clone(),
            detail: format!("unexpected reply {m:?}"),
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // Ends the reader thread: its read returns at once.
        if let Ok(w) = self.writer.lock() {
            let _ = w.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// The hello, checked: its protocol first (from any version's hello), then the rest.
fn parse_hello(socket: &Path, line: &str) -> Result<Hello, ControlError> {
    let not_wattson = |detail: String| ControlError::NotWattson {
        socket: socket.to_owned(),
        detail,
    };
    let value: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| not_wattson(format!("its first line is not JSON ({e})")))?;
    if let Ok(Message::Error { message }) = serde_json::from_value::<Message>(value.clone()) {
        return Err(ControlError::Refused {
            socket: socket.to_owned(),
            message,
        });
    }
    if value.get("type").and_then(serde_json::Value::as_str) != Some("hello") {
        return Err(not_wattson(format!(
            "its first line is not a hello: {}",
            shorten(line)
        )));
    }
    let theirs = value
        .get("protocol")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| not_wattson("its hello names no protocol".into()))?;
    if theirs != u64::from(PROTOCOL) {
        return Err(ControlError::Protocol {
            socket: socket.to_owned(),
            theirs,
            version: value
                .get("version")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("unknown")
                .to_owned(),
        });
    }
    match serde_json::from_value::<Message>(value) {
        Ok(Message::Hello(h)) => Ok(h),
        Ok(_) => Err(not_wattson("its first line is not a hello".into())),
        Err(e) => Err(not_wattson(format!("its hello does not parse ({e})"))),
    }
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 80 {
        s.chars().take(79).chain(['…']).collect()
    } else {
        s.to_owned()
    }
}

/// One line of at most [`MAX_LINE_BYTES`]; `None` at the end of the stream.
fn read_line(reader: &mut BufReader<UnixStream>) -> std::io::Result<Option<String>> {
    let mut buf = Vec::new();
    let limit = MAX_LINE_BYTES as u64 + 1;
    let n = reader.by_ref().take(limit).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if buf.len() > MAX_LINE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a line longer than {MAX_LINE_BYTES} bytes"),
        ));
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

fn read_messages(mut reader: BufReader<UnixStream>, inbox: &Inbox) {
    let why = loop {
        let line = match read_line(&mut reader) {
            Ok(Some(line)) => line,
            Ok(None) => break "the connection ended".to_owned(),
            Err(e) => break crate::store::error_chain(&e),
        };
        let message = match serde_json::from_str::<Message>(&line) {
            Ok(m) => m,
            Err(e) => break format!("a line that does not parse ({e}): {}", shorten(&line)),
        };
        let mut state = inbox.lock();
        match message {
            Message::Reading(r) => {
                if state.readings.len() >= READINGS_KEPT {
                    state.readings.pop_front();
                }
                state.readings.push_back(r);
            }
            other => state.replies.push_back(other),
        }
        drop(state);
        inbox.changed.notify_all();
    };
    // The daemon's last word, when it said why it dropped us.
    let mut state = inbox.lock();
    let said = state.replies.iter().rev().find_map(|m| match m {
        Message::Error { message } => Some(message.clone()),
        _ => None,
    });
    state.closed = Some(said.map_or(why.clone(), |m| format!("{m} ({why})")));
    drop(state);
    inbox.changed.notify_all();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hello_of_another_protocol_is_named_before_anything_else_is_read() {
        let socket = Path::new("/run/x.sock");
        let e = parse_hello(
            socket,
            r#"{"type":"hello","protocol":7,"version":"9.0.0","whatever":[1]}"#,
        )
        .unwrap_err();
        let text = e.to_string();
        assert!(text.contains("speaks control protocol 7"), "{text}");
        assert!(text.contains("wattson 9.0.0"), "{text}");
        assert!(text.contains("/run/x.sock"), "{text}");
        let e = parse_hello(socket, "HTTP/1.1 400 Bad Request").unwrap_err();
        assert!(e.to_string().contains("not JSON"), "{e}");
        let e = parse_hello(socket, r#"{"type":"reading"}"#).unwrap_err();
        assert!(e.to_string().contains("not a hello"), "{e}");
    }
}
