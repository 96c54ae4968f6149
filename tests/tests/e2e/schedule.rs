//! A day's schedule of modes through the real binary: DESIGN's two machines and a small
//! modern box, `wattson report --schedule "standby 00:00-07:00; idle"` at 9p: each
//! machine's year equal to the hand computation to the cent (7 h standby + 17 h idle a day,
//! 365 days, x 0.09), in JSON, text and CSV; on a time-of-use tariff the night is priced at
//! the night's price; a mode the schedule names that a configuration lacks, and a schedule
//! that cannot be read, say so.

// Test helpers unwrap: a failed expectation is a panic with a message.
#![allow(clippy::unwrap_used, clippy::panic)]

use serde_json::Value;
use wattson_tests::{TestEnv, wattson};

const MACHINES: &str = r#"
[[config]]
name = "2x Opteron 2.2 GHz, 6 disks"
modes = { standby = 40.0, idle = 240.0, "1 loop" = 260.0, "2 loops" = 280.0 }

[[config]]
name = "Athlon 64 1.8 GHz, 3 disks"
modes = { standby = 4.0, idle = 78.0, "1 loop" = 111.0, "2 loops" = 111.0 }

[[config]]
name = "N100 mini PC"
modes = { standby = 1.0, idle = 8.0 }
"#;

const NIGHTS: &str = "standby 00:00-07:00; idle";

fn report(tariff: &str, schedule: &str, args: &[&str]) -> std::process::Output {
    let env = TestEnv::new();
    let config = env.config(&format!("{tariff}{MACHINES}"));
    wattson()
        .arg("--config")
        .arg(&config)
        .args(["report", "--schedule", schedule])
        .args(args)
        .output()
        .unwrap()
}

