//! Which package C-state residency counters a CPU has, from `/proc/cpuinfo` (vendor, family,
//! model, the `hypervisor` flag) and Intel's per-model table as turbostat keeps it
//! (tools/power/x86/turbostat/turbostat.c: `turbostat_pdata`, `supported_cstates`,
//! `*_pkg_cstate_limits`; model numbers from arch/x86/include/asm/intel-family.h).
//!
//! The residency MSRs count at the TSC's rate (Intel SDM vol. 4): PC2 0x60D, PC3 0x3F8,
//! PC6 0x3F9, PC7 0x3FA, PC8 0x630, PC9 0x631, PC10 0x632; the TSC is 0x10. Which of them a
//! model has differs (Alder Lake has no PC7 or PC9, servers stop at PC6), and a read of an
//! absent one fails with EIO, so the table decides what is read and EIO drops the rest.

use serde::Serialize;

use crate::CollectError;
use crate::sysroot::{SysRoot, read_trimmed};

/// `IA32_TIME_STAMP_COUNTER`.
pub const MSR_TSC: u64 = 0x10;
/// `MSR_PKG_CST_CONFIG_CONTROL`: bits 3:0 the deepest package C-state the firmware allows,
/// bit 15 the lock.
pub const MSR_PKG_CST_CONFIG_CONTROL: u64 = 0xE2;
/// `MSR_ATOM_PKG_C6_RESIDENCY` (Silvermont): PC6 lives where PC7 is on the big cores.
const MSR_ATOM_PKG_C6: u64 = 0x3FA;

/// A package C-state with a residency counter, shallowest first (the order compares depth).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum PcState {
    Pc2,
    Pc3,
    Pc6,
    Pc7,
    Pc8,
    Pc9,
    Pc10,
}

impl PcState {
    /// Every state, shallowest first.
    pub const ALL: [PcState; 7] = [
        PcState::Pc2,
        PcState::Pc3,
        PcState::Pc6,
        PcState::Pc7,
        PcState::Pc8,
        PcState::Pc9,
        PcState::Pc10,
    ];

    /// `PC2` .. `PC10`, as channels and reports name them.
    pub fn name(self) -> &'static str {
        match self {
            PcState::Pc2 => "PC2",
            PcState::Pc3 => "PC3",
            PcState::Pc6 => "PC6",
            PcState::Pc7 => "PC7",
            PcState::Pc8 => "PC8",
            PcState::Pc9 => "PC9",
            PcState::Pc10 => "PC10",
        }
    }

    /// Inverse of [`PcState::name`].
    pub fn parse(name: &str) -> Option<PcState> {
        PcState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The depth number (2 for PC2, 10 for PC10).
    pub fn depth(self) -> u8 {
        match self {
            PcState::Pc2 => 2,
            PcState::Pc3 => 3,
            PcState::Pc6 => 6,
            PcState::Pc7 => 7,
            PcState::Pc8 => 8,
            PcState::Pc9 => 9,
            PcState::Pc10 => 10,
        }
    }

    /// The residency MSR on the big-core models.
    pub fn msr(self) -> u64 {
        match self {
            PcState::Pc2 => 0x60D,
            PcState::Pc3 => 0x3F8,
            PcState::Pc6 => 0x3F9,
            PcState::Pc7 => 0x3FA,
            PcState::Pc8 => 0x630,
            PcState::Pc9 => 0x631,
            PcState::Pc10 => 0x632,
        }
    }
}

/// The CPU vendor, from `vendor_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Vendor {
    Intel,
    Amd,
    Hygon,
    Other(String),
}

/// What `/proc/cpuinfo` says about the first CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpuIdentity {
    pub vendor: Vendor,
    /// `cpu family`, decimal as cpuinfo prints it.
    pub family: Option<u32>,
    /// `model`, decimal as cpuinfo prints it.
    pub model: Option<u32>,
    pub model_name: Option<String>,
    /// The `hypervisor` flag: a virtual machine, whose package belongs to the host.
    pub hypervisor: bool,
}

impl CpuIdentity {
    /// Read the first processor block of `proc/cpuinfo` under `root`.
    pub fn read(root: &SysRoot) -> Result<CpuIdentity, CollectError> {
        let path = root.proc_path("cpuinfo");
        let text = std::fs::read_to_string(&path).map_err(|e| CollectError::io(&path, e))?;
        Ok(Self::parse(&text))
    }

