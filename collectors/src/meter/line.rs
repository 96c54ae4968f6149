//! A configurable line-of-text meter (docs/meters.md, "Line meters": Arduino + ACS712/INA219
//! sketches, USB testers): one record per `\n`-terminated line, either CSV with a column map or
//! key=value pairs with a key map, each field multiplied by its scale to reach W, V, A, Hz, Wh
//! or a 0..1 power factor. Lines longer than `max_line_len` are rejected.

use serde::{Deserialize, Serialize};

use super::{FrameError, MeterReading, StreamDecoder};

/// Which reading field a column or key feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    Power,
    Voltage,
    Current,
    PowerFactor,
    Frequency,
    Energy,
}

/// How fields are laid out on a line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", deny_unknown_fields)]
pub enum Layout {
    /// Values separated by `separator`; fields located by 0-based column.
    Csv { separator: char },
    /// `key<assign>value` pairs separated by `pair_separator` (whitespace also separates
    /// when `pair_separator` is a space).
    KeyValue { pair_separator: char, assign: char },
}

/// Where one field is found and how to scale it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldMap {
    pub field: Field,
    /// CSV column (0-based).
    #[serde(default)]
    pub column: Option<usize>,
    /// Key for key=value lines.
    #[serde(default)]
    pub key: Option<String>,
    /// Multiplier from the raw number to the unit (e.g. 0.001 for mA → A).
    #[serde(default = "one")]
    pub scale: f64,
}

fn one() -> f64 {
    1.0
}

/// The whole line format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineFormat {
    pub layout: Layout,
    pub fields: Vec<FieldMap>,
    /// Longest accepted line, bytes.
    #[serde(default = "default_max")]
    pub max_line_len: usize,
}

fn default_max() -> usize {
    256
}

impl Default for LineFormat {
    /// `power,voltage,current` CSV in W, V, A.
    fn default() -> Self {
        let col = |field, column| FieldMap {
            field,
            column: Some(column),
            key: None,
            scale: 1.0,
        };
        LineFormat {
            layout: Layout::Csv { separator: ',' },
            fields: vec![
                col(Field::Power, 0),
                col(Field::Voltage, 1),
                col(Field::Current, 2),
            ],
            max_line_len: default_max(),
        }
    }
}

impl LineFormat {
    /// Check that every field has the locator its layout needs.
    pub fn validate(&self) -> Result<(), FrameError> {
        if self.fields.is_empty() {
            return Err(FrameError::InvalidRequest(
                "line format maps no fields".into(),
            ));
        }
        for f in &self.fields {
            let ok = match self.layout {
                Layout::Csv { .. } => f.column.is_some(),
                Layout::KeyValue { .. } => f.key.as_deref().is_some_and(|k| !k.is_empty()),
            };
            if !ok || !f.scale.is_finite() || f.scale == 0.0 {
                return Err(FrameError::InvalidRequest(format!(
                    "line format field {:?} needs a column (csv) or key (key_value) and a non-zero scale",
                    f.field
                )));
            }
        }
        Ok(())
    }

    /// Parse one line (without its terminator).
    pub fn parse_line(&self, line: &str) -> Result<MeterReading, FrameError> {
        let line = line.trim();
        if line.len() > self.max_line_len {
            return Err(FrameError::TooLong {
                max: self.max_line_len,
            });
        }
        let mut reading = MeterReading::default();
        let mut found = 0;
        let num = |s: &str, f: &FieldMap| -> Result<f64, FrameError> {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .map(|v| v * f.scale)
                .ok_or_else(|| {
                    FrameError::Malformed(format!(
                        "{:?} is not a number for {:?}",
                        s.trim(),
                        f.field
                    ))
                })
        };
        match &self.layout {
            Layout::Csv { separator } => {
                let cols: Vec<&str> = line.split(*separator).collect();
                for f in &self.fields {
                    let Some(col) = f.column.and_then(|c| cols.get(c)) else {
                        continue;
                    };
                    set(&mut reading, f.field, num(col, f)?);
                    found += 1;
                }
            }
            Layout::KeyValue {
                pair_separator,
                assign,
            } => {
                let pairs: Vec<(&str, &str)> = line
                    .split(|c: char| {
                        c == *pair_separator || (*pair_separator == ' ' && c.is_whitespace())
                    })
                    .filter_map(|p| p.split_once(*assign))
                    .map(|(k, v)| (k.trim(), v.trim()))
                    .collect();
                for f in &self.fields {
                    let Some((_, v)) = pairs.iter().find(|(k, _)| Some(*k) == f.key.as_deref())
                    else {
                        continue;
                    };
                    // Allow a trailing unit such as "12.5W".
                    let v = v.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '%');
                    set(&mut reading, f.field, num(v, f)?);
                    found += 1;
                }
            }
        }
        if found == 0 {
            return Err(FrameError::Malformed(format!(
                "no mapped field in line {line:?}"
            )));
        }
        Ok(reading)
    }

    /// The line a device of this format prints for `reading` (device side), with `\r\n`.
    pub fn encode_line(&self, reading: &MeterReading) -> String {
        let value = |f: &FieldMap| get(reading, f.field).unwrap_or(0.0) / f.scale;
        match &self.layout {
            Layout::Csv { separator } => {
                let width = self
                    .fields
                    .iter()
                    .filter_map(|f| f.column)
                    .max()
                    .map_or(0, |m| m + 1);
                let mut cols = vec!["0".to_owned(); width];
                for f in &self.fields {
                    if let Some(c) = f.column {
                        cols[c] = format!("{}", round6(value(f)));
                    }
                }
                format!("{}\r\n", cols.join(&separator.to_string()))
            }
            Layout::KeyValue {
                pair_separator,
                assign,
            } => {
                let parts: Vec<String> = self
                    .fields
                    .iter()
                    .filter_map(|f| {
                        f.key
                            .as_ref()
                            .map(|k| format!("{k}{assign}{}", round6(value(f))))
                    })
                    .collect();
                format!("{}\r\n", parts.join(&pair_separator.to_string()))
            }
        }
    }
}

fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

fn set(r: &mut MeterReading, field: Field, v: f64) {
    match field {
        Field::Power => r.power_w = Some(v),
        Field::Voltage => r.voltage_v = Some(v),
        Field::Current => r.current_a = Some(v),
        Field::PowerFactor => r.power_factor = Some(v),
        Field::Frequency => r.frequency_hz = Some(v),
        Field::Energy => r.energy_wh = Some(v),
    }
}

fn get(r: &MeterReading, field: Field) -> Option<f64> {
    match field {
        Field::Power => r.power_w,
        Field::Voltage => r.voltage_v,
        Field::Current => r.current_a,
        Field::PowerFactor => r.power_factor,
        Field::Frequency => r.frequency_hz,
        Field::Energy => r.energy_wh,
    }
}

/// Incremental decoder over a byte stream. An over-long line is dropped up to its newline
/// and reported once as [`FrameError::TooLong`].
#[derive(Debug)]
pub struct LineDecoder {
    format: LineFormat,
    buf: Vec<u8>,
    overflow: bool,
    discarded: u64,
    pending: std::collections::VecDeque<Result<MeterReading, FrameError>>,
}

impl LineDecoder {
    pub fn new(format: LineFormat) -> Self {
        LineDecoder {
            format,
            buf: Vec::new(),
            overflow: false,
            discarded: 0,
            pending: std::collections::VecDeque::default(),
        }
    }
}

impl StreamDecoder for LineDecoder {
    fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                if self.overflow {
                    self.overflow = false;
                } else {
                    let line = std::mem::take(&mut self.buf);
                    let text = String::from_utf8_lossy(&line);
                    if !text.trim().is_empty() {
                        self.pending.push_back(self.format.parse_line(&text));
                    }
                }
                self.buf.clear();
            } else if self.overflow {
                self.discarded += 1;
            } else {
                self.buf.push(b);
                if self.buf.len() > self.format.max_line_len + 1 {
                    self.discarded += self.buf.len() as u64;
                    self.buf.clear();
                    self.overflow = true;
                    self.pending.push_back(Err(FrameError::TooLong {
                        max: self.format.max_line_len,
                    }));
                }
            }
        }
    }

    fn next_reading(&mut self) -> Option<Result<MeterReading, FrameError>> {
        self.pending.pop_front()
    }

    fn discarded(&self) -> u64 {
        self.discarded
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kv() -> LineFormat {
        let key = |field, k: &str, scale| FieldMap {
            field,
            column: None,
            key: Some(k.into()),
            scale,
        };
        LineFormat {
            layout: Layout::KeyValue {
                pair_separator: ' ',
                assign: '=',
            },
            fields: vec![
                key(Field::Power, "P", 1.0),
                key(Field::Current, "I", 0.001),
                key(Field::Energy, "E", 1000.0),
            ],
            max_line_len: 64,
        }
    }

    #[test]
    fn csv_with_column_map_and_scale() {
        let f = LineFormat::default();
        let r = f.parse_line("12.5,230.1,0.06\r").unwrap();
        assert_eq!(
            (r.power_w, r.voltage_v, r.current_a),
            (Some(12.5), Some(230.1), Some(0.06))
        );
        assert!(f.parse_line("power,voltage,current").is_err());
    }

    #[test]
    fn key_value_with_units_and_scale() {
        let r = kv().parse_line("P=35.5W  I=154mA E=1.25 junk").unwrap();
        assert_eq!(r.power_w, Some(35.5));
        assert!((r.current_a.unwrap() - 0.154).abs() < 1e-12);
        assert_eq!(r.energy_wh, Some(1250.0));
        assert!(kv().parse_line("hello world").is_err());
    }

    #[test]
    fn long_lines_are_bounded() {
        let mut d = LineDecoder::new(kv());
        d.push(&[b'x'; 500]);
        d.push(b"\nP=1\n");
        assert_eq!(d.next_reading(), Some(Err(FrameError::TooLong { max: 64 })));
        assert_eq!(d.next_reading().unwrap().unwrap().power_w, Some(1.0));
        assert!(d.next_reading().is_none());
    }

    #[test]
    fn encode_round_trips() {
        for f in [LineFormat::default(), kv()] {
            let r = MeterReading {
                power_w: Some(42.0),
                voltage_v: Some(231.0),
                current_a: Some(0.2),
                energy_wh: Some(500.0),
                ..MeterReading::default()
            };
            let line = f.encode_line(&r);
            let back = f.parse_line(&line).unwrap();
            assert_eq!(back.power_w, Some(42.0));
            assert!((back.current_a.unwrap() - 0.2).abs() < 1e-9);
        }
        assert!(kv().validate().is_ok());
        let bad = LineFormat {
            fields: vec![FieldMap {
                field: Field::Power,
                column: None,
                key: None,
                scale: 1.0,
            }],
            ..LineFormat::default()
        };
        assert!(bad.validate().is_err());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1000)) {
            for f in [LineFormat::default(), kv()] {
                let mut d = LineDecoder::new(f);
                d.push(&bytes);
                while let Some(r) = d.next_reading() {
                    if let Ok(r) = r { prop_assert!(r.power_w.is_none_or(f64::is_finite)); }
                }
            }
        }
    }
}
