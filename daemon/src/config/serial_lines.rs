//! Serial lines: meters that name the same port share one line (one RS-485 bus, polled in
//! turn). One function turns the `[[meter]]`s into the collectors' per-line settings, for
//! validation and for building the collectors alike, so both apply the same rules:
//!
//! - one line carries one protocol, and one set of serial settings, interval and timeout;
//! - a streaming meter (Watts Up, CSE7766, HLW8032, `line`) has its line to itself;
//! - Modbus meters on one line each answer on their own address (an unset address is the
//!   protocol's default: 248, the PZEM general address every PZEM answers on, or 1 for
//!   Eastron), and the collectors' own checks pass.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::Path;
use std::time::Duration;
use wattson_collectors::SourceId;

use wattson_collectors::meter;

use super::MeterConfig;

/// One serial line and how often it is polled.
#[derive(Debug, Clone)]
pub struct SerialLine {
    /// The collectors' settings: one meter, or several polled in turn (ids joined by `+`).
    pub meter: meter::MeterConfig,
    pub interval: Duration,
}

/// Which key of a meter an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKey {
    Id,
    Protocol,
    Port,
    Address,
}

impl LineKey {
    pub fn name(self) -> &'static str {
        match self {
            LineKey::Id => "meter.id",
            LineKey::Protocol => "meter.protocol",
            LineKey::Port => "meter.port",
            LineKey::Address => "meter.address",
        }
    }
}

/// Why meters cannot share their line: `meter` is the index of the meter at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LineError {
    pub meter: usize,
    pub key: LineKey,
    pub message: String,
}

/// The serial lines `meters` form, in port order; `Err` for the first meter that cannot be
/// on its line as configured.
pub fn serial_lines(meters: &[MeterConfig]) -> Result<Vec<SerialLine>, LineError> {
    let mut by_port: BTreeMap<&Path, Vec<usize>> = BTreeMap::new();
    for (i, m) in meters.iter().enumerate() {
        by_port.entry(m.port.as_path()).or_default().push(i);
    }
    by_port
        .into_values()
        .map(|group| serial_line(meters, &group))
        .collect()
}

/// The source names the collectors for `meters` report under (`meter:<id>`, or the ids
/// joined with `+` for meters sharing a line), in [`serial_lines`]'s order.
pub fn collector_names(meters: &[MeterConfig]) -> Vec<SourceId> {
    let mut by_port: BTreeMap<&Path, Vec<&str>> = BTreeMap::new();
    for m in meters {
        by_port.entry(m.port.as_path()).or_default().push(&m.id);
    }
    by_port
        .into_values()
        .map(|ids| SourceId::meter(ids.join("+")))
        .collect()
}

/// The line the meters at `group` (indices into `meters`, one port) share.
fn serial_line(meters: &[MeterConfig], group: &[usize]) -> Result<SerialLine, LineError> {
    let first = &meters[group[0]];
    let protocol = first.protocol;
    for &i in &group[1..] {
        same_line(first, &meters[i], i)?;
    }
    let id = group
        .iter()
        .map(|&i| meters[i].id.as_str())
        .collect::<Vec<_>>()
        .join("+");
    same_direction(meters, group)?;
    let mut cfg = meter::MeterConfig::new(id, protocol, first.port.clone());
    cfg.bidirectional = first.bidirectional;
    if let Some(b) = first.baud {
        cfg.serial.baud = b;
    }
    if let Some(p) = first.parity {
        cfg.serial.parity = p;
    }
    if let Some(s) = first.stop_bits {
        cfg.serial.stop_bits = s;
    }
    if protocol.is_polled() {
        cfg.addresses = addresses(meters, group)?;
        cfg.ids = group.iter().map(|&i| meters[i].id.clone()).collect();
    }
    // Intervals and timeouts are range-checked, so these fit.
    cfg.interval_ms = first.interval.as_millis() as u64;
    if let Some(t) = first.timeout {
        cfg.timeout_ms = (t.as_millis() as u64).max(1);
    }
    cfg.line.clone_from(&first.line);
    // The collectors' own checks, so that nothing they refuse passes here.
    cfg.validate().map_err(|e| LineError {
        meter: group[0],
        key: LineKey::Id,
        message: e.to_string(),
    })?;
    Ok(SerialLine {
        meter: cfg,
        interval: first.interval,
    })
}

