//! Logging through `tracing`: human-readable on a terminal, journald-friendly under systemd.
//!
//! When started by systemd (`JOURNAL_STREAM` set), each line starts with a syslog priority
//! prefix (`<3>` error ... `<7>` debug, see sd-daemon(3)) and carries no timestamp: the
//! journal adds its own, so lines are not timestamped twice.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// How much is logged when `RUST_LOG` does not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    /// Warnings and errors: a command's output is what it prints, its log only what went
    /// wrong.
    Warnings,
    /// What a long-running process does (the daemon, the collector, a sweep, a simulated
    /// meter), without the schema migration's "Database migrated to version N" (the
    /// store's business).
    Progress,
    /// Everything down to debug (`-v`).
    Debug,
}

/// Install the global subscriber at `verbosity`. `RUST_LOG` overrides it (e.g.
/// `RUST_LOG=wattson=trace`).
pub fn init(verbosity: Verbosity) {
    init_with_default(match verbosity {
        Verbosity::Warnings => "warn",
        Verbosity::Progress => "info,rusqlite_migration=warn",
        Verbosity::Debug => "debug",
    });
}

/// As [`init`], with `default` as the level when `RUST_LOG` is not set.
fn init_with_default(default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| ProgressAwareStderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        let _ = builder.event_format(JournalFormat).try_init();
    } else {
        let _ = builder.with_target(false).try_init();
    }
}

/// The progress bar or spinner on the terminal, if one is showing: log lines are written
/// with it hidden and redrawn after, so a line never breaks it.
static PROGRESS: std::sync::Mutex<Option<indicatif::ProgressBar>> = std::sync::Mutex::new(None);

/// Say which progress bar is showing (`None` when it is finished).
pub fn set_progress(bar: Option<&indicatif::ProgressBar>) {
    if let Ok(mut p) = PROGRESS.lock() {
        *p = bar.cloned();
    }
}

/// stderr, written around the progress bar if one is showing. tracing writes each event
/// with one `write_all`.
struct ProgressAwareStderr;

impl std::io::Write for ProgressAwareStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let bar = PROGRESS.lock().ok().and_then(|p| p.clone());
        match bar {
            Some(bar) if !bar.is_hidden() => {
                bar.suspend(|| std::io::stderr().write_all(buf))?;
                Ok(buf.len())
            }
            _ => std::io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// `<priority>message key=value ...`, no timestamp.
struct JournalFormat;

impl<S, N> FormatEvent<S, N> for JournalFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        write!(writer, "<{}>", syslog_priority(*event.metadata().level()))?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// The syslog priority for a tracing level (sd-daemon(3) prefixes).
pub fn syslog_priority(level: Level) -> u8 {
    match level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_follow_syslog() {
        assert_eq!(syslog_priority(Level::ERROR), 3);
        assert_eq!(syslog_priority(Level::WARN), 4);
        assert_eq!(syslog_priority(Level::INFO), 6);
        assert_eq!(syslog_priority(Level::TRACE), 7);
    }
}
