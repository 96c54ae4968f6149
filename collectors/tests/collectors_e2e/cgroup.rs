//! The cgroup v2 CPU-time collector against fixture trees: a Debian host with Docker, nested
//! slices, a cgroup v1 host, 10/100/1,000 groups, groups that come and go, counter resets,
//! unreadable files and hostile names.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wattson_collectors::cgroup::fixture::{FixtureTree, raw_name};
use wattson_collectors::cgroup::{self, CgroupCollector, CgroupOptions};
use wattson_collectors::{Action, Collector, Metric, Sample, SysRoot};

struct Host {
    _dir: tempfile::TempDir,
    tree: FixtureTree,
    root: SysRoot,
    clock_us: Arc<AtomicU64>,
}

impl Host {
    fn v2() -> Host {
        // In memory where the machine has it: the churn test makes 10,000 directories.
        let dir = tempfile::Builder::new()
            .tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .unwrap();
        let sys = dir.path().join("sys");
        let tree = FixtureTree::v2(&sys).unwrap();
        let root = SysRoot::new(&sys, dir.path().join("proc"));
        Host {
            _dir: dir,
            tree,
            root,
            clock_us: Arc::new(AtomicU64::new(5_000_000)),
        }
    }

    fn collector(&self, top: usize) -> CgroupCollector {
        let us = Arc::clone(&self.clock_us);
        CgroupCollector::with_clock(
            &self.root,
            CgroupOptions {
                top,
                docker_root: None,
            },
            Box::new(move || Duration::from_micros(us.load(Ordering::SeqCst))),
        )
        .unwrap()
    }

    fn advance(&self, secs: u64) {
        self.clock_us.fetch_add(secs * 1_000_000, Ordering::SeqCst);
    }
}

fn value(samples: &[Sample], channel: &str) -> Option<f64> {
    samples
        .iter()
        .find(|s| s.channel == channel)
        .inspect(|s| assert_eq!(s.metric, Metric::CgroupCpu))
        .map(|s| s.value)
}

fn close(got: Option<f64>, want: f64) {
    let got = got.unwrap_or(f64::NAN);
    assert!((got - want).abs() < 1e-9, "got {got}, want {want}");
}

#[test]
fn a_debian_docker_host_is_grouped_as_services_containers_sessions_and_machines() {
    let h = Host::v2();
    let id = "4f1c2a9b7d3e".repeat(5) + "abcd";
    let groups = h.tree.debian_docker_host(&id).unwrap();
    let mut c = h.collector(10);
    assert!(
        c.poll(1).unwrap().is_empty(),
        "the first poll is a baseline"
    );
    // 10 s: jellyfin half a CPU, the container a quarter, the user 0.1, the VM 0.05, and
    // 0.5 s in the kernel (root only).
    let rates = [5.0, 0.0, 0.0, 2.5, 1.0, 0.5];
    for (g, secs) in groups.iter().zip(rates) {
        h.tree.set_usage(g, (secs * 1e6) as u64).unwrap();
    }
    h.tree.set_root_usage(9_500_000).unwrap();
    h.advance(10);
    let s = c.poll(2).unwrap();
    close(value(&s, "service:jellyfin.service"), 5.0);
    close(value(&s, "container:docker 4f1c2a9b7d3e"), 2.5);
    close(value(&s, "session:user-1000"), 1.0);
    close(value(&s, "machine:qemu-1-homeassistant"), 0.5);
    close(value(&s, cgroup::REST), 0.5);
    close(value(&s, cgroup::OTHER), 0.0);
    close(value(&s, cgroup::TOTAL), 9.5);
    close(value(&s, cgroup::ELAPSED), 10.0);
    assert_eq!(
        value(&s, "service:sshd.service"),
        None,
        "idle groups are not listed"
    );
    assert!(s.iter().all(|x| x.ts_ms == 2));
}

#[test]
fn nested_slices_are_walked_to_their_services() {
    let h = Host::v2();
    for g in [
        "system.slice/media.slice/jellyfin.service",
        "system.slice/media.slice/deep.slice/sonarr.service",
        "workload.slice/backup.service",
    ] {
        h.tree.add(g).unwrap();
    }
    let mut c = h.collector(10);
    c.poll(1).unwrap();
    h.tree
        .set_usage(
            "system.slice/media.slice/deep.slice/sonarr.service",
            3_000_000,
        )
        .unwrap();
    h.tree
        .set_usage("workload.slice/backup.service", 1_000_000)
        .unwrap();
    h.tree.set_root_usage(4_000_000).unwrap();
    h.advance(10);
    let s = c.poll(2).unwrap();
    close(value(&s, "service:sonarr.service"), 3.0);
    close(value(&s, "service:backup.service"), 1.0);
    close(value(&s, cgroup::REST), 0.0);
}