/// Whether `m` (the meter at index `i`) can share `first`'s port: the same protocol, a
/// polled one, and the same serial settings, interval and timeout.
fn same_line(first: &MeterConfig, m: &MeterConfig, i: usize) -> Result<(), LineError> {
    let port = first.port.display();
    let protocol = first.protocol;
    let err = |key: LineKey, message: String| LineError {
        meter: i,
        key,
        message,
    };
    if m.protocol != protocol {
        return Err(err(
            LineKey::Protocol,
            format!(
                "meters {} and {} share {port} but speak different protocols ({protocol} and {}): \
                 one line carries one protocol; give each its own port",
                first.id, m.id, m.protocol
            ),
        ));
    }
    if !protocol.is_polled() {
        return Err(err(
            LineKey::Port,
            format!(
                "meters {} and {} share {port}, but {protocol} meters stream on their own line: \
                 give each its own port",
                first.id, m.id
            ),
        ));
    }
    let differs = |what: &str, a: &dyn Display, b: &dyn Display| {
        err(
            LineKey::Port,
            format!(
                "meters {} and {} share {port} but set different {what} ({a} and {b}): \
                 a shared line has one {what}; set the same on both",
                first.id, m.id
            ),
        )
    };
    let shown = |v: Option<String>| v.unwrap_or_else(|| "the default".to_owned());
    if m.baud != first.baud {
        return Err(differs(
            "baud",
            &shown(first.baud.map(|b| b.to_string())),
            &shown(m.baud.map(|b| b.to_string())),
        ));
    }
    if m.parity != first.parity {
        return Err(differs(
            "parity",
            &shown(first.parity.map(|p| p.as_str().to_owned())),
            &shown(m.parity.map(|p| p.as_str().to_owned())),
        ));
    }
    if m.stop_bits != first.stop_bits {
        return Err(differs(
            "stop_bits",
            &shown(first.stop_bits.map(|s| s.to_string())),
            &shown(m.stop_bits.map(|s| s.to_string())),
        ));
    }
    if m.interval != first.interval {
        return Err(differs(
            "interval",
            &super::format_duration(first.interval),
            &super::format_duration(m.interval),
        ));
    }
    if m.timeout != first.timeout {
        return Err(differs(
            "timeout",
            &shown(first.timeout.map(super::format_duration)),
            &shown(m.timeout.map(super::format_duration)),
        ));
    }
    Ok(())
}

/// Whether the meters at `group` are all bidirectional or all not.
fn same_direction(meters: &[MeterConfig], group: &[usize]) -> Result<(), LineError> {
    let first = &meters[group[0]];
    match group
        .iter()
        .find(|&&i| meters[i].bidirectional != first.bidirectional)
    {
        Some(&i) => Err(LineError {
            meter: i,
            key: LineKey::Port,
            message: format!(
                "meters {} and {} share {} but only one is bidirectional: a shared line is one \
                 or the other; set the same `bidirectional` on both",
                first.id,
                meters[i].id,
                first.port.display()
            ),
        }),
        None => Ok(()),
    }
}

/// The Modbus address of each of the meters at `group` (a polled protocol's line), in
/// order: each its own, and none the PZEM general address where the line is shared.
fn addresses(meters: &[MeterConfig], group: &[usize]) -> Result<Vec<u8>, LineError> {
    let first = &meters[group[0]];
    let port = first.port.display();
    let protocol = first.protocol;
    let err = |meter: usize, message: String| LineError {
        meter,
        key: LineKey::Address,
        message,
    };
    let mut addresses: Vec<(u8, usize)> = Vec::new();
    for &i in group {
        let m = &meters[i];
        let a = m.address.or(protocol.default_address()).unwrap_or(1);
        let unset = || {
            if m.address.is_none() {
                format!(
                    " ({} sets no address, so it uses the {protocol} default)",
                    m.id
                )
            } else {
                String::new()
            }
        };
        if let Some(&(_, j)) = addresses.iter().find(|(b, _)| *b == a) {
            return Err(err(
                i,
                format!(
                    "meters {} and {} on {port} both use Modbus address {a}{}: give each meter \
                     on a shared line its own `address`",
                    meters[j].id,
                    m.id,
                    unset()
                ),
            ));
        }
        if group.len() > 1 && a == meter::pzem::GENERAL_ADDRESS {
            return Err(err(
                i,
                format!(
                    "meter {} on shared line {port} uses address {a}, the general address \
                     every PZEM answers on{}: give each meter on a shared line its own \
                     `address` (1 to 247)",
                    m.id,
                    unset()
                ),
            ));
        }
        addresses.push((a, i));
    }
    Ok(addresses.iter().map(|(a, _)| *a).collect())
}
