//! Running a helper program (`ipmitool`, `nvidia-smi`) with a hard time limit: the caller
//! never waits longer than the timeout, and a program that overruns is killed.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Linux `ETXTBSY`, "Text file busy".
const ETXTBSY: i32 = 26;

/// What a finished program left behind.
#[derive(Debug, Clone)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The first non-empty line of stderr, else of stdout: what a log line should quote.
    pub fn first_line(&self) -> &str {
        self.stderr
            .lines()
            .chain(self.stdout.lines())
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
    }
}

/// Why a program gave no output.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("{program} not found (is it installed? set its path in the config)")]
    NotFound { program: PathBuf },
    #[error("{program} cannot be run")]
    Spawn {
        program: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{program} gave no answer within {} ms; killed", .timeout.as_millis())]
    Timeout { program: PathBuf, timeout: Duration },
}

fn reader(mut pipe: impl Read + Send + 'static, tx: mpsc::Sender<(bool, String)>, is_out: bool) {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        let _ = tx.send((is_out, String::from_utf8_lossy(&buf).into_owned()));
    });
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Run `program args` with stdin closed and wait at most `timeout` for it to exit.
pub fn run(program: &Path, args: &[&str], timeout: Duration) -> Result<Output, CommandError> {
    let deadline = Instant::now() + timeout;
    let spawn = || {
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
    };
    let mut attempt = spawn();
    // ETXTBSY: a program just written (a package upgrade replacing ipmitool) can still be
    // open for writing in a process forked meanwhile; it clears within milliseconds.
    for _ in 0..3 {
        match &attempt {
            Err(e) if e.raw_os_error() == Some(ETXTBSY) => {
                std::thread::sleep(Duration::from_millis(20));
                attempt = spawn();
            }
            _ => break,
        }
    }
    let mut child = attempt.map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => CommandError::NotFound {
            program: program.to_owned(),
        },
        _ => CommandError::Spawn {
            program: program.to_owned(),
            source,
        },
    })?;
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        reader(out, tx.clone(), true);
    }
    if let Some(err) = child.stderr.take() {
        reader(err, tx, false);
    }
    let timed_out = || CommandError::Timeout {
        program: program.to_owned(),
        timeout,
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    // Both pipes reach end of file when the program exits (or closes them).
    for _ in 0..2 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((true, text)) => stdout = text,
            Ok((false, text)) => stderr = text,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                kill(&mut child);
                return Err(timed_out());
            }
        }
    }
    // A program that closed its pipes but lingers gets until the deadline to exit.
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                return Ok(Output {
                    status,
                    stdout,
                    stderr,
                });
            }
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Ok(None) => {
                kill(&mut child);
                return Err(timed_out());
            }
            Err(source) => {
                kill(&mut child);
                return Err(CommandError::Spawn {
                    program: program.to_owned(),
                    source,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_program_is_not_found() {
        let err = run(
            Path::new("/nonexistent/ipmitool"),
            &[],
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(err, CommandError::NotFound { .. }), "{err}");
        assert!(err.to_string().contains("/nonexistent/ipmitool"));
    }

    #[test]
    fn output_and_status_come_back() {
        let out = run(
            Path::new("/bin/sh"),
            &["-c", "echo hello; echo oops >&2; exit 3"],
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(out.stdout, "hello\n");
        assert_eq!(out.first_line(), "oops");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn overrunning_program_is_killed_at_the_timeout() {
        let started = Instant::now();
        let err = run(
            Path::new("/bin/sh"),
            &["-c", "exec sleep 30"],
            Duration::from_millis(200),
        )
        .unwrap_err();
        assert!(matches!(err, CommandError::Timeout { .. }), "{err}");
        // Generous bound for a loaded CI machine; the point is "not 30 s".
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
