//! One remote-write request: a plain HTTP/1.1 POST over a tokio `TcpStream`, one request per
//! connection (`Connection: close`), with the headers remote write 1.0 asks for. No TLS:
//! `config check` refuses an `https://` endpoint.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::config::RemoteWriteUrl;

/// How long one request may take, connection included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The most of a response read (its status line and a receiver's error text).
const MAX_RESPONSE: usize = 64 * 1024;

/// How the request authenticates.
#[derive(Clone, Default)]
pub enum Auth {
    #[default]
    None,
    /// `Authorization: Basic ...` of user and password.
    Basic { user: String, password: String },
    /// `Authorization: Bearer <token>`.
    Bearer(String),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.write_str(match self {
            Auth::None => "none",
            Auth::Basic { .. } => "basic",
            Auth::Bearer(_) => "bearer",
        })
    }
}

impl Auth {
    /// The `Authorization` header's value; `None` without credentials.
    pub fn header_value(&self) -> Option<String> {
        match self {
            Auth::None => None,
            Auth::Basic { user, password } => Some(format!(
                "Basic {}",
                base64(format!("{user}:{password}").as_bytes())
            )),
            Auth::Bearer(token) => Some(format!("Bearer {token}")),
        }
    }
}

/// What the receiver made of a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// 2xx: stored.
    Accepted,
    /// 400: the receiver will never take these samples (out of order, duplicate with
    /// another value, too old): skipped past, not sent again.
    Refused(String),
    /// Anything else (no connection, a timeout, 5xx, 429, 401, 404): sent again later.
    Failed(String),
}

/// POSTs `body` (a snappy-compressed `WriteRequest`) to `url`.
pub async fn post(url: &RemoteWriteUrl, auth: &Auth, body: &[u8]) -> Outcome {
    match tokio::time::timeout(REQUEST_TIMEOUT, exchange(url, auth, body)).await {
        Err(_) => Outcome::Failed(format!("no answer within {}s", REQUEST_TIMEOUT.as_secs())),
        Ok(Err(e)) => Outcome::Failed(e.to_string()),
        Ok(Ok((status, text))) => classify(status, &text),
    }
}

/// The outcome of a response's status and text.
pub fn classify(status: u16, text: &str) -> Outcome {
    let text = text.trim().chars().take(300).collect::<String>();
    match status {
        200..=299 => Outcome::Accepted,
        400 => Outcome::Refused(format!("HTTP 400: {text}")),
        _ => Outcome::Failed(format!("HTTP {status}: {text}")),
    }
}

async fn exchange(
    url: &RemoteWriteUrl,
    auth: &Auth,
    body: &[u8],
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect((url.host.as_str(), url.port)).await?;
    stream.set_nodelay(true)?;
    stream
        .write_all(head(url, auth, body.len()).as_bytes())
        .await?;
    stream.write_all(body).await?;
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 || response.len() >= MAX_RESPONSE {
            break;
        }
        response.extend_from_slice(&buf[..n]);
    }
    parse_response(&response).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the receiver's answer is not an HTTP response",
        )
    })
}

/// The request line and headers.
fn head(url: &RemoteWriteUrl, auth: &Auth, length: usize) -> String {
    let authorization = auth
        .header_value()
        .map_or_else(String::new, |v| format!("Authorization: {v}\r\n"));
    format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: wattson/{}\r\n\
         Content-Type: application/x-protobuf\r\nContent-Encoding: snappy\r\n\
         X-Prometheus-Remote-Write-Version: 0.1.0\r\n{authorization}\
         Content-Length: {length}\r\nConnection: close\r\n\r\n",
        url.path,
        url.authority,
        env!("CARGO_PKG_VERSION"),
    )
}

/// The status code and the body's text (chunked bodies are shown as they came).
fn parse_response(raw: &[u8]) -> Option<(u16, String)> {
    let text = String::from_utf8_lossy(raw);
    let status_line = text.lines().next()?;
    let mut parts = status_line.split_whitespace();
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let status = parts.next()?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Some((status, body.to_owned()))
}

/// Standard base64 with padding (RFC 4648), for basic auth.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_rfc_4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(
            base64(b"Aladdin:open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
    }

    #[test]
    fn only_a_400_is_skipped_past_and_only_2xx_is_stored() {
        assert_eq!(classify(204, ""), Outcome::Accepted);
        assert!(
            matches!(classify(400, "out of order sample"), Outcome::Refused(t) if t.contains("out of order"))
        );
        for status in [401, 403, 404, 429, 500, 503] {
            assert!(
                matches!(classify(status, ""), Outcome::Failed(_)),
                "{status}"
            );
        }
    }

    #[test]
    fn a_response_gives_its_status_and_text() {
        let raw = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 19\r\n\r\nout of order sample";
        assert_eq!(
            parse_response(raw),
            Some((400, "out of order sample".to_owned()))
        );
        assert_eq!(parse_response(b"SSH-2.0-OpenSSH"), None);
    }

    #[test]
    fn the_head_carries_the_remote_write_headers_and_the_auth() {
        let url = RemoteWriteUrl {
            text: "http://prom:9090/api/v1/write".into(),
            host: "prom".into(),
            port: 9090,
            authority: "prom:9090".into(),
            path: "/api/v1/write".into(),
        };
        let h = head(&url, &Auth::Bearer("t0k".into()), 42);
        assert!(h.starts_with("POST /api/v1/write HTTP/1.1\r\nHost: prom:9090\r\n"));
        for line in [
            "Content-Encoding: snappy",
            "Content-Type: application/x-protobuf",
            "X-Prometheus-Remote-Write-Version: 0.1.0",
            "Authorization: Bearer t0k",
            "Content-Length: 42",
        ] {
            assert!(h.contains(line), "{line}");
        }
        assert_eq!(format!("{:?}", Auth::Bearer("t0k".into())), "bearer");
    }
}
