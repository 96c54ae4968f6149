//! A UPS through Network UPS Tools: upsd's text protocol on TCP, default port 3493
//! (NUT docs, "Network protocol information": `GET VAR <ups> <var>` answered by
//! `VAR <ups> <var> "<value>"` or `ERR <code>`; `USERNAME`/`PASSWORD` answered by `OK`).
//!
//! Watts are `ups.realpower` where the driver has it, else `ups.load` (percent) times
//! `ups.realpower.nominal` (W) / 100. A UPS feeds every machine plugged into it:
//! [`Scope::Shared`], never added to a wall or component reading.
//!
//! One connection is kept open between polls; a lost connection is dropped and reopened at
//! the next poll. Every read and write is bounded by the configured timeout. The password
//! is sent only in the `PASSWORD` line and never appears in logs, errors or `Debug`.

use crate::SourceId;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::{CollectError, Collector, Metric, Sample, Scope};

/// upsd's registered port.
pub const DEFAULT_PORT: u16 = 3493;

/// What goes wrong talking to upsd.
#[derive(Debug, thiserror::Error)]
pub enum NutError {
    #[error("upsd at {addr}: cannot resolve")]
    Resolve {
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error("upsd at {addr}: {what}")]
    Io {
        addr: String,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("upsd at {addr}: no answer within {} ms", .timeout.as_millis())]
    Timeout { addr: String, timeout: Duration },
    #[error("upsd at {addr}: closed the connection")]
    Closed { addr: String },
    #[error("upsd at {addr}: UPS {ups:?} is unknown to upsd (check the name in ups.conf)")]
    UnknownUps { addr: String, ups: String },
    #[error("upsd at {addr}: {request} refused: ERR {code}")]
    Refused {
        addr: String,
        request: String,
        code: String,
    },
    #[error("upsd at {addr}: unexpected answer to {request}: {line:?}")]
    Protocol {
        addr: String,
        request: String,
        line: String,
    },
    #[error(
        "upsd at {addr}: UPS {ups:?} reports neither ups.realpower nor ups.load with \
         ups.realpower.nominal, so its watts are unknown"
    )]
    NoPower { addr: String, ups: String },
}

impl NutError {
    /// Whether the connection is unusable after this error.
    fn breaks_connection(&self) -> bool {
        matches!(
            self,
            NutError::Io { .. }
                | NutError::Timeout { .. }
                | NutError::Closed { .. }
                | NutError::Protocol { .. }
        )
    }
}

/// upsd `ERR` codes that no retry will fix.
const FATAL_CODES: [&str; 5] = [
    "ACCESS-DENIED",
    "INVALID-USERNAME",
    "INVALID-PASSWORD",
    "USERNAME-REQUIRED",
    "PASSWORD-REQUIRED",
];

impl From<NutError> for CollectError {
    fn from(e: NutError) -> Self {
        let source_name = "ups".to_owned();
        let detail = e.to_string();
        match e {
            NutError::Timeout { addr, timeout } => CollectError::Timeout {
                source_name: format!("ups (upsd at {addr})"),
                timeout_ms: timeout.as_millis() as u64,
            },
            NutError::UnknownUps { .. } | NutError::NoPower { .. } => CollectError::Unavailable {
                source_name,
                detail,
            },
            NutError::Refused { ref code, .. } if FATAL_CODES.contains(&code.as_str()) => {
                CollectError::Unavailable {
                    source_name,
                    detail,
                }
            }
            // DATA-STALE, DRIVER-NOT-CONNECTED, a lost or refused connection: next poll.
            _ => CollectError::Failed {
                source_name,
                detail,
            },
        }
    }
}

/// One line from upsd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `VAR <ups> <var> "<value>"`, value unescaped.
    Var {
        ups: String,
        var: String,
        value: String,
    },
    /// `OK` or `OK <text>`.
    Ok,
    /// `ERR <code> [<extra>]`.
    Err(String),
}

/// Parse one reply line (without its newline). `None` for anything else.
pub fn parse_reply(line: &str) -> Option<Reply> {
    let line = line.trim_end_matches(['\r', '\n']);
    if line == "OK" || line.starts_with("OK ") {
        return Some(Reply::Ok);
    }
    if let Some(rest) = line.strip_prefix("ERR ") {
        let code = rest.split_whitespace().next()?;
        return Some(Reply::Err(code.to_owned()));
    }
    let rest = line.strip_prefix("VAR ")?;
    let (ups, rest) = rest.split_once(' ')?;
    let (var, quoted) = rest.split_once(' ')?;
    let inner = quoted.strip_prefix('"')?.strip_suffix('"')?;
    let mut value = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        // The protocol escapes `"` and `\` with a backslash.
        value.push(if c == '\\' { chars.next()? } else { c });
    }
    Some(Reply::Var {
        ups: ups.to_owned(),
        var: var.to_owned(),
        value,
    })
}

