//! `wattson tariff`'s subcommands and their options.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::tariff::import::Format;

#[derive(Debug, Subcommand)]
pub enum TariffCommand {
    /// Import price or carbon-intensity slots from files (all or nothing).
    ///
    /// Slots of the same series (--name) that the new ones overlap are replaced; the
    /// output counts what was added, changed and left as it was. A file with one bad line
    /// imports nothing and names the line and field.
    #[command(after_help = super::examples::TARIFF_IMPORT)]
    Import(ImportArgs),
    /// The stored series: kind, unit, slots, first and last, mean, whether it prices the
    /// ledger.
    #[command(after_help = super::examples::TARIFF_LIST)]
    List(ListArgs),
    /// Delete a series and its slots.
    #[command(after_help = super::examples::TARIFF_REMOVE)]
    Remove(RemoveArgs),
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The files (several pages of the Octopus API at once, ...); `-` reads stdin.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// The file format [default: from the contents].
    #[arg(long, value_enum, default_value_t = Format::Auto)]
    pub format: Format,
    /// The series' name: imports under one name replace each other where they overlap
    /// [default: octopus, entsoe, nordpool, imported, carbon by format].
    #[arg(long, value_name = "NAME", value_parser = crate::config::names::parse_label)]
    pub name: Option<String>,
    /// Octopus: the price without VAT (value_exc_vat) [default: with VAT, value_inc_vat].
    #[arg(long)]
    pub exc_vat: bool,
    /// Keep the series to compare against (`report --tariffs`) without pricing the
    /// ledger's energy by it.
    #[arg(long)]
    pub compare_only: bool,
    /// The currency of a plain CSV's prices [default: [tariff] currency].
    #[arg(long, value_name = "CODE")]
    pub currency: Option<String>,
    /// The time zone of a day-ahead CSV whose header names none (e.g. Europe/Oslo).
    #[arg(long, value_name = "ZONE")]
    pub timezone: Option<crate::zone::Zone>,
    /// The price column of a day-ahead CSV with several areas (e.g. "SE3 (EUR)").
    #[arg(long, value_name = "HEADER")]
    pub column: Option<String>,
    /// Refuse prices beyond this, either sign, per kWh [default: [tariff] max_price_per_kwh].
    #[arg(long, value_name = "PRICE", value_parser = crate::parse::parse_positive)]
    pub max_price: Option<f64>,
    /// Write into this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Read this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The series (as `wattson tariff list` names it).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Write into this database instead of `[storage] path`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}

impl TariffCommand {
    /// The database this command works on, where its `--db` names one.
    pub fn db(&self) -> Option<PathBuf> {
        match self {
            TariffCommand::Import(a) => a.db.clone(),
            TariffCommand::List(a) => a.db.clone(),
            TariffCommand::Remove(a) => a.db.clone(),
        }
    }
}