#[test]
fn a_cgroup_v1_host_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    FixtureTree::v1(&dir.path().join("sys")).unwrap();
    let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
    let err = CgroupCollector::new(&root, CgroupOptions::default()).unwrap_err();
    assert_eq!(err.action(), Action::Stop);
    let text = err.to_string();
    assert!(text.contains("cgroup v1"), "{text}");
    assert!(text.contains("cpu,cpuacct"), "{text}");
    assert!(
        text.contains("systemd.unified_cgroup_hierarchy=1"),
        "{text}"
    );
    let none = SysRoot::new(dir.path().join("nowhere"), dir.path());
    let err = CgroupCollector::new(&none, CgroupOptions::default()).unwrap_err();
    assert!(err.to_string().contains("no cgroup file system"), "{err}");
}

#[test]
fn ten_hundred_and_a_thousand_groups_are_bounded_to_the_top_and_other() {
    for n in [10usize, 100, 1_000] {
        let h = Host::v2();
        let groups = h.tree.many_services(n).unwrap();
        let mut c = h.collector(10);
        c.poll(1).unwrap();
        let mut total = 0;
        for (i, g) in groups.iter().enumerate() {
            let us = 1_000 * (i as u64 + 1);
            h.tree.set_usage(g, us).unwrap();
            total += us;
        }
        h.tree.set_root_usage(total).unwrap();
        h.advance(10);
        let s = c.poll(2).unwrap();
        let named: Vec<&Sample> = s.iter().filter(|x| x.channel.contains(':')).collect();
        assert_eq!(named.len(), n.min(10), "{n} groups");
        assert_eq!(named[0].channel, format!("service:svc-{}.service", n - 1));
        let listed: f64 = named.iter().map(|x| x.value).sum::<f64>()
            + value(&s, cgroup::OTHER).unwrap()
            + value(&s, cgroup::REST).unwrap();
        assert!(
            (listed - total as f64 / 1e6).abs() < 1e-6,
            "{n}: shares sum to the total"
        );
        close(value(&s, cgroup::GROUPS), n as f64);
    }
}

#[test]
fn groups_that_appear_and_vanish_count_once_and_are_forgotten() {
    let h = Host::v2();
    h.tree.add("system.slice/a.service").unwrap();
    let mut c = h.collector(10);
    c.poll(1).unwrap();
    // A group created mid-interval: all of its time is in this interval.
    h.tree.add("system.slice/new.service").unwrap();
    h.tree
        .set_usage("system.slice/new.service", 2_000_000)
        .unwrap();
    h.tree.set_root_usage(2_000_000).unwrap();
    h.advance(10);
    let s = c.poll(2).unwrap();
    close(value(&s, "service:new.service"), 2.0);
    // It ends: it is no longer listed nor tracked; its last time is in the rest.
    h.tree.remove("system.slice/new.service").unwrap();
    h.tree.set_root_usage(3_000_000).unwrap();
    h.advance(10);
    let s = c.poll(3).unwrap();
    assert_eq!(value(&s, "service:new.service"), None);
    close(value(&s, cgroup::REST), 1.0);
    assert_eq!(c.tracked_groups(), 1);

    // 10,000 short-lived groups: what is held stays at the groups alive now.
    let mut root = 3_000_000;
    for round in 0..100 {
        for i in 0..100 {
            let g = format!("system.slice/job-{round}-{i}.service");
            h.tree.add_with_usage(&g, 1_000).unwrap();
            root += 1_000;
        }
        h.tree.set_root_usage(root).unwrap();
        h.advance(10);
        let s = c.poll(10 + round).unwrap();
        assert!(s.len() <= 10 + 5, "bounded output");
        assert!(c.tracked_groups() <= 101, "tracked {}", c.tracked_groups());
        assert!(c.kept_open() <= 101, "files held open {}", c.kept_open());
        for i in 0..100 {
            h.tree
                .remove(format!("system.slice/job-{round}-{i}.service"))
                .unwrap();
        }
    }
    h.advance(10);
    c.poll(1_000).unwrap();
    assert_eq!(c.tracked_groups(), 1);
    assert_eq!(c.kept_open(), 1, "the handles of groups gone are closed");
}

