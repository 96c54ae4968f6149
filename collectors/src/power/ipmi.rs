//! Whole-server power from the BMC: the output of `ipmitool dcmi power reading` (DCMI 1.5
//! section 6.6.1 "Get Power Reading", printed by ipmitool's lib/ipmi_dcmi.c), in watts.
//!
//! The BMC measures the power supplies' input, so this is [`Scope::Wall`]: the whole box,
//! comparable with an inline meter (never add the two). ipmitool exits 0 and prints a number
//! even when the BMC says "Power reading state is: deactivated" (no measurement available;
//! a BMC with no power sensor prints 0 W), so that state is an error unless configured
//! otherwise: OpenBMC builds report real readings with the bit clear (openbmc#3257).
//!
//! Running ipmitool costs a process and, in band, a KCS round trip of tens of ms: poll it
//! every 10 s or so, not every second.

use crate::SourceId;
use std::path::PathBuf;
use std::time::Duration;

use super::command::{self, CommandError};
use crate::{CollectError, Collector, Metric, Sample, Scope};

/// Sample source name.
pub const SOURCE: SourceId = SourceId::Ipmi;

/// What goes wrong getting a DCMI power reading.
#[derive(Debug, thiserror::Error)]
pub enum IpmiError {
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("{program} failed ({status}): {message}")]
    Failed {
        program: PathBuf,
        status: String,
        message: String,
    },
    #[error("no \"Instantaneous power reading\" in ipmitool output (first line: {first_line:?})")]
    NoReading { first_line: String },
    #[error("ipmitool output: {line:?} is not a reading in watts")]
    BadLine { line: String },
    #[error(
        "the BMC says its power reading is deactivated ({watts} W reported): no measurement \
         available. `ipmitool dcmi power activate` may turn it on; set accept_deactivated \
         where the BMC reports real watts with the state bit clear (some OpenBMC builds)"
    )]
    Deactivated { watts: f64 },
}

impl From<IpmiError> for CollectError {
    fn from(e: IpmiError) -> Self {
        let source_name = SOURCE.to_string();
        let detail = e.to_string();
        match e {
            IpmiError::Command(CommandError::Timeout { timeout, .. }) => CollectError::Timeout {
                source_name,
                timeout_ms: timeout.as_millis() as u64,
            },
            IpmiError::Command(_) | IpmiError::Deactivated { .. } => CollectError::Unavailable {
                source_name,
                detail,
            },
            IpmiError::Failed { .. } => CollectError::Failed {
                source_name,
                detail,
            },
            IpmiError::NoReading { .. } | IpmiError::BadLine { .. } => CollectError::BadFrame {
                source_name,
                detail,
            },
        }
    }
}

/// One `dcmi power reading`.
#[derive(Debug, Clone, PartialEq)]
pub struct DcmiReading {
    /// Instantaneous power, W.
    pub instantaneous_w: f64,
    /// Minimum, maximum and average over the BMC's sampling period, W.
    pub minimum_w: Option<f64>,
    pub maximum_w: Option<f64>,
    pub average_w: Option<f64>,
    /// The BMC's statistics sampling period, seconds.
    pub sampling_period_s: Option<u64>,
    /// "Power reading state is: activated"; `false` for `deactivated` or no state line.
    pub active: bool,
}

/// `   215 Watts` -> 215.0.
fn watts(rest: &str, line: &str) -> Result<f64, IpmiError> {
    let bad = || IpmiError::BadLine {
        line: line.trim().to_owned(),
    };
    let mut words = rest.split_whitespace();
    let value: f64 = words.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
    match words.next() {
        Some(unit) if unit.eq_ignore_ascii_case("watts") && value >= 0.0 => Ok(value),
        _ => Err(bad()),
    }
}

