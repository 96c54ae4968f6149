//! Outputs of the live data: MQTT (the state, Home Assistant discovery; [`mqtt`]).

pub mod mqtt;
