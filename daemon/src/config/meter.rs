//! `[[meter]]` validation: each meter on its own (id, port, serial settings, address,
//! interval, timeout, `[meter.line]`), then the meters that share a port as one serial line
//! ([`super::serial_lines`]), with the collectors' own checks, so that `config check`
//! refuses exactly what the collectors would.

use std::collections::BTreeSet;
use std::time::Duration;

use toml::Spanned;
use wattson_collectors::meter::Protocol;
use wattson_collectors::meter::line::{Field, FieldMap, Layout, LineFormat};

use super::file::{FileLineFormat, FileMeter, LineLayoutName};
use super::serial_lines::{LineKey, serial_lines};
use super::validate::{METER_TIMEOUT, SAMPLING, Validator};
use super::{ConfigError, MeterConfig};

/// Where each checked key of one meter is written, for the line of an error found later.
struct MeterSpans {
    id: std::ops::Range<usize>,
    protocol: std::ops::Range<usize>,
    port: std::ops::Range<usize>,
    address: Option<std::ops::Range<usize>>,
}

impl Validator<'_> {
    pub(super) fn meters(&self, file: Vec<FileMeter>) -> Result<Vec<MeterConfig>, ConfigError> {
        let mut ids = BTreeSet::new();
        let mut meters = Vec::with_capacity(file.len());
        let mut spans = Vec::with_capacity(file.len());
        for m in file {
            let id = self.identifier(&m.id, "meter.id")?;
            if !ids.insert(id.clone()) {
                return Err(self.err(
                    m.id.span(),
                    "meter.id",
                    format!("{id:?} is used by two meters"),
                ));
            }
            spans.push(MeterSpans {
                id: m.id.span(),
                protocol: m.protocol.span(),
                port: m.port.span(),
                address: m.address.as_ref().map(Spanned::span),
            });
            meters.push(self.meter(m, id)?);
        }
        serial_lines(&meters).map_err(|e| {
            let s = &spans[e.meter];
            let span = match e.key {
                LineKey::Id => s.id.clone(),
                LineKey::Protocol => s.protocol.clone(),
                LineKey::Port => s.port.clone(),
                LineKey::Address => s.address.clone().unwrap_or_else(|| s.port.clone()),
            };
            self.err(span, e.key.name(), e.message)
        })?;
        Ok(meters)
    }

    fn meter(&self, m: FileMeter, id: String) -> Result<MeterConfig, ConfigError> {
        let protocol = m.protocol.get_ref().0;
        let port = m.port.get_ref();
        if port.as_os_str().is_empty() || !port.is_absolute() {
            return Err(self.err(
                m.port.span(),
                "meter.port",
                format!(
                    "{:?} is not a serial port: write its absolute path, e.g. \"/dev/ttyUSB0\" \
                     (`wattson meter probe PORT` finds which meter answers)",
                    port.display().to_string()
                ),
            ));
        }
        if let Some(s) = &m.stop_bits
            && !matches!(s.get_ref(), 1 | 2)
        {
            return Err(self.err(s.span(), "meter.stop_bits", "must be 1 or 2"));
        }
        if let Some(b) = &m.baud
            && !(300..=4_000_000).contains(b.get_ref())
        {
            return Err(self.err(b.span(), "meter.baud", "must be between 300 and 4000000"));
        }
        if let Some(a) = &m.address {
            if !protocol.is_polled() {
                return Err(self.err(
                    a.span(),
                    "meter.address",
                    format!("{protocol} meters stream on their own line and have no address: leave it out"),
                ));
            }
            if !(1..=247).contains(a.get_ref()) {
                return Err(self.err(
                    a.span(),
                    "meter.address",
                    "a Modbus address must be between 1 and 247",
                ));
            }
        }
        let line = match m.line {
            None if protocol == Protocol::Line => {
                return Err(self.err(
                    m.protocol.span(),
                    "meter.line",
                    "protocol \"line\" needs a [meter.line] table saying which fields hold which values",
                ));
            }
            None => None,
            Some(l) if protocol != Protocol::Line => {
                return Err(self.err(
                    l.format.span(),
                    "meter.line",
                    format!("[meter.line] is for protocol \"line\", not {protocol}: leave it out"),
                ));
            }
            Some(l) => Some(self.line_format(&l)?),
        };
        Ok(MeterConfig {
            id,
            protocol,
            port: m.port.into_inner(),
            baud: m.baud.map(Spanned::into_inner),
            parity: m.parity.map(|p| p.into_inner().0),
            stop_bits: m.stop_bits.map(Spanned::into_inner),
            address: m.address.map(Spanned::into_inner),
            interval: self.duration(
                m.interval.as_ref(),
                "meter.interval",
                Duration::from_secs(1),
                SAMPLING,
            )?,
            timeout: m
                .timeout
                .as_ref()
                .map(|t| self.duration(Some(t), "meter.timeout", Duration::ZERO, METER_TIMEOUT))
                .transpose()?,
            line,
            bidirectional: m.bidirectional.unwrap_or(false),
        })
    }

    /// `[meter.line]` into the collectors' [`LineFormat`].
    fn line_format(&self, l: &FileLineFormat) -> Result<LineFormat, ConfigError> {
        let kv = l.format.get_ref().0 == LineLayoutName::Kv;
        let separator = match &l.separator {
            None => {
                if kv {
                    ' '
                } else {
                    ','
                }
            }
            Some(s) => {
                let mut chars = s.get_ref().chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) if c != '\n' && c != '\r' && (!kv || c != '=') => c,
                    _ => {
                        return Err(self.err(
                            s.span(),
                            "meter.line.separator",
                            format!(
                                "{:?} must be one character (not a line break{})",
                                s.get_ref(),
                                if kv { " or '='" } else { "" }
                            ),
                        ));
                    }
                }
            }
        };
        let layout = if kv {
            Layout::KeyValue {
                pair_separator: separator,
                assign: '=',
            }
        } else {
            Layout::Csv { separator }
        };
        let mut fields = Vec::new();
        for (field, v) in &l.fields {
            let key = format!("meter.line.fields.{}", field_name(*field));
            let (column, name) = match (kv, v.get_ref()) {
                (false, toml::Value::Integer(c)) if (0..=1024).contains(c) => {
                    (Some(*c as usize), None)
                }
                (true, toml::Value::String(k)) if !k.trim().is_empty() => (None, Some(k.clone())),
                _ => {
                    return Err(self.err(
                        v.span(),
                        &key,
                        if kv {
                            "with format \"kv\" each field names a key (a non-empty string)"
                        } else {
                            "with format \"csv\" each field is a 0-based column number (0 to 1024)"
                        },
                    ));
                }
            };
            let scale = match l.scale.get(field) {
                None => 1.0,
                Some(s) => {
                    let x = *s.get_ref();
                    if !x.is_finite() || x == 0.0 {
                        return Err(self.err(
                            s.span(),
                            &format!("meter.line.scale.{}", field_name(*field)),
                            format!("{x} must be a finite, non-zero multiplier"),
                        ));
                    }
                    x
                }
            };
            fields.push(FieldMap {
                field: *field,
                column,
                key: name,
                scale,
            });
        }
        if let Some((field, s)) = l.scale.iter().find(|(f, _)| !l.fields.contains_key(f)) {
            return Err(self.err(
                s.span(),
                &format!("meter.line.scale.{}", field_name(*field)),
                "scales a field that [meter.line] fields does not map",
            ));
        }
        if !l.fields.contains_key(&Field::Power) {
            return Err(self.err(
                l.format.span(),
                "meter.line.fields",
                "a line meter must map at least the \"power\" field",
            ));
        }
        Ok(LineFormat {
            layout,
            fields,
            ..LineFormat::default()
        })
    }
}

/// The config-file name of a line field (`power_factor`).
pub(super) fn field_name(field: Field) -> &'static str {
    match field {
        Field::Power => "power",
        Field::Voltage => "voltage",
        Field::Current => "current",
        Field::PowerFactor => "power_factor",
        Field::Frequency => "frequency",
        Field::Energy => "energy",
    }
}
