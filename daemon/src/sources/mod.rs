//! Where samples come from, as the daemon wires them ([`wiring`]: every source's collector
//! and interval from the config, and the store's spacing per source): serial meters from
//! their config sections ([`meters`]), smart plugs over MQTT ([`plug`]), other hosts' MQTT
//! state for the fleet collector ([`fleet`]), the wall draw estimated from the host's
//! calibration when no meter is here ([`calibrated_wall`]: a model fitted on ordinary
//! running or a sweep's fit, the one source of every estimate; it reads a disk's spin state
//! with [`disk_spin`]), and the live price of `[tariff] price_topic`
//! ([`price_topic`], stored as price slots). The hardware readers themselves are in the
//! `wattson-collectors` crate, each naming its samples with a `wattson_collectors::SourceId`;
//! [`simulated_power`] is the watts a simulated meter reads (`wattson meter simulate`, the
//! demo, the tests).

pub mod calibrated_wall;
pub mod disk_spin;
pub mod error;
pub mod fleet;
pub mod meters;
pub mod plug;
pub mod price_topic;
pub mod simulated_power;
pub mod wiring;

pub use error::SourcesError;
pub use fleet::{FleetSink, FleetStats, MemorySink, SharedMemorySink};
pub use plug::{PlugCollector, PlugKind, PlugReading, PlugSpec};
