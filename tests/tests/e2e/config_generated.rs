//! What `wattson run` refuses, `wattson config check` refuses with exit 78: a property over
//! generated configs, each through the real binary (`config check`, then `run --duration 1s`).
//! Rerun with more cases: `PROPTEST_CASES=200 cargo test -p wattson-tests --test e2e
//! config_generated::`.

// Helpers outside #[test] fns are test code too.
#![allow(clippy::panic, clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

use wattson_collectors::meter::Protocol;
use wattson_tests::{TestEnv, output_within, q, wattson};

/// One generated `[[meter]]`: index into the choices below (protocols: [`Protocol::ALL`]).
#[derive(Debug, Clone)]
struct GenMeter {
    protocol: usize,
    port: usize,
    address: usize,
    timeout: usize,
    interval: usize,
    baud: usize,
}

const ADDRESSES: &[Option<&str>] = &[None, Some("1"), Some("2"), Some("248"), Some("0")];
const TIMEOUTS: &[Option<&str>] = &[None, Some("0.5ms"), Some("600ms"), Some("2m")];
const INTERVALS: &[&str] = &["1s", "500ms", "50ms", "2h"];
const BAUDS: &[Option<&str>] = &[None, Some("9600"), Some("4800"), Some("100")];
const CPU_INTERVALS: &[&str] = &[
    "1s",
    "100ms",
    "99ms",
    "0.0001ms",
    "1h",
    "18446744073709551616s",
];
const FLUSHES: &[&str] = &["200ms", "1s", "50ms", "60000000000000d"];
const RETENTIONS: &[&str] = &["30d", "1h", "59m", "18446744073709552s"];
/// `[mqtt]` variants: none; a readable password file; a missing one; a directory; a
/// credential with `$CREDENTIALS_DIRECTORY` set; a URL with a user in it.
const MQTTS: usize = 6;

/// An index into a list of `len` choices whose first is valid: the first five times in six,
/// so that enough generated configs are valid for `run` to run them.
fn pick(len: usize) -> impl proptest::strategy::Strategy<Value = usize> {
    use proptest::prelude::*;
    prop_oneof![5 => Just(0usize), 1 => 0..len]
}

fn gen_meter() -> impl proptest::strategy::Strategy<Value = GenMeter> {
    use proptest::prelude::*;
    (
        0..Protocol::ALL.len(),
        pick(4),
        pick(ADDRESSES.len()),
        pick(TIMEOUTS.len()),
        pick(INTERVALS.len()),
        pick(BAUDS.len()),
    )
        .prop_map(
            |(protocol, port, address, timeout, interval, baud)| GenMeter {
                protocol,
                port,
                address,
                timeout,
                interval,
                baud,
            },
        )
}

