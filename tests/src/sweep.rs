//! A stored sweep for the tests that read one back: written through the library as
//! `wattson sweep` stores it.

use std::collections::BTreeMap;
use std::path::Path;

use wattson::store::{Store, StoreOptions};
use wattson::sweep::outcome::{LevelResult, SweepOutcome, fits};
use wattson::sweep::workload::LoopKind;

use crate::{HOST, kvm_fixture};

/// A spin level of `basket`: 40 W + 15 W a loop, half busy, no C-state residency.
pub fn level(loops: usize) -> LevelResult {
    LevelResult {
        kind: LoopKind::Spin,
        loops,
        started_ms: 1,
        ended_ms: 2,
        settle_s: 1.0,
        n: 60,
        mean_w: 40.0 + 15.0 * loops as f64,
        sd_w: 1.0,
        ci95_w: 0.4,
        ci_method: "batch means".into(),
        min_w: 38.0,
        max_w: 72.0,
        mean_mhz: Some(2000.0),
        busy: Some(0.5),
        busy_cpus: Some(1.0),
        residency: BTreeMap::new(),
        ops_per_s: 1e6,
        joules_per_op: None,
        components: BTreeMap::new(),
        component_ranges: BTreeMap::new(),
        pinned: true,
        smt_siblings: false,
        warnings: Vec::new(),
    }
}

/// Stores spin `levels` as the sweep `basket` of this host (on the KVM fixture, metered by
/// `pzem004t wall on /dev/ttyUSB0`), fitted as `wattson sweep` fits them.
pub fn save_basket(store: &Store, mut levels: Vec<LevelResult>) {
    let fits = fits(&[LoopKind::Spin], &mut levels, 2);
    let outcome = SweepOutcome {
        levels,
        fits,
        complete: true,
        started_ms: 1,
        ended_ms: 2,
    };
    let root =
        wattson_collectors::SysRoot::new(kvm_fixture().join("sys"), kvm_fixture().join("proc"));
    let fp = wattson::sweep::fingerprint::gather(&root, HOST, "pzem004t wall on /dev/ttyUSB0");
    wattson::sweep::persist::save(store, "basket", &fp, &outcome, &serde_json::json!({}))
        .expect("storing the sweep");
}

/// A database holding one sweep, `basket`: idle 40 W and 15 W a loop, levels 0 to 2.
pub fn basket(db: &Path) {
    let options = StoreOptions {
        host: HOST.to_owned(),
        ..StoreOptions::default()
    };
    let store = Store::open(db, &options).expect("opening the database");
    save_basket(&store, (0..=2).map(level).collect());
}
