//! The NUT collector against a fake upsd on 127.0.0.1:0 speaking the network protocol
//! (NUT docs, "Network protocol information"), and an ignored test against a real upsd.
// Helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wattson_collectors::power::nut::{NutCollector, NutConfig, NutError};
use wattson_collectors::{Action, CollectError, Collector, Metric, Scope};

#[derive(Clone, Default)]
struct Behaviour {
    /// (ups, var) -> value.
    vars: HashMap<(String, String), String>,
    /// Required login, if any.
    login: Option<(String, String)>,
    /// Read requests, never answer.
    silent: bool,
    /// Close the first connection after answering this many requests.
    close_first_after: Option<usize>,
}

struct FakeUpsd {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
    connections: Arc<AtomicUsize>,
}

impl FakeUpsd {
    fn start(b: Behaviour) -> FakeUpsd {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (log, count) = (requests.clone(), connections.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let n = count.fetch_add(1, Ordering::SeqCst);
                let (b, log) = (b.clone(), log.clone());
                std::thread::spawn(move || serve(&b, stream, n == 0, &log));
            }
        });
        FakeUpsd {
            addr,
            requests,
            connections,
        }
    }

    fn config(&self, ups: &str) -> NutConfig {
        NutConfig {
            port: self.addr.port(),
            timeout: Duration::from_secs(5),
            ..NutConfig::new("127.0.0.1", ups)
        }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(b: &Behaviour, stream: std::net::TcpStream, first: bool, log: &Mutex<Vec<String>>) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let (mut user, mut logged_in) = (None::<String>, b.login.is_none());
    let mut answered = 0;
    loop {
        if first && b.close_first_after == Some(answered) {
            return;
        }
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end().to_owned();
        log.lock().unwrap().push(line.clone());
        if b.silent {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = match words.as_slice() {
            ["USERNAME", u] => {
                user = Some((*u).to_owned());
                "OK".to_owned()
            }
            ["PASSWORD", p] => match &b.login {
                Some((u, pw)) if user.as_deref() == Some(u.as_str()) && pw == p => {
                    logged_in = true;
                    "OK".to_owned()
                }
                _ => "ERR INVALID-PASSWORD".to_owned(),
            },
            ["GET", "VAR", _, _] if !logged_in => "ERR ACCESS-DENIED".to_owned(),
            ["GET", "VAR", ups, var] => {
                let known = b.vars.keys().any(|(u, _)| u == ups);
                match b.vars.get(&((*ups).to_owned(), (*var).to_owned())) {
                    Some(v) => format!("VAR {ups} {var} \"{v}\""),
                    None if known => "ERR VAR-NOT-SUPPORTED".to_owned(),
                    None => "ERR UNKNOWN-UPS".to_owned(),
                }
            }
            ["LOGOUT"] => "OK Goodbye".to_owned(),
            _ => "ERR UNKNOWN-COMMAND".to_owned(),
        };
        if writer.write_all(format!("{reply}\n").as_bytes()).is_err() {
            return;
        }
        answered += 1;
    }
}

fn vars(ups: &str, pairs: &[(&str, &str)]) -> HashMap<(String, String), String> {
    pairs
        .iter()
        .map(|(k, v)| ((ups.to_owned(), (*k).to_owned()), (*v).to_owned()))
        .collect()
}

#[test]
fn realpower_is_read_as_shared_watts() {
    let upsd = FakeUpsd::start(Behaviour {
        vars: vars("rack", &[("ups.realpower", "312.5"), ("ups.load", "40")]),
        ..Behaviour::default()
    });
    let mut c = NutCollector::new(upsd.config("rack")).unwrap();
    assert_eq!(c.scope(), Scope::Shared);
    assert_eq!(Collector::scope(&c), Some(Scope::Shared));
    assert_eq!(c.source(), &"ups:rack");
    let s = c.poll(77).unwrap();
    assert_eq!(
        (
            s[0].metric,
            s[0].value,
            s[0].ts_ms,
            s[0].source.to_string().as_str()
        ),
        (Metric::Power, 312.5, 77, "ups:rack")
    );
    // One connection for construction and poll alike.
    assert_eq!(upsd.connections.load(Ordering::SeqCst), 1);
}

#[test]
fn load_times_nominal_when_realpower_is_not_supported() {
    let upsd = FakeUpsd::start(Behaviour {
        vars: vars(
            "eaton",
            &[("ups.load", "23"), ("ups.realpower.nominal", "900")],
        ),
        ..Behaviour::default()
    });
    let mut c = NutCollector::new(upsd.config("eaton")).unwrap();
    let s = c.poll(0).unwrap();
    assert!((s[0].value - 207.0).abs() < 1e-9, "{}", s[0].value);
    c.poll(1).unwrap();
    let reqs = upsd.requests();
    // realpower and the nominal are asked once; the load every time.
    let count = |r: &str| reqs.iter().filter(|l| *l == r).count();
    assert_eq!(count("GET VAR eaton ups.realpower"), 1);
    assert_eq!(count("GET VAR eaton ups.realpower.nominal"), 1);
    assert_eq!(count("GET VAR eaton ups.load"), 3);
}

#[test]
fn ups_without_any_power_figure_is_unavailable() {
    let upsd = FakeUpsd::start(Behaviour {
        vars: vars("old", &[("ups.load", "23")]),
        ..Behaviour::default()
    });
    let err = CollectError::from(NutCollector::new(upsd.config("old")).unwrap_err());
    assert_eq!(err.action(), Action::Stop);
    assert!(err.to_string().contains("ups.realpower.nominal"), "{err}");
}

#[test]
fn unknown_ups_name_is_named_in_the_error() {
    let upsd = FakeUpsd::start(Behaviour {
        vars: vars("rack", &[("ups.realpower", "100")]),
        ..Behaviour::default()
    });
    let err = NutCollector::new(upsd.config("rak")).unwrap_err();
    assert!(matches!(err, NutError::UnknownUps { .. }), "{err}");
    assert!(err.to_string().contains("\"rak\""), "{err}");
    assert_eq!(CollectError::from(err).action(), Action::Stop);
}

#[test]
fn login_is_sent_and_the_password_never_shows() {
    let upsd = FakeUpsd::start(Behaviour {
        vars: vars("rack", &[("ups.realpower", "100")]),
        login: Some(("monuser".into(), "s3cret-pw".into())),
        ..Behaviour::default()
    });
    let mut config = upsd.config("rack");
    config.username = Some("monuser".into());
    config.password = Some("s3cret-pw".into());
    let mut c = NutCollector::new(config.clone()).unwrap();
    assert_eq!(c.poll(0).unwrap()[0].value, 100.0);
    assert_eq!(
        &upsd.requests()[..2],
        ["USERNAME monuser", "PASSWORD s3cret-pw"]
    );
    assert!(!format!("{c:?}").contains("s3cret-pw"));

    config.password = Some("wrong-pw".into());
    let err = NutCollector::new(config).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("INVALID-PASSWORD"), "{text}");
    assert!(!text.contains("wrong-pw"), "{text}");
    assert_eq!(CollectError::from(err).action(), Action::Stop);
}

