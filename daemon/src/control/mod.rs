//! The daemon's control socket: one owner of the meter.
//!
//! While `wattson run` is running it owns the meter's port and the database's single writer.
//! Measuring commands (`wattson sweep`, `wattson idle --measure`) and `wattson status` then
//! reach the meter through the daemon, over a Unix socket beside the database
//! ([`socket_path`]: `<database>.sock`, e.g. `/var/lib/wattson/wattson.db.sock`, mode 0660,
//! owned by the service's user and group), instead of opening the port a second time. With
//! no daemon running for that database they open the meter themselves ([`open_meter`] says
//! which path it took, and why).
//!
//! **Where the loops run.** A sweep's workload loops run in the sweep's own process: they
//! are the CPU load being measured, the monthly `wattson-sweep.service` is the unit that runs
//! them, and the daemon keeps its small footprint and its hardening (`TasksMax=`,
//! `MemoryMax=`). The daemon streams the meter's readings to the sweep as its sampler takes
//! them, keeps storing them (no gap in its stored power during a sweep), and stores the
//! sweep's levels, fit, calibrations and regression verdict through its single writer when
//! the sweep sends them ([`messages::Request::StoreSweep`]).
//!
//! **The protocol** (version [`PROTOCOL`]) is line-delimited JSON over the stream socket:
//! one object per line, UTF-8, at most [`messages::MAX_LINE_BYTES`] a line.
//!
//! 1. On connecting, the daemon sends a hello: `{"type":"hello","protocol":1,
//!    "version":"0.1.0","pid":1234,"database":"/var/lib/wattson/wattson.db","host":"basket"}`.
//!    Its `type` and `protocol` keys never change; a client that speaks another protocol
//!    says so and stops ([`ControlError::Protocol`]).
//! 2. The client sends requests, one at a time, each answered by one reply:
//!    - `{"op":"status"}`: `{"type":"status",...}` ([`messages::DaemonStatus`]): the daemon,
//!      its sources, their latest readings, meter counters, the writer's health.
//!    - `{"op":"subscribe","source":"meter:wall"}`: `{"type":"subscribed","source":...,
//!      "interval_ms":1000}`, then every reading of that source as the sampler takes it,
//!      `{"type":"reading","source":"meter:wall","ts_ms":...,"values":[{"metric":"power",
//!      "channel":"","value":41.9},...]}`, interleaved with later replies.
//!    - `{"op":"store_sweep",...}` ([`messages::SweepRecord`]): the daemon checks the
//!      levels against the readings it sent this connection, stores them with its own
//!      fingerprint of the host, fits and checks them, and replies `{"type":"stored",...}`.
//!    - A request it cannot do gets `{"type":"error","message":"..."}`.
//!
//! **Bounds.** At most [`messages::MAX_CLIENTS`] connections (one more is told so and
//! closed); a first request within [`messages::FIRST_REQUEST_WITHIN`]; requests of at most
//! [`messages::MAX_LINE_BYTES`]. Each subscriber has a queue of [`messages::CLIENT_QUEUE`]
//! sampling passes and [`messages::WRITE_TIMEOUT`] to take each line: a client that falls
//! behind is dropped (and the daemon logs it), never waited for, so sampling and storing go
//! on. Nothing received changes a setting: there is no request for it.
//!
//! **The modules.** [`messages`] is the contract both sides speak (its messages and bounds); [`client`] and [`meter`]
//! are the commands' side (a client of the socket, and the meter reached through it or
//! opened directly); [`server`] is the daemon's side (bind, accept, serve each connection,
//! check and store a sweep). The daemon's lifecycle starts the server
//! (`runtime::daemon`), so this module stays below `runtime`.

pub mod client;
pub mod messages;
pub mod meter;
pub mod server;

pub use client::{Client, ControlError, Located, locate};
pub use messages::{PROTOCOL, socket_path};
pub use meter::{DaemonMeter, LinkedMeter, MeterLink, MeterLinkError, MeterPath, open_meter};
