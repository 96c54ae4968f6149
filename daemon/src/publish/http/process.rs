//! The daemon's own cost for `/metrics`: CPU time from `getrusage(RUSAGE_SELF)` (s), memory
//! from `/proc/self/statm` (pages, as bytes), descriptors from `/proc/self/fd` and
//! `getrlimit(RLIMIT_NOFILE)`. Whatever cannot be read is left out.

use std::path::Path;

use nix::sys::resource::{Resource, UsageWho, getrlimit, getrusage};

/// One reading of the process' own figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessStats {
    /// User plus system CPU time, s.
    pub cpu_seconds: Option<f64>,
    /// Resident set, bytes.
    pub resident_bytes: Option<f64>,
    /// Virtual size, bytes.
    pub virtual_bytes: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
}

impl ProcessStats {
    pub fn read() -> ProcessStats {
        let own = Path::new(crate::config::PROC_SELF);
        let cpu_seconds = getrusage(UsageWho::RUSAGE_SELF).ok().map(|u| {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
            t(u.user_time()) + t(u.system_time())
        });
        let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .map_or(4096.0, |p| p as f64);
        let statm = std::fs::read_to_string(own.join("statm")).ok();
        let field = |i: usize| {
            statm
                .as_deref()
                .and_then(|s| s.split_whitespace().nth(i))
                .and_then(|v| v.parse::<f64>().ok())
                .map(|pages| pages * page)
        };
        ProcessStats {
            cpu_seconds,
            virtual_bytes: field(0),
            resident_bytes: field(1),
            open_fds: std::fs::read_dir(own.join("fd"))
                .ok()
                .map(|d| d.count() as f64),
            max_fds: getrlimit(Resource::RLIMIT_NOFILE)
                .ok()
                .map(|(soft, _)| soft as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_reads_its_own_cpu_time() {
        let s = ProcessStats::read();
        assert!(s.cpu_seconds.is_some_and(|c| c >= 0.0), "{s:?}");
        assert!(s.max_fds.is_some_and(|m| m >= 1.0), "{s:?}");
    }
}
