//! One remote-write request: an HTTP/1.1 POST through hyper's client over a tokio
//! `TcpStream`, one request per connection (`Connection: close`), with the headers remote
//! write 1.0 asks for. A response hyper cannot read whole (a status line or body cut short)
//! is a failure, and the batch is sent again. No TLS: `config check` refuses an `https://`
//! endpoint.

use std::time::Duration;

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::config::RemoteWriteUrl;

/// How long one request may take, connection included.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
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
pub(super) enum Outcome {
    /// 2xx: stored.
    Accepted,
    /// 400: the receiver will never take these samples (out of order, duplicate with
    /// another value, too old): skipped past, not sent again.
    Refused(String),
    /// Anything else (no connection, a timeout, 5xx, 429, 401, 404): sent again later.
    Failed(String),
}

/// POSTs `body` (a snappy-compressed `WriteRequest`) to `url`.
pub(super) async fn post(url: &RemoteWriteUrl, auth: &Auth, body: &[u8]) -> Outcome {
    match tokio::time::timeout(REQUEST_TIMEOUT, exchange(url, auth, body)).await {
        Err(_) => Outcome::Failed(format!("no answer within {}s", REQUEST_TIMEOUT.as_secs())),
        Ok(Err(e)) => Outcome::Failed(e.to_string()),
        Ok(Ok((status, text))) => classify(status, &text),
    }
}

/// The outcome of a response's status and text.
pub(super) fn classify(status: u16, text: &str) -> Outcome {
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
    let stream = TcpStream::connect((url.host.as_str(), url.port)).await?;
    stream.set_nodelay(true)?;
    let http = |e: hyper::Error| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(http)?;
    let driver = tokio::spawn(connection);
    let answer = async {
        let response = sender
            .send_request(request(url, auth, body)?)
            .await
            .map_err(http)?;
        let status = response.status().as_u16();
        // A receiver's error text is read for the log; a body cut short is a failed
        // request, as is a status line cut short (hyper refuses both).
        match Limited::new(response.into_body(), MAX_RESPONSE)
            .collect()
            .await
        {
            Ok(text) => Ok((
                status,
                String::from_utf8_lossy(&text.to_bytes()).into_owned(),
            )),
            // A whole status with a long text: the status decides.
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Ok((
                status,
                format!("(an answer longer than {} KiB)", MAX_RESPONSE / 1024),
            )),
            Err(e) => Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        }
    }
    .await;
    driver.abort();
    answer
}

/// The POST with the headers remote write 1.0 asks for.
fn request(
    url: &RemoteWriteUrl,
    auth: &Auth,
    body: &[u8],
) -> std::io::Result<hyper::Request<Full<Bytes>>> {
    let mut request = hyper::Request::post(&url.path)
        .header(hyper::header::HOST, &url.authority)
        .header(
            hyper::header::USER_AGENT,
            concat!("wattson/", env!("CARGO_PKG_VERSION")),
        )
        .header(hyper::header::CONTENT_TYPE, "application/x-protobuf")
        .header(hyper::header::CONTENT_ENCODING, "snappy")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .header(hyper::header::CONNECTION, "close");
    if let Some(value) = auth.header_value() {
        request = request.header(hyper::header::AUTHORIZATION, value);
    }
    request
        .body(Full::new(Bytes::copy_from_slice(body)))
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
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
    fn the_request_carries_the_remote_write_headers_and_the_auth() {
        let url = RemoteWriteUrl {
            text: "http://prom:9090/api/v1/write".into(),
            host: "prom".into(),
            port: 9090,
            authority: "prom:9090".into(),
            path: "/api/v1/write".into(),
        };
        let r = request(&url, &Auth::Bearer("t0k".into()), b"body").unwrap();
        assert_eq!(r.method(), hyper::Method::POST);
        assert_eq!(r.uri(), "/api/v1/write");
        for (name, value) in [
            ("host", "prom:9090"),
            ("content-encoding", "snappy"),
            ("content-type", "application/x-protobuf"),
            ("x-prometheus-remote-write-version", "0.1.0"),
            ("authorization", "Bearer t0k"),
        ] {
            assert_eq!(r.headers()[name], value, "{name}");
        }
        assert_eq!(format!("{:?}", Auth::Bearer("t0k".into())), "bearer");
    }

    /// A receiver that closes mid-status-line (`HTTP/1.1 204 No Co`) did not answer: the
    /// batch is sent again. So is one that sends no HTTP at all.
    #[tokio::test]
    async fn a_response_cut_short_or_not_http_is_a_failure() {
        for (reply, accepted) in [
            (&b"HTTP/1.1 204 No Content\r\n\r\n"[..], true),
            (&b"HTTP/1.1 204 No Co"[..], false),
            (
                &b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"[..],
                false,
            ),
            (&b"SSH-2.0-OpenSSH\r\n"[..], false),
            (&b""[..], false),
        ] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let server = tokio::spawn(async move {
                use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 65536];
                let mut got = Vec::new();
                while !got.ends_with(b"body") {
                    let n = s.read(&mut buf).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
                s.write_all(reply).await.unwrap();
                s.shutdown().await.unwrap();
            });
            let url = RemoteWriteUrl {
                text: format!("http://127.0.0.1:{port}/api/v1/write"),
                host: "127.0.0.1".into(),
                port,
                authority: format!("127.0.0.1:{port}"),
                path: "/api/v1/write".into(),
            };
            let outcome = post(&url, &Auth::None, b"body").await;
            assert_eq!(
                outcome == Outcome::Accepted,
                accepted,
                "{:?}: {outcome:?}",
                String::from_utf8_lossy(reply)
            );
            server.await.unwrap();
        }
    }
}
