//! Candidates in SQLite (`schema/0010-candidates.sql`, `0011-measured-candidates.sql`): written whole in one transaction,
//! read back with their curves checked again (a row written by hand into the database is
//! input too).

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::Candidate;
use crate::analysis::candidate::{Curve, CurveKind, CurvePoint};

/// Why the candidate store refused.
#[derive(Debug, thiserror::Error)]
pub enum CandidateStoreError {
    #[error("stored candidate {name:?} has a bad curve ({why}): `wattson candidate remove` it")]
    BadCurve { name: String, why: String },
    #[error("the candidate store")]
    Sql(#[from] rusqlite::Error),
}

/// Writes `candidates` in one transaction, replacing stored ones of the same name; how
/// many it replaced.
pub fn put(
    conn: &Connection,
    candidates: &[Candidate],
    now_ms: i64,
) -> Result<usize, CandidateStoreError> {
    let tx = conn.unchecked_transaction()?;
    let mut replaced = 0;
    for c in candidates {
        replaced += tx.execute("DELETE FROM candidate WHERE name = ?1", [&c.name])?;
        let curve = serde_json::to_string(c.curve.points()).unwrap_or_else(|_| "[]".to_owned());
        tx.execute(
            "INSERT INTO candidate (name, curve_kind, curve, origin, vendor, system, cpu, cores, \
             threads, memory_gb, published, overall_ssj_ops_per_watt, price, perf_ratio, \
             perf_ratio_basis, stated_annual_cost, stated_price_per_kwh, added_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, \
             ?18)",
            params![
                c.name,
                c.curve.kind().as_str(),
                curve,
                c.origin,
                c.vendor,
                c.system,
                c.cpu,
                c.cores,
                c.threads,
                c.memory_gb,
                c.published,
                c.overall_ssj_ops_per_watt,
                c.price,
                c.perf_ratio,
                c.perf_ratio.and(c.perf_ratio_basis.as_ref()),
                c.stated_annual_cost,
                c.stated_price_per_kwh,
                now_ms
            ],
        )?;
    }
    tx.commit()?;
    Ok(replaced)
}

/// Whether a candidate named `name` is stored.
pub fn exists(conn: &Connection, name: &str) -> Result<bool, CandidateStoreError> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM candidate WHERE name = ?1",
            [name],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

const COLUMNS: &str = "name, curve_kind, curve, origin, vendor, system, cpu, cores, threads, \
                       memory_gb, published, overall_ssj_ops_per_watt, price, perf_ratio, \
                       stated_annual_cost, stated_price_per_kwh, perf_ratio_basis";

fn from_row(r: &Row<'_>) -> rusqlite::Result<(Candidate, String, String)> {
    // The curve is checked after the row is read; until then an idle-only placeholder.
    let placeholder = Curve::new(
        vec![
            CurvePoint {
                load: 0.0,
                watts: 1.0,
                ssj_ops: None,
            },
            CurvePoint {
                load: 1.0,
                watts: 1.0,
                ssj_ops: None,
            },
        ],
        CurveKind::Hand,
    )
    .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    Ok((
        Candidate {
            name: r.get(0)?,
            curve: placeholder,
            origin: r.get(3)?,
            vendor: r.get(4)?,
            system: r.get(5)?,
            cpu: r.get(6)?,
            cores: r.get(7)?,
            threads: r.get(8)?,
            memory_gb: r.get(9)?,
            published: r.get(10)?,
            overall_ssj_ops_per_watt: r.get(11)?,
            price: r.get(12)?,
            perf_ratio: r.get(13)?,
            perf_ratio_basis: r.get(16)?,
            stated_annual_cost: r.get(14)?,
            stated_price_per_kwh: r.get(15)?,
        },
        r.get(1)?,
        r.get(2)?,
    ))
}

fn checked(
    (mut c, kind, curve): (Candidate, String, String),
) -> Result<Candidate, CandidateStoreError> {
    let bad = |why: String| CandidateStoreError::BadCurve {
        name: c.name.clone(),
        why,
    };
    let kind = CurveKind::parse(&kind).ok_or_else(|| bad(format!("kind {kind:?}")))?;
    let points: Vec<CurvePoint> = serde_json::from_str(&curve).map_err(|e| bad(e.to_string()))?;
    c.curve = Curve::new(points, kind).map_err(|e| bad(e.to_string()))?;
    Ok(c)
}

/// Every stored candidate, by name.
pub fn list(conn: &Connection) -> Result<Vec<Candidate>, CandidateStoreError> {
    let mut stmt = conn.prepare(&format!("SELECT {COLUMNS} FROM candidate ORDER BY name"))?;
    let rows = stmt
        .query_map([], from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter().map(checked).collect()
}

/// The candidate named `name`.
pub fn get(conn: &Connection, name: &str) -> Result<Option<Candidate>, CandidateStoreError> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM candidate WHERE name = ?1"),
        [name],
        from_row,
    )
    .optional()?
    .map(checked)
    .transpose()
}

/// Deletes the candidate named `name`; whether there was one.
pub fn remove(conn: &Connection, name: &str) -> Result<bool, CandidateStoreError> {
    Ok(conn.execute("DELETE FROM candidate WHERE name = ?1", [name])? > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_round_trip_and_replace_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(
            &dir.path().join("c.db"),
            &crate::store::StoreOptions::default(),
        )
        .unwrap();
        let curve = Curve::new(
            vec![
                CurvePoint {
                    load: 0.0,
                    watts: 60.0,
                    ssj_ops: Some(0.0),
                },
                CurvePoint {
                    load: 1.0,
                    watts: 200.0,
                    ssj_ops: Some(1e6),
                },
            ],
            CurveKind::SpecTwoPoint,
        )
        .unwrap();
        let mut c = Candidate::new("box".into(), curve, "f.csv line 2".into());
        c.price = Some(400.0);
        assert_eq!(put(store.conn(), std::slice::from_ref(&c), 1).unwrap(), 0);
        assert_eq!(put(store.conn(), std::slice::from_ref(&c), 2).unwrap(), 1);
        assert_eq!(list(store.conn()).unwrap(), vec![c.clone()]);
        assert_eq!(get(store.conn(), "box").unwrap(), Some(c));
        assert!(remove(store.conn(), "box").unwrap());
        assert!(!remove(store.conn(), "box").unwrap());
        store
            .conn()
            .execute(
                "INSERT INTO candidate (name, curve_kind, curve, origin, added_ms) \
                 VALUES ('bad', 'hand', '[{\"load\": 0.5, \"watts\": 1}]', 'hand', 0)",
                [],
            )
            .unwrap();
        let e = list(store.conn()).unwrap_err().to_string();
        assert!(e.contains("\"bad\"") && e.contains("active idle"), "{e}");
    }
}
