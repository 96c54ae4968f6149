//! Shared helpers for wattson end-to-end tests.
