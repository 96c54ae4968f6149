//! The Grafana dashboard reads wattson's database through the SQLite data source: every
//! query in it (and its variables) must prepare against the migrated schema.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;

use wattson::store::{Store, StoreOptions};

fn queries(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, val) in map {
                if (k == "queryText" || k == "query") && val.is_string() {
                    let q = val.as_str().unwrap_or_default();
                    if q.trim_start().to_ascii_uppercase().starts_with("SELECT") {
                        out.push(q.to_owned());
                    }
                } else {
                    queries(val, out);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| queries(i, out)),
        _ => {}
    }
}

#[test]
fn every_grafana_query_prepares_against_the_schema() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/grafana.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut qs = Vec::new();
    queries(&dash, &mut qs);
    assert!(qs.len() >= 7, "found only {} queries", qs.len());
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("w.db"), &StoreOptions::default()).unwrap();
    for q in qs {
        // Grafana macros and variables, as the data source substitutes them.
        let sql = q
            .replace("$__from", "0")
            .replace("$__to", "1")
            .replace("${host}", "basket");
        if let Err(e) = store.conn().prepare(&sql) {
            panic!("query does not prepare: {e}\n{sql}");
        }
    }
}

#[test]
fn a_query_against_a_missing_column_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("w.db"), &StoreOptions::default()).unwrap();
    assert!(
        store
            .conn()
            .prepare("SELECT watts_typo FROM hourly")
            .is_err()
    );
}
