//! The daemon's side of the control socket ([`crate::control`] describes the protocol):
//! bind `<database>.sock` (mode 0660), accept at most [`MAX_CLIENTS`] connections, serve
//! each on a task of the daemon's runtime, and remove the socket on the way out. The
//! daemon's lifecycle (`runtime::daemon`) starts it with what it serves from
//! ([`ControlContext`]).
//!
//! The sampler hands each pass to the live view's [`SampleFeed`](crate::live::feed::SampleFeed)
//! (a bounded broadcast: it never waits for a subscriber); a connection that falls
//! [`crate::control::messages::CLIENT_QUEUE`] passes behind, or takes longer than [`crate::control::messages::WRITE_TIMEOUT`] to take a line,
//! is dropped.

mod connection;
mod vouch;

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use wattson_collectors::SourceId;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::control::messages::{MAX_CLIENTS, socket_path};
use crate::live::LiveState;
use crate::live::feed::Pass;
use crate::store::StoreHandle;

/// What the control socket serves from.
pub struct ControlContext {
    /// The daemon's configuration at start: its host, database, meters and roots.
    pub config: Config,
    pub live: Arc<LiveState>,
    pub store: StoreHandle,
    /// The sources the daemon collects.
    pub sources: Vec<SourceId>,
    /// The address `[http]` is bound to, when it is served.
    pub http: Option<std::net::SocketAddr>,
}

/// Shared by the connections.
struct Shared {
    ctx: ControlContext,
    permits: Arc<Semaphore>,
    started_ms: i64,
}

impl Shared {
    fn clients(&self) -> usize {
        MAX_CLIENTS.saturating_sub(self.permits.available_permits())
    }
}

/// Why the control socket could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ControlServerError {
    #[error(
        "control socket {path}: {what}: {reason}; `wattson sweep`, `wattson status` and \
         `wattson idle --measure` cannot reach this daemon (a sweep then fails on the busy \
         meter)"
    )]
    Bind {
        path: PathBuf,
        what: &'static str,
        reason: String,
    },
}

/// The running control socket; [`ControlHandle::stop`] ends it and removes the socket.
pub struct ControlHandle {
    task: tokio::task::JoinHandle<()>,
    path: PathBuf,
    /// Device and inode of the socket this daemon bound, so that stopping removes only its
    /// own.
    identity: Option<(u64, u64)>,
}

impl ControlHandle {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Wait (at most a second) for the connections to end after the cancellation, then
    /// remove the socket file if it is still this daemon's.
    pub async fn stop(self) {
        if tokio::time::timeout(Duration::from_secs(1), self.task)
            .await
            .is_err()
        {
            tracing::warn!("the control socket did not stop within 1 s");
        }
        let still_ours = std::fs::symlink_metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        if still_ours.is_some() && still_ours == self.identity {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Bind the control socket of the context's database and serve it until `cancel`. Call from
/// within the daemon's runtime. The caller holds the database's writer lock, so a socket
/// file already there was left by a daemon that stopped without removing it: it is replaced.
pub fn start(
    ctx: ControlContext,
    cancel: CancellationToken,
) -> Result<ControlHandle, ControlServerError> {
    let path = socket_path(&ctx.config.storage.path);
    let bind_error = |what: &'static str, e: &std::io::Error| ControlServerError::Bind {
        path: path.clone(),
        what,
        reason: crate::store::error_chain(e),
    };
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_socket() => {
            std::fs::remove_file(&path).map_err(|e| bind_error("removing the stale socket", &e))?;
            tracing::info!("control socket {}: replaced a stale one", path.display());
        }
        Ok(_) => {
            return Err(ControlServerError::Bind {
                path: path.clone(),
                what: "in the way",
                reason: "a file that is not a socket is there (left alone: move it away)".into(),
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(bind_error("looking at the path", &e)),
    }
    let listener = bind_private(&path).map_err(|(what, e)| bind_error(what, &e))?;
    let identity = std::fs::symlink_metadata(&path)
        .ok()
        .map(|m| (m.dev(), m.ino()));
    let shared = Arc::new(Shared {
        ctx,
        permits: Arc::new(Semaphore::new(MAX_CLIENTS)),
        started_ms: wattson_collectors::now_ms(),
    });
    tracing::info!(
        "control socket {}: sweeps, status and idle --measure reach the meter through it",
        path.display()
    );
    let task = tokio::spawn(accept(listener, shared, cancel));
    Ok(ControlHandle {
        task,
        path,
        identity,
    })
}

/// Binds the socket inside a fresh 0700 directory beside `path` ([`staging_dir`]), sets its
/// mode to 0660 there and only then renames it into place: whatever the umask, no other
/// user can connect before the mode is right, or unlink it before it is in place
/// (SECURITY.md).
fn bind_private(path: &Path) -> Result<tokio::net::UnixListener, (&'static str, std::io::Error)> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let staging = staging_dir(parent).map_err(|e| ("creating a private directory beside it", e))?;
    let inside = staging.path().join("s");
    let listener = tokio::net::UnixListener::bind(&inside).map_err(|e| ("binding", e))?;
    std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o660))
        .map_err(|e| ("setting its mode to 0660", e))?;
    std::fs::rename(&inside, path).map_err(|e| ("moving it into place", e))?;
    Ok(listener)
}

/// A fresh directory in `parent` that only this user may enter, made with mode 0700 by
/// `mkdir` itself: the umask can only narrow that. Made 0777 and left to the umask (as
/// `tempfile` does by default), it was world-writable under `umask 000`, and another user
/// unlinked the socket in it before it was moved into place.
fn staging_dir(parent: &Path) -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(".wattson-sock-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)
}

async fn accept(
    listener: tokio::net::UnixListener,
    shared: Arc<Shared>,
    cancel: CancellationToken,
) {
    let mut connections = tokio::task::JoinSet::new();
    let mut last_error: Option<String> = None;
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    last_error = None;
                    match shared.permits.clone().try_acquire_owned() {
                        Ok(permit) => {
                            connections.spawn(connection::serve(
                                stream,
                                shared.clone(),
                                permit,
                                cancel.clone(),
                            ));
                        }
                        Err(_) => {
                            connections.spawn(connection::refuse_busy(stream));
                        }
                    }
                }
                Err(e) => {
                    // Out of descriptors, say: logged once, retried after a pause rather
                    // than in a tight loop.
                    let text = crate::store::error_chain(&e);
                    if last_error.as_deref() != Some(text.as_str()) {
                        tracing::warn!("control socket: accepting a connection: {text}");
                    }
                    last_error = Some(text);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 44: the staging directory is made 0700, not left to the umask (under the usual
    /// 022 it was 0755, under 000 world-writable).
    #[test]
    fn the_staging_directory_is_made_private_by_mkdir_itself() {
        let parent = tempfile::tempdir().unwrap();
        let dir = staging_dir(parent.path()).unwrap();
        let mode = std::fs::metadata(dir.path()).unwrap().mode() & 0o7777;
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        assert_eq!(mode & 0o700, 0o700, "{mode:o}");
    }
}
