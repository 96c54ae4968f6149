//! Helpers for the `[http]` tests: the address a daemon bound (from its log line), a plain
//! HTTP/1.1 request over a TCP stream, a free port for programs that cannot bind port 0
//! themselves, and a `line` meter whose watts the test sets while the daemon reads it.

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serialport::SerialPort as _;

use crate::ledger::{config_for, meter_toml};
use crate::{Child, TestEnv};

/// `[http] listen` on a port the kernel picks.
pub const HTTP_TOML: &str = "\n[http]\nlisten = \"127.0.0.1:0\"\n";

/// A daemon serving `[http]` for `host` (the ledger tests' flat tariff, no CPU telemetry),
/// reading a constant `watts` PZEM-004T every 250 ms; with the meter, the config and the
/// bound address.
pub struct HttpDaemon {
    pub meter: wattson::sources::meters::SimHandle,
    pub config: PathBuf,
    pub daemon: Child,
    pub addr: SocketAddr,
}

impl HttpDaemon {
    pub fn start(env: &TestEnv, host: &str, watts: f64) -> HttpDaemon {
        let meter = crate::simulate("pzem004t", &[1], watts);
        let config = config_for(
            env.dir.path(),
            host,
            &env.db,
            &format!("{}{HTTP_TOML}", meter_toml(&meter.path, "250ms")),
        );
        let daemon = Child::run_daemon(&config, &[]);
        let addr = bound_addr(&daemon);
        HttpDaemon {
            meter,
            config,
            daemon,
            addr,
        }
    }
}

/// The address the daemon says it serves `[http]` on, once its log says so.
pub fn bound_addr(daemon: &Child) -> SocketAddr {
    daemon.wait_for("the http log line", Duration::from_secs(20), || {
        let log = daemon.stderr();
        let line = log.lines().find(|l| l.contains("http: serving"))?;
        let url = line.split(" on http://").nth(1)?;
        url.trim().parse().ok()
    })
}

/// One response: status, headers (lower-case names) and body.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `GET path` with `headers`, `Connection: close`; `None` when the connection fails.
pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Option<Response> {
    request(addr, "GET", path, headers)
}

/// Any method; `None` when the connection fails or the answer is not HTTP.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Option<Response> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (n, v) in headers {
        let _ = write!(head, "{n}: {v}\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    parse(&raw)
}

/// A response as bytes read to the end; a chunked body is put together again (Go's servers,
/// Prometheus among them, chunk a response longer than their buffer), and its
/// `transfer-encoding` header then left out.
pub fn parse(raw: &[u8]) -> Option<Response> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let mut headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        headers.retain(|(n, _)| n != "transfer-encoding");
        dechunk(body)?
    } else {
        body.to_owned()
    };
    Some(Response {
        status,
        headers,
        body,
    })
}

/// A chunked body's chunks joined; `None` where it is cut short.
fn dechunk(mut body: &str) -> Option<String> {
    let mut whole = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(whole);
        }
        whole.push_str(rest.get(..size)?);
        body = rest.get(size..)?.strip_prefix("\r\n")?;
    }
}

/// A port free now on 127.0.0.1 (for a program that cannot be given port 0; retry on a
/// conflict).
pub fn free_port() -> u16 {
    crate::broker::free_port()
}

/// A `line` meter on a pseudo-terminal writing `power,voltage,current` four times a second
/// at the watts last set.
pub struct SettableMeter {
    pub path: PathBuf,
    watts: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SettableMeter {
    pub fn start(watts: f64) -> SettableMeter {
        let (mut master, slave) = wattson::sources::meters::pty_pair().unwrap();
        let path = PathBuf::from(slave.name().unwrap());
        let level = Arc::new(AtomicU64::new(watts.to_bits()));
        let stop = Arc::new(AtomicBool::new(false));
        let (level2, stop2) = (level.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let _slave = slave;
            while !stop2.load(Ordering::SeqCst) {
                let w = f64::from_bits(level2.load(Ordering::Relaxed));
                let _ = master.write_all(format!("{w:.1},230.0,{:.3}\n", w / 230.0).as_bytes());
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        SettableMeter {
            path,
            watts: level,
            stop,
            thread: Some(thread),
        }
    }

    pub fn set(&self, watts: f64) {
        self.watts.store(watts.to_bits(), Ordering::Relaxed);
    }
}

impl Drop for SettableMeter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The value of the first exposition line starting with `prefix` (a metric name and labels).
pub fn metric_value(exposition: &str, prefix: &str) -> Option<f64> {
    exposition
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}
