//! The daemon's moving parts: the sampling thread, the live view, and the lifecycle.

pub mod daemon;
pub mod health;
pub mod live;
pub mod notify;
pub mod sampler;