#[test]
fn a_counter_that_goes_back_is_a_group_created_again() {
    let h = Host::v2();
    h.tree.add("system.slice/nightly.service").unwrap();
    h.tree
        .set_usage("system.slice/nightly.service", 50_000_000)
        .unwrap();
    h.tree.set_root_usage(50_000_000).unwrap();
    let mut c = h.collector(10);
    c.poll(1).unwrap();
    // Restarted: its new cgroup has used 1 s.
    h.tree
        .set_usage("system.slice/nightly.service", 1_000_000)
        .unwrap();
    h.tree.set_root_usage(51_000_000).unwrap();
    h.advance(10);
    let s = c.poll(2).unwrap();
    close(value(&s, "service:nightly.service"), 1.0);
    // A counter claiming more than the whole host used is capped at the host's time.
    h.tree
        .set_usage("system.slice/nightly.service", 900_000_000)
        .unwrap();
    h.tree.set_root_usage(53_000_000).unwrap();
    h.advance(10);
    let s = c.poll(3).unwrap();
    close(value(&s, "service:nightly.service"), 2.0);
    close(value(&s, cgroup::TOTAL), 2.0);
}

#[test]
fn unreadable_and_corrupt_files_leave_the_group_out_without_failing() {
    let h = Host::v2();
    h.tree.add("system.slice/ok.service").unwrap();
    h.tree.add("system.slice/garbage.service").unwrap();
    h.tree.add("system.slice/dir.service").unwrap();
    let mut c = h.collector(10);
    c.poll(1).unwrap();
    h.tree
        .set_stat_bytes(
            "system.slice/garbage.service",
            b"usage_usec \xff\xfe\nnonsense",
        )
        .unwrap();
    std::fs::remove_file(h.tree.root().join("system.slice/dir.service/cpu.stat")).unwrap();
    std::fs::create_dir(h.tree.root().join("system.slice/dir.service/cpu.stat")).unwrap();
    h.tree
        .set_usage("system.slice/ok.service", 1_000_000)
        .unwrap();
    h.tree.set_stat_bytes("", b"not a stat file").unwrap();
    h.advance(10);
    let s = c.poll(2).unwrap();
    close(value(&s, "service:ok.service"), 1.0);
    // Without the root's counter the total is what the groups used.
    close(value(&s, cgroup::TOTAL), 1.0);
    assert_eq!(value(&s, "service:garbage.service"), None);

    // The hierarchy gone (unmounted): stop, naming it.
    std::fs::remove_dir_all(h.tree.root()).unwrap();
    let err = c.poll(3).unwrap_err();
    assert_eq!(err.action(), Action::Stop);
    assert!(err.to_string().contains("fs/cgroup"), "{err}");
}

#[test]
fn hostile_names_are_bounded_printable_and_never_panic() {
    let h = Host::v2();
    let long = format!("system.slice/{}.service", "x".repeat(240));
    let newline = "system.slice/evil\nname\u{1b}[2J.service".to_owned();
    let mut bytes = b"system.slice/caf\xe9-\xff.service".to_vec();
    let non_utf8 = raw_name(&bytes).to_owned();
    h.tree.add(&long).unwrap();
    h.tree.add(&newline).unwrap();
    h.tree.add(&non_utf8).unwrap();
    bytes.clear();
    h.tree
        .add("machine.slice/machine-\\x0a\\xzz.scope")
        .unwrap();
    h.tree.add("system.slice/docker-\n.scope").unwrap();
    let mut c = h.collector(10);
    c.poll(1).unwrap();
    for g in [long.as_str(), newline.as_str()] {
        h.tree.set_usage(g, 1_000_000).unwrap();
    }
    h.tree.set_usage(&non_utf8, 1_000_000).unwrap();
    h.tree
        .set_usage("machine.slice/machine-\\x0a\\xzz.scope", 1_000_000)
        .unwrap();
    h.tree
        .set_usage("system.slice/docker-\n.scope", 1_000_000)
        .unwrap();
    h.tree.set_root_usage(5_000_000).unwrap();
    h.advance(10);
    let s = c.poll(2).unwrap();
    let named: Vec<&str> = s
        .iter()
        .filter(|x| x.channel.contains(':'))
        .map(|x| x.channel.as_str())
        .collect();
    assert_eq!(named.len(), 5, "{named:?}");
    for n in &named {
        assert!(!n.chars().any(char::is_control), "{n:?}");
        assert!(
            n.chars().count() <= 10 + cgroup::names::MAX_NAME_CHARS,
            "{n:?}"
        );
    }
    assert!(
        named.contains(&"service:evil?name?[2J.service"),
        "{named:?}"
    );
    assert!(
        named.contains(&"service:caf\u{fffd}-\u{fffd}.service"),
        "{named:?}"
    );
    assert!(named.contains(&"machine:?\\xzz"), "{named:?}");
}
