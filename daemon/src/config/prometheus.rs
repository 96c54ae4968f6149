//! `[prometheus]`: remote write to a Prometheus-compatible receiver
//! (`crate::publish::remote_write`), validated into [`PrometheusConfig`].
//!
//! ```toml
//! [prometheus]
//! remote_write = "http://prometheus.lan:9090/api/v1/write"
//! remote_write_interval = "30s"   # how often new samples are sent (1 s to 1 h)
//! basic_auth_username = "wattson" # with password_file, or bearer_token_file instead
//! password_file = "/etc/wattson/prometheus-password"
//! ```

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::duration::{Range, Written};
use super::validate::Validator;
use super::{ConfigError, duration};

/// `prometheus.remote_write_interval` when unset: half Prometheus' own default scrape interval
/// (1 m), so the fleet's data is as fresh as a scrape's, at a third of the host's cost of a
/// 10 s interval (BENCHMARKS.md, "Remote write: what it costs the host").
pub(super) const DEFAULT_REMOTE_WRITE_INTERVAL: Duration = Duration::from_secs(30);

/// `prometheus.remote_write_interval`: 1 s to 1 h.
pub const REMOTE_WRITE_INTERVAL: Range =
    Range::new(Duration::from_secs(1), Duration::from_secs(3600));

/// `[prometheus]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FilePrometheus {
    remote_write: Spanned<String>,
    remote_write_interval: Option<Spanned<Written>>,
    basic_auth_username: Option<Spanned<String>>,
    password_file: Option<Spanned<PathBuf>>,
    bearer_token_file: Option<Spanned<PathBuf>>,
}

/// `[prometheus]`: off unless configured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrometheusConfig {
    pub remote_write: RemoteWriteUrl,
    /// How often the sender looks for new samples once it has caught up.
    #[serde(serialize_with = "duration::serialize")]
    pub remote_write_interval: Duration,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub basic_auth_username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bearer_token_file: Option<PathBuf>,
}

/// A remote-write endpoint: `http://HOST[:PORT]/PATH`, the host resolved when connecting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteWriteUrl {
    /// As written (trimmed): the endpoint's name in the cursors, logs and metrics.
    pub text: String,
    pub host: String,
    pub port: u16,
    /// `host:port` as written, for the `Host` header.
    pub authority: String,
    /// The path and query, `/` at least.
    pub path: String,
}

impl Serialize for RemoteWriteUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

/// The example a remote-write URL that is not `http://` is shown.
const REMOTE_WRITE_EXAMPLE: &str = "http://prometheus.lan:9090/api/v1/write";

/// Why a text is not an `http://HOST[:PORT]/PATH` URL wattson can send to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// Not `http://` (or no scheme at all); `example` is one that is.
    #[error("{text:?} must start with http:// (e.g. \"{example}\")")]
    NotHttp { text: String, example: &'static str },
    #[error("{text}: not a port from 1 to 65535")]
    Port { text: String },
    #[error("{text}: no host in the URL")]
    NoHost { text: String },
    /// Any other way the `url` crate finds it is no URL.
    #[error("{text}: {error}")]
    Syntax {
        text: String,
        error: url::ParseError,
    },
    #[error(
        "{text}: https is not supported yet: use http:// to a receiver on this machine \
         or a trusted network (or a local TLS-terminating relay)"
    )]
    Https { text: String },
    #[error(
        "put the user in prometheus.basic_auth_username and the password in password_file, \
         not in the URL"
    )]
    Credentials,
}

/// `text` as a remote-write URL, or why it is not one (parsed by the `url` crate).
pub fn parse_remote_write_url(text: &str) -> Result<RemoteWriteUrl, UrlError> {
    parse_http_url(text, REMOTE_WRITE_EXAMPLE)
}

/// `text` as an `http://` URL, or why it is not one; `example` is what a text that is not
/// `http://` is shown.
pub fn parse_http_url(text: &str, example: &'static str) -> Result<RemoteWriteUrl, UrlError> {
    let text = text.trim();
    let owned = || text.to_owned();
    let not_http = || UrlError::NotHttp {
        text: owned(),
        example,
    };
    let url = url::Url::parse(text).map_err(|e| match e {
        url::ParseError::RelativeUrlWithoutBase => not_http(),
        url::ParseError::InvalidPort => UrlError::Port { text: owned() },
        url::ParseError::EmptyHost => UrlError::NoHost { text: owned() },
        error => UrlError::Syntax {
            text: owned(),
            error,
        },
    })?;
    match url.scheme() {
        "http" => {}
        "https" => return Err(UrlError::Https { text: owned() }),
        _ => return Err(not_http()),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlError::Credentials);
    }
    let host = match url.host() {
        Some(url::Host::Domain(name)) if !name.is_empty() => name.to_owned(),
        Some(url::Host::Ipv4(a)) => a.to_string(),
        Some(url::Host::Ipv6(a)) => a.to_string(),
        _ => return Err(UrlError::NoHost { text: owned() }),
    };
    let port = match url.port_or_known_default() {
        Some(0) | None => return Err(UrlError::Port { text: owned() }),
        Some(p) => p,
    };
    let authority = match url.port() {
        Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_owned(),
    };
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    Ok(RemoteWriteUrl {
        text: text.to_owned(),
        host,
        port,
        authority,
        path,
    })
}

