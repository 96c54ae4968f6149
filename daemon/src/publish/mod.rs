//! Outputs of the live data: MQTT (the state, Home Assistant discovery; [`mqtt`]) and HTTP
//! (Prometheus `/metrics`, the live page, the report; [`http`]).

pub mod http;
pub mod mqtt;
pub mod remote_write;
