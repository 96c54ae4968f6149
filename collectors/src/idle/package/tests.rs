use super::*;
use crate::source::channel;
use crate::sysroot::SysRoot;

#[allow(
    clippy::disallowed_methods,
    reason = "a fixture file: never a database"
)]
fn write_msr(path: &Path, values: &[(u64, u64)]) {
    use std::os::unix::fs::FileExt as _;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(path)
        .unwrap();
    for &(msr, v) in values {
        f.write_all_at(&v.to_le_bytes(), msr * 8).unwrap();
    }
}

fn tree(cpuinfo: &str, packages: &[u32]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("proc")).unwrap();
    std::fs::write(dir.path().join("proc/cpuinfo"), cpuinfo).unwrap();
    let cpus = dir.path().join("sys/devices/system/cpu");
    std::fs::create_dir_all(&cpus).unwrap();
    std::fs::write(
        cpus.join("online"),
        format!("0-{}\n", packages.len().saturating_sub(1)),
    )
    .unwrap();
    for (cpu, pkg) in packages.iter().enumerate() {
        let t = cpus.join(format!("cpu{cpu}/topology"));
        std::fs::create_dir_all(&t).unwrap();
        std::fs::write(t.join("physical_package_id"), format!("{pkg}\n")).unwrap();
        std::fs::write(t.join("core_id"), format!("{cpu}\n")).unwrap();
        std::fs::create_dir_all(dir.path().join(format!("dev/cpu/{cpu}"))).unwrap();
    }
    dir
}

const ADL: &str = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 151\nmodel name\t: i3-12100\nflags\t: fpu msr\n";

#[test]
fn shares_are_counter_deltas_over_the_tsc_delta_per_package_and_overall() {
    let dir = tree(ADL, &[0, 1]);
    let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
    let dev = dir.path().join("dev");
    for cpu in [0, 1] {
        write_msr(
            &dev.join(format!("cpu/{cpu}/msr")),
            &[
                (0x10, 1000),
                (0x60D, 0),
                (0x3F9, 0),
                (0x632, 0),
                (0xE2, 0x8002),
            ],
        );
    }
    let mut r = PackageReader::discover(&root, &dev).unwrap();
    assert_eq!(r.states().len(), 5);
    assert_eq!(r.limit().unwrap().label, "PC3");
    // Package 0: 10 % PC2, 60 % PC10 of 1e6 TSC ticks; package 1: all PC6.
    write_msr(
        &dev.join("cpu/0/msr"),
        &[(0x10, 1_001_000), (0x60D, 100_000), (0x632, 600_000)],
    );
    write_msr(
        &dev.join("cpu/1/msr"),
        &[(0x10, 1_001_000), (0x3F9, 1_000_000)],
    );
    let mut got = std::collections::BTreeMap::new();
    r.read(|c, v| {
        got.insert(c.to_owned(), v);
    })
    .unwrap();
    assert_eq!(got["package0/PC2"], 0.1);
    assert_eq!(got["package0/PC10"], 0.6);
    assert_eq!(got["package1/PC6"], 1.0);
    assert_eq!(got[channel::all("PC6").as_str()], 0.5);
    assert_eq!(got[channel::all("PC10").as_str()], 0.3);
    assert!(
        !got.contains_key(channel::all("PC7").as_str()),
        "ADL has no PC7: {got:?}"
    );
}

#[test]
fn one_package_emits_only_the_all_channels_and_a_tsc_that_stood_still_emits_nothing() {
    let dir = tree(ADL, &[0]);
    let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
    let dev = dir.path().join("dev");
    write_msr(&dev.join("cpu/0/msr"), &[(0x10, 5), (0x632, 0)]);
    let mut r = PackageReader::discover(&root, &dev).unwrap();
    let mut n = 0;
    r.read(|_, _| n += 1).unwrap();
    assert_eq!(n, 0);
    write_msr(&dev.join("cpu/0/msr"), &[(0x10, 105), (0x632, 50)]);
    let mut got = Vec::new();
    r.read(|c, v| got.push((c.to_owned(), v))).unwrap();
    assert!(
        got.iter().all(|(c, _)| channel::all_part(c).is_some()),
        "{got:?}"
    );
    assert!(got.contains(&(channel::all("PC10"), 0.5)), "{got:?}");
}

#[test]
fn each_unavailable_case_says_why() {
    let amd = tree(
        "vendor_id : AuthenticAMD\nmodel name : AMD EPYC 7252\n",
        &[0],
    );
    let err = PackageReader::discover(
        &SysRoot::new(amd.path().join("sys"), amd.path().join("proc")),
        &amd.path().join("dev"),
    )
    .unwrap_err();
    assert!(err.reason.contains("AMD documents no package"), "{err}");

    let vm = tree(
        &format!("{ADL}flags : fpu hypervisor\n").replace("flags\t: fpu msr\n", ""),
        &[0],
    );
    let err = PackageReader::discover(
        &SysRoot::new(vm.path().join("sys"), vm.path().join("proc")),
        &vm.path().join("dev"),
    )
    .unwrap_err();
    assert!(err.reason.contains("virtual machine"), "{err}");

    let no_msr = tree(ADL, &[0]);
    std::fs::create_dir_all(
        no_msr
            .path()
            .join("sys")
            .join(CSTATE_PKG_PMU)
            .join("events"),
    )
    .unwrap();
    std::fs::write(
        no_msr
            .path()
            .join("sys")
            .join(CSTATE_PKG_PMU)
            .join("events/c6-residency"),
        "event=0x02\n",
    )
    .unwrap();
    let err = PackageReader::discover(
        &SysRoot::new(no_msr.path().join("sys"), no_msr.path().join("proc")),
        &no_msr.path().join("dev"),
    )
    .unwrap_err();
    assert!(err.reason.contains("modprobe msr"), "{err}");
    // The PMU lacks its `type`: named beside the MSRs, before anything is opened.
    assert!(
        err.reason.contains("nor the perf PMU") && err.reason.contains("cstate_pkg/type"),
        "{err}"
    );

    let odd = tree(
        "vendor_id : GenuineIntel\ncpu family : 6\nmodel : 1\nmodel name : Pentium Pro\n",
        &[0],
    );
    let err = PackageReader::discover(
        &SysRoot::new(odd.path().join("sys"), odd.path().join("proc")),
        &odd.path().join("dev"),
    )
    .unwrap_err();
    assert!(err.reason.contains("turbostat's table"), "{err}");
}
