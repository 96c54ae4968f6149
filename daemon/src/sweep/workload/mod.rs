//! Controlled workload loops for sweeps: n threads, each pinned to one logical CPU, running a
//! compute-bound (`spin`), memory-bound (`memory`) or spin-wait (`pause`) loop while the wall
//! meter measures what they cost. Each loop counts its operations, so a sweep can report
//! operations per second and joules per operation next to watts.
//!
//! Units: operations are loop steps of the kind named by [`LoopKind`] (one xorshift plus
//! multiply-add step, one dependent cache-missing load, one CPU pause hint); times are
//! [`Duration`](std::time::Duration)s; rates are operations per second. CPUs are the kernel's
//! logical CPU numbers (`sched_setaffinity(2)`); the memory loop's buffer is sized from the
//! sysfs cache tree under the configured sysfs root (see [`ChaseBuffer`]).
//!
//! Running them (one thread per CPU, pinned where it can be, counted, stopped and joined) is
//! `loop_set`'s ([`LoopSet`]).

mod chase;
mod cpus;
mod kernels;
mod loop_set;

use std::fmt;
use std::io;
use std::path::Path;
use std::str::FromStr;

pub use chase::{
    CACHE_MULTIPLE, ChaseBuffer, DEFAULT_CHASE_BYTES, MAX_CHASE_BYTES, MIN_CHASE_BYTES,
    chase_bytes_for, last_level_cache_bytes,
};
pub use cpus::{allowed_cpus, cpu_order, order_cpus};
pub use loop_set::{LoopSet, LoopStats};

/// Errors from preparing or starting workload loops.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A kind name that is none of `spin`, `memory`, `pause`.
    #[error("unknown workload kind {given:?}; valid kinds: spin, memory, pause")]
    UnknownKind { given: String },
    /// A memory-loop buffer size that cannot hold a chase or is over the cap.
    #[error("memory loop buffer of {bytes} bytes is out of range (8 to {MAX_CHASE_BYTES} bytes)")]
    ChaseSize { bytes: usize },
    /// The OS refused to start a loop thread (out of threads or memory).
    #[error("starting the {kind} loop thread for CPU {cpu}")]
    Spawn {
        kind: LoopKind,
        cpu: usize,
        #[source]
        source: io::Error,
    },
}

/// What each loop thread does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoopKind {
    /// Compute-bound: integer and floating-point work in registers; one op = one step.
    Spin,
    /// Memory-bound: a dependent pointer chase through a buffer several times the last-level
    /// cache; one op = one load.
    Memory,
    /// A spin-wait on the CPU's pause hint; one op = one hint.
    Pause,
}

impl LoopKind {
    /// Every kind, in the order sweeps run them.
    pub const ALL: [LoopKind; 3] = [LoopKind::Spin, LoopKind::Memory, LoopKind::Pause];

    /// The name used on the command line, in config and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            LoopKind::Spin => "spin",
            LoopKind::Memory => "memory",
            LoopKind::Pause => "pause",
        }
    }
}

impl fmt::Display for LoopKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for LoopKind {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<LoopKind, WorkloadError> {
        LoopKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| WorkloadError::UnknownKind {
                given: s.to_owned(),
            })
    }
}

/// A loop kind with what it needs prepared: for `memory`, the chase buffer, which is built
/// once (it takes a while: one random swap per entry) and shared by every level of a sweep.
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct Workload {
    kind: LoopKind,
    chase: Option<ChaseBuffer>,
}

impl Workload {
    /// Prepares `kind` for this machine; `sys_root` is the sysfs root from config (`/sys` in
    /// production), read for the last-level cache size when `kind` is `memory`.
    pub fn prepare(kind: LoopKind, sys_root: &Path) -> Result<Workload, WorkloadError> {
        let chase = match kind {
            LoopKind::Memory => Some(ChaseBuffer::for_machine(sys_root)?),
            LoopKind::Spin | LoopKind::Pause => None,
        };
        Ok(Workload { kind, chase })
    }

    /// Prepares `kind` with a memory buffer of `chase_bytes` bytes (ignored unless `kind` is
    /// `memory`).
    pub fn with_chase_bytes(kind: LoopKind, chase_bytes: usize) -> Result<Workload, WorkloadError> {
        let chase = match kind {
            LoopKind::Memory => Some(ChaseBuffer::with_bytes(chase_bytes, 0x5eed_cafe_f00d_d00d)?),
            LoopKind::Spin | LoopKind::Pause => None,
        };
        Ok(Workload { kind, chase })
    }

    /// The loop kind.
    pub fn kind(&self) -> LoopKind {
        self.kind
    }

    /// The memory loop's buffer size in bytes; `None` for the other kinds.
    pub fn chase_bytes(&self) -> Option<usize> {
        self.chase.as_ref().map(ChaseBuffer::bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in LoopKind::ALL {
            assert_eq!(kind.as_str().parse::<LoopKind>().unwrap(), kind);
            assert_eq!(kind.to_string(), kind.as_str());
        }
        assert_eq!(LoopKind::Memory.as_str(), "memory");
    }

    #[test]
    fn unknown_kind_error_lists_the_valid_ones() {
        let err = "Spin".parse::<LoopKind>().unwrap_err().to_string();
        assert!(err.contains("\"Spin\""), "{err}");
        for kind in ["spin", "memory", "pause"] {
            assert!(err.contains(kind), "{err} lacks {kind}");
        }
    }

    #[test]
    fn memory_workload_is_sized_from_the_sysfs_root() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("devices/system/cpu/cpu0/cache/index3");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("level"), "3\n").unwrap();
        std::fs::write(dir.join("type"), "Unified\n").unwrap();
        std::fs::write(dir.join("size"), "3M\n").unwrap();
        let w = Workload::prepare(LoopKind::Memory, tmp.path()).unwrap();
        assert_eq!(w.chase_bytes(), Some(12 << 20));
        let w = Workload::prepare(LoopKind::Spin, tmp.path()).unwrap();
        assert_eq!(w.chase_bytes(), None);
    }
}
