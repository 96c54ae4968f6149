//! Headless Chromium for the tests that look at what wattson draws: the binary (a test
//! that needs it fails under CI=true without it, and is skipped otherwise), its flags for
//! a quiet, sandbox-free run with a profile of its own, and a [`Page`] driven over the
//! DevTools protocol (a viewport of any width, scripts evaluated, screenshots).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Chromium binary, or `None` (a skip) where it is not installed and CI is not set.
pub fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Some(dir) = std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .find(|d| d.join(name).is_file())
        {
            return Some(dir.join(name));
        }
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "chromium is not installed (apt-get install chromium); CI must run this test"
    );
    eprintln!("skipped: chromium is not installed");
    None
}

/// Chromium's flags for a quiet, sandbox-free headless run with its own profile.
pub fn headless(chromium: &Path, profile: &Path) -> Command {
    let mut cmd = Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

/// A page of a headless Chromium of its own, driven over the DevTools protocol: laid out
/// at a given viewport (any width, a phone's 390 px included, which `--window-size` cannot
/// give: headless windows are at least 500 px wide), evaluated in and photographed. The
/// browser is killed on drop.
pub struct Page {
    ws: tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<std::net::TcpStream>>,
    next: u64,
    session: String,
    /// The events the browser sent while a call waited for its answer (`Network.*` once
    /// `Network.enable` was called), oldest first.
    pub events: Vec<serde_json::Value>,
    _browser: crate::Child,
    _profile: tempfile::TempDir,
}

impl Page {
    /// A new browser's page with a viewport `width` x `height` CSS px (device scale 1).
    pub fn open(chromium: &Path, (width, height): (u32, u32)) -> Page {
        use std::time::Duration;
        let profile = tempfile::tempdir().unwrap();
        let mut cmd = headless(chromium, profile.path());
        cmd.arg("--remote-debugging-port=0").arg("about:blank");
        let browser = crate::Child::spawn(cmd);
        let active = profile.path().join("DevToolsActivePort");
        let text = crate::wait_for("DevToolsActivePort", Duration::from_secs(30), || {
            std::fs::read_to_string(&active)
                .ok()
                .filter(|t| t.lines().count() >= 2)
        });
        let mut lines = text.lines();
        let (port, path) = (lines.next().unwrap(), lines.next().unwrap());
        let (ws, _) = tungstenite::connect(format!("ws://127.0.0.1:{port}{path}")).unwrap();
        if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
        }
        let mut page = Page {
            ws,
            next: 1,
            session: String::new(),
            events: Vec::new(),
            _browser: browser,
            _profile: profile,
        };
        let targets = page.call("Target.getTargets", &serde_json::json!({}));
        let target = targets["targetInfos"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .unwrap_or_else(|| panic!("no page target: {targets}"))["targetId"]
            .clone();
        let attached = page.call(
            "Target.attachToTarget",
            &serde_json::json!({ "targetId": target, "flatten": true }),
        );
        attached["sessionId"]
            .as_str()
            .unwrap()
            .clone_into(&mut page.session);
        page.call("Page.enable", &serde_json::json!({}));
        page.viewport((width, height), 1);
        page
    }

    /// Lay the page out at `width` x `height` CSS px, `scale` device pixels to one (a phone's
    /// 2 or 3), as a phone where it is under 600 px wide; the page is not reloaded.
    pub fn viewport(&mut self, (width, height): (u32, u32), scale: u32) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            &serde_json::json!({
                "width": width, "height": height, "deviceScaleFactor": scale, "mobile": width < 600
            }),
        );
    }

    /// Call `method` (in the page's session once attached) and return its result.
    pub fn call(&mut self, method: &str, params: &serde_json::Value) -> serde_json::Value {
        use std::time::{Duration, Instant};
        let id = self.next;
        self.next += 1;
        let mut msg = serde_json::json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            msg["sessionId"] = serde_json::Value::String(self.session.clone());
        }
        self.ws
            .send(tungstenite::Message::text(msg.to_string()))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "no answer to {method}");
            let text = match self.ws.read() {
                Ok(tungstenite::Message::Text(t)) => t.to_string(),
                Ok(_) => continue,
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    continue;
                }
                Err(e) => panic!("DevTools connection: {e}"),
            };
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
            self.events.push(v);
        }
    }

    /// Evaluate `expr` in the page; its value.
    pub fn eval(&mut self, expr: &str) -> serde_json::Value {
        let r = self.call(
            "Runtime.evaluate",
            &serde_json::json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        );
        r["result"]["value"].clone()
    }

    /// Load `url` and wait until the document and everything in it has loaded.
    pub fn goto(&mut self, url: &str) {
        self.call("Page.navigate", &serde_json::json!({ "url": url }));
        crate::wait_for(
            &format!("{url} loaded"),
            std::time::Duration::from_secs(30),
            || {
                (self.eval("document.readyState === 'complete' && location.href") == url)
                    .then_some(())
            },
        );
    }

    /// A PNG of the viewport, `height` CSS px of the page from its top, written to `path`.
    pub fn screenshot(&mut self, path: &Path, height: u32) {
        let width = self.eval("document.documentElement.clientWidth");
        let shot = self.call(
            "Page.captureScreenshot",
            &serde_json::json!({
                "format": "png",
                "captureBeyondViewport": true,
                "clip": { "x": 0, "y": 0, "width": width, "height": height, "scale": 1 }
            }),
        );
        std::fs::write(path, base64(shot["data"].as_str().unwrap())).unwrap();
    }
}

/// Standard base64 (with padding), as the DevTools protocol sends binary data.
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => u32::from(c - b'A'),
        b'a'..=b'z' => u32::from(c - b'a') + 26,
        b'0'..=b'9' => u32::from(c - b'0') + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for chunk in text.trim_end_matches('=').as_bytes().chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0_u32, |n, (i, &c)| n | (value(c) << (18 - 6 * i)));
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_reads_as_written() {
        assert_eq!(super::base64("aGVsbG8gd29ybGQ="), b"hello world");
        assert_eq!(super::base64("YQ=="), b"a");
        assert_eq!(super::base64("YWI="), b"ab");
        assert_eq!(super::base64("YWJj"), b"abc");
    }
}
