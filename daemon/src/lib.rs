//! wattson: a power and efficiency monitor for home servers.
//!
//! The modules follow the data path (ARCHITECTURE.md): [`sources`] wire the readers of the
//! `wattson-collectors` crate (and MQTT plugs, fleet hosts, the live price) into the daemon;
//! [`runtime`] samples them on one thread into the [`live`] view (what the outputs read) and
//! the [`store`], which keeps the samples, rollups and gaps in SQLite; [`ledger`] turns them
//! into energy and money; [`publish`] sends them out (MQTT, HTTP); [`report`] makes the cost
//! reports; [`sweep`] runs the workload loops; [`services`] says what each service costs;
//! [`tariff`] keeps price series; [`candidate`] keeps other machines to price on this one's
//! load; [`calibration`] models the wall from the host's own signals for when the meter has
//! moved on. [`config`] is the typed configuration, [`analysis`] the
//! science (statistics, fits, tariffs); [`cli`] is the command line's arguments and
//! [`commands`] has one module per subcommand. [`control`] is how those commands reach the
//! meter through a running daemon (its control socket).

pub mod analysis;
pub mod calibration;
pub mod candidate;
pub mod cli;
pub mod commands;
pub mod config;
pub mod control;
pub mod csv_records;
pub mod idle;
pub mod ledger;
pub mod live;
pub mod logging;
pub mod output;
pub mod parse;
pub mod publish;
pub mod report;
pub mod runtime;
pub mod safe_open;
pub mod services;
pub mod sources;
pub mod store;
pub mod sweep;
pub mod tariff;
pub mod zone;
