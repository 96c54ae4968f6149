//! The systemd notification protocol (sd_notify(3)): `READY=1`, `STOPPING=1`, `WATCHDOG=1`,
//! `STATUS=...` as datagrams to the unix socket named by `$NOTIFY_SOCKET`.
//!
//! Without `NOTIFY_SOCKET` every call is a no-op, so the daemon runs the same by hand.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::Duration;

/// A connection to the service manager's notification socket, if there is one.
#[derive(Debug)]
pub struct Notifier {
    target: Option<Target>,
}

#[derive(Debug)]
enum Target {
    Path(PathBuf),
    Abstract(Vec<u8>),
}

impl Notifier {
    /// Read `$NOTIFY_SOCKET` (a path, or `@name` for the abstract namespace).
    pub fn from_env() -> Notifier {
        let target = std::env::var_os("NOTIFY_SOCKET").and_then(|v| {
            let s = v.into_encoded_bytes();
            match s.first() {
                None => None,
                Some(b'@') => Some(Target::Abstract(s[1..].to_vec())),
                Some(_) => Some(Target::Path(PathBuf::from(std::ffi::OsString::from_vec(s)))),
            }
        });
        Notifier { target }
    }

    /// Whether a service manager is listening.
    pub fn enabled(&self) -> bool {
        self.target.is_some()
    }

    /// Send one notification; failures are logged, never fatal.
    pub fn notify(&self, state: &str) {
        let Some(target) = &self.target else { return };
        let result = UnixDatagram::unbound().and_then(|sock| match target {
            Target::Path(p) => sock.send_to(state.as_bytes(), p),
            Target::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                sock.send_to_addr(state.as_bytes(), &addr)
            }
        });
        if let Err(e) = result {
            tracing::warn!(
                "could not notify the service manager ({state:?}): {}",
                wattson_collectors::ErrorChain(&e)
            );
        }
    }

    pub fn ready(&self) {
        self.notify("READY=1");
    }

    pub fn stopping(&self) {
        self.notify("STOPPING=1");
    }

    pub fn reloading(&self) {
        self.notify("RELOADING=1");
    }

    pub fn watchdog(&self) {
        self.notify("WATCHDOG=1");
    }

    pub fn status(&self, text: &str) {
        self.notify(&format!("STATUS={text}"));
    }
}

use std::os::unix::ffi::OsStringExt as _;

/// The watchdog interval asked for by systemd (`$WATCHDOG_USEC`, checked against
/// `$WATCHDOG_PID` when set), if any.
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.parse::<u32>().ok() != Some(std::process::id())
    {
        return None;
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_datagrams_to_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let server = UnixDatagram::bind(&path).unwrap();
        let n = Notifier {
            target: Some(Target::Path(path)),
        };
        n.ready();
        n.status("sampling");
        let mut buf = [0u8; 64];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1");
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"STATUS=sampling");
    }

    #[test]
    fn without_socket_is_a_no_op() {
        let n = Notifier { target: None };
        assert!(!n.enabled());
        n.ready();
    }
}
