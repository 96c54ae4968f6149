//! `wattson idle`'s options.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

// Command-line flags are bools by nature.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Args)]
pub struct IdleArgs {
    /// Print JSON instead of text (without --measure; `wattson idle --json` afterwards lists
    /// what was measured).
    #[arg(long, conflicts_with = "measure")]
    pub json: bool,
    /// Database to read history from and store measurements in [default: [storage] path].
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Sample who wakes the CPUs for this long, and the C-states too without an hour of
    /// history in the database (0: no live sample).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "5s",
        value_parser = crate::parse::parse_duration_or_zero,
        allow_hyphen_values = true
    )]
    pub sample: Duration,
    /// How many services, processes and interrupt lines "Who wakes the CPUs" lists.
    #[arg(
        long,
        value_name = "N",
        default_value_t = crate::idle::wakeups::TOP,
        value_parser = crate::parse::parse_count,
        allow_hyphen_values = true,
        conflicts_with_all = ["measure", "restore"]
    )]
    pub top: usize,
    /// Measure what each setting saves at the wall (root, with a [[meter]]): each one
    /// changed and put back in turn, A/B/A/B/A/B/A against idle as it was, then restored;
    /// stored as configurations ("idle as found", "idle with <setting>") that `wattson
    /// report` compares.
    #[arg(long)]
    pub measure: bool,
    /// Restore the settings an interrupted `--measure` left changed, as the database records
    /// them. Every command does this by itself, except as root from a database owned by
    /// another user; this asks for it. Only files of wattson's settings catalogue under
    /// [host] sysfs and procfs are written, with values their settings take.
    #[arg(long, conflicts_with_all = ["measure", "json"])]
    pub restore: bool,
    /// Keep the settings --measure found to save at the wall (root): write them into one
    /// file wattson owns, a tmpfiles.d file that systemd applies at every boot, print it,
    /// apply it now, then watch the error counters such settings can raise (PCIe AER, NIC
    /// errors and link drops, disk I/O errors) for --watch and put back any setting whose
    /// counters rise. USB input devices and devices whose driver reports runtime PM
    /// unsupported are never touched.
    #[arg(long, conflicts_with_all = ["measure", "restore", "json", "revert"])]
    pub apply: bool,
    /// Undo --apply: put back every value it changed, as found, and take its lines out of
    /// its file (lines added below them are kept; the file goes when nothing else is in it).
    #[arg(long, conflicts_with_all = ["measure", "restore", "json"])]
    pub revert: bool,
    /// With --apply: how long to watch the error counters afterwards (0: not at all).
    /// Ctrl-C stops watching; what was applied stays.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10m",
        value_parser = crate::parse::parse_duration_or_zero,
        allow_hyphen_values = true,
        requires = "apply"
    )]
    pub watch: Duration,
    /// With --apply or --revert: the directory of its tmpfiles.d file (wattson-idle.conf).
    #[arg(long, value_name = "DIR", default_value = crate::idle::tmpfiles::DEFAULT_DIR)]
    pub tmpfiles_dir: PathBuf,
    /// With --measure or --apply: only these settings (comma-separated ids: pcie_aspm,
    /// sata_alpm, runtime_pm_pci, runtime_pm_ata, runtime_pm_usb, nmi_watchdog,
    /// dirty_writeback, audio_power_save, epp, cpufreq_governor, turbo). With --measure also
    /// disk_standby:DISK (or disk_standby, every such disk): what a spinning disk costs, the
    /// kernel letting it stop against keeping it spinning; measured only when named here.
    #[arg(long, value_name = "ID,...", value_delimiter = ',')]
    pub only: Vec<String>,
    /// With --measure: leave these settings alone (ids as for --only).
    #[arg(
        long,
        value_name = "ID,...",
        value_delimiter = ',',
        requires = "measure"
    )]
    pub skip: Vec<String>,
    /// With --measure: which [[meter]] to read (its id) [default: the first].
    #[arg(long, value_name = "ID", requires = "measure")]
    pub meter: Option<String>,
    /// With --measure: measuring time of each phase, after the power settles.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "20s",
        value_parser = crate::parse::parse_duration_arg,
        allow_hyphen_values = true,
        requires = "measure"
    )]
    pub phase: Duration,
    /// With --measure: phases per setting, odd, 3 or more (A B A, A B A B A, ...).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 7,
        value_parser = crate::parse::parse_count,
        allow_hyphen_values = true,
        requires = "measure"
    )]
    pub phases: usize,
}
