//! The `wall_model` table (`schema/0017-wall-models.sql`).

use rusqlite::params;

use super::CalibrationError;
use super::model::WallModel;
use crate::store::Store;

fn sql(store: &Store, source: rusqlite::Error) -> CalibrationError {
    CalibrationError::Sqlite {
        path: store.path().display().to_string(),
        source,
    }
}

/// Stores `model` for `host` (its own, or borrowed when `model.borrowed_from` is set).
pub fn save(store: &Store, host: &str, model: &WallModel) -> Result<(), CalibrationError> {
    let text = serde_json::to_string(model)
        .map_err(|e| CalibrationError::BadInput(format!("the model as JSON: {e}")))?;
    store
        .conn()
        .execute(
            "INSERT INTO wall_model (host, created_ms, borrowed_from, model) VALUES (?1, ?2, ?3, ?4)",
            params![host, model.created_ms, model.borrowed_from, text],
        )
        .map(drop)
        .map_err(|e| sql(store, e))
}

/// The newest model of `host` that reads back whole; one that does not is logged and
/// passed over (a database is input like any other).
pub fn latest(store: &Store, host: &str) -> Result<Option<WallModel>, CalibrationError> {
    Ok(newest_first(store, host)?.next())
}

/// Every model of `host` that reads back whole, newest first; one that does not is logged
/// and passed over.
pub fn all(store: &Store, host: &str) -> Result<Vec<WallModel>, CalibrationError> {
    Ok(newest_first(store, host)?.collect())
}

/// `host`'s models that read back whole, newest first, each parsed when reached.
fn newest_first(
    store: &Store,
    host: &str,
) -> Result<impl Iterator<Item = WallModel>, CalibrationError> {
    let mut stmt = store
        .conn()
        .prepare_cached(
            "SELECT id, model FROM wall_model WHERE host = ?1 ORDER BY created_ms DESC, id DESC",
        )
        .map_err(|e| sql(store, e))?;
    let rows = stmt
        .query_map([host], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| sql(store, e))?;
    let host = host.to_owned();
    Ok(rows
        .into_iter()
        .filter_map(move |(id, text)| match parse(&text) {
            Ok(m) => Some(m),
            Err(why) => {
                tracing::warn!(
                    "wall model {id} of {host} in the database refused, not used: {why}; fit \
                     one again (`wattson calibration fit`) or import a file"
                );
                None
            }
        }))
}

/// A model from its JSON, checked whole and vetted as an imported one is
/// ([`super::export::vet`]: names, watts, signal values), since whoever may write the
/// database (the service user, as root reads it) may have written it.
pub fn parse(text: &str) -> Result<WallModel, String> {
    let m: WallModel = serde_json::from_str(text).map_err(|e| e.to_string())?;
    m.check()?;
    super::export::vet(&m)?;
    Ok(m)
}
