//! Whether the daemon is doing its job: the sampler completes its passes and the store
//! writes. One value, read by the systemd watchdog (no `WATCHDOG=1` while unhealthy, so
//! systemd restarts a daemon that cannot sample or store) and by the `/healthz` endpoint
//! (200 while healthy, 503 with the reasons).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use serde::Serialize;
use wattson_collectors::now_ms;

use crate::store::StoreHandle;
use crate::store::health::STUCK_AFTER;

/// The daemon's health, cheap to clone and to check.
#[derive(Clone)]
pub struct Health {
    inner: Arc<Inner>,
}

struct Inner {
    /// When the sampler last completed a pass, UTC ms (its `Heartbeat`).
    heartbeat: Arc<AtomicI64>,
    /// A sampling pass older than this means the sampler is stalled, ms.
    stale_ms: i64,
    store: StoreHandle,
}

/// One part's state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartHealth {
    pub healthy: bool,
    /// What it is doing, or why it is unhealthy.
    pub detail: String,
}

/// The daemon's health at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HealthReport {
    pub healthy: bool,
    pub sampler: PartHealth,
    pub store: PartHealth,
    /// What was lost or set aside since the start; it does not make the daemon unhealthy.
    pub losses: Vec<String>,
}

impl HealthReport {
    /// The HTTP status `/healthz` answers: 200 while healthy, 503 otherwise.
    pub fn http_status(&self) -> u16 {
        if self.healthy { 200 } else { 503 }
    }

    /// Why the daemon is unhealthy (the unhealthy parts' details joined), or `"ok"`.
    pub fn reason(&self) -> String {
        let bad: Vec<String> = [("sampler", &self.sampler), ("store", &self.store)]
            .into_iter()
            .filter(|(_, p)| !p.healthy)
            .map(|(name, p)| format!("{name}: {}", p.detail))
            .collect();
        if bad.is_empty() {
            "ok".to_owned()
        } else {
            bad.join("; ")
        }
    }
}

impl Health {
    /// Health from the sampler's heartbeat (stale after `stale`) and the store's writer.
    pub fn new(heartbeat: Arc<AtomicI64>, stale: Duration, store: StoreHandle) -> Health {
        Health {
            inner: Arc::new(Inner {
                heartbeat,
                stale_ms: stale.as_millis() as i64,
                store,
            }),
        }
    }

    /// The health now.
    pub fn report(&self) -> HealthReport {
        let inner = &self.inner;
        let age = now_ms() - inner.heartbeat.load(Ordering::Relaxed);
        let sampler = if age <= inner.stale_ms {
            PartHealth {
                healthy: true,
                detail: format!("last pass {:.1} s ago", age.max(0) as f64 / 1000.0),
            }
        } else {
            PartHealth {
                healthy: false,
                detail: format!("sampling loop stalled for {age} ms"),
            }
        };
        let board = inner.store.board();
        let health = board.snapshot();
        let path = inner.store.path().display();
        let store = match (health.problem(), board.busy_for()) {
            (Some(problem), _) => PartHealth {
                healthy: false,
                detail: format!("database {path}: {problem}"),
            },
            (None, Some(busy)) if busy >= STUCK_AFTER => PartHealth {
                healthy: false,
                detail: format!(
                    "database {path}: the writer has been in one write for {:.0} s",
                    busy.as_secs_f64()
                ),
            },
            (None, _) => PartHealth {
                healthy: true,
                detail: board.last_commit_ms().map_or_else(
                    || format!("writing {path}; nothing committed yet"),
                    |t| {
                        format!(
                            "writing {path}; last commit {:.1} s ago",
                            (now_ms() - t).max(0) as f64 / 1000.0
                        )
                    },
                ),
            },
        };
        HealthReport {
            healthy: sampler.healthy && store.healthy,
            sampler,
            store,
            losses: health.losses(),
        }
    }
}

#[cfg(test)]
mod tests {
    use wattson_collectors::{Metric, Sample};

    use super::*;
    use crate::store::StoreOptions;

    #[test]
    fn healthy_is_200_and_a_store_that_cannot_write_or_a_stalled_sampler_is_503_with_why() {
        let dir = tempfile::tempdir().unwrap();
        let (store, join) = StoreHandle::spawn(
            &dir.path().join("w.db"),
            StoreOptions {
                retry_interval: Duration::from_secs(3600),
                ..StoreOptions::default()
            },
        )
        .unwrap();
        let heartbeat = Arc::new(AtomicI64::new(now_ms()));
        let health = Health::new(heartbeat.clone(), Duration::from_secs(3), store.clone());
        let report = health.report();
        assert_eq!(
            (report.http_status(), report.reason()),
            (200, "ok".to_owned())
        );

        // The writer's connection refuses writes: the next flush fails.
        store
            .query(|s| s.conn().pragma_update(None, "query_only", true).unwrap())
            .unwrap();
        let now = now_ms();
        store
            .insert(vec![Sample::new(
                now,
                wattson_collectors::SourceId::meter("wall"),
                Metric::Power,
                "",
                50.0,
            )])
            .unwrap();
        store.flush().unwrap_err();
        let report = health.report();
        assert_eq!(report.http_status(), 503);
        assert!(report.sampler.healthy);
        assert!(
            report.reason().starts_with("store: database ")
                && report.reason().contains("readonly database")
                && report.reason().contains("1 samples held in memory"),
            "{}",
            report.reason()
        );

        store
            .query(|s| s.conn().pragma_update(None, "query_only", false).unwrap())
            .unwrap();
        store.flush().unwrap();
        assert_eq!(health.report().http_status(), 200);

        heartbeat.store(now_ms() - 10_000, Ordering::Relaxed);
        let report = health.report();
        assert_eq!(report.http_status(), 503);
        assert!(
            report
                .reason()
                .starts_with("sampler: sampling loop stalled for "),
            "{}",
            report.reason()
        );
        store.close().unwrap();
        join.join().unwrap().unwrap();
    }
}
