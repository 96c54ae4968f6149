//! Analysis of measurements: pure functions over numbers, no I/O.
//!
//! - [`stats`]: means, standard deviations, t quantiles and confidence intervals (watts).
//! - [`fit`]: watts against loops or utilisation, and plain-words non-linearity checks.
//! - [`gpu_idle`]: GPU samples classified busy / idle with a resident process / idle bare.
//! - [`candidate`]: a candidate machine's power curve (watts against its share of maximum
//!   throughput).
//! - [`modes`]: the names of operating modes (`standby`, `idle`, `1 loop`, ...).
//! - [`schedule`]: a week's schedule of modes; [`sleep`]: the hours of the week idle enough
//!   to sleep, the nightly window they propose and what it would interrupt.

pub mod candidate;
pub mod fit;
pub mod gpu_idle;
pub mod least_squares;
pub mod modes;
pub mod schedule;
pub mod sleep;
pub mod stats;
