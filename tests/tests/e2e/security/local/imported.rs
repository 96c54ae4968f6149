//! A calibration file is input like any other (issue 44): its names pass the one rule for
//! names and its watts the rules a meter's readings pass, at `calibration import` and again
//! when a stored model is read back from the database; `calibration export` writes YAML of
//! exactly the structure it means, by a YAML serializer, its comments one line each.

use std::path::Path;

use serde_json::{Value, json};
use wattson::calibration::model::{Feature, Model, Origin, Shape, Span, WallModel};
use wattson_collectors::{Metric, SourceId};

use super::run;
use wattson_tests::TestEnv;

/// A newline and the YAML keys after it, as the service user would store or a file carry.
const KEYS: &str = "nas\ngroups:\n  - name: pwned";

/// A calibrate table over the CPU's busy share, fitted on `nas` (the KVM fixture's hardware).
fn model() -> WallModel {
    let root = wattson_tests::kvm_fixture();
    let sys = wattson_collectors::SysRoot::new(root.join("sys"), root.join("proc"));
    WallModel {
        host: "nas".into(),
        created_ms: 1_760_000_000_000,
        wall_source: "meter:wall".into(),
        model: Model {
            features: vec![Feature::new(SourceId::Cpu, Metric::CpuBusy, "all")],
            shape: Shape::Table {
                points: vec![(0.0, 30.0), (0.5, 50.0), (1.0, 90.0)],
                plus: Vec::new(),
            },
        },
        from_ms: 1_759_900_000_000,
        to_ms: 1_760_000_000_000,
        minutes: 1200,
        feature_spans: vec![Span { min: 0.0, max: 1.0 }],
        wall_span: Some(Span {
            min: 31.0,
            max: 88.0,
        }),
        heldout_from_ms: 1_759_980_000_000,
        heldout_minutes: 300,
        heldout_rms_w: 1.5,
        heldout_energy_error_pct: 0.4,
        interval_pct: 2.0,
        considered: vec![(
            "calibrate table over cpu/cpu_busy/all (3 points)".into(),
            1.5,
        )],
        hardware: wattson::calibration::refit::hardware(&sys, "nas"),
        borrowed_from: None,
        origin: Origin::Running,
    }
}

/// The YAML's structure, as a YAML parser reads it: each mapping's keys, a sequence's
/// items (one `"scalar"` for a run of scalars), `"scalar"` for any other value; and its
/// comment lines, which must be the three first and start `# `. A newline that escaped
/// into a comment or a value would show as a key or item here.
fn skeleton(yaml: &str) -> Value {
    let comments: Vec<&str> = yaml.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(comments, yaml.lines().take(3).collect::<Vec<_>>(), "{yaml}");
    assert!(comments.iter().all(|l| l.starts_with("# ")), "{yaml}");
    fn shape(v: &serde_norway::Value) -> Value {
        match v {
            serde_norway::Value::Mapping(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.as_str().unwrap_or("<not a string>").to_owned(), shape(v)))
                    .collect(),
            ),
            serde_norway::Value::Sequence(items) => {
                let mut out: Vec<Value> = items.iter().map(shape).collect();
                out.dedup();
                Value::Array(out)
            }
            _ => json!("scalar"),
        }
    }
    shape(&serde_norway::from_str(yaml).unwrap_or_else(|e| panic!("{e}: {yaml}")))
}

fn powercalc_shape() -> Value {
    json!({"powercalc": {"sensors": [{
        "entity_id": "scalar", "name": "scalar", "unique_id": "scalar",
        "linear": {"calibrate": ["scalar"]}
    }]}})
}

fn rule_shape() -> Value {
    json!({"groups": [{"name": "scalar", "rules": [{
        "record": "scalar", "expr": "scalar",
        "labels": {"host": "scalar", "source": "scalar"}
    }]}]})
}

fn export(config: &Path, format: &str) -> String {
    let (code, out) = run(config, &["calibration", "export", "--format", format]);
    assert_eq!(code, Some(0), "{out}");
    let mut yaml = String::new();
    for line in out.lines().filter(|l| !l.contains(" INFO ")) {
        yaml.push_str(line);
        yaml.push('\n');
    }
    yaml
}