    /// Parse the first processor block of cpuinfo text.
    pub fn parse(text: &str) -> CpuIdentity {
        let mut fields = std::collections::BTreeMap::new();
        for line in text.lines() {
            if line.trim().is_empty() && !fields.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                fields
                    .entry(k.trim().to_owned())
                    .or_insert(v.trim().to_owned());
            }
        }
        let vendor = match fields.get("vendor_id").map(String::as_str) {
            Some("GenuineIntel") => Vendor::Intel,
            Some("AuthenticAMD") => Vendor::Amd,
            Some("HygonGenuine") => Vendor::Hygon,
            other => Vendor::Other(other.unwrap_or("unknown").to_owned()),
        };
        let num = |k: &str| fields.get(k).and_then(|v| v.parse::<u32>().ok());
        CpuIdentity {
            vendor,
            family: num("cpu family"),
            model: num("model"),
            model_name: fields.get("model name").cloned(),
            hypervisor: fields
                .get("flags")
                .is_some_and(|f| f.split_whitespace().any(|x| x == "hypervisor")),
        }
    }

    /// `family 6 model 0x97`, for messages.
    pub fn describe(&self) -> String {
        let name = self.model_name.as_deref().unwrap_or("unknown model");
        match (self.family, self.model) {
            (Some(f), Some(m)) => format!("{name} (family {f} model {m:#04x})"),
            _ => format!("{name} (no family/model in cpuinfo)"),
        }
    }
}

/// How `MSR_PKG_CST_CONFIG_CONTROL` bits 3:0 encode the firmware's package C-state limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitEncoding {
    Nehalem,
    SandyBridge,
    Haswell,
    SkylakeX,
    /// A model whose encoding wattson does not decode.
    Unknown,
}

/// The deepest package C-state the firmware allows, as `MSR_PKG_CST_CONFIG_CONTROL` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackageLimit {
    /// `PC0`, `PC2`, `PC6n` ... or `unlimited`.
    pub label: &'static str,
    /// The depth number (0 for PC0, 6 for PC6n/PC6r, 7 for PC7s); `None` when unlimited.
    pub depth: Option<u8>,
    /// Bit 15: the firmware locked the limit (only a firmware setting changes it).
    pub locked: bool,
}

impl LimitEncoding {
    /// Decode the register (turbostat's `*_pkg_cstate_limits` tables).
    pub fn decode(self, raw: u64) -> Option<PackageLimit> {
        const RSV: Option<(&str, Option<u8>)> = None;
        let pc = |label, depth| Some((label, Some(depth)));
        let unl = Some(("unlimited", None));
        let table: [Option<(&'static str, Option<u8>)>; 9] = match self {
            LimitEncoding::Nehalem => [
                pc("PC0", 0),
                pc("PC1", 1),
                pc("PC3", 3),
                pc("PC6", 6),
                pc("PC7", 7),
                RSV,
                RSV,
                unl,
                RSV,
            ],
            LimitEncoding::SandyBridge => [
                pc("PC0", 0),
                pc("PC2", 2),
                pc("PC6n", 6),
                pc("PC6r", 6),
                pc("PC7", 7),
                pc("PC7s", 7),
                RSV,
                unl,
                RSV,
            ],
            LimitEncoding::Haswell => [
                pc("PC0", 0),
                pc("PC2", 2),
                pc("PC3", 3),
                pc("PC6", 6),
                pc("PC7", 7),
                pc("PC7s", 7),
                pc("PC8", 8),
                pc("PC9", 9),
                unl,
            ],
            LimitEncoding::SkylakeX => [
                pc("PC0", 0),
                pc("PC2", 2),
                pc("PC6n", 6),
                pc("PC6r", 6),
                RSV,
                RSV,
                RSV,
                unl,
                RSV,
            ],
            LimitEncoding::Unknown => return None,
        };
        let (label, depth) = (*table.get((raw & 0xF) as usize)?)?;
        Some(PackageLimit {
            label,
            depth,
            locked: raw & (1 << 15) != 0,
        })
    }
}

/// One Intel platform's package counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntelPlatform {
    /// turbostat's name for the feature set (`adl`, `skl`, ...).
    pub platform: &'static str,
    /// The package C-states with residency counters, shallowest first.
    pub states: Vec<PcState>,
    /// Where each state's counter is (differs from [`PcState::msr`] on Silvermont).
    pub msrs: Vec<u64>,
    pub limit: LimitEncoding,
}

