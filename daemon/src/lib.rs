//! wattson: a power and efficiency monitor for home servers.

pub mod store;
