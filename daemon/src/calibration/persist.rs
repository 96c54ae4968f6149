//! The calibrations of a host: the `wall_model` table (`schema/0017-wall-models.sql`: models
//! fitted on ordinary running or imported), and the fits its sweeps stored, read as models
//! ([`super::swept`]). A model from ordinary running comes first: it saw the machine's own
//! load and was tested on history it was not fitted on; a sweep's fit is the estimate
//! where there is none.

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

/// The calibration `host`'s estimate uses: its newest model that reads back whole, else its
/// sweeps' best fit; one that does not read back is logged and passed over (a database is
/// input like any other).
pub fn latest(store: &Store, host: &str) -> Result<Option<WallModel>, CalibrationError> {
    match newest_first(store, host)?.next() {
        Some(m) => Ok(Some(m)),
        None => Ok(super::swept::fits(store, host)?.into_iter().next()),
    }
}

/// The calibrations the live estimate tries, in turn, until one's signals can be read
/// here: [`latest`]'s model from ordinary running, then every sweep's fit, best first.
pub fn candidates(store: &Store, host: &str) -> Result<Vec<WallModel>, CalibrationError> {
    let mut out: Vec<WallModel> = newest_first(store, host)?.take(1).collect();
    out.extend(super::swept::fits(store, host)?);
    Ok(out)
}

/// Every calibration of `host` that reads back whole: its models, newest first, then its
/// sweeps' fits, best first; one that does not read back is logged and passed over.
pub fn all(store: &Store, host: &str) -> Result<Vec<WallModel>, CalibrationError> {
    let mut out: Vec<WallModel> = newest_first(store, host)?.collect();
    out.extend(super::swept::fits(store, host)?);
    Ok(out)
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
pub fn parse(text: &str) -> Result<WallModel, StoredModelError> {
    let m: WallModel = serde_json::from_str(text)?;
    super::export::vouch(&m)?;
    Ok(m)
}

/// Why a model stored in the database is not used.
#[derive(Debug, thiserror::Error)]
pub enum StoredModelError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Refused(#[from] super::export::ExportError),
}