/// The config text for one generated case, in `env`'s temp dir.
fn generated_config(
    env: &TestEnv,
    meters: &[GenMeter],
    cpu: usize,
    flush: usize,
    retention: usize,
    mqtt: usize,
) -> String {
    use std::fmt::Write as _;
    let mut s = format!("\n[cpu]\ninterval = {}\n", q(CPU_INTERVALS[cpu]));
    for (i, m) in meters.iter().enumerate() {
        // Ports: two paths that do not exist (so nothing real is opened), or an empty one.
        let port = match m.port {
            0 | 1 => env.path("ttyA").display().to_string(),
            2 => env.path("ttyB").display().to_string(),
            _ => String::new(),
        };
        let _ = write!(
            s,
            "\n[[meter]]\nid = \"m{i}\"\nprotocol = {}\nport = {}\ninterval = {}\n",
            q(Protocol::ALL[m.protocol].as_str()),
            q(&port),
            q(INTERVALS[m.interval])
        );
        if let Some(a) = ADDRESSES[m.address] {
            let _ = writeln!(s, "address = {a}");
        }
        if let Some(t) = TIMEOUTS[m.timeout] {
            let _ = writeln!(s, "timeout = {}", q(t));
        }
        if let Some(b) = BAUDS[m.baud] {
            let _ = writeln!(s, "baud = {b}");
        }
        if Protocol::ALL[m.protocol] == Protocol::Line {
            s.push_str("[meter.line]\nformat = \"csv\"\nfields = { power = 0 }\n");
        }
    }
    let url = "mqtt://127.0.0.1:1";
    match mqtt {
        0 => {}
        1 => {
            let _ = write!(
                s,
                "\n[mqtt]\nurl = {}\nusername = \"u\"\npassword_file = {}\n",
                q(url),
                q(env.path("password"))
            );
        }
        2 => {
            let _ = write!(
                s,
                "\n[mqtt]\nurl = {}\nusername = \"u\"\npassword_file = {}\n",
                q(url),
                q(env.path("no-such-password"))
            );
        }
        3 => {
            let _ = write!(
                s,
                "\n[mqtt]\nurl = {}\nusername = \"u\"\npassword_file = {}\n",
                q(url),
                q(env.dir.path())
            );
        }
        4 => {
            let _ = write!(
                s,
                "\n[mqtt]\nurl = {}\nusername = \"u\"\npassword_credential = \"password\"\n",
                q(url)
            );
        }
        _ => {
            let _ = write!(s, "\n[mqtt]\nurl = \"mqtt://someone@127.0.0.1:1\"\n");
        }
    }
    let config = env.config(&s);
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "flush_interval = \"200ms\"",
        &format!(
            "flush_interval = {}\nraw_retention = {}",
            q(FLUSHES[flush]),
            q(RETENTIONS[retention])
        ),
    );
    std::fs::write(&config, &text).unwrap();
    text
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(32),
        // Each case runs the daemon: shrinking would rerun it hundreds of times.
        max_shrink_iters: 16,
        // A failure prints its config; there is no source file here to record it beside.
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]

    #[test]
    fn generated_configs_run_refuses_are_refused_by_config_check_with_78(
        meters in proptest::collection::vec(gen_meter(), 0..4),
        cpu in pick(CPU_INTERVALS.len()),
        flush in pick(FLUSHES.len()),
        retention in pick(RETENTIONS.len()),
        mqtt in proptest::prop_oneof![2 => 0..MQTTS, 1 => proptest::strategy::Just(0usize)],
    ) {
        let env = TestEnv::new();
        std::fs::write(env.path("password"), "secret\n").unwrap();
        std::fs::set_permissions(env.path("password"), std::fs::Permissions::from_mode(0o600)).unwrap();
        let text = generated_config(&env, &meters, cpu, flush, retention, mqtt);
        let config = env.path("wattson.toml");
        let cmd = || {
            let mut cmd = wattson();
            cmd.env("CREDENTIALS_DIRECTORY", env.dir.path());
            cmd
        };
        let within = Duration::from_secs(30);
        let mut check = cmd();
        check.arg("--config").arg(&config).args(["config", "check"]);
        let (checked, check_err) = output_within(check, within);
        let mut run = cmd();
        run.arg("--config").arg(&config).args(["run", "--duration", "1s"]);
        let (ran, run_err) = output_within(run, within);
        println!("generated config: check exit {checked:?}, run exit {ran:?}: {}", check_err.lines().find(|l| l.contains("ERROR")).unwrap_or(""));
        proptest::prop_assert!(
            checked == Some(0) || checked == Some(78),
            "config check exited {checked:?}:\n{check_err}\n--- config:\n{text}"
        );
        if ran != Some(0) {
            proptest::prop_assert_eq!(
                checked, Some(78),
                "run exited {:?} but config check passed:\nrun: {}\n--- config:\n{}",
                ran, run_err, text
            );
        }
        // And the other way: both read the config the same way.
        proptest::prop_assert_eq!(
            ran, checked,
            "check: {}\nrun: {}\n--- config:\n{}", check_err, run_err, text
        );
    }
}
