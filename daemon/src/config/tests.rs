use wattson_collectors::meter::line::Field;

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(text, Path::new("test.toml"))
}

#[test]
fn empty_file_gives_defaults() {
    let c = parse("").unwrap();
    assert_eq!(c.storage.raw_retention, Duration::from_secs(30 * 86_400));
    assert_eq!(c.storage.detail_retention, Duration::from_secs(3 * 86_400));
    assert_eq!(c.cpu.interval, Duration::from_secs(1));
    assert_eq!(c.tariff.price_per_kwh, 0.09);
    assert!(c.meters.is_empty());
}

#[test]
fn unknown_key_is_named_with_its_line() {
    let err = parse("[storage]\npath = \"/tmp/x.db\"\nretention = \"3d\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("test.toml:3: storage.retention: "), "{err}");
}

#[test]
fn bad_duration_names_key_and_line() {
    let err = parse("[cpu]\n\ninterval = \"1 fortnight\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("test.toml:3: cpu.interval:"), "{err}");
}

#[test]
fn unknown_protocol_lists_supported() {
    let err = parse("[[meter]]\nid = \"wall\"\nprotocol = \"pzem999\"\nport = \"/dev/ttyUSB0\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("meter.protocol") && err.contains("pzem004t"),
        "{err}"
    );
}

#[test]
fn full_example_parses_and_round_trips() {
    let text = r#"
[host]
name = "basket"
sysfs = "/tmp/sys"
[storage]
path = "/tmp/w.db"
raw_retention = "7d"
detail_retention = "12h"
[[meter]]
id = "wall"
protocol = "pzem004t"
port = "/dev/ttyUSB0"
address = 1
[[meter]]
id = "desk"
protocol = "line"
port = "/dev/ttyACM0"
baud = 115200
[meter.line]
format = "kv"
fields = { power = "P", voltage = "U" }
scale = { power = 0.001 }
[tariff]
currency = "gbp"
price_per_kwh = 0.30
timezone = "Europe/London"
[[tariff.period]]
start = "00:30"
end = "07:30"
price_per_kwh = 0.07
[[tariff.change]]
effective_from = "2027-01-01"
price_per_kwh = 0.25
[mqtt]
url = "mqtt://broker.lan:1883"
username = "wattson"
password_file = "/run/credentials/wattson.service/mqtt"
[[config]]
name = "2x Opteron 2.2 GHz, 6 disks"
modes = { standby = 40.0, idle = 240.0, "1 loop" = 260.0, "2 loops" = 280.0 }
"#;
    let c = parse(text).unwrap();
    assert_eq!(c.host.name, "basket");
    assert_eq!(c.tariff.currency, "GBP");
    assert_eq!(c.meters.len(), 2);
    assert_eq!(c.storage.detail_retention, Duration::from_secs(12 * 3600));
    let power = &c.meters[1].line.as_ref().unwrap().fields[0];
    assert_eq!(power.field, Field::Power);
    assert_eq!(power.key.as_deref(), Some("P"));
    assert_eq!(power.scale, 0.001);
    assert_eq!(c.manual[0].modes[1], ("idle".to_owned(), 240.0));
    let again = parse(&c.to_effective_toml().unwrap()).unwrap();
    assert_eq!(
        Config {
            source: None,
            ..again
        },
        Config { source: None, ..c }
    );
}

#[test]
fn password_in_url_is_refused_and_never_echoed() {
    let err = parse("[mqtt]\nurl = \"mqtt://u:hunter2@h\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("password_file"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

// -----------------------------------------------------------------------------------
// Fuzzing: arbitrary text and mutations of a valid file never panic, and every error
// names a line or a key. Rerun with more cases:
// PROPTEST_CASES=20000 cargo test -p wattson --lib config::tests::fuzz
// -----------------------------------------------------------------------------------

const VALID: &str = r#"[host]
name = "basket"
[storage]
path = "/tmp/w.db"
raw_retention = "7d"
flush_interval = "5s"
[[meter]]
id = "wall"
protocol = "pzem004t"
port = "/dev/ttyUSB0"
address = 1
interval = "1s"
[[meter]]
id = "desk"
protocol = "line"
port = "/dev/ttyACM0"
baud = 115200
[meter.line]
format = "csv"
separator = ";"
fields = { power = 0, voltage = 1 }
[cpu]
interval = "1s"
[tariff]
currency = "GBP"
price_per_kwh = 0.09
timezone = "Europe/London"
[[tariff.period]]
start = "00:30"
end = "07:30"
price_per_kwh = 0.07
[mqtt]
url = "mqtt://broker.lan:1883"
username = "wattson"
password_file = "/etc/wattson/mqtt-password"
keepalive = "30s"
[[config]]
name = "Athlon"
modes = { standby = 4.0, idle = 78.0 }
"#;

/// An error names where: `line N` (syntax) or `path:N: key:` (validation).
fn names_line_or_key(e: &ConfigError) -> bool {
    match e {
        ConfigError::Syntax { message, .. } => {
            message.contains("line ") || message.contains("missing field")
        }
        ConfigError::Invalid { line, key, .. } => *line >= 1 && !key.is_empty(),
        ConfigError::Read { .. }
        | ConfigError::NotAConfigFile { .. }
        | ConfigError::Unusable { .. } => false,
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize, usize),
    Insert(usize, String),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    ReplaceValue(usize, String),
}

fn mutation() -> impl proptest::strategy::Strategy<Value = Mutation> {
    use proptest::prelude::*;
    let token = prop_oneof![
        any::<String>(),
        "[-+0-9.eE_inf nan]{0,12}",
        "\"[0-9a-z: ]{0,10}\"",
        Just("[[meter]]".to_owned()),
        Just("=".to_owned()),
        Just("{".to_owned()),
        Just("\"\u{0}\"".to_owned()),
    ];
    prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<usize>(), token.clone()).prop_map(|(a, t)| Mutation::Insert(a, t)),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        (any::<usize>(), token).prop_map(|(a, t)| Mutation::ReplaceValue(a, t)),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    match m {
        Mutation::Delete(at, n) => {
            let at = at % (chars.len() + 1);
            let end = (at + n).min(chars.len());
            chars.drain(at..end);
            chars.into_iter().collect()
        }
        Mutation::Insert(at, t) => {
            let at = at % (chars.len() + 1);
            chars.splice(at..at, t.chars());
            chars.into_iter().collect()
        }
        Mutation::DuplicateLine(i) => {
            let i = i % lines.len();
            lines.insert(i, lines[i].clone());
            lines.join("\n")
        }
        Mutation::SwapLines(a, b) => {
            let n = lines.len();
            lines.swap(a % n, b % n);
            lines.join("\n")
        }
        Mutation::ReplaceValue(i, t) => {
            let i = i % lines.len();
            if let Some((k, _)) = lines[i].split_once('=') {
                lines[i] = format!("{k}= {t}");
            }
            lines.join("\n")
        }
    }
}

#[test]
fn fuzz_valid_config_parses() {
    assert!(parse(VALID).is_ok(), "{:?}", parse(VALID).err());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000)
    ))]

    #[test]
    fn fuzz_arbitrary_text_never_panics_and_errors_say_where(text in proptest::prelude::any::<String>()) {
        if let Err(e) = parse(&text) {
            proptest::prop_assert!(names_line_or_key(&e), "{e}");
        }
    }

    #[test]
    fn fuzz_mutated_config_never_panics_and_errors_say_where(
        muts in proptest::collection::vec(mutation(), 1..4)
    ) {
        let mut text = VALID.to_owned();
        for m in &muts {
            text = apply(&text, m);
        }
        match parse(&text) {
            Err(e) => proptest::prop_assert!(names_line_or_key(&e), "{e}\n--- input:\n{text}"),
            Ok(c) => proptest::prop_assert_eq!(round_trip(&c), Config { source: None, ..c }),
        }
    }
}

