//! Whether the daemon is doing its job: the sampler completes its passes, the store
//! writes, and the wall meter answers. One value, read by the systemd watchdog (no
//! `WATCHDOG=1` while the sampler or the store is unhealthy, so systemd restarts a daemon
//! that cannot sample or store) and by the `/healthz` endpoint (200 while all is well, 503
//! with the reasons). A stale wall meter (its newest reading older than three of its
//! intervals, whatever its session believes) makes `/healthz` answer 503 but does not stop
//! the watchdog: a restart does not bring back a meter that is unplugged or silent.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use serde::Serialize;
use wattson_collectors::now_ms;

use wattson_collectors::{Metric, SourceId};

use super::LiveState;
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
    /// The wall meter, where its readings come to the live state, and how old its newest
    /// may be, ms.
    wall: Option<(SourceId, Arc<LiveState>, i64)>,
    /// When the daemon started, UTC ms: a meter not read yet is not stale before the
    /// first of its limits.
    started_ms: i64,
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
    /// The wall meter, where there is one: healthy while its newest reading is recent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall: Option<PartHealth>,
    /// What was lost or set aside since the start; it does not make the daemon unhealthy.
    pub losses: Vec<String>,
    /// What the store recovered from without losing anything.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recovered: Vec<String>,
}

impl HealthReport {
    /// Whether the wall meter (if any) is read.
    pub fn wall_fresh(&self) -> bool {
        self.wall.as_ref().is_none_or(|w| w.healthy)
    }

    /// The HTTP status `/healthz` answers: 200 while healthy and the wall meter is read,
    /// 503 otherwise.
    pub fn http_status(&self) -> u16 {
        if self.healthy && self.wall_fresh() {
            200
        } else {
            503
        }
    }

    /// Why the daemon is unhealthy (the unhealthy parts' details joined), or `"ok"`.
    pub fn reason(&self) -> String {
        let bad: Vec<String> = [("sampler", &self.sampler), ("store", &self.store)]
            .into_iter()
            .chain(self.wall.as_ref().map(|w| ("wall meter", w)))
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
                wall: None,
                started_ms: now_ms(),
            }),
        }
    }

    /// The daemon's health: the sampler is stalled once its last pass is older than three
    /// of the longest intervals it polls at (at least 3 s); the wall meter, where one is
    /// configured, is watched too.
    pub fn for_daemon(
        config: &crate::config::Config,
        heartbeat: &Arc<AtomicI64>,
        store: &StoreHandle,
        live: &Arc<LiveState>,
    ) -> Health {
        let max_interval = config
            .meters
            .iter()
            .map(|m| m.interval)
            .chain(std::iter::once(config.cpu.interval))
            .max()
            .unwrap_or(Duration::from_secs(1));
        let health = Health::new(
            heartbeat.clone(),
            (max_interval * 3).max(Duration::from_secs(3)),
            store.clone(),
        );
        let wall = crate::ledger::PrimaryPower::from_config(config)
            .wall()
            .cloned();
        match wall.and_then(|w| config.meters.iter().find(|m| SourceId::meter(&m.id) == w)) {
            Some(m) => health.watching_wall(SourceId::meter(&m.id), live.clone(), m.interval),
            None => health,
        }
    }

    /// How old a meter read every `interval` may let its newest reading grow before it is
    /// stale, whatever its session believes: three intervals, at least 3 s. `status` and
    /// `/healthz` both judge by it.
    pub fn meter_stale_after(interval: Duration) -> Duration {
        (interval * 3).max(Duration::from_secs(3))
    }

    /// Also watch the wall meter `source`, read every `interval` into `live`: stale once its
    /// newest reading is older than three intervals (at least 3 s).
    #[must_use]
    pub fn watching_wall(
        mut self,
        source: SourceId,
        live: Arc<LiveState>,
        interval: Duration,
    ) -> Health {
        let limit = Self::meter_stale_after(interval).as_millis() as i64;
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.wall = Some((source, live, limit));
        }
        self
    }

    fn wall(&self, now: i64) -> Option<PartHealth> {
        let (source, live, limit) = self.inner.wall.as_ref()?;
        let newest = live
            .latest()
            .into_iter()
            .filter(|r| r.source == *source && r.metric == Metric::Power)
            .map(|r| r.ts_ms)
            .max();
        let age = now - newest.unwrap_or(self.inner.started_ms);
        Some(if age <= *limit {
            PartHealth {
                healthy: true,
                detail: newest.map_or_else(
                    || format!("{source}: not read yet"),
                    |_| format!("{source}: read {:.1} s ago", age.max(0) as f64 / 1000.0),
                ),
            }
        } else {
            PartHealth {
                healthy: false,
                detail: match newest {
                    Some(_) => format!(
                        "{source}: stale: the newest reading is {:.0} s old (limit {:.0} s): \
                         the meter is not answering; the log says why",
                        age as f64 / 1000.0,
                        *limit as f64 / 1000.0
                    ),
                    None => format!(
                        "{source}: stale: no reading in the {:.0} s since the start",
                        age as f64 / 1000.0
                    ),
                },
            }
        })
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
            wall: self.wall(now_ms()),
            losses: health.losses(),
            recovered: health.recoveries(),
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

    /// The wall meter is judged by its newest reading, whatever its session believes: a
    /// reading older than three intervals makes `/healthz` answer 503 with why, but the
    /// watchdog goes on (a restart does not bring a silent meter back).
    #[test]
    fn a_wall_meter_whose_newest_reading_is_old_is_stale_on_healthz_not_for_the_watchdog() {
        let dir = tempfile::tempdir().unwrap();
        let (store, join) =
            StoreHandle::spawn(&dir.path().join("w.db"), StoreOptions::default()).unwrap();
        let live = Arc::new(LiveState::default());
        let wall = SourceId::meter("wall");
        let health = Health::new(
            Arc::new(AtomicI64::new(now_ms())),
            Duration::from_secs(3),
            store.clone(),
        )
        .watching_wall(wall.clone(), live.clone(), Duration::from_secs(1));
        let report = health.report();
        assert_eq!(report.http_status(), 200, "{}", report.reason());
        assert!(report.wall.unwrap().detail.contains("not read yet"));

        let _ = live.observe(&[Sample::new(now_ms(), wall.clone(), Metric::Power, "", 50.0)]);
        assert_eq!(health.report().http_status(), 200);

        let live2 = Arc::new(LiveState::default());
        let _ = live2.observe(&[Sample::new(
            now_ms() - 24_000,
            wall.clone(),
            Metric::Power,
            "",
            50.0,
        )]);
        let stale = Health::new(
            Arc::new(AtomicI64::new(now_ms())),
            Duration::from_secs(3),
            store.clone(),
        )
        .watching_wall(wall, live2, Duration::from_secs(1))
        .report();
        assert!(stale.healthy, "the watchdog goes on");
        assert_eq!(stale.http_status(), 503);
        assert!(
            stale
                .reason()
                .starts_with("wall meter: meter:wall: stale: the newest reading is 24 s old"),
            "{}",
            stale.reason()
        );
        store.close().unwrap();
        join.join().unwrap().unwrap();
    }
}
