//! Hostile tariff files: each refused whole, named by line and field, and nothing imported.

use std::path::{Path, PathBuf};

use super::{config, fixture, ok, run, series_count};

/// The hostile files, each with the extra arguments it is imported with and what the error
/// says: written into `dir` (`good`, a good line, beside the bad one), and fixtures.
fn hostile_files(dir: &Path, good: &str) -> Vec<(PathBuf, &'static [&'static str], &'static str)> {
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let huge = dir.join("huge.csv");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(40 * 1024 * 1024)
        .unwrap();
    let agile = std::fs::read_to_string(fixture("agile-2026-11-29.json")).unwrap();
    vec![
        (huge, &[], "larger than 32 MiB"),
        (
            write(
                "nan.csv",
                &format!("{good}2026-11-29T00:30:00Z,2026-11-29T01:00:00Z,NaN\n"),
            ),
            &[],
            "line 2: price: NaN is not a finite number",
        ),
        (
            write(
                "inf.csv",
                &format!("{good}2026-11-29T00:30:00Z,2026-11-29T01:00:00Z,inf\n"),
            ),
            &[],
            "line 2: price: inf is not a finite number",
        ),
        (
            write(
                "overlap.csv",
                &format!("{good}2026-11-29T00:15:00Z,2026-11-29T01:00:00Z,0.3\n"),
            ),
            &[],
            "line 2: start: the slot",
        ),
        (
            write(
                "backwards.csv",
                &format!("{good}2026-11-29T01:00:00Z,2026-11-29T00:30:00Z,0.3\n"),
            ),
            &[],
            "line 2: end:",
        ),
        (
            write(
                "empty-slot.csv",
                &format!("{good}2026-11-29T01:00:00Z,2026-11-29T01:00:00Z,0.3\n"),
            ),
            &[],
            "line 2: end:",
        ),
        (
            write(
                "absurd.csv",
                &format!("{good}2026-11-29T00:30:00Z,2026-11-29T01:00:00Z,245.0\n"),
            ),
            &[],
            "line 2: price: 245 GBP/kWh is beyond",
        ),
        (
            write(
                "bad-line.csv",
                &format!(
                    "start,end,price_per_kwh\n{good}2026-11-29T00:30:00Z,2026-11-29T01:00:00Z,0.21\n2026-11-29T01:00:00Z,soon,0.22\n"
                ),
            ),
            &[],
            "line 4: end:",
        ),
        (
            write("fields.csv", &format!("{good}2026-11-29T00:30:00Z,0.21\n")),
            &[],
            "line 2: line: 2 fields",
        ),
        (
            fixture("entsoe-de-lu-2026-10-25.csv"),
            &[],
            "prices in EUR, but [tariff] currency is GBP",
        ),
        (
            write(
                "agile-bad.json",
                &agile.replacen("\"value_inc_vat\": 18.06", "\"value_inc_vat\": \"NaN\"", 1),
            ),
            &[],
            "line 8: value_inc_vat",
        ),
        (
            write("truncated.json", &agile[..agile.len() / 2]),
            &[],
            "json: not valid JSON",
        ),
        (
            write("binary.csv", "\u{0}\u{1}\u{2}"),
            &[],
            "line 1: line: 1 fields",
        ),
    ]
}

/// Every hostile file: refused whole (exit 1), the line and field named, nothing stored.
#[test]
fn hostile_files_import_nothing_and_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let cfg = config(dir.path(), &db, "GBP", "");
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let good = "2026-11-29T00:00:00Z,2026-11-29T00:30:00Z,0.20\n";
    let cases = hostile_files(dir.path(), good);
    for (file, extra, want) in cases {
        let mut args = vec!["tariff", "import"];
        args.extend(extra);
        args.push(file.to_str().unwrap());
        let (code, _, err) = run(&cfg, &args);
        assert_eq!(code, 1, "{}: {err}", file.display());
        assert!(
            err.contains(want),
            "{}: wanted {want:?} in: {err}",
            file.display()
        );
        assert!(err.contains("nothing imported"), "{err}");
        assert!(
            err.contains(file.file_name().unwrap().to_str().unwrap()),
            "{err}"
        );
        assert_eq!(err.matches(want).count(), 1, "printed once: {err}");
    }
    // A good file beside a bad one: neither goes in.
    let bad = dir.path().join("nan.csv");
    let good_file = write("good.csv", good);
    let (code, _, err) = run(
        &cfg,
        &[
            "tariff",
            "import",
            good_file.to_str().unwrap(),
            bad.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{err}");
    if db.exists() {
        assert_eq!(series_count(&cfg), 0);
    }
    // Then the good one alone does.
    ok(&cfg, &["tariff", "import", good_file.to_str().unwrap()]);
    assert_eq!(series_count(&cfg), 1);
}
