//! Which protocol each wall meter spoke ([`record`], by `wattson run` as it starts its
//! meters), and so the accuracy behind a stretch of history ([`stored_accuracy`]): the
//! database's own account, so that a report or status of it states the interval of its own
//! history whatever the configuration reading it says. History from before wattson kept it
//! has only the configuration's word ([`super::costs::accuracy_of`]).

use rusqlite::params;
use wattson_collectors::SourceId;
use wattson_collectors::meter::{Accuracy, Protocol};

use crate::config::Config;
use crate::store::{Store, StoreError, StoreHandle};

/// Records which protocol each configured meter speaks, so that the database states the
/// accuracy behind its own history (read by [`stored_accuracy`]); `wattson run` calls it as
/// it opens the store.
pub fn record_at_start(store: &StoreHandle, config: &Config) {
    let meters: Vec<(SourceId, Protocol)> = config
        .meters
        .iter()
        .map(|m| (SourceId::meter(&m.id), m.protocol))
        .collect();
    if meters.is_empty() {
        return;
    }
    let host = config.host.name.clone();
    let queued = store.submit(move |s| {
        if let Err(e) = record(s, &host, &meters, wattson_collectors::now_ms()) {
            tracing::warn!("recording the meters' protocols: {e}");
        }
    });
    if let Err(e) = queued {
        tracing::warn!("recording the meters' protocols: {e}");
    }
}

/// Records that `host`'s meters speak these protocols from `now_ms`: a row for each whose
/// protocol is not the one last recorded.
pub fn record(
    store: &Store,
    host: &str,
    meters: &[(SourceId, Protocol)],
    now_ms: i64,
) -> rusqlite::Result<()> {
    let conn = store.conn();
    for (source, protocol) in meters {
        let source = source.to_string();
        let last: Option<String> = conn
            .query_row(
                "SELECT protocol FROM meter_protocol WHERE host = ?1 AND source = ?2
                 ORDER BY since_ms DESC LIMIT 1",
                params![host, source],
                |r| r.get(0),
            )
            .ok();
        if last.as_deref() != Some(protocol.as_str()) {
            conn.execute(
                "INSERT OR REPLACE INTO meter_protocol (host, source, protocol, since_ms)
                 VALUES (?1, ?2, ?3, ?4)",
                params![host, source, protocol.as_str(), now_ms],
            )?;
        }
    }
    Ok(())
}

/// The accuracy of `host`'s meter `source` over `from_ms..to_ms`, as recorded: `None` where
/// nothing is recorded for it (the caller falls back to the configuration), `Some(None)`
/// where a protocol of the stretch states none (or is one this build does not know), else
/// the widest of the protocols the meter spoke in the stretch.
pub fn stored_accuracy(
    store: &Store,
    host: &str,
    source: &SourceId,
    from_ms: i64,
    to_ms: i64,
) -> Result<Option<Option<Accuracy>>, StoreError> {
    let sql = |source| StoreError::Sqlite {
        path: store.path().to_owned(),
        source,
    };
    // The protocol in force at the start (the last recorded at or before it), and each
    // recorded within the stretch; before the first record, the first.
    let mut stmt = store
        .conn()
        .prepare_cached(
            "SELECT protocol FROM meter_protocol WHERE host = ?1 AND source = ?2 AND (
             since_ms >= coalesce((SELECT max(since_ms) FROM meter_protocol
                                    WHERE host = ?1 AND source = ?2 AND since_ms <= ?3), 0)
         ) AND since_ms < ?4",
        )
        .map_err(sql)?;
    let texts: Vec<String> = stmt
        .query_map(params![host, source.to_string(), from_ms, to_ms], |r| {
            r.get(0)
        })
        .and_then(Iterator::collect)
        .map_err(sql)?;
    if texts.is_empty() {
        return Ok(None);
    }
    let mut widest: Option<Accuracy> = None;
    for text in texts {
        let Some(a) = text.parse::<Protocol>().ok().and_then(Protocol::accuracy) else {
            return Ok(Some(None));
        };
        // Compared at 100 W: the stated parts are a percentage and a fixed term.
        if widest.is_none_or(|w| a.half_width_w(100.0) > w.half_width_w(100.0)) {
            widest = Some(a);
        }
    }
    Ok(Some(widest))
}
