//! Why idle draws what it does (`wattson idle`), and what each power setting saves at the
//! wall (`wattson idle --measure`). The readers it uses (package C-states, power settings,
//! wake-ups) are the collectors' (`wattson_collectors::idle`); this is what the command makes
//! of them.
//!
//! - [`explain`]: package and core C-state residency (from the database's last hour, else a
//!   short live sample) and every power setting, turned into findings in words;
//! - [`configs`]: each measured setting as configurations `wattson report` compares;
//! - [`history`]: the idle hours, package residency and measured effects the database holds,
//!   for `wattson idle` and the report;
//! - [`trials`]: the settings `--measure` may change, grouped one trial per kind,
//!   and the allowlist of files that follows from them;
//! - [`catalogue`]: every file wattson could write on this machine and the values each
//!   takes, against which a database's rows are vetted;
//! - [`journal`]: the original value of every file, stored in the database before the first
//!   write, restored after success, Ctrl-C, SIGTERM, and at the next start of any wattson
//!   command after a crash;
//! - [`measure`]: idle with each trial's setting changed against idle as it was, in an A/B/A/B/A/B/A
//!   sequence using the sweep's settling test and batch-means intervals;
//! - [`keep_advice`]: the lines that make a setting that saved something permanent by hand;
//! - [`apply`]: keeping the settings that saved (`--apply`: a tmpfiles.d file wattson owns,
//!   applied now and watched against the error counters they can raise) and `--revert`;
//! - [`tmpfiles`]: the one writer of the tmpfiles.d file `--apply` keeps: `w` lines and
//!   comments only, an administrator's lines below wattson's kept;
//! - [`store`]: the measured effects in the database, for `wattson idle` and `wattson report`;
//! - [`wakeups`]: who wakes the CPUs over the sampled window, by service, process and
//!   interrupt line;
//! - [`gap`]: idle now against the best idle seen, assigned to the measured settings not in
//!   effect;
//! - [`wakeup_hours`]: those wake-ups per hour as `wattson run` stores them, read back for
//!   the report, `/metrics` and `wattson idle`;
//! - [`disk_hours`]: each disk's spin state per hour as `wattson run` stores it (`[[disk]]`),
//!   with who woke it at each spin-up, read back as spin-ups and spun-up hours per day and
//!   priced at its datasheet watts;
//! - [`activity_hours`]: those wake-ups by service and disk spin-ups hour by hour, for the
//!   hours idle enough to sleep (`crate::analysis::sleep`).
//!
//! Units: shares 0..1 (printed as %), watts (W), UTC milliseconds.

pub mod activity_hours;
pub mod apply;
pub mod catalogue;
pub mod configs;
pub mod disk_hours;
pub mod error;
pub mod explain;
pub mod gap;
pub mod history;
pub mod journal;
pub mod keep_advice;
pub mod measure;
pub mod store;
pub mod tmpfiles;
pub mod trials;
pub mod wakeup_hours;
pub mod wakeups;

pub use error::IdleError;
