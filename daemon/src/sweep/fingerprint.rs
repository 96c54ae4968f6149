//! A host's hardware/software fingerprint, stored with each swept configuration so reports
//! can compare machines and settings.

use serde::{Deserialize, Serialize};
use wattson_collectors::SysRoot;
use wattson_collectors::cpu::topology::{CpuFacts, cpu_facts};

/// What a configuration was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub host: String,
    pub cpu: CpuFacts,
    /// `MemTotal` from /proc/meminfo, bytes.
    pub memory_bytes: Option<u64>,
    /// /proc/sys/kernel/osrelease.
    pub kernel: Option<String>,
    /// The meter the sweep read, e.g. `pzem004t wall on /dev/ttyUSB0`.
    pub meter: String,
}

/// Gather the fingerprint; what cannot be read is `None`.
pub fn gather(root: &SysRoot, host: &str, meter: &str) -> Fingerprint {
    let memory_bytes = std::fs::read_to_string(root.proc_path("meminfo"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map(|kb| kb * 1024)
        });
    let kernel = std::fs::read_to_string(root.proc_path("sys/kernel/osrelease"))
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    Fingerprint {
        host: host.to_owned(),
        cpu: cpu_facts(root),
        memory_bytes,
        kernel,
        meter: meter.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_of_the_kvm_fixture() {
        let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../collectors/tests/fixtures/kvm-amd-epyc-haltpoll");
        let root = SysRoot::new(base.join("sys"), base.join("proc"));
        let f = gather(&root, "basket", "pzem004t wall");
        assert_eq!(f.cpu.logical_cpus, 2);
        assert_eq!(f.cpu.cpuidle_driver.as_deref(), Some("haltpoll"));
        assert!(
            f.cpu.model_name.as_deref().unwrap_or("").contains("EPYC"),
            "{:?}",
            f.cpu.model_name
        );
        assert_eq!(f.meter, "pzem004t wall");
    }
}
