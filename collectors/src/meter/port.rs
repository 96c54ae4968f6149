//! Real serial ports (`serialport`, 8N1/8N2/8E1 as configured), opened through a
//! [`PortOpener`] so that the collector's reconnect logic runs as well on an in-memory line
//! in tests as on `/dev/ttyUSB0`.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serialport::SerialPort;

use super::protocol::{Parity, SerialSettings};

/// Why a port could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// The port could not be opened; `source` is the OS's reason, with its error number
    /// where the OS gave one ([`PortError::explain`] says what to do about it).
    #[error("opening serial port {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("meter {id}: {detail}")]
    Config { id: String, detail: String },
}

impl PortError {
    /// The OS's reason the port could not be opened, where it was a failed open.
    pub fn os_reason(&self) -> Option<&io::Error> {
        match self {
            PortError::Open { source, .. } => Some(source),
            PortError::Config { .. } => None,
        }
    }

    /// True if the port does not exist (yet): unplugged, or a pty not created.
    pub fn is_missing(&self) -> bool {
        self.os_reason()
            .is_some_and(|e| e.kind() == io::ErrorKind::NotFound)
    }

    /// True if another program holds the port: `serialport` opens ports exclusively
    /// (`TIOCEXCL` and an exclusive `flock`).
    pub fn is_busy(&self) -> bool {
        self.os_reason()
            .is_some_and(|e| e.kind() == io::ErrorKind::ResourceBusy)
    }

    /// True if this user may not open the port.
    pub fn is_denied(&self) -> bool {
        self.os_reason()
            .is_some_and(|e| e.kind() == io::ErrorKind::PermissionDenied)
    }

    /// What a user reads when the port could not be opened: the port, the OS's reason (once)
    /// and what to do, as `PORT: REASON: what to do`. `was_open`: the port worked earlier in
    /// this run (so it was unplugged, rather than never there).
    pub fn explain(&self, was_open: bool) -> String {
        let PortError::Open { path, source } = self else {
            return self.to_string();
        };
        let path = path.display();
        let advice: &str = if self.is_missing() && was_open {
            "unplugged? It is reopened as soon as it returns"
        } else if self.is_missing() {
            "check that the adapter is plugged in and that this is its name (ls \
             /dev/serial/by-id/ lists the adapters present)"
        } else if self.is_busy() {
            "in use by another program: while `wattson run` is running it holds \
             the meter; stop it (systemctl stop wattson) or the other program, then try again"
        } else if self.is_denied() {
            "add the service user to the dialout group (the group that owns serial ports; \
             the installed unit runs wattson with SupplementaryGroups=dialout), or run as a \
             user in it"
        } else {
            return format!("{path}: {source}");
        };
        format!("{path}: {source}: {advice}")
    }
}

/// The OS's reason `serialport` could not open `path`. `serialport` keeps the error
/// number's text but not the number, so a failed `open(2)` is repeated here (without
/// becoming the controlling terminal, without waiting for the line) to get the OS's own
/// error; a port another program holds is not touched again.
#[allow(
    clippy::disallowed_methods,
    reason = "the meter's serial device: never a database"
)]
fn os_reason(path: &Path, e: serialport::Error) -> io::Error {
    use std::os::unix::fs::OpenOptionsExt as _;
    if e.kind() == serialport::ErrorKind::NoDevice {
        // EBUSY from TIOCEXCL, or another program's exclusive flock.
        return io::Error::new(io::ErrorKind::ResourceBusy, e.description);
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)
    {
        Err(os) => os,
        // open(2) worked: the failure came after it (not a terminal, settings refused).
        Ok(_) => io::Error::from(e),
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
        .map_err(|e| PortError::Open {
            path: path.to_owned(),
            source: os_reason(path, e),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::Protocol;

    fn failed(errno: i32) -> PortError {
        PortError::Open {
            path: PathBuf::from("/dev/ttyUSB0"),
            source: io::Error::from_raw_os_error(errno),
        }
    }

    /// Each failed open says `PORT: OS reason: what to do`, with the reason (and its error
    /// number) once.
    #[test]
    fn a_port_that_cannot_be_opened_names_itself_and_the_os_reason_once() {
        let denied = failed(libc::EACCES).explain(false);
        assert!(
            denied.starts_with(
                "/dev/ttyUSB0: Permission denied (os error 13): add the service user to the \
                 dialout group"
            ),
            "{denied}"
        );
        let missing = failed(libc::ENOENT).explain(false);
        assert!(
            missing.starts_with("/dev/ttyUSB0: No such file or directory (os error 2): check that"),
            "{missing}"
        );
        assert!(failed(libc::ENOENT).explain(true).contains("unplugged?"));
        let busy = PortError::Open {
            path: PathBuf::from("/dev/ttyUSB0"),
            source: io::Error::new(io::ErrorKind::ResourceBusy, "Device or resource busy"),
        };
        assert!(busy.is_busy() && busy.explain(false).contains("in use by another program"));
        let odd = failed(libc::EISDIR).explain(false);
        assert_eq!(odd, "/dev/ttyUSB0: Is a directory (os error 21)");
        for e in [&denied, &missing, &odd] {
            assert_eq!(e.matches("os error").count(), 1, "{e}");
            assert_eq!(e.matches("/dev/ttyUSB0").count(), 1, "{e}");
        }
    }

    /// The real open of a path that is not there keeps the OS's error number.
    #[test]
    fn opening_a_missing_path_keeps_the_error_number() {
        let dir = tempfile::tempdir().unwrap();
        let e = open(
            &dir.path().join("ttyUSB9"),
            Protocol::Pzem004t.default_serial(),
            Duration::from_millis(10),
        )
        .err()
        .unwrap();
        assert!(e.is_missing(), "{e:?}");
        assert_eq!(
            e.os_reason().and_then(io::Error::raw_os_error),
            Some(libc::ENOENT)
        );
    }
}
