//! Which power sources this machine offers (the configured meters, RAPL, hwmon, ...) and
//! why the others are unavailable.

use serde::Serialize;
use wattson_collectors::{SourceId, SysRoot};

/// Whether a power source works on this machine, and why not.
#[derive(Debug, Serialize)]
pub struct SourceState {
    pub source: String,
    pub available: bool,
    pub detail: String,
}

/// Which sources this machine offers and why the others are unavailable.
pub fn source_states(root: &SysRoot, config: &crate::config::Config) -> Vec<SourceState> {
    let mut out = Vec::new();
    for m in &config.meters {
        out.push(SourceState {
            source: SourceId::meter(&m.id).to_string(),
            available: m.port.exists(),
            detail: if m.port.exists() {
                format!("{} on {}", m.protocol, m.port.display())
            } else {
                format!("{} is not present (unplugged?)", m.port.display())
            },
        });
    }
    if config.meters.is_empty() {
        out.push(SourceState {
            source: "meter".into(),
            available: false,
            detail: "no [[meter]] configured: wall power is not measured".into(),
        });
    }
    let cpu =
        wattson_collectors::cpu::CpuCollector::new(root.clone()).with_devfs(&config.host.devfs);
    for (part, state) in cpu.availability() {
        let ok = if part == "frequency" && cpu.frequency_is_nominal() {
            wattson_collectors::cpu::NOMINAL_FREQUENCY
        } else {
            "ok"
        };
        out.push(SourceState {
            source: format!("{} {part}", SourceId::Cpu),
            available: state.is_ok(),
            detail: state.map_or_else(ToString::to_string, |()| ok.into()),
        });
    }
    match wattson_collectors::power::rapl::RaplCollector::new(root) {
        Ok(_) => out.push(SourceState {
            source: SourceId::Rapl.to_string(),
            available: true,
            detail: "powercap zones readable".into(),
        }),
        Err(e) => out.push(SourceState {
            source: SourceId::Rapl.to_string(),
            available: false,
            detail: e.to_string(),
        }),
    }
    if config.power.gpu {
        let state = wattson_collectors::power::nvml::NvmlCollector::new();
        out.push(SourceState {
            source: SourceId::Gpu.to_string(),
            available: state.is_ok(),
            detail: state.map_or_else(|e| e.to_string(), |_| "NVML loaded".into()),
        });
    }
    if !config.power.ipmi {
        out.push(SourceState {
            source: SourceId::Ipmi.to_string(),
            available: false,
            detail: "off ([power] ipmi = true reads the BMC's DCMI power reading)".into(),
        });
    }
    for u in &config.ups {
        out.push(SourceState {
            source: SourceId::ups(&u.name).to_string(),
            available: true,
            detail: format!(
                "upsd {}:{} (shared: feeds several machines; never added to the wall figure)",
                u.host, u.port
            ),
        });
    }
    let services = wattson_collectors::cgroup::availability(root);
    out.push(SourceState {
        source: wattson_collectors::cgroup::SOURCE.to_string(),
        available: config.services.enabled && services.is_ok(),
        detail: match (config.services.enabled, services) {
            (false, _) => "off ([services] enabled = true records CPU time per service)".into(),
            (true, Ok(dir)) => format!("cgroup v2 at {}", dir.display()),
            (true, Err(why)) => why.to_string(),
        },
    });
    match wattson_collectors::power::hwmon::HwmonCollector::new(root) {
        Ok(_) => out.push(SourceState {
            source: SourceId::Hwmon.to_string(),
            available: true,
            detail: "power sensors found".into(),
        }),
        Err(e) => out.push(SourceState {
            source: SourceId::Hwmon.to_string(),
            available: false,
            detail: e.to_string(),
        }),
    }
    out
}
