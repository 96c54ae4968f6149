//! Where samples come from, as the daemon wires them: serial meters from their config
//! sections ([`meters`]), smart plugs over MQTT ([`plug`]), other hosts' MQTT state for the
//! fleet collector ([`fleet`]), the wall draw estimated from a sweep's calibration when
//! no meter is here ([`estimate`]), and the live price of `[tariff] price_topic`
//! ([`live_price`], stored as price slots). The hardware readers themselves are in the `wattson-collectors` crate, each naming its
//! samples with a `wattson_collectors::SourceId`; [`power_model`] drives simulated meters.

pub mod estimate;
pub mod fleet;
pub mod live_price;
pub mod meters;
pub mod plug;
pub mod power_model;

pub use fleet::{FleetSink, FleetStats, MemorySink, SharedMemorySink};
pub use plug::{PlugCollector, PlugKind, PlugReading, PlugSpec};
