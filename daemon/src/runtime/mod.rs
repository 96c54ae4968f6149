//! The daemon's moving parts: the sampling thread, the live view, the control socket, and
//! the lifecycle.

pub mod control;
pub mod daemon;
pub mod health;
pub mod ledger_feed;
pub mod live;
pub mod notify;
pub mod preflight;
pub mod sampler;
pub mod services_sink;
pub mod wiring;
