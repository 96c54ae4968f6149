//! A fixture procfs for wake-ups, for tests: processes with their `comm`, `cgroup` and each
//! thread's `task/<tid>/schedstat`, and an `interrupts` file, whose counts the caller moves
//! between reads. Files are written whole and renamed, so a reader never sees half of one.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Per-CPU columns of the fixture's `interrupts` (counts go on CPU0).
pub const CPUS: usize = 4;

/// Processes and interrupts under a procfs root.
#[derive(Debug, Clone)]
pub struct FixtureProc {
    root: PathBuf,
}

impl FixtureProc {
    /// The procfs root `proc` (created where missing; existing files are kept).
    pub fn new(proc: &Path) -> std::io::Result<FixtureProc> {
        std::fs::create_dir_all(proc)?;
        Ok(FixtureProc {
            root: proc.to_owned(),
        })
    }

    /// A process `pid` named `comm` in the cgroup v2 group `cgroup` (`/system.slice/x.service`),
    /// with threads `tids` that have run 0 times.
    pub fn add_process(
        &self,
        pid: u32,
        comm: &str,
        cgroup: &str,
        tids: &[u32],
    ) -> std::io::Result<()> {
        let dir = self.root.join(pid.to_string());
        std::fs::create_dir_all(dir.join("task"))?;
        write(&dir.join("comm"), &format!("{comm}\n"))?;
        write(&dir.join("cgroup"), &format!("0::{cgroup}\n"))?;
        for &tid in tids {
            self.add_thread(pid, tid, 0)?;
        }
        Ok(())
    }

    /// A small home server's processes: jellyfin (threads 100 and 101) with an ffmpeg (120)
    /// in a sub-group of its service, sshd (200), and the kernel thread kthreadd (2) in the
    /// root group; every count 0.
    pub fn add_home_server(&self) -> std::io::Result<()> {
        self.add_process(
            100,
            "jellyfin",
            "/system.slice/jellyfin.service",
            &[100, 101],
        )?;
        self.add_process(
            120,
            "ffmpeg",
            "/system.slice/jellyfin.service/transcode",
            &[120],
        )?;
        self.add_process(200, "sshd", "/system.slice/sshd.service", &[200])?;
        self.add_process(2, "kthreadd", "/", &[2])
    }

    /// A thread `tid` of `pid` that has been given a CPU `count` times.
    pub fn add_thread(&self, pid: u32, tid: u32, count: u64) -> std::io::Result<()> {
        std::fs::create_dir_all(self.task(pid, tid))?;
        self.set_count(pid, tid, count)
    }

    /// Sets the times thread `tid` of `pid` has been given a CPU (schedstat's third field).
    pub fn set_count(&self, pid: u32, tid: u32, count: u64) -> std::io::Result<()> {
        // Run time and wait time, ns: plausible, never read.
        write(
            &self.task(pid, tid).join("schedstat"),
            &format!("{} {} {count}\n", count * 20_000, count * 1_000),
        )
    }

    /// Writes `interrupts`: `kernel` kinds (`LOC`, ...) and `devices` (IRQ, handler name),
    /// each with its count on CPU0 and 0 on the others, plus `ERR` and `MIS`.
    pub fn set_interrupts(
        &self,
        kernel: &[(&str, u64)],
        devices: &[(u32, &str, u64)],
    ) -> std::io::Result<()> {
        let mut text = String::from("    ");
        for cpu in 0..CPUS {
            let _ = write!(text, "      CPU{cpu}");
        }
        text.push('\n');
        let zeros = " ".to_owned() + &vec![format!("{:>10}", 0); CPUS - 1].join(" ");
        for (irq, name, count) in devices {
            let _ = writeln!(
                text,
                "{irq:>3}: {count:>10}{zeros}  IR-PCI-MSIX-0000:01:00.0 {irq}-edge      {name}"
            );
        }
        for (kind, count) in kernel {
            let description = match *kind {
                "LOC" => "Local timer interrupts",
                "RES" => "Rescheduling interrupts",
                "CAL" => "Function call interrupts",
                "TLB" => "TLB shootdowns",
                _ => "Other interrupts",
            };
            let _ = writeln!(text, "{kind}: {count:>10}{zeros}   {description}");
        }
        text.push_str("ERR:          0\nMIS:          0\n");
        write(&self.root.join("interrupts"), &text)
    }

    fn task(&self, pid: u32, tid: u32) -> PathBuf {
        self.root.join(format!("{pid}/task/{tid}"))
    }
}

fn write(path: &Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}