#[test]
fn silent_upsd_times_out() {
    let upsd = FakeUpsd::start(Behaviour {
        silent: true,
        ..Behaviour::default()
    });
    let mut config = upsd.config("rack");
    config.timeout = Duration::from_millis(200);
    let started = std::time::Instant::now();
    let err = NutCollector::new(config).unwrap_err();
    assert!(matches!(err, NutError::Timeout { .. }), "{err}");
    assert_eq!(CollectError::from(err).action(), Action::Retry);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn lost_connection_fails_one_poll_and_reconnects_at_the_next() {
    let upsd = FakeUpsd::start(Behaviour {
        vars: vars("rack", &[("ups.realpower", "150")]),
        close_first_after: Some(2),
        ..Behaviour::default()
    });
    let mut c = NutCollector::new(upsd.config("rack")).unwrap();
    assert_eq!(c.poll(1).unwrap()[0].value, 150.0);
    // upsd restarted: the old connection is closed.
    let err = c.poll(2).unwrap_err();
    assert_eq!(err.action(), Action::Retry, "{err}");
    assert_eq!(c.poll(3).unwrap()[0].value, 150.0);
    assert_eq!(upsd.connections.load(Ordering::SeqCst), 2);
}

#[test]
fn nothing_listening_is_a_clear_error() {
    // Bind then drop: the port is free and, for a moment, nobody listens on it.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = NutConfig::new("127.0.0.1", "rack");
    config.port = port;
    let err = NutCollector::new(config).unwrap_err();
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
}

/// Against a real upsd (NUT 2.8.0) with the dummy-ups driver, whose UPS has no
/// ups.realpower: 25 % of 600 W nominal. Needs `apt-get install nut-server` (Debian/Ubuntu)
/// and runs both from a temp dir as the current user:
/// `cargo test -p wattson-collectors --test collectors_e2e nut:: -- --ignored`.
#[test]
#[ignore = "needs nut-server (upsd, dummy-ups) installed"]
fn real_upsd_with_dummy_ups() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        d.join("dummy.dev"),
        "ups.status: OL\nups.load: 25\nups.realpower.nominal: 600\n",
    )
    .unwrap();
    std::fs::write(
        d.join("ups.conf"),
        format!(
            "[dummy]\n  driver = dummy-ups\n  port = {}/dummy.dev\n  desc = \"test\"\n",
            d.display()
        ),
    )
    .unwrap();
    std::fs::write(d.join("upsd.conf"), format!("LISTEN 127.0.0.1 {port}\n")).unwrap();
    std::fs::write(d.join("upsd.users"), "").unwrap();
    std::fs::write(d.join("nut.conf"), "MODE=standalone\n").unwrap();
    let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    let env = [
        ("NUT_CONFPATH", d),
        ("NUT_STATEPATH", d),
        ("NUT_ALTPIDPATH", d),
    ];
    let run = |program: &str, args: &[&str]| {
        let mut cmd = Command::new(program);
        cmd.args(args).stdout(Stdio::null()).stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.status().unwrap()
    };
    assert!(run("/lib/nut/dummy-ups", &["-a", "dummy", "-u", &user]).success());
    // /usr/sbin/upsd is Debian's wrapper that reads /etc/nut/nut.conf; this is the daemon.
    assert!(run("/lib/nut/upsd", &["-u", &user]).success());
    let mut config = NutConfig::new("127.0.0.1", "dummy");
    config.port = port;
    // upsd answers before the driver's first dump reaches it: poll until the data is in.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let result = loop {
        let r = NutCollector::new(config.clone()).and_then(|mut c| c.watts());
        if r.is_ok() || std::time::Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    run("/lib/nut/upsd", &["-c", "stop"]);
    let pid = std::fs::read_to_string(d.join("dummy-ups-dummy.pid")).unwrap();
    run("kill", &[pid.trim()]);
    assert_eq!(result.unwrap(), 150.0);
}