impl Validator<'_> {
    /// `[prometheus]`: the endpoint, the interval, and one way to authenticate whose
    /// credential file can be read and holds one line.
    pub(super) fn prometheus(&self, p: FilePrometheus) -> Result<PrometheusConfig, ConfigError> {
        let remote_write = parse_remote_write_url(p.remote_write.get_ref()).map_err(|m| {
            self.err(
                p.remote_write.span(),
                "prometheus.remote_write",
                m.to_string(),
            )
        })?;
        let remote_write_interval = self.duration(
            p.remote_write_interval.as_ref(),
            "prometheus.remote_write_interval",
            DEFAULT_REMOTE_WRITE_INTERVAL,
            REMOTE_WRITE_INTERVAL,
        )?;
        if let (Some(b), Some(_)) = (&p.bearer_token_file, &p.basic_auth_username) {
            return Err(self.err(
                b.span(),
                "prometheus.bearer_token_file",
                "set basic_auth_username with password_file, or bearer_token_file, not both",
            ));
        }
        match (&p.basic_auth_username, &p.password_file) {
            (Some(u), None) => {
                return Err(self.err(
                    u.span(),
                    "prometheus.password_file",
                    "basic_auth_username is set but no password_file: add password_file = \
                     \"/etc/wattson/prometheus-password\" (a file holding the password)",
                ));
            }
            (None, Some(f)) => {
                return Err(self.err(
                    f.span(),
                    "prometheus.basic_auth_username",
                    "password_file is set but no basic_auth_username: add basic_auth_username = \"...\"",
                ));
            }
            _ => {}
        }
        if let Some(u) = &p.basic_auth_username
            && (u.get_ref().is_empty() || u.get_ref().contains([':', '\n', '\r']))
        {
            return Err(self.err(
                u.span(),
                "prometheus.basic_auth_username",
                "must be a non-empty name without ':' or line breaks",
            ));
        }
        for (file, key) in [
            (&p.password_file, "prometheus.password_file"),
            (&p.bearer_token_file, "prometheus.bearer_token_file"),
        ] {
            if let Some(f) = file {
                self.credential_file(f, key)?;
            }
        }
        Ok(PrometheusConfig {
            remote_write,
            remote_write_interval,
            basic_auth_username: p.basic_auth_username.map(Spanned::into_inner),
            password_file: p.password_file.map(Spanned::into_inner),
            bearer_token_file: p.bearer_token_file.map(Spanned::into_inner),
        })
    }

    /// A credential file: readable, one non-empty line of printable text (a trailing
    /// newline allowed). Its content is never shown.
    fn credential_file(&self, f: &Spanned<PathBuf>, key: &str) -> Result<(), ConfigError> {
        let path = f.get_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| self.err(f.span(), key, format!("{}: {e}", path.display())))?;
        let secret = text.trim_end_matches(['\r', '\n']);
        if secret.is_empty() {
            return Err(self.err(f.span(), key, format!("{} is empty", path.display())));
        }
        if secret.chars().any(char::is_control) {
            return Err(self.err(
                f.span(),
                key,
                format!(
                    "{} holds more than one line or control characters: write the secret \
                     alone on one line",
                    path.display()
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_write_url_gives_host_port_and_path() {
        let u = parse_remote_write_url(" http://prom.lan:9090/api/v1/write ").unwrap();
        assert_eq!(
            (
                u.host.as_str(),
                u.port,
                u.path.as_str(),
                u.authority.as_str()
            ),
            ("prom.lan", 9090, "/api/v1/write", "prom.lan:9090")
        );
        assert_eq!(u.text, "http://prom.lan:9090/api/v1/write");
        let u = parse_remote_write_url("http://[::1]:9090/w").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 9090));
        let u = parse_remote_write_url("http://vm").unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, "/"));
    }

    #[test]
    fn https_ports_users_and_other_schemes_are_refused_with_the_reason() {
        for (url, says) in [
            (
                "https://prom:9090/api/v1/write",
                "https is not supported yet",
            ),
            ("prom:9090/api/v1/write", "must start with http://"),
            ("http://prom:99999/w", "not a port"),
            ("http://prom:0/w", "not a port"),
            ("http://u:p@prom:9090/w", "basic_auth_username"),
            ("http://:9090/w", "no host"),
        ] {
            let e = parse_remote_write_url(url).unwrap_err().to_string();
            assert!(e.contains(says), "{url}: {e}");
        }
    }
}
