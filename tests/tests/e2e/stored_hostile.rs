//! A database is input like any other: what a crafted one holds, through the real binary.
//! A sweep level of infinite watts (the HTML report's chart of it never finished drawing) and
//! a stored fit that is not one (every report failed with NaN energy) are set aside with the
//! reason, in every format and in `sweep --show`; a price slot in year 1 (the year's mean
//! price was worked out over 17,758,921 hours, 15 s a report) is refused at import and left
//! out when found stored; a name written with a terminal escape and a line break is shown as
//! one line of printable text.

// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic, clippy::missing_panics_doc)]

use std::path::Path;
use std::time::Duration;

use wattson_tests::{output_within, wattson};

/// Long enough for any report of these small databases; a report that hangs fails here.
const WITHIN: Duration = Duration::from_secs(60);

fn sql(db: &Path, statement: &str) {
    rusqlite::Connection::open(db)
        .unwrap()
        .execute_batch(statement)
        .unwrap();
}

/// `wattson report --db DB --format FORMAT`, finished within [`WITHIN`]: (exit code, stderr,
/// the report).
fn report(db: &Path, format: &str) -> (Option<i32>, String, String) {
    let out = db.with_extension(format);
    let mut cmd = wattson();
    cmd.arg("report")
        .arg("--db")
        .arg(db)
        .args(["--format", format, "--out"])
        .arg(&out);
    let (code, stderr) = output_within(cmd, WITHIN);
    (
        code,
        stderr,
        std::fs::read_to_string(&out).unwrap_or_default(),
    )
}

#[test]
fn a_stored_level_of_infinite_watts_and_a_fit_that_is_not_one_are_set_aside_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crafted.db");
    wattson_tests::sweep::basket(&db);
    sql(
        &db,
        "UPDATE sweep_level SET mean_w = 9e999 WHERE loops = 1;
         UPDATE sweep_run SET fit = '[1,2,3]';",
    );
    for format in ["table", "markdown", "csv", "json", "html"] {
        let (code, stderr, text) = report(&db, format);
        assert_eq!(code, Some(0), "{format}: {stderr}");
        for why in [
            "its stored spin level 1 (run 1) is set aside: its mean is inf W",
            "its stored fit (run 1) is set aside, and its figures come from its levels alone: \
             fit 1 names no loop kind",
        ] {
            if format != "csv" {
                assert!(text.contains(why), "{format} lacks {why:?}:\n{text}");
            }
        }
        assert!(
            !text.contains("NaN") && !text.contains("inf ±"),
            "{format}:\n{text}"
        );
    }
    // What is left is used: the levels of 40 and 70 W, and the fit is gone.
    let (_, _, json) = report(&db, "json");
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    let levels: Vec<(u64, f64)> = r["configs"][0]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["loops"].as_u64().unwrap(), l["mean_w"].as_f64().unwrap()))
        .collect();
    assert_eq!(levels, [(0, 40.0), (2, 70.0)], "{json}");
    assert!(r["configs"][0]["fit"].is_null(), "{json}");

    let out = wattson()
        .args(["sweep", "--show", "basket", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("warning: its stored spin level 1 (run 1) is set aside"),
        "{text}"
    );
    assert!(
        text.contains("warning: its stored fit (run 1) is set aside"),
        "{text}"
    );
}

#[test]
fn a_price_slot_outside_1970_to_2100_is_refused_at_import_and_left_out_where_stored() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("prices.db");
    wattson_tests::sweep::basket(&db);
    let file = dir.path().join("prices.csv");
    std::fs::write(
        &file,
        "start,end,price_per_kwh\n\
         0001-01-01T00:00:00Z,0001-01-02T00:00:00Z,0.1\n\
         2026-12-06T00:00:00Z,2026-12-06T01:00:00Z,0.2\n",
    )
    .unwrap();
    let import = |file: &Path| {
        wattson()
            .args(["tariff", "import"])
            .arg(file)
            .arg("--db")
            .arg(&db)
            .args(["--name", "day-ahead"])
            .output()
            .unwrap()
    };
    let out = import(&file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "line 2: start: the slot 0001-01-01T00:00:00Z..0001-01-02T00:00:00Z is outside \
             the years 1970 to 2100"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("nothing imported"), "{stderr}");

    // Stored anyway, by a hand on the database: the series is left out with a warning, and
    // the report finishes with the configured prices.
    std::fs::write(
        &file,
        "start,end,price_per_kwh\n\
         2026-12-05T00:00:00Z,2026-12-05T01:00:00Z,0.1\n\
         2026-12-06T00:00:00Z,2026-12-06T01:00:00Z,0.2\n",
    )
    .unwrap();
    assert!(import(&file).status.success());
    sql(
        &db,
        "UPDATE price_slot SET start_ms = -62135596800000, end_ms = -62135510400000
         WHERE start_ms = 1796428800000;",
    );
    let (code, stderr, text) = report(&db, "table");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("price series \"day-ahead\": ") && stderr.contains("outside 1970..2100"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("price series \"day-ahead\"").count(),
        1,
        "said once: {stderr}"
    );
    assert!(!text.contains("the price series over"), "{text}");
}

#[test]
fn a_stored_name_with_control_characters_reaches_no_terminal_or_file_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("names.db");
    wattson_tests::sweep::basket(&db);
    sql(
        &db,
        "UPDATE configuration SET name = char(27) || '[31mRED' || char(10) || 'x' || char(13);",
    );
    let out = wattson()
        .args(["report", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("?[31mRED?x?"), "{stdout}");
    assert!(
        stdout.contains("its stored name holds control characters, shown as ?"),
        "{stdout}"
    );
    for format in ["table", "markdown", "csv"] {
        let (code, stderr, text) = report(&db, format);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{format}: {text:?}"
        );
        // Markdown escapes the bracket too (it reads as itself when rendered).
        let name = if format == "markdown" {
            "?\\[31mRED?x?"
        } else {
            "?[31mRED?x?"
        };
        assert!(text.contains(name), "{format}: {text}");
    }
    let out = wattson()
        .args(["sweep", "--list", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("?[31mRED?x? ("), "{stdout:?}");
}
