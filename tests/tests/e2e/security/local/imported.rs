//! A calibration file is input like any other (issue 44): its names pass the one rule for
//! names and its watts the rules a meter's readings pass, at `calibration import`; and
//! whatever a stored model holds, `calibration export` writes YAML of exactly the structure
//! it means, its comments one line each.

use std::path::Path;

use serde_json::{Value, json};
use wattson::calibration::model::{Feature, Model, Shape, Span, WallModel};
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
        wall_span: Span {
            min: 31.0,
            max: 88.0,
        },
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
    }
}

/// The YAML's structure: `#` for a comment line (which must start `# `), each key line up
/// to its colon, `<point>` for a run of calibrate points and `<expr>` for a run of lines of
/// the `>-` block. A newline that escaped into a comment or a value shows as a line here.
fn skeleton(yaml: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut block = None;
    for line in yaml.lines() {
        let indent = line.len() - line.trim_start().len();
        let shape = match block {
            Some(at) if indent > at => "<expr>".to_owned(),
            _ if line.starts_with('#') => {
                assert!(line.starts_with("# "), "{line:?}");
                "#".to_owned()
            }
            _ if line.trim_start().starts_with("- ") && line.contains(" -> ") => {
                "<point>".to_owned()
            }
            _ => line.split_once(':').map_or(line, |(k, _)| k).to_owned() + ":",
        };
        block = line
            .ends_with(": >-")
            .then_some(indent)
            .or(block.filter(|at| indent > *at));
        if out.last() != Some(&shape) || !shape.starts_with('<') {
            out.push(shape);
        }
    }
    out
}

const POWERCALC: [&str; 11] = [
    "#",
    "#",
    "#",
    "powercalc:",
    "  sensors:",
    "    - entity_id:",
    "      name:",
    "      unique_id:",
    "      linear:",
    "        calibrate:",
    "<point>",
];

const RULE: [&str; 12] = [
    "#",
    "#",
    "#",
    "groups:",
    "  - name:",
    "    rules:",
    "      - record:",
    "        expr:",
    "<expr>",
    "        labels:",
    "          host:",
    "          source:",
];

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
/// stored; a good file imports, and its exports have exactly the keys meant. A model the
/// service user stored with those newlines exports the same structure, the newlines
/// escaped in its comments and its PromQL.
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
    assert_eq!(skeleton(&powercalc), POWERCALC, "{powercalc}");
    assert!(powercalc.contains("borrowed from nas.\n"), "{powercalc}");
    let rule = export(&config, "prometheus");
    assert_eq!(skeleton(&rule), RULE, "{rule}");

    // The service user writes the database: a model whose names hold newlines.
    let mut stored = model();
    stored.host = "e2e".into();
    stored.created_ms += 1;
    stored.borrowed_from = Some(KEYS.into());
    let save = |m: &WallModel| {
        let store =
            wattson::store::Store::open(&env.db, &wattson::store::StoreOptions::default()).unwrap();
        wattson::calibration::persist::save(&store, "e2e", m).unwrap();
        drop(store);
        let _ = std::fs::remove_file(wattson::store::lock::lock_path(&env.db));
    };
    save(&stored);
    let powercalc = export(&config, "powercalc");
    assert_eq!(skeleton(&powercalc), POWERCALC, "{powercalc}");
    assert!(
        powercalc.contains("borrowed from nas\\u{a}groups:\\u{a}  - name: pwned."),
        "{powercalc}"
    );
    stored.created_ms += 1;
    stored.model.features[0].channel = "all\"}\n  - name: pwned".into();
    save(&stored);
    let rule = export(&config, "prometheus");
    assert_eq!(skeleton(&rule), RULE, "{rule}");
    assert!(
        rule.contains(r#"channel="all\"}\n  - name: pwned""#)
            && rule.contains("cpu_busy/all\"}\\u{a}  - name: pwned"),
        "{rule}"
    );
}
