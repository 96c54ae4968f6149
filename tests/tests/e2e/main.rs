//! The end-to-end tests of wattson, one module per file, linked into one test binary (`e2e`)
//! rather than one binary per file: each binary links the whole daemon, and linking them
//! was most of the test build.
//!
//! One file's tests: `cargo test -p wattson-tests --test e2e security::` (the module is the
//! file's name; `-- --nocapture` and `-- --ignored` as before). One test:
//! `cargo test -p wattson-tests --test e2e sweep::sigint_stops -- --nocapture`.
//!
//! A filter matches anywhere in a test's path, so a module whose name ends another's also
//! runs that one's tests: `faults::` those of `mqtt_faults::` and `storage_faults::`,
//! `cli::` those of `report_cli::`, `hostile::` those of `http_hostile::`, `prometheus::`
//! those of `grafana_prometheus::`. `-- --skip mqtt_faults:: --skip storage_faults::` leaves
//! them out.
//!
//! The files' tests share this process (two at a time on two CPUs, as before within a file):
//! a test that follows the test process's own CPU time, or changes a setting of the whole
//! process, must not count on the other files' tests being idle.

#![allow(
    clippy::disallowed_methods,
    reason = "the tests open fixture files and databases in their own process, never beside a connection of the daemon's"
)]

mod advisories;
mod annual;
mod architecture;
mod calibration;
mod calibration_disks;
mod calibration_export;
mod calibration_live;
mod calibration_swept;
mod candidates;
mod candidates_swept;
mod cli;
mod config;
mod config_generated;
mod control;
mod counted_gaps;
mod dashboards;
mod demo;
mod disks;
mod errors;
mod faults;
mod grafana;
mod grafana_prometheus;
mod held_readings;
mod help;
mod home_assistant;
mod hostile;
mod http;
mod http_hostile;
mod idle;
mod idle_apply;
mod idle_gap;
mod interleaved;
mod ledger;
mod lifecycle;
mod live_page;
mod meters;
mod mqtt;
mod mqtt_faults;
mod notify;
mod prometheus;
mod regression;
mod remote_write;
mod report_cli;
mod report_html;
mod schedule;
mod security;
mod services;
mod sleep;
mod slow_store;
mod sources;
mod standby;
mod storage_faults;
mod store_shared;
mod stored_hostile;
mod sweep;
mod tariff;
mod wakeups_stored;
