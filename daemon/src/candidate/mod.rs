//! Candidate machines: another box to price on this host's own measured load ("keep this
//! one or buy that one"). A candidate is a power curve ([`crate::analysis::candidate::Curve`])
//! with where it came from and what it costs to buy.
//!
//! - [`import`]: SPECpower_ssj2008 results as CSV (the full eleven-point curve, or the
//!   two-point form), checked whole: a bad row imports nothing and is named by line and
//!   column (`wattson candidate import`).
//! - [`measured`]: a configuration wattson swept, on this host or another, as a curve
//!   (`wattson candidate from-sweep`).
//! - [`store`]: candidates in SQLite (`schema/0010-candidates.sql`,
//!   `schema/0011-measured-candidates.sql`).
//!
//! What a candidate costs a year on this machine's load is the ledger's
//! ([`crate::ledger::candidate`]); the report shows it.
//!
//! Units: W, the tariff's currency, ssj_ops.

pub mod import;
pub mod measured;
pub mod store;

use serde::Serialize;
use thiserror::Error;

use crate::analysis::candidate::Curve;

/// The longest text field kept (a system or CPU name), characters.
pub const MAX_TEXT_CHARS: usize = 200;

/// One candidate machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// Unique; no commas (`report --candidates` separates names with them).
    pub name: String,
    pub curve: Curve,
    /// Where it came from: `FILE line N`, or `hand`.
    pub origin: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_gb: Option<f64>,
    /// As the result states it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published: Option<String>,
    /// The published overall score, ssj_ops per W.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overall_ssj_ops_per_watt: Option<f64>,
    /// What buying it costs, the tariff's currency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price: Option<f64>,
    /// Its throughput over this machine's: as the user gave it, or measured (see
    /// `perf_ratio_basis`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub perf_ratio: Option<f64>,
    /// How a `perf_ratio` that was not given was found ("the spin loops' rate at 100 %
    /// in the two sweeps: ..."); `None` when the user gave it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub perf_ratio_basis: Option<String>,
    /// A hand table's own annual cost and price per kWh, to check its arithmetic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stated_annual_cost: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stated_price_per_kwh: Option<f64>,
}

/// A candidate's fields that are not its curve, all empty.
impl Candidate {
    pub fn new(name: String, curve: Curve, origin: String) -> Candidate {
        Candidate {
            name,
            curve,
            origin,
            vendor: None,
            system: None,
            cpu: None,
            cores: None,
            threads: None,
            memory_gb: None,
            published: None,
            overall_ssj_ops_per_watt: None,
            price: None,
            perf_ratio: None,
            perf_ratio_basis: None,
            stated_annual_cost: None,
            stated_price_per_kwh: None,
        }
    }
}

/// Input that cannot be a candidate: a bad file, name or figure. The command exits 65
/// (`EX_DATAERR`) and nothing is written.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("{0}")]
pub struct BadInput(pub String);

/// Exit status for [`BadInput`]: `EX_DATAERR` from sysexits.h.
pub const EXIT_DATA: u8 = 65;

/// A candidate's name: printable, at most [`MAX_TEXT_CHARS`], without commas.
pub fn check_name(name: &str) -> Result<(), BadInput> {
    crate::config::names::check_label(name)
        .map_err(|e| BadInput(format!("candidate name {name:?} {e}")))?;
    if name.contains(',') {
        return Err(BadInput(format!(
            "candidate name {name:?} holds a comma: `report --candidates` separates names with \
             commas"
        )));
    }
    Ok(())
}
