//! What each service costs: CPU time per systemd service, container, user session and
//! machine from cgroup v2 ([`wattson_collectors::cgroup`]), accounted interval by interval
//! against the wall ([`account`]), kept per hour ([`store`]), and estimated against this
//! host's newest sweep fit, the wall's power above idle attributed to each group by its
//! share of busy CPU time ([`attribution`]). `wattson services`, the report's section "What
//! each service costs" and `wattson status` (wattson's own cost) show it.

pub mod account;
pub mod attribution;
pub mod error;
pub mod render;
pub mod store;

#[cfg(test)]
mod tests;

pub use account::{Account, GroupKey, Interval};
pub use attribution::{ServicesEstimate, estimate};
pub use error::ServicesError;
