//! The daemon's moving parts: the sampling thread, the live view, and the lifecycle.

pub mod live;
pub mod sampler;