/// Row 4: newlines in an imported file's `host`, `borrowed_from` and a signal's `channel`,
/// and a table of 1e308 W (or below 0 W), are refused at import with the reason, nothing
/// stored; a good file imports, and its exports, read by a YAML parser, have exactly the
/// keys meant.
#[test]
fn an_imported_calibration_with_newlines_or_absurd_watts_is_refused() {
    let env = TestEnv::new();
    let config = env.config("");
    let good: Value = serde_json::from_str(&wattson::calibration::export::file(&model())).unwrap();
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut v = good.clone();
        edit(&mut v);
        v
    };
    let cases: [(&str, Value, &[&str]); 6] = [
        (
            "host",
            with(&|v| v["model"]["host"] = json!(KEYS)),
            &["host \"nas\\ngroups:", "U+000A"],
        ),
        (
            "borrowed_from",
            with(&|v| v["model"]["borrowed_from"] = json!(KEYS)),
            &["borrowed_from", "U+000A"],
        ),
        (
            "channel",
            with(&|v| v["model"]["model"]["features"][0]["channel"] = json!("all\"}\n- x: 1")),
            &["a signal's channel", "U+000A"],
        ),
        (
            "huge",
            with(&|v| v["model"]["model"]["shape"]["points"][2][1] = json!(1e308)),
            &[
                "the table's point at 1 is 1e308 W",
                "from 0 to under 16000 W",
            ],
        ),
        (
            "negative",
            with(&|v| v["model"]["model"]["shape"]["points"][0][1] = json!(-500.0)),
            &["the table's point at 0 is -500 W"],
        ),
        (
            "wall",
            with(&|v| v["model"]["wall_span"]["max"] = json!(1e308)),
            &["the wall's most is 1e308 W"],
        ),
    ];
    for (name, file, says) in cases {
        let path = env.path(&format!("{name}.json"));
        std::fs::write(&path, file.to_string()).unwrap();
        let (code, out) = run(&config, &["calibration", "import", path.to_str().unwrap()]);
        assert_eq!(code, Some(65), "{name}: {out}");
        for s in says {
            assert!(
                out.contains("refused: ") && out.contains(s),
                "{name}: {s:?} in {out}"
            );
        }
        assert!(
            !out.contains("kWh") && !out.contains("inf"),
            "{name}: {out}"
        );
    }
    assert!(!env.db.exists(), "a refused file stored something");

    let path = env.path("good.json");
    std::fs::write(&path, good.to_string()).unwrap();
    let (code, out) = run(&config, &["calibration", "import", path.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    let powercalc = export(&config, "powercalc");
    assert_eq!(skeleton(&powercalc), powercalc_shape(), "{powercalc}");
    assert!(powercalc.contains("borrowed from nas.\n"), "{powercalc}");
    let rule = export(&config, "prometheus");
    assert_eq!(skeleton(&rule), rule_shape(), "{rule}");
}

/// `wattson calibration ARGS` on `config`: exit status, standard output, standard error.
fn calibration(config: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = wattson_tests::wattson()
        .arg("--config")
        .arg(config)
        .arg("calibration")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A model stored by another hand (the service user writing the database with sqlite, as
/// root then reads it) is vetted as an imported one is: newlines in `borrowed_from`, `host`
/// or a channel, a table point of 1e308 W or below 0 W, a signal seen at 1e300, a wall of
/// 1e308 W. Each is refused when read back, once, with its row and the reason, and
/// `export` (every format) and `show` use the newest model that passes, the good one
/// imported before them; with only refused models left, there is no calibration to use.
#[test]
fn a_calibration_stored_by_another_hand_is_vetted_when_read_back() {
    let env = TestEnv::new();
    let config = env.config("");
    let mut good: Value =
        serde_json::from_str(&wattson::calibration::export::file(&model())).unwrap();
    let path = env.path("good.json");
    std::fs::write(&path, good.to_string()).unwrap();
    let (code, out, err) = calibration(&config, &["import", path.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}{err}");

    // Newer rows, each written straight into the table as sqlite3 would.
    good["model"]["host"] = json!("e2e");
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut v = good["model"].clone();
        edit(&mut v);
        v
    };
    let hostile: [(Value, &str); 7] = [
        (
            with(&|v| v["borrowed_from"] = json!(KEYS)),
            "borrowed_from \"nas\\ngroups:",
        ),
        (with(&|v| v["host"] = json!(KEYS)), "host \"nas\\ngroups:"),
        (
            with(&|v| v["model"]["features"][0]["channel"] = json!("all\"}\n  - name: pwned")),
            "a signal's channel",
        ),
        (
            with(&|v| v["model"]["shape"]["points"][2][1] = json!(1e308)),
            "the table's point at 1 is 1e308 W",
        ),
        (
            with(&|v| v["model"]["shape"]["points"][0][1] = json!(-500.0)),
            "the table's point at 0 is -500 W",
        ),
        (
            with(&|v| v["model"]["shape"]["points"][2][0] = json!(1e300)),
            "cpu/cpu_busy/all is seen at 1e300",
        ),
        (
            with(&|v| v["wall_span"]["max"] = json!(1e308)),
            "the wall's most is 1e308 W",
        ),
    ];
    let db = rusqlite::Connection::open(&env.db).unwrap();
    let mut ids = Vec::new();
    for (i, (m, _)) in hostile.iter().enumerate() {
        db.execute(
            "INSERT INTO wall_model (host, created_ms, borrowed_from, model) \
             VALUES ('e2e', ?1, ?2, ?3)",
            rusqlite::params![
                1_770_000_000_000_i64 + i as i64,
                m["borrowed_from"].as_str(),
                m.to_string()
            ],
        )
        .unwrap();
        ids.push(db.last_insert_rowid());
    }
    drop(db);

    for args in [
        &["export", "--format", "powercalc"][..],
        &["export", "--format", "prometheus"],
        &["export", "--format", "file"],
        &["show"],
    ] {
        let (code, out, err) = calibration(&config, args);
        assert_eq!(code, Some(0), "{args:?}: {out}{err}");
        assert!(
            !out.contains("pwned") && !out.contains("e308"),
            "{args:?}: {out}"
        );
        for ((_, says), id) in hostile.iter().zip(&ids) {
            let line = format!("wall model {id} of e2e in the database refused, not used: ");
            assert_eq!(err.matches(&line).count(), 1, "{args:?}: {line}\n{err}");
            assert!(
                err.lines().any(|l| l.contains(&line) && l.contains(says)),
                "{args:?}: {says:?} in {err}"
            );
        }
    }
    let (_, powercalc, _) = calibration(&config, &["export", "--format", "powercalc"]);
    assert_eq!(skeleton(&powercalc), powercalc_shape(), "{powercalc}");
    assert!(powercalc.contains("borrowed from nas.\n"), "{powercalc}");

    // Only refused models: none to use, and the reasons said.
    let db = rusqlite::Connection::open(&env.db).unwrap();
    db.execute("DELETE FROM wall_model WHERE borrowed_from = 'nas'", [])
        .unwrap();
    drop(db);
    let (code, out, err) = calibration(&config, &["export", "--format", "powercalc"]);
    assert_ne!(code, Some(0), "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("no calibration of e2e") && err.contains("refused, not used: "),
        "{err}"
    );
}
