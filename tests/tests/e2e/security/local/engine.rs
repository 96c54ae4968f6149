//! `report --prometheus URL` against a hostile or broken engine (issue 44): a small fake of
//! the Prometheus query API served from the test on 127.0.0.1:0, one thread answering one
//! connection at a time, as the report asks (one connection a request).
//!
//! `cargo test -p wattson-tests --test e2e security::local::engine -- --nocapture` prints
//! the figures.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use wattson_tests::{TestEnv, wattson};

/// The window every report here asks for: 2026-01-05 10:00 to 11:00 UTC.
const FROM_MS: i64 = 1_767_607_200_000;
const TO_MS: i64 = FROM_MS + 3_600_000;
const DAY_MS: i64 = 86_400_000;

/// A query API: each request's path and decoded parameters in, the whole answer written by
/// the handler. Stops with the test (the thread is left blocked in accept).
fn serve(
    handler: impl Fn(&str, &BTreeMap<String, String>, &mut TcpStream) + Send + 'static,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            // The headers, up to the blank line.
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let target = line.split(' ').nth(1).unwrap_or("").to_owned();
            let (path, query) = target.split_once('?').unwrap_or((&target, ""));
            let params = query
                .split('&')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (decode(k), decode(v)))
                .collect();
            handler(path, &params, &mut stream);
        }
    });
    addr
}

/// `application/x-www-form-urlencoded` decoded.
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

/// A `200 OK` of `body`, the connection closed after it.
fn answer(stream: &mut TcpStream, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
}

fn matrix(series: &[String]) -> String {
    format!(
        r#"{{"status":"success","data":{{"resultType":"matrix","result":[{}]}}}}"#,
        series.join(",")
    )
}

