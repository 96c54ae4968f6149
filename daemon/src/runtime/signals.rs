//! The signals wattson acts on, installed in one place: SIGINT and SIGTERM stop (the daemon,
//! the fleet collector, a simulated meter, a sweep's loops); SIGHUP reloads the daemon's
//! configuration. Every command that waits for them takes them from [`Signals`].

use tokio::signal::unix::{Signal, SignalKind, signal};

/// What a signal asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// SIGINT or SIGTERM: its number (for the exit status, 128 + the number).
    Stop(i32),
    /// SIGHUP, where the command reloads.
    Reload,
}

impl Asked {
    /// The signal's name, for the log.
    pub fn name(self) -> &'static str {
        match self {
            Asked::Stop(libc::SIGINT) => "SIGINT",
            Asked::Stop(_) => "SIGTERM",
            Asked::Reload => "SIGHUP",
        }
    }
}

/// SIGINT and SIGTERM, and SIGHUP where the command reloads: handled from when this is made
/// (inside a tokio runtime), each received as it arrives.
#[derive(Debug)]
pub struct Signals {
    int: Signal,
    term: Signal,
    hup: Option<Signal>,
}

impl Signals {
    /// SIGINT and SIGTERM.
    pub fn stop() -> std::io::Result<Signals> {
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: None,
        })
    }

    /// SIGINT and SIGTERM, and SIGHUP.
    pub fn stop_or_reload() -> std::io::Result<Signals> {
        Ok(Signals {
            hup: Some(signal(SignalKind::hangup())?),
            ..Signals::stop()?
        })
    }

    /// The next signal.
    pub async fn recv(&mut self) -> Asked {
        let hup = async {
            match &mut self.hup {
                Some(h) => h.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            Some(()) = self.int.recv() => Asked::Stop(libc::SIGINT),
            Some(()) = self.term.recv() => Asked::Stop(libc::SIGTERM),
            Some(()) = hup => Asked::Reload,
            else => std::future::pending().await,
        }
    }

    /// The next SIGINT or SIGTERM (a SIGHUP, where handled, is passed over).
    pub async fn stopped(&mut self) -> i32 {
        loop {
            if let Asked::Stop(n) = self.recv().await {
                return n;
            }
        }
    }
}