/// `c` printed as the effective config and parsed back (without its source).
fn round_trip(c: &Config) -> Config {
    let effective = c.to_effective_toml().unwrap();
    let again = parse(&effective).unwrap_or_else(|e| panic!("{e}\n--- effective:\n{effective}"));
    Config {
        source: None,
        ..again
    }
}

/// Every section that has defaults prints them in a form that parses back: a key added
/// without its file form (a `Duration` without `serialize_with`) fails here.
#[test]
fn the_defaults_print_and_parse_back_unchanged() {
    let d = Config::defaults();
    assert_eq!(round_trip(&d), d);
}

/// Regression (found by the fuzz test): a period price above the default
/// `max_price_per_kwh` of 10, valid in a file that does not set it, was refused when the
/// effective config (which printed the default) was read back.
#[test]
fn a_price_above_the_default_limit_round_trips_when_the_file_sets_none() {
    let text = VALID.replace("price_per_kwh = 0.07", "price_per_kwh = 12");
    let c = parse(&text).unwrap();
    assert_eq!(round_trip(&c), Config { source: None, ..c });
}

/// `mqtt.url` is parsed once, when the file is read: a port the broker cannot have is the
/// file's error, with its key and line, not the publisher's at start.
#[test]
fn a_broker_url_without_a_usable_port_is_refused_where_it_is_written() {
    let text = VALID.replace("mqtt://broker.lan:1883", "mqtt://broker.lan:0");
    let e = parse(&text).unwrap_err().to_string();
    assert!(
        e.contains("mqtt.url") && e.contains("port must be a number from 1 to 65535"),
        "{e}"
    );
    let c = parse(VALID).unwrap();
    let broker = &c.mqtt.as_ref().unwrap().broker;
    assert_eq!(
        (broker.host.as_str(), broker.port, broker.tls),
        ("broker.lan", 1883, false)
    );
}

