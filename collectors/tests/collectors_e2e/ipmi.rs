//! DCMI power readings: the parser on captured `ipmitool dcmi power reading` outputs
//! (`fixtures/ipmi-dcmi/`, see its README) and the collector against fake ipmitool programs.
// Helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use wattson_collectors::power::ipmi::{IpmiCollector, IpmiConfig, IpmiError, parse_power_reading};
use wattson_collectors::{Action, CollectError, Collector, Metric, Scope};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ipmi-dcmi")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

#[test]
fn activated_reading_has_every_figure() {
    let r = parse_power_reading(&read("activated.txt")).unwrap();
    assert_eq!(r.instantaneous_w, 215.0);
    assert_eq!(r.minimum_w, Some(162.0));
    assert_eq!(r.maximum_w, Some(276.0));
    assert_eq!(r.average_w, Some(176.0));
    assert_eq!(r.sampling_period_s, Some(1_131_466));
    assert!(r.active);
}

#[test]
fn sampling_period_running_on_the_timestamp_line_is_found() {
    let r = parse_power_reading(&read("supermicro-timestamp-run-on.txt")).unwrap();
    assert_eq!(r.instantaneous_w, 109.0);
    assert_eq!(r.sampling_period_s, Some(65_530));
    assert!(r.active);
}

#[test]
fn deactivated_readings_are_marked() {
    let zero = parse_power_reading(&read("openbmc-deactivated-zero.txt")).unwrap();
    assert!(!zero.active);
    assert_eq!(zero.instantaneous_w, 0.0);
    let real = parse_power_reading(&read("openbmc-deactivated-319.txt")).unwrap();
    assert!(!real.active);
    assert_eq!(real.instantaneous_w, 319.0);
}

#[test]
fn failures_and_garbage_are_errors() {
    let err = parse_power_reading(&read("no-device.stderr")).unwrap_err();
    assert!(err.to_string().contains("/dev/ipmi0"), "{err}");
    let err = parse_power_reading("    Instantaneous power reading:   lots Watts\n").unwrap_err();
    assert!(matches!(err, IpmiError::BadLine { .. }), "{err}");
    let err = parse_power_reading("    Instantaneous power reading:   -5 Watts\n").unwrap_err();
    assert!(matches!(err, IpmiError::BadLine { .. }), "{err}");
    assert!(parse_power_reading("").is_err());
}

/// A stand-in `ipmitool` that checks its arguments, prints `stdout_file` and exits `code`.
fn fake_ipmitool(dir: &Path, stdout_file: &str, stderr_file: &str, code: i32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("ipmitool");
    let out = if stdout_file.is_empty() {
        String::new()
    } else {
        format!("cat '{}'", fixture(stdout_file).display())
    };
    let err = if stderr_file.is_empty() {
        String::new()
    } else {
        format!("cat '{}' >&2", fixture(stderr_file).display())
    };
    let script = format!(
        "#!/bin/sh\n\
         case \"$*\" in *'dcmi power reading') ;; *) echo \"bad args: $*\" >&2; exit 64;; esac\n\
         {out}\n{err}\nexit {code}\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn config(program: PathBuf) -> IpmiConfig {
    IpmiConfig {
        program,
        args: vec!["-I".into(), "lanplus".into(), "-H".into(), "bmc".into()],
        timeout: Duration::from_secs(10),
        accept_deactivated: false,
    }
}

#[test]
fn collector_reports_wall_watts() {
    let dir = tempfile::tempdir().unwrap();
    let program = fake_ipmitool(dir.path(), "activated.txt", "", 0);
    let mut c = IpmiCollector::new(config(program)).unwrap();
    assert_eq!(c.scope(), Scope::Wall);
    assert_eq!(Collector::scope(&c), Some(Scope::Wall));
    let s = c.poll(9).unwrap();
    assert_eq!(s.len(), 1);
    assert_eq!(
        (
            s[0].source.to_string().as_str(),
            s[0].metric,
            s[0].value,
            s[0].ts_ms
        ),
        ("ipmi", Metric::Power, 215.0, 9)
    );
}

#[test]
fn deactivated_reading_is_refused_unless_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let program = fake_ipmitool(dir.path(), "openbmc-deactivated-319.txt", "", 0);
    let err = IpmiCollector::new(config(program.clone())).unwrap_err();
    assert!(matches!(err, IpmiError::Deactivated { watts } if watts == 319.0));
    let err = CollectError::from(err);
    assert_eq!(err.action(), Action::Stop);
    assert!(err.to_string().contains("dcmi power activate"), "{err}");

    let mut accepting = IpmiCollector::new(IpmiConfig {
        accept_deactivated: true,
        ..config(program)
    })
    .unwrap();
    assert_eq!(accepting.poll(0).unwrap()[0].value, 319.0);
}

#[test]
fn machine_without_a_bmc_names_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let program = fake_ipmitool(dir.path(), "", "no-device.stderr", 1);
    let err = IpmiCollector::new(config(program)).unwrap_err();
    assert!(matches!(err, IpmiError::Failed { .. }), "{err}");
    assert!(err.to_string().contains("Could not open device"), "{err}");
}

#[test]
fn bmc_that_stops_answering_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let program = fake_ipmitool(dir.path(), "activated.txt", "", 0);
    let mut c = IpmiCollector::new(config(program)).unwrap();
    // The BMC drops off the network between polls.
    fake_ipmitool(dir.path(), "", "lan-session-failed.stderr", 1);
    let err = c.poll(0).unwrap_err();
    assert_eq!(err.action(), Action::Retry);
    assert!(err.to_string().contains("RMCP+"), "{err}");
}

#[test]
fn missing_ipmitool_is_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let err = IpmiCollector::new(config(dir.path().join("ipmitool"))).unwrap_err();
    let err = CollectError::from(err);
    assert_eq!(err.action(), Action::Stop);
    assert!(err.to_string().contains("not found"), "{err}");
}

#[test]
fn hung_ipmitool_is_killed_at_the_timeout() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("ipmitool");
    std::fs::write(&program, "#!/bin/sh\nexec sleep 30\n").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let started = std::time::Instant::now();
    let err = IpmiCollector::new(IpmiConfig {
        timeout: Duration::from_millis(200),
        ..config(program)
    })
    .unwrap_err();
    let err = CollectError::from(err);
    assert!(
        matches!(
            err,
            CollectError::Timeout {
                timeout_ms: 200,
                ..
            }
        ),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}
