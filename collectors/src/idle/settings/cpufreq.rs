//! cpufreq (Documentation/admin-guide/pm/cpufreq.rst, intel_pstate.rst, amd-pstate.rst):
//! the scaling governor and the energy-performance preference of every CPU, shown as one
//! setting each (written to every CPU), and turbo (`intel_pstate/no_turbo`, else
//! `cpufreq/boost`).

use std::path::PathBuf;

use super::{Setting, SettingKind, list_entries, read, sorted_entries};
use crate::sysroot::SysRoot;

/// EPP values from most to least power.
const EPP_ORDER: [&str; 5] = [
    "performance",
    "balance_performance",
    "default",
    "balance_power",
    "power",
];

/// One file per CPU and what each holds.
fn per_cpu(root: &SysRoot, file: &str) -> Vec<(PathBuf, String)> {
    sorted_entries(&root.sys_path("devices/system/cpu"))
        .into_iter()
        .filter(|(n, _)| {
            n.strip_prefix("cpu") // kernel name
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|(_, dir)| {
            let path = dir.join("cpufreq").join(file);
            let value = read(&path)?;
            Some((path, value))
        })
        .collect()
}

/// `powersave` on every CPU, or `powersave on 6 CPUs, performance on 2`.
fn summarise(values: &[(PathBuf, String)]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for (_, v) in values {
        match counts.iter_mut().find(|(x, _)| x == v) {
            Some(c) => c.1 += 1,
            None => counts.push((v, 1)),
        }
    }
    if counts.len() == 1 {
        return counts[0].0.to_owned();
    }
    counts
        .iter()
        .map(|(v, n)| format!("{v} on {n} CPUs"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn settings(root: &SysRoot) -> Vec<Setting> {
    let mut out = Vec::new();
    let cpu = root.sys_path("devices/system/cpu");
    let first_dir = per_cpu(root, "scaling_driver")
        .first()
        .and_then(|(p, _)| p.parent().map(std::path::Path::to_owned));
    let driver = per_cpu(root, "scaling_driver")
        .first()
        .map(|(_, d)| d.clone());
    let governors = per_cpu(root, "scaling_governor");
    if !governors.is_empty() {
        let available = first_dir
            .as_ref()
            .and_then(|d| read(&d.join("scaling_available_governors")))
            .map(|t| list_entries(&t))
            .unwrap_or_default();
        let lower = (available.iter().any(|a| a == "powersave")
            && governors.iter().any(|(_, g)| g != "powersave"))
        .then(|| "powersave".to_owned());
        let intel = driver.as_deref().is_some_and(|d| d.contains("pstate"));
        out.push(Setting {
            kind: SettingKind::CpufreqGovernor,
            id: SettingKind::CpufreqGovernor.as_str().to_owned(),
            label: format!(
                "cpufreq governor ({})",
                driver.as_deref().unwrap_or("unknown driver")
            ),
            current: summarise(&governors),
            available,
            note: lower.as_ref().map(|_| {
                if intel {
                    "with intel_pstate/amd-pstate, powersave still scales up under load".to_owned()
                } else {
                    "with this driver powersave holds the lowest frequency under load too: \
                     schedutil is the usual everyday choice"
                        .to_owned()
                }
            }),
            lower,
            files: governors.iter().map(|(p, _)| p.clone()).collect(),
        });
    }
    let epp = per_cpu(root, "energy_performance_preference");
    if !epp.is_empty() {
        let available = first_dir
            .as_ref()
            .and_then(|d| read(&d.join("energy_performance_available_preferences")))
            .map(|t| list_entries(&t))
            .unwrap_or_default();
        let deepest = epp
            .iter()
            .filter_map(|(_, v)| EPP_ORDER.iter().position(|o| o == v))
            .min();
        let lower = deepest.and_then(|i| {
            let target = if i < 3 { "balance_power" } else { "power" };
            (i < 4 && available.iter().any(|a| a == target)).then(|| target.to_owned())
        });
        out.push(Setting {
            kind: SettingKind::Epp,
            id: SettingKind::Epp.as_str().to_owned(),
            label: "energy-performance preference".to_owned(),
            current: summarise(&epp),
            available,
            lower,
            files: epp.iter().map(|(p, _)| p.clone()).collect(),
            note: None,
        });
    }
    let no_turbo = cpu.join("intel_pstate/no_turbo");
    let boost = cpu.join("cpufreq/boost");
    if let Some(v) = read(&no_turbo) {
        out.push(Setting {
            kind: SettingKind::Turbo,
            id: SettingKind::Turbo.as_str().to_owned(),
            label: "turbo (intel_pstate no_turbo)".to_owned(),
            lower: (v == "0").then(|| "1".to_owned()),
            current: v,
            available: vec!["0".to_owned(), "1".to_owned()],
            files: vec![no_turbo],
            note: Some("1 turns turbo off: slower under load, rarely lower at idle".to_owned()),
        });
    } else if let Some(v) = read(&boost) {
        out.push(Setting {
            kind: SettingKind::Turbo,
            id: SettingKind::Turbo.as_str().to_owned(),
            label: "turbo (cpufreq boost)".to_owned(),
            lower: (v == "1").then(|| "0".to_owned()),
            current: v,
            available: vec!["0".to_owned(), "1".to_owned()],
            files: vec![boost],
            note: Some("0 turns boost off: slower under load, rarely lower at idle".to_owned()),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_values_are_counted() {
        let v = |s: &str| (PathBuf::new(), s.to_owned());
        assert_eq!(summarise(&[v("powersave"), v("powersave")]), "powersave");
        assert_eq!(
            summarise(&[v("powersave"), v("performance"), v("powersave")]),
            "powersave on 2 CPUs, performance on 1 CPUs"
        );
    }
}