/// An engine holding one series, `wattson_power_watts{host="nas",source="wall"}`, of
/// `samples` `(ts_ms, "value")`: it answers the report's queries as Prometheus does.
fn engine_of(samples: Vec<(i64, &'static str)>) -> SocketAddr {
    serve(move |path, params, stream| {
        let query = params.get("query").map_or("", String::as_str);
        let power = query.contains("wattson_power_watts{");
        let s = |k: &str| {
            params
                .get(k)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let day = |end: i64| {
            samples
                .iter()
                .filter(move |(ts, _)| (end - DAY_MS..=end).contains(ts))
        };
        let body = match path {
            "/api/v1/query_range" if power => {
                let (start, end, step) = (s("start") * 1e3, s("end") * 1e3, s("step") * 1e3);
                let mut points = Vec::new();
                let mut t = start as i64;
                while t <= end as i64 {
                    let n = day(t).count();
                    if n > 0 {
                        points.push(format!("[{},\"{n}\"]", t as f64 / 1e3));
                    }
                    t += step as i64;
                }
                matrix(&[format!(
                    r#"{{"metric":{{"host":"nas","source":"meter:wall"}},"values":[{}]}}"#,
                    points.join(",")
                )])
            }
            "/api/v1/query" if power => {
                let points: Vec<String> = day((s("time") * 1e3) as i64)
                    .map(|(ts, v)| format!("[{},\"{v}\"]", *ts as f64 / 1e3))
                    .collect();
                matrix(&[format!(
                    r#"{{"metric":{{"__name__":"wattson_power_watts","host":"nas","source":"meter:wall"}},"values":[{}]}}"#,
                    points.join(",")
                )])
            }
            p if p.starts_with("/api/v1/label/") => r#"{"status":"success","data":["nas"]}"#.into(),
            _ => matrix(&[]),
        };
        answer(stream, &body);
    })
}

/// A configuration of host `nas`, priced at GBP 0.30 a kWh.
fn config(env: &TestEnv) -> std::path::PathBuf {
    let text = format!(
        "[host]\nname = \"nas\"\n\n[storage]\npath = {}\n\n[tariff]\ncurrency = \"GBP\"\n\
         price_per_kwh = 0.30\ntimezone = \"UTC\"\n",
        wattson_tests::q(&env.db)
    );
    let path = env.path("wattson.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn report(env: &TestEnv, addr: SocketAddr, format: &str) -> std::process::Command {
    let at = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .unwrap()
            .to_rfc3339()
    };
    let mut cmd = wattson();
    cmd.arg("--config")
        .arg(config(env))
        .args([
            "report",
            "--format",
            format,
            "--since",
            &at(FROM_MS),
            "--until",
            &at(TO_MS),
        ])
        .args(["--prometheus", &format!("http://{addr}")]);
    cmd
}

/// An hour at 100 W, a sample every 10 s, with `odd` in place of some.
fn hour_with(odd: &[(usize, &'static str)]) -> Vec<(i64, &'static str)> {
    (0..=360)
        .map(|i| {
            let v = odd
                .iter()
                .find(|(at, _)| *at == i)
                .map_or("100", |(_, v)| *v);
            (FROM_MS + i as i64 * 10_000, v)
        })
        .collect()
}

#[test]
fn negative_and_absurd_watts_from_an_engine_are_set_aside_and_said_in_the_notes() {
    let env = TestEnv::new();
    let odd = [
        (30, "-500"),
        (31, "-500"),
        (90, "1e308"),
        (200, "-500"),
        (201, "NaN"),
    ];
    let addr = engine_of(hour_with(&odd));
    let out = report(&env, addr, "json").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let notes: Vec<&str> = report["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    let power = notes
        .iter()
        .find(|n| n.contains("4 samples of wattson_power_watts"))
        .unwrap_or_else(|| panic!("no note of the 4 power samples set aside: {notes:?}"));
    assert!(power.contains("-500") && power.contains("1e308"), "{power}");
    assert!(
        notes
            .iter()
            .any(|n| n.contains("1 sample of") && n.contains("NaN")),
        "{notes:?}"
    );
    // The measured hour is there, at 100 W, and nothing in it is negative.
    let measured = &report["measured"];
    assert!(measured.is_object(), "no measured section: {report}");
    let watts = measured["mean_watts"].as_f64().unwrap();
    assert!((watts - 100.0).abs() < 0.01, "mean {watts} W, not 100 W");
    let mut negative = Vec::new();
    walk("measured", measured, &mut negative);
    assert!(negative.is_empty(), "negative figures: {negative:?}");
    let text = report_text(&env, addr);
    assert!(!text.contains("-4380") && !text.contains("GBP -"), "{text}");
}

/// The paths of the negative numbers under `v`.
fn walk(path: &str, v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Number(n) if n.as_f64().is_some_and(|x| x < 0.0) => {
            out.push(format!("{path} = {n}"));
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                walk(&format!("{path}[{i}]"), x, out);
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                walk(&format!("{path}.{k}"), x, out);
            }
        }
        _ => {}
    }
}

fn report_text(env: &TestEnv, addr: SocketAddr) -> String {
    let out = report(env, addr, "table").output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    text
}

#[test]
fn an_engine_that_trickles_its_answers_ends_at_the_reports_deadline() {
    let env = TestEnv::new();
    // Every answer promises a megabyte and sends a byte a second.
    let addr = serve(|_, _, stream| {
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
        );
        for _ in 0..120 {
            if stream.write_all(b" ").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    let started = Instant::now();
    let out = report(&env, addr, "json")
        .env("WATTSON_PROMETHEUS_DEADLINE_S", "4")
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("trickling engine: ended after {took:?}: {stderr}");
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("did not finish within 4 s, the deadline of a whole report"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

/// The report of `addr` with the child's peak resident memory (VmHWM, KiB), read from
/// /proc while it runs: its exit status and stderr.
fn report_measured(env: &TestEnv, addr: SocketAddr) -> (Option<i32>, String, u64) {
    let err = env.path("stderr");
    let mut child = report(env, addr, "json")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0;
    let code = loop {
        if let Some(code) = child.try_wait().unwrap() {
            break code.code();
        }
        let hwm = std::fs::read_to_string(&status).ok().and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_owned();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        });
        peak_kib = peak_kib.max(hwm.unwrap_or(0));
        std::thread::sleep(Duration::from_millis(2));
    };
    (code, std::fs::read_to_string(&err).unwrap(), peak_kib)
}

/// An engine whose every range query is answered with `n` series, each `series(i)`, sent
/// as it is made with no length given.
fn engine_of_many(n: usize, series: fn(usize) -> String) -> SocketAddr {
    serve(move |path, _, stream| {
        if path != "/api/v1/query_range" {
            return answer(stream, &matrix(&[]));
        }
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n\
             {{\"status\":\"success\",\"data\":{{\"resultType\":\"matrix\",\"result\":["
        );
        let mut chunk = String::new();
        for i in 0..n {
            if i > 0 {
                chunk.push(',');
            }
            chunk.push_str(&series(i));
            if chunk.len() > 64 * 1024 && stream.write_all(chunk.as_bytes()).is_err() {
                return;
            }
            if chunk.len() > 64 * 1024 {
                chunk.clear();
            }
        }
        chunk.push_str("]}}");
        let _ = stream.write_all(chunk.as_bytes());
    })
}

#[test]
fn an_answer_of_a_million_series_is_refused_in_little_memory() {
    const N: usize = 1_000_000;
    // 75 MB of real-looking series: refused at the answer's bound.
    let env = TestEnv::new();
    let addr = engine_of_many(N, |i| {
        format!(
            r#"{{"metric":{{"host":"nas","source":"meter:m{i}"}},"values":[[1767610800,"1"]]}}"#
        )
    });
    let started = Instant::now();
    let (code, stderr, peak_kib) = report_measured(&env, addr);
    println!(
        "10^6 series, 75 MB: {:?}, peak RSS {peak_kib} KiB: {stderr}",
        started.elapsed()
    );
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("is larger than 32 MiB, more than a report reads"),
        "{stderr}"
    );
    assert!(peak_kib < 100 * 1024, "peak RSS {peak_kib} KiB");
    // 27 MB of empty series, under that bound: refused by their count, read past unkept.
    let env = TestEnv::new();
    let addr = engine_of_many(N, |_| r#"{"metric":{},"values":[]}"#.to_owned());
    let started = Instant::now();
    let (code, stderr, peak_kib) = report_measured(&env, addr);
    println!(
        "10^6 empty series, 27 MB: {:?}, peak RSS {peak_kib} KiB: {stderr}",
        started.elapsed()
    );
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("with 1000000 series, more than one host's (at most 4096"),
        "{stderr}"
    );
    assert!(peak_kib < 100 * 1024, "peak RSS {peak_kib} KiB");
}