/// Where the UPS is and how to log in.
#[derive(Clone, PartialEq, Eq)]
pub struct NutConfig {
    /// upsd host name or address.
    pub host: String,
    /// upsd port, normally [`DEFAULT_PORT`].
    pub port: u16,
    /// The UPS name in upsd's ups.conf (`ups` in `ups@host`).
    pub ups: String,
    /// Optional `USERNAME`/`PASSWORD` login (upsd.users). Plain `GET VAR` needs none.
    pub username: Option<String>,
    pub password: Option<String>,
    /// Connect, read and write limit, each.
    pub timeout: Duration,
}

impl NutConfig {
    /// `ups` on `host` at the default port, 2 s timeout, no login.
    pub fn new(host: impl Into<String>, ups: impl Into<String>) -> Self {
        NutConfig {
            host: host.into(),
            port: DEFAULT_PORT,
            ups: ups.into(),
            username: None,
            password: None,
            timeout: Duration::from_secs(2),
        }
    }

    fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

impl std::fmt::Debug for NutConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NutConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("ups", &self.ups)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// How this UPS's watts are found, learned at the first poll.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Method {
    RealPower,
    /// `ups.load` x this nominal W / 100.
    Load {
        nominal_w: f64,
    },
}

/// Polls one UPS through upsd.
pub struct NutCollector {
    config: NutConfig,
    addr: String,
    source: SourceId,
    conn: Option<Conn>,
    method: Option<Method>,
}

impl std::fmt::Debug for NutCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NutCollector")
            .field("config", &self.config)
            .field("connected", &self.conn.is_some())
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

impl NutCollector {
    /// What a UPS's output power measures: everything plugged into it.
    pub const SCOPE: Scope = Scope::Shared;

    /// Connects and takes one reading, so a wrong host, UPS name or login fails here, once.
    pub fn new(config: NutConfig) -> Result<Self, NutError> {
        let mut c = NutCollector {
            addr: config.addr(),
            source: SourceId::ups(&config.ups),
            config,
            conn: None,
            method: None,
        };
        c.watts()?;
        Ok(c)
    }

    pub fn scope(&self) -> Scope {
        Self::SCOPE
    }

    fn io_err(&self, what: &'static str, source: io::Error) -> NutError {
        if matches!(
            source.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            NutError::Timeout {
                addr: self.addr.clone(),
                timeout: self.config.timeout,
            }
        } else {
            NutError::Io {
                addr: self.addr.clone(),
                what,
                source,
            }
        }
    }

    fn connect(&self) -> Result<Conn, NutError> {
        let addrs = (self.config.host.as_str(), self.config.port)
            .to_socket_addrs()
            .map_err(|source| NutError::Resolve {
                addr: self.addr.clone(),
                source,
            })?;
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no addresses");
        for a in addrs {
            match TcpStream::connect_timeout(&a, self.config.timeout) {
                Ok(stream) => {
                    let setup = |s: &TcpStream| {
                        s.set_read_timeout(Some(self.config.timeout))?;
                        s.set_write_timeout(Some(self.config.timeout))?;
                        s.set_nodelay(true)?;
                        s.try_clone()
                    };
                    let writer = setup(&stream).map_err(|e| self.io_err("connecting", e))?;
                    return Ok(Conn {
                        reader: BufReader::new(stream),
                        writer,
                    });
                }
                Err(e) => last = e,
            }
        }
        Err(self.io_err("connecting", last))
    }

    /// Send one line and read one reply. `shown` is the request as errors may quote it.
    fn request(&mut self, line: &str, shown: &str) -> Result<Reply, NutError> {
        let result = self.request_inner(line, shown);
        if let Err(e) = &result
            && e.breaks_connection()
        {
            self.conn = None;
        }
        result
    }

