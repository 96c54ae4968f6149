//! Shared helpers for wattson end-to-end tests.
// Test scaffolding: a failed setup step should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::panic, clippy::missing_panics_doc)]

pub mod broker;
