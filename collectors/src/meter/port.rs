//! Real serial ports (`serialport`, 8N1/8N2/8E1 as configured), opened through a
//! [`PortOpener`] so that the collector's reconnect logic runs as well on an in-memory line
//! in tests as on `/dev/ttyUSB0`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serialport::SerialPort;

use super::protocol::{Parity, SerialSettings};

/// Why a port could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error("opening serial port {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: serialport::Error,
    },
    #[error("meter {id}: {detail}")]
    Config { id: String, detail: String },
}

impl PortError {
    /// True if the port does not exist (yet): unplugged, or a pty not created.
    pub fn is_missing(&self) -> bool {
        match self {
            PortError::Open { source, .. } => matches!(
                source.kind(),
                serialport::ErrorKind::Io(std::io::ErrorKind::NotFound)
            ),
            PortError::Config { .. } => false,
        }
    }

    /// True if another program holds the port: `serialport` opens ports exclusively
    /// (`TIOCEXCL` and an exclusive `flock`) and reports EBUSY or a held lock as `NoDevice`.
    pub fn is_busy(&self) -> bool {
        match self {
            PortError::Open { source, .. } => source.kind() == serialport::ErrorKind::NoDevice,
            PortError::Config { .. } => false,
        }
    }

    /// What a user reads when the port could not be opened: which port, why (the OS reason)
    /// and what to do. `was_open`: the port worked earlier in this run (so it was unplugged,
    /// rather than never there).
    pub fn explain(&self, was_open: bool) -> String {
        let PortError::Open { path, source } = self else {
            return self.to_string();
        };
        let path = path.display();
        let reason = source.to_string();
        if self.is_missing() && was_open {
            format!("{path} is gone ({reason}): unplugged? It is reopened as soon as it returns")
        } else if self.is_missing() {
            format!(
                "{path} does not exist ({reason}): check that the adapter is plugged in and \
                 that this is its name (ls /dev/serial/by-id/ lists the adapters present)"
            )
        } else if self.is_busy() {
            format!(
                "{path} is in use by another program ({reason}): while `wattson run` is \
                 running it holds the meter; stop it (systemctl stop wattson) or the other \
                 program, then try again"
            )
        } else {
            format!("cannot open {path}: {reason}")
        }
    }
}

/// Open `path` with `settings`; each blocking read waits at most `read_timeout`.
pub fn open(
    path: &Path,
    settings: SerialSettings,
    read_timeout: Duration,
) -> Result<Box<dyn SerialPort>, PortError> {
    let parity = match settings.parity {
        Parity::None => serialport::Parity::None,
        Parity::Even => serialport::Parity::Even,
        Parity::Odd => serialport::Parity::Odd,
    };
    let data_bits = match settings.data_bits {
        5 => serialport::DataBits::Five,
        6 => serialport::DataBits::Six,
        7 => serialport::DataBits::Seven,
        _ => serialport::DataBits::Eight,
    };
    let stop_bits = if settings.stop_bits == 2 {
        serialport::StopBits::Two
    } else {
        serialport::StopBits::One
    };
    serialport::new(path.to_string_lossy(), settings.baud)
        .data_bits(data_bits)
        .parity(parity)
        .stop_bits(stop_bits)
        .flow_control(serialport::FlowControl::None)
        .timeout(read_timeout)
        .open()
        .map_err(|source| PortError::Open {
            path: path.to_owned(),
            source,
        })
}

/// A byte stream to a meter: what a session talks through.
pub trait MeterPort: Read + Write + Send {}

impl<T: Read + Write + Send + ?Sized> MeterPort for T {}

/// Opens the port of a meter collector: [`SerialOpener`] opens real serial ports; a test
/// hands out in-memory lines and fails on cue.
pub trait PortOpener: Send {
    /// Open `path` with `settings`; each blocking read waits at most `read_timeout`.
    fn open(
        &mut self,
        path: &Path,
        settings: SerialSettings,
        read_timeout: Duration,
    ) -> Result<Box<dyn MeterPort>, PortError>;
}

/// Opens real serial ports ([`open`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct SerialOpener;

impl PortOpener for SerialOpener {
    fn open(
        &mut self,
        path: &Path,
        settings: SerialSettings,
        read_timeout: Duration,
    ) -> Result<Box<dyn MeterPort>, PortError> {
        open(path, settings, read_timeout).map(|p| Box::new(p) as Box<dyn MeterPort>)
    }
}