fn ok(tariff: &str, schedule: &str, args: &[&str]) -> String {
    let out = report(tariff, schedule, args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

const NINE_P: &str = "[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.09\ntimezone = \"UTC\"\n";

#[test]
fn the_seeds_machines_on_a_schedule_cost_the_hand_computed_year() {
    // (7 h x standby + 17 h x idle) a day x 365 x 0.09.
    let by_hand = |standby: f64, idle: f64| (7.0 * standby + 17.0 * idle) * 365.0 / 1000.0 * 0.09;
    let want = [
        ("2x Opteron 2.2 GHz, 6 disks", by_hand(40.0, 240.0)),
        ("Athlon 64 1.8 GHz, 3 disks", by_hand(4.0, 78.0)),
        ("N100 mini PC", by_hand(1.0, 8.0)),
    ];
    assert_eq!(format!("{:.2}", want[0].1), "143.23");
    let json: Value = serde_json::from_str(&ok(NINE_P, NIGHTS, &["--format", "json"])).unwrap();
    let s = &json["schedule"];
    assert_eq!(s["schedule"], "standby 00:00-07:00; idle", "{s}");
    assert_eq!(s["hours_a_week"][0]["hours"], 49.0, "{s}");
    let text = ok(NINE_P, NIGHTS, &[]);
    let csv = ok(NINE_P, NIGHTS, &["--format", "csv"]);
    for (name, cost) in want {
        let row = s["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["config"] == name)
            .unwrap_or_else(|| panic!("no {name} in {s}"));
        let got = row["annual_cost"].as_f64().unwrap();
        assert_eq!(format!("{got:.2}"), format!("{cost:.2}"), "{name}: {row}");
        let money = format!("GBP {cost:.2} a year");
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(name) && l.contains(&money)),
            "{name}: {money} not in\n{text}"
        );
        let row = csv
            .lines()
            .find(|l| l.contains(name) && l.contains(",schedule,schedule,"))
            .unwrap_or_else(|| panic!("no {name} row in\n{csv}"));
        // After the kind and mode: watts, ci95, kWh, its ci95, then the cost (the quoted
        // name and warnings hold commas, these columns do not).
        let cost_col: f64 = row
            .split(",schedule,schedule,")
            .nth(1)
            .and_then(|r| r.split(',').nth(4))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(format!("{cost_col:.2}"), format!("{cost:.2}"), "{row}");
    }
}

#[test]
fn the_night_on_a_schedule_is_priced_at_the_nights_price() {
    let tou = "[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.30\ntimezone = \"Europe/London\"\n\n\
               [[tariff.period]]\nstart = \"00:00\"\nend = \"07:00\"\nprice_per_kwh = 0.10\n";
    let json: Value = serde_json::from_str(&ok(tou, NIGHTS, &["--format", "json"])).unwrap();
    let row = &json["schedule"]["configs"][0];
    // Standby sleeps through the cheap night; idle pays the day's price. A 365-day year
    // holds as many 23- as 25-hour days in London only over whole years: the two
    // clock changes inside it shift an hour of standby each way (net zero here).
    let want = (7.0 * 40.0 * 0.10 + 17.0 * 240.0 * 0.30) * 365.0 / 1000.0;
    let got = row["annual_cost"].as_f64().unwrap();
    assert!((got - want).abs() < 0.5, "{got} against {want}: {row}");
}

#[test]
fn a_mode_a_machine_lacks_and_a_schedule_that_cannot_be_read_are_named() {
    let out = ok(NINE_P, "standby 00:00-07:00; 2 loops", &[]);
    assert!(
        out.lines().any(|l| l
            .trim_start()
            .starts_with("N100 mini PC: no 2 loops measured or entered")),
        "{out}"
    );
    let bad = report(NINE_P, "standby 25:00-07:00; idle", &[]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("HH:MM-HH:MM") && err.contains("--schedule"),
        "{err}"
    );
}

/// A configuration's own schedule in the file (`[[config]] schedule`): priced on it with no
/// `--schedule`, and in place of `--schedule` when one is given; the other machines on
/// `--schedule`. A schedule naming a mode the configuration does not give is refused when
/// the file is read, with the line and the modes it has.
#[test]
fn a_configuration_with_its_own_schedule_is_priced_on_it() {
    let env = TestEnv::new();
    let own = MACHINES.replace(
        "name = \"N100 mini PC\"\n",
        "name = \"N100 mini PC\"\nschedule = \"standby mon-fri 09:00-17:00; idle\"\n",
    );
    let config = env.config(&format!("{NINE_P}{own}"));
    let run = |args: &[&str]| {
        let out = wattson()
            .arg("--config")
            .arg(&config)
            .args(["report", "--format", "json"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    // Standby 8 h of each weekday at 1 W, idle the rest at 8 W, over the 365 days from
    // today.
    let weekdays = chrono::Utc::now()
        .date_naive()
        .iter_days()
        .take(365)
        .filter(|d| chrono::Datelike::weekday(d).num_days_from_monday() < 5)
        .count() as f64;
    let standby_h = 8.0 * weekdays;
    let n100 = (standby_h * 1.0 + (365.0 * 24.0 - standby_h) * 8.0) / 1000.0 * 0.09;
    let json = run(&[]);
    let s = &json["schedule"];
    assert!(s.get("schedule").is_none(), "{s}");
    let configs = s["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 1, "{s}");
    assert_eq!(configs[0]["config"], "N100 mini PC");
    assert_eq!(configs[0]["own_schedule"], true);
    assert_eq!(configs[0]["schedule"], "standby mon-fri 09:00-17:00; idle");
    let got = configs[0]["annual_cost"].as_f64().unwrap();
    assert_eq!(format!("{got:.2}"), format!("{n100:.2}"), "{s}");

    let json = run(&["--schedule", NIGHTS]);
    let s = &json["schedule"];
    assert_eq!(s["schedule"], NIGHTS, "{s}");
    let cost = |name: &str| {
        s["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["config"] == name)
            .and_then(|c| c["annual_cost"].as_f64())
            .unwrap()
    };
    assert_eq!(format!("{:.2}", cost("N100 mini PC")), format!("{n100:.2}"));
    assert_eq!(
        format!("{:.2}", cost("2x Opteron 2.2 GHz, 6 disks")),
        "143.23"
    );

    let bad = MACHINES.replace(
        "name = \"N100 mini PC\"\n",
        "name = \"N100 mini PC\"\nschedule = \"standby 00:00-07:00; 2 loops\"\n",
    );
    let config = env.config(&format!("{NINE_P}{bad}"));
    let out = wattson()
        .arg("--config")
        .arg(&config)
        .arg("report")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config.schedule")
            && err.contains("\"2 loops\"")
            && err.contains("they are: standby, idle"),
        "{err}"
    );
}
