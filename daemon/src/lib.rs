//! wattson: a power and efficiency monitor for home servers.
//!
//! The binary's subcommands live in [`commands`], one module each. The daemon's moving parts
//! are in [`runtime`]; configuration in [`config`]; the science (statistics, fits, tariffs)
//! in [`analysis`]; the workload loops sweeps run in [`workload`].

pub mod analysis;
pub mod cli;
pub mod commands;
pub mod config;
pub mod costs;
pub mod estimate;
pub mod logging;
pub mod meters;
pub mod modes;
pub mod mqtt;
pub mod notify;
pub mod output;
pub mod power_model;
pub mod report;
pub mod runtime;
pub mod store;
pub mod sweep;
pub mod workload;
