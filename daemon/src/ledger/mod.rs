//! Energy and money: the one accounting of what the machine used and what it cost.
//!
//! - [`costs`]: the configured tariff, the wall meter's energy as hourly buckets, today's
//!   and this month's cost with an annual projection.

pub mod costs;
