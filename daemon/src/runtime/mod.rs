//! The daemon's moving parts: the sampling thread (which fills [`crate::live`]), the ledger
//! feed, who wakes the CPUs (`wakeups`), each disk's spin state (`disks`), and the lifecycle
//! that starts the outputs and the control socket's server ([`crate::control::server`]).

pub mod calibration_refit;
pub mod daemon;
pub mod disks;
pub mod downtime;
pub mod error;
pub mod heap;
pub mod ledger_feed;
pub mod notify;
pub mod preflight;
mod reload;
pub mod sampler;
pub mod services_sink;
pub mod signals;
pub mod wakeups;

pub use error::RuntimeError;
