//! Energy and money: the one accounting of what the machine used and what it cost. Every
//! energy and money figure (`wattson status`, every `wattson report` format, the MQTT state
//! and Home Assistant entities, the fleet collector's data) comes from here, over the store's
//! rollups and raw samples (`ledger -> store`, never the other way).
//!
//! - [`price`]: energy into money, once: the cost of energy buckets at the prices in force
//!   over each (periods, changes, price series), a constant load's year at the year's mean
//!   price, comparisons and payback, and money as every surface prints it.
//! - [`energy`]: energy, covered time and gaps of a source over any window, and its stored
//!   total.
//! - [`interval`]: how sure a measured mean power is (the meter's accuracy, the sampling
//!   uncertainty, and what projecting it to a year assumes).
//! - [`annual`]: the two annual figures, named once (projected as measured, modelled),
//!   and the phrase every surface prints for their price basis.
//! - [`load_shape`]: this machine's mean power by local hour of the week, which a year
//!   on a tariff is priced over.
//! - [`candidate`]: what another machine would cost a year on this machine's measured load
//!   (its power curve at the share of its throughput that load needs).
//! - [`costs`]: the configured tariff, the wall source, today's / this month's / all-time
//!   energy and cost with an annual projection.
//! - [`running`]: today's, this month's and all-time figures kept up to date cheaply for
//!   the live outputs.
//! - [`counter_check`]: the meter's own energy counter against the integral, and the readings
//!   rejected as implausible.
//! - [`power_line`]: a source's power bucket by bucket over a window (a minute from the
//!   rollups, seconds from raw samples), with nothing where it covers no time: the live
//!   page's power charts.
//! - [`primary`]: which source's power is the host's, decided once from the config, and what
//!   a source's watts stand for.
//! - [`standby`]: standby and off measured at the wall, from the meter's counter over the
//!   gaps the kernel says the host was asleep or off in.
//! - [`estimated_cost`]: money for estimated energy (what each service costs), kept apart
//!   from measured energy.
//! - [`error`]: why a figure could not be made ([`LedgerError`]).

pub mod annual;
pub mod candidate;
pub mod costs;
pub mod counter_check;
pub mod energy;
pub mod error;
pub mod estimated_cost;
pub mod interval;
pub mod load_shape;
pub mod meter_protocols;
pub mod power_line;
pub mod price;
pub mod primary;
pub mod running;
pub mod standby;

pub use error::LedgerError;
pub use primary::{PrimaryPower, scope_label};

#[cfg(test)]
mod held_tests;
#[cfg(test)]
mod tests;