/// Parse the text ipmitool prints for `dcmi power reading`.
pub fn parse_power_reading(text: &str) -> Result<DcmiReading, IpmiError> {
    let mut reading = DcmiReading {
        instantaneous_w: f64::NAN,
        minimum_w: None,
        maximum_w: None,
        average_w: None,
        sampling_period_s: None,
        active: false,
    };
    let mut found = false;
    for line in text.lines() {
        let trimmed = line.trim();
        let value = |prefix: &str| trimmed.strip_prefix(prefix).map(|r| watts(r, line));
        if let Some(w) = value("Instantaneous power reading:") {
            reading.instantaneous_w = w?;
            found = true;
        } else if let Some(w) = value("Minimum during sampling period:") {
            reading.minimum_w = Some(w?);
        } else if let Some(w) = value("Maximum during sampling period:") {
            reading.maximum_w = Some(w?);
        } else if let Some(w) = value("Average power reading over sample period:") {
            reading.average_w = Some(w?);
        } else if let Some(state) = trimmed.strip_prefix("Power reading state is:") {
            reading.active = state.trim().eq_ignore_ascii_case("activated");
        }
        // Some BMCs' timestamps lack a newline, so this label may follow one on its line.
        if let Some((_, rest)) = trimmed.split_once("Sampling period:") {
            reading.sampling_period_s = rest.split_whitespace().next().and_then(|n| n.parse().ok());
        }
    }
    if !found {
        return Err(IpmiError::NoReading {
            first_line: text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("")
                .to_owned(),
        });
    }
    Ok(reading)
}

/// How to run ipmitool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpmiConfig {
    /// `ipmitool` (searched on `PATH`) or a full path.
    pub program: PathBuf,
    /// Arguments before `dcmi power reading`, e.g. `-I lanplus -H bmc -U admin -f FILE` for
    /// a BMC over the network (pass the password with `-f` or `-E`, never `-P`: arguments
    /// show in `ps`). Empty for the local BMC through /dev/ipmi0.
    pub args: Vec<String>,
    /// Each run is killed after this long.
    pub timeout: Duration,
    /// Take readings the BMC marks `deactivated` (some OpenBMC builds report real watts so).
    pub accept_deactivated: bool,
}

impl Default for IpmiConfig {
    fn default() -> Self {
        IpmiConfig {
            program: PathBuf::from("ipmitool"),
            args: Vec::new(),
            timeout: Duration::from_secs(5),
            accept_deactivated: false,
        }
    }
}

/// Polls `ipmitool dcmi power reading`.
#[derive(Debug)]
pub struct IpmiCollector {
    config: IpmiConfig,
}

impl IpmiCollector {
    /// What a DCMI power reading measures: the whole server's input power.
    pub const SCOPE: Scope = Scope::Wall;

    /// Takes one reading to check the BMC answers: a missing ipmitool, no BMC, or a
    /// deactivated reading fails here, once, with what to do.
    pub fn new(config: IpmiConfig) -> Result<Self, IpmiError> {
        let c = IpmiCollector { config };
        c.read()?;
        Ok(c)
    }

    pub fn scope(&self) -> Scope {
        Self::SCOPE
    }

    /// Run ipmitool once and parse its answer.
    pub fn read(&self) -> Result<DcmiReading, IpmiError> {
        let mut args: Vec<&str> = self.config.args.iter().map(String::as_str).collect();
        args.extend(["dcmi", "power", "reading"]);
        let out = command::run(&self.config.program, &args, self.config.timeout)?;
        if !out.status.success() {
            return Err(IpmiError::Failed {
                program: self.config.program.clone(),
                status: out.status.to_string(),
                message: out.first_line().to_owned(),
            });
        }
        let reading = parse_power_reading(&out.stdout)?;
        if !reading.active && !self.config.accept_deactivated {
            return Err(IpmiError::Deactivated {
                watts: reading.instantaneous_w,
            });
        }
        Ok(reading)
    }
}

impl Collector for IpmiCollector {
    fn source(&self) -> &SourceId {
        &SOURCE
    }

    fn scope(&self) -> Option<Scope> {
        Some(Self::SCOPE)
    }

    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        match self.read() {
            Ok(r) => Ok(vec![Sample::new(
                now_ms,
                SOURCE,
                Metric::Power,
                "",
                r.instantaneous_w,
            )]),
            // Deactivated after a good start: a BMC hiccup, not a reason to stop for good.
            Err(e @ IpmiError::Deactivated { .. }) => Err(CollectError::Failed {
                source_name: SOURCE.to_string(),
                detail: e.to_string(),
            }),
            Err(e) => Err(e.into()),
        }
    }
}