/// The package counters of an Intel family 6 `model`, from turbostat's table; `None` for a
/// model it does not list.
pub fn intel_platform(model: u32) -> Option<IntelPlatform> {
    use LimitEncoding::{Haswell, Nehalem, SandyBridge, SkylakeX, Unknown};
    use PcState::{Pc2, Pc3, Pc6, Pc7, Pc8, Pc9, Pc10};
    let all_to_10: &[PcState] = &[Pc2, Pc3, Pc6, Pc7, Pc8, Pc9, Pc10];
    let to_7: &[PcState] = &[Pc2, Pc3, Pc6, Pc7];
    let (platform, states, limit): (&str, &[PcState], LimitEncoding) = match model {
        0x1E | 0x1F | 0x1A | 0x25 | 0x2C => ("nhm", &[Pc3, Pc6], Nehalem),
        0x2E | 0x2F => ("nhx", &[Pc3, Pc6], Nehalem),
        0x2A | 0x3A => ("snb", to_7, SandyBridge),
        0x2D | 0x3E => ("snx", to_7, SandyBridge),
        0x3C | 0x46 | 0x47 => ("hsw", to_7, Haswell),
        0x3F => ("hsx", to_7, Haswell),
        0x45 | 0x3D => ("hswl", all_to_10, Haswell),
        0x4F | 0x56 => ("bdx", &[Pc2, Pc3, Pc6], Haswell),
        0x4E | 0x5E | 0x8E | 0x9E | 0xA5 | 0xA6 => ("skl", all_to_10, Haswell),
        0x55 => ("skx", &[Pc2, Pc6], SkylakeX),
        0x6A | 0x6C => ("icx", &[Pc2, Pc6], Unknown),
        0x8F | 0xCF | 0xAD | 0xAE => ("spr", &[Pc2, Pc6], SkylakeX),
        0x66 | 0x7E | 0x9D | 0xA7 | 0x8C | 0x8D | 0x8A => ("cnl", all_to_10, Haswell),
        0x97 | 0x9A | 0xB7 | 0xBA | 0xBF | 0xAC | 0xAA | 0xC5 | 0xB5 | 0xC6 | 0xBE => {
            ("adl", &[Pc2, Pc3, Pc6, Pc8, Pc10], Haswell)
        }
        0xBD | 0xCC => ("lnl", &[Pc2, Pc6, Pc10], Haswell),
        0x37 => ("slv", &[Pc6], Unknown),
        0x4D => ("slvd", &[Pc3, Pc6], Unknown),
        0x4C => ("amt", &[Pc3, Pc6], Unknown),
        0x5C | 0x7A => ("gmt", all_to_10, Unknown),
        0x5F => ("gmtd", &[Pc2, Pc6], Unknown),
        0x96 | 0x9C => ("tmt", &[Pc2, Pc3, Pc6, Pc7, Pc8, Pc9, Pc10], Unknown),
        0xAF | 0xDD => ("srf", &[Pc2, Pc6], SkylakeX),
        0x57 | 0x85 => ("knl", &[Pc3, Pc6], Unknown),
        // tmtd (0x86) and grr (0xB6) list no package counters.
        _ => return None,
    };
    let atom_pc6 = matches!(platform, "slv" | "slvd");
    let msrs = states
        .iter()
        .map(|s| match s {
            PcState::Pc6 if atom_pc6 => MSR_ATOM_PKG_C6,
            s => s.msr(),
        })
        .collect();
    Some(IntelPlatform {
        platform,
        states: states.to_vec(),
        msrs,
        limit,
    })
}

/// Read `path` trimmed, `None` when absent or empty.
pub(crate) fn read_opt(path: &std::path::Path) -> Option<String> {
    read_trimmed(path).ok().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_gives_vendor_model_and_the_hypervisor_flag() {
        let text = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 151\n\
                    model name\t: 12th Gen Intel(R) Core(TM) i3-12100\nflags\t\t: fpu msr\n\n\
                    processor\t: 1\nvendor_id\t: AuthenticAMD\n";
        let id = CpuIdentity::parse(text);
        assert_eq!(id.vendor, Vendor::Intel);
        assert_eq!((id.family, id.model), (Some(6), Some(0x97)));
        assert!(!id.hypervisor);
        assert!(id.describe().contains("model 0x97"), "{}", id.describe());
        let vm = CpuIdentity::parse("vendor_id : AuthenticAMD\nflags : fpu hypervisor lm\n");
        assert_eq!(vm.vendor, Vendor::Amd);
        assert!(vm.hypervisor);
    }

    #[test]
    fn alder_lake_has_no_pc7_or_pc9_and_skylake_reaches_pc10() {
        let adl = intel_platform(0x97).unwrap();
        assert_eq!(adl.platform, "adl");
        assert_eq!(
            adl.states,
            [
                PcState::Pc2,
                PcState::Pc3,
                PcState::Pc6,
                PcState::Pc8,
                PcState::Pc10
            ]
        );
        assert_eq!(adl.msrs, [0x60D, 0x3F8, 0x3F9, 0x630, 0x632]);
        assert_eq!(intel_platform(0x9E).unwrap().states.len(), 7);
        // Silvermont keeps PC6 at 0x3FA.
        assert_eq!(intel_platform(0x37).unwrap().msrs, [0x3FA]);
        assert_eq!(intel_platform(0x86), None);
        assert_eq!(intel_platform(0x01), None);
    }

    #[test]
    fn the_firmware_limit_decodes_per_family() {
        let l = LimitEncoding::Haswell.decode(0x8000 | 2).unwrap();
        assert_eq!((l.label, l.depth, l.locked), ("PC3", Some(3), true));
        let l = LimitEncoding::Haswell.decode(8).unwrap();
        assert_eq!((l.label, l.depth, l.locked), ("unlimited", None, false));
        assert_eq!(LimitEncoding::SandyBridge.decode(3).unwrap().label, "PC6r");
        assert_eq!(LimitEncoding::SandyBridge.decode(6), None);
        assert_eq!(LimitEncoding::Unknown.decode(0), None);
        assert_eq!(LimitEncoding::Haswell.decode(0xF), None);
    }

    #[test]
    fn state_names_round_trip_in_depth_order() {
        for s in PcState::ALL {
            assert_eq!(PcState::parse(s.name()), Some(s));
        }
        assert!(PcState::Pc10 > PcState::Pc6);
        assert_eq!(PcState::parse("C6"), None);
    }
}