    fn request_inner(&mut self, line: &str, shown: &str) -> Result<Reply, NutError> {
        if self.conn.is_none() {
            let conn = self.connect()?;
            self.conn = Some(conn);
            self.login()?;
        }
        let Some(conn) = self.conn.as_mut() else {
            return Err(NutError::Closed {
                addr: self.addr.clone(),
            });
        };
        let sent = conn
            .writer
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| conn.writer.flush());
        let mut reply = String::new();
        let read = sent.and_then(|()| conn.reader.read_line(&mut reply));
        match read {
            Ok(0) => Err(NutError::Closed {
                addr: self.addr.clone(),
            }),
            Ok(_) => parse_reply(&reply).ok_or_else(|| NutError::Protocol {
                addr: self.addr.clone(),
                request: shown.to_owned(),
                line: reply.trim_end().to_owned(),
            }),
            Err(e) => Err(self.io_err("talking", e)),
        }
    }

    fn login(&mut self) -> Result<(), NutError> {
        let (Some(user), password) = (self.config.username.clone(), self.config.password.clone())
        else {
            return Ok(());
        };
        let mut steps = vec![(format!("USERNAME {user}"), "USERNAME".to_owned())];
        if let Some(pw) = password {
            steps.push((format!("PASSWORD {pw}"), "PASSWORD".to_owned()));
        }
        for (line, shown) in steps {
            match self.request_inner(&line, &shown)? {
                Reply::Ok => {}
                Reply::Err(code) => {
                    self.conn = None;
                    return Err(NutError::Refused {
                        addr: self.addr.clone(),
                        request: shown,
                        code,
                    });
                }
                Reply::Var { .. } => {
                    self.conn = None;
                    return Err(NutError::Protocol {
                        addr: self.addr.clone(),
                        request: shown,
                        line: "VAR ...".to_owned(),
                    });
                }
            }
        }
        Ok(())
    }

    /// `GET VAR`: `Ok(None)` where the UPS lacks the variable.
    fn get_var(&mut self, var: &str) -> Result<Option<f64>, NutError> {
        let ups = self.config.ups.clone();
        let request = format!("GET VAR {ups} {var}");
        match self.request(&request, &request)? {
            Reply::Var { value, .. } => {
                value
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| NutError::Protocol {
                        addr: self.addr.clone(),
                        request,
                        line: value,
                    })
            }
            Reply::Err(code) if code == "VAR-NOT-SUPPORTED" => Ok(None),
            Reply::Err(code) if code == "UNKNOWN-UPS" => Err(NutError::UnknownUps {
                addr: self.addr.clone(),
                ups,
            }),
            Reply::Err(code) => Err(NutError::Refused {
                addr: self.addr.clone(),
                request,
                code,
            }),
            Reply::Ok => Err(NutError::Protocol {
                addr: self.addr.clone(),
                request,
                line: "OK".to_owned(),
            }),
        }
    }

    fn no_power(&self) -> NutError {
        NutError::NoPower {
            addr: self.addr.clone(),
            ups: self.config.ups.clone(),
        }
    }

    /// The UPS's output power now, W.
    pub fn watts(&mut self) -> Result<f64, NutError> {
        if matches!(self.method, None | Some(Method::RealPower)) {
            if let Some(w) = self.get_var("ups.realpower")? {
                self.method = Some(Method::RealPower);
                return Ok(w);
            }
            let Some(nominal_w) = self.get_var("ups.realpower.nominal")? else {
                return Err(self.no_power());
            };
            tracing::debug!(
                "{}: no ups.realpower; using ups.load x {nominal_w} W nominal",
                self.source
            );
            self.method = Some(Method::Load { nominal_w });
        }
        let Some(Method::Load { nominal_w }) = self.method else {
            return Err(self.no_power());
        };
        let Some(load) = self.get_var("ups.load")? else {
            return Err(self.no_power());
        };
        Ok(load * nominal_w / 100.0)
    }
}

impl Drop for NutCollector {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.as_mut() {
            // Polite, not required: upsd also copes with a dropped socket.
            let _ = conn.writer.write_all(b"LOGOUT\n");
        }
    }
}

impl Collector for NutCollector {
    fn source(&self) -> &SourceId {
        &self.source
    }

    fn scope(&self) -> Option<Scope> {
        Some(Self::SCOPE)
    }

    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        let w = self.watts()?;
        Ok(vec![Sample::new(
            now_ms,
            self.source.clone(),
            Metric::Power,
            "",
            w,
        )])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse() {
        assert_eq!(
            parse_reply("VAR su700 ups.realpower \"312.5\"\n"),
            Some(Reply::Var {
                ups: "su700".into(),
                var: "ups.realpower".into(),
                value: "312.5".into()
            })
        );
        assert_eq!(
            parse_reply(r#"VAR x ups.mfr "say \"hi\" \\ there""#),
            Some(Reply::Var {
                ups: "x".into(),
                var: "ups.mfr".into(),
                value: r#"say "hi" \ there"#.into()
            })
        );
        assert_eq!(parse_reply("OK Goodbye"), Some(Reply::Ok));
        assert_eq!(
            parse_reply("ERR VAR-NOT-SUPPORTED"),
            Some(Reply::Err("VAR-NOT-SUPPORTED".into()))
        );
        assert_eq!(parse_reply("VAR x y unquoted"), None);
        assert_eq!(parse_reply("BEGIN LIST VAR x"), None);
    }

    #[test]
    fn debug_never_shows_the_password() {
        let mut c = NutConfig::new("nas", "ups");
        c.password = Some("hunter2".into());
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