#[test]
fn the_fuzz_seed_round_trips() {
    let c = parse(VALID).unwrap();
    assert_eq!(round_trip(&c), Config { source: None, ..c });
}

/// Regression: the meter checks were split between config and the meter wiring, so `config
/// check` passed what `run` refused. Each of these is refused by validation now.
#[test]
fn meters_that_cannot_share_their_line_are_refused() {
    let meter = |id: &str, protocol: &str, port: &str, more: &str| {
        format!("[[meter]]\nid = \"{id}\"\nprotocol = \"{protocol}\"\nport = \"{port}\"\n{more}")
    };
    for (text, needle) in [
        (
            meter("a", "pzem004t", "/dev/x", "address = 1\n")
                + &meter("b", "sdm120", "/dev/x", "address = 2\n"),
            "test.toml:8: meter.protocol: meters a and b share /dev/x but speak different protocols",
        ),
        (
            meter("a", "sdm120", "/dev/x", "") + &meter("b", "sdm120", "/dev/x", ""),
            "test.toml:8: meter.address: meters a and b on /dev/x both use Modbus address 1 (b sets no address",
        ),
        (
            meter("a", "wattsup", "/dev/x", "") + &meter("b", "wattsup", "/dev/x", ""),
            "test.toml:8: meter.port: meters a and b share /dev/x, but wattsup meters stream",
        ),
        (
            meter("a", "sdm120", "/dev/x", "address = 1\nbaud = 9600\n")
                + &meter("b", "sdm120", "/dev/x", "address = 2\n"),
            "meter.port: meters a and b share /dev/x but set different baud (9600 and the default)",
        ),
        (
            meter("a", "pzem004t", "/dev/x", "timeout = \"0.5ms\"\n"),
            "test.toml:5: meter.timeout: 0.5ms is too short: use 10ms to 1m",
        ),
        (
            meter("a", "pzem004t", "", ""),
            "test.toml:4: meter.port: \"\" is not a serial port",
        ),
        (
            meter("a", "pzem004t", "ttyUSB0", ""),
            "meter.port: \"ttyUSB0\" is not a serial port",
        ),
        (
            meter("a", "cse7766", "/dev/x", "address = 3\n"),
            "meter.address: cse7766 meters stream",
        ),
    ] {
        let err = parse(&text).unwrap_err().to_string();
        assert!(
            err.contains(needle),
            "{err}\n--- want {needle:?} for:\n{text}"
        );
    }
    // Three Modbus meters on their own addresses share a line.
    let ok = meter("a", "sdm120", "/dev/x", "address = 1\n")
        + &meter("b", "sdm120", "/dev/x", "address = 2\n")
        + &meter("c", "pzem004t", "/dev/y", "");
    let c = parse(&ok).unwrap();
    let lines = serial_lines(&c.meters).unwrap();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].meter.id, "a+b");
    assert_eq!(lines[0].meter.addresses, [1, 2]);
}
