//! Finding the daemon of a database: its control socket connected and its hello checked,
//! or, where no daemon answers, why not in words ([`Located::NoDaemon`]: none runs, a stale
//! socket, a fleet collector that serves none), told apart by who holds the database's
//! writer lock; a socket the caller may not use, or a daemon that holds the lock but does
//! not answer, is an error. Talking to the daemon found is [`Client`]'s.

use std::os::unix::net::UnixStream;
use std::path::Path;

use super::{Client, ControlError};
use crate::control::messages::socket_path;
use crate::store::lock::{WriterState, writer_state};

/// The outcome of looking for the daemon of a database.
#[derive(Debug)]
pub enum Located {
    /// A daemon answered; its connection.
    Daemon(Client),
    /// No daemon runs for the database: the command opens the meter itself. Why, in words.
    NoDaemon { why: String },
}

/// Find the daemon of the database at `db`: connect to [`socket_path`]`(db)` and check its
/// hello. No socket, or a stale one (nothing listening and no writer holds the database),
/// is [`Located::NoDaemon`]; a socket the caller may not use, a daemon that does not answer
/// or speaks another protocol is an error.
pub fn locate(db: &Path) -> Result<Located, ControlError> {
    let socket = socket_path(db);
    let stream = match UnixStream::connect(&socket) {
        Ok(s) => s,
        Err(e) => return not_connected(db, &socket, &e),
    };
    Client::greet(stream, socket, db).map(Located::Daemon)
}

fn not_connected(db: &Path, socket: &Path, e: &std::io::Error) -> Result<Located, ControlError> {
    use std::io::ErrorKind;
    let reason = crate::store::error_chain(e);
    let writer = writer_state(db);
    match (e.kind(), writer) {
        (ErrorKind::PermissionDenied, _) => Err(ControlError::Permission {
            socket: socket.to_owned(),
            reason,
        }),
        (ErrorKind::NotFound, WriterState::Live(Some(holder))) if !holder.serves_socket => {
            Ok(Located::NoDaemon {
                why: format!(
                    "{} writes {} as a fleet collector, which serves no control socket: no \
                     meter of this machine is read through it",
                    holder.describe(),
                    db.display(),
                ),
            })
        }
        (ErrorKind::NotFound, WriterState::Live(holder)) => Ok(Located::NoDaemon {
            why: format!(
                "{} writes {} but serves no control socket at {} (a wattson older than this \
                 one? restart it to share the meter)",
                describe(holder.as_ref()),
                db.display(),
                socket.display()
            ),
        }),
        // No daemon can serve a socket there either (the daemon logs the same at start).
        (ErrorKind::InvalidInput, _) => Ok(Located::NoDaemon {
            why: format!(
                "no control socket can exist at {}: {reason} (a shorter [storage] path would \
                 let a daemon share the meter)",
                socket.display()
            ),
        }),
        (ErrorKind::NotFound, _) => Ok(Located::NoDaemon {
            why: format!("no daemon is running for {}", db.display()),
        }),
        (ErrorKind::ConnectionRefused, WriterState::Live(holder)) => {
            Err(ControlError::NotAnswering {
                socket: socket.to_owned(),
                holder: describe(holder.as_ref()),
                reason,
            })
        }
        (ErrorKind::ConnectionRefused, _) => Ok(Located::NoDaemon {
            why: format!(
                "no daemon is running for {}: its control socket {} is stale (left by a daemon \
                 that stopped without removing it; the next `wattson run` replaces it)",
                db.display(),
                socket.display()
            ),
        }),
        _ => Err(ControlError::Io {
            socket: socket.to_owned(),
            what: "connecting",
            reason,
        }),
    }
}

fn describe(holder: Option<&crate::store::lock::Holder>) -> String {
    holder.map_or_else(
        || "a writer".to_owned(),
        crate::store::lock::Holder::describe,
    )
}
