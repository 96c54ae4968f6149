//! Outputs of the live data: MQTT (the state, Home Assistant discovery; [`mqtt`]) and HTTP
//! (Prometheus `/metrics`, the live page, the report; [`http`]), remote write
//! ([`remote_write`]), and a calibration in the forms Home Assistant and Prometheus read
//! ([`calibration`]).

pub mod calibration;
pub mod http;
pub mod mqtt;
pub mod remote_write;
