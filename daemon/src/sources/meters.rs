//! Wiring of the serial meter collectors into the daemon: config sections to collectors
//! (meters naming the same port share one line), and simulated meters on pseudo-terminals.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread::JoinHandle;

use serialport::SerialPort as _;
use wattson_collectors::SysRoot;
use wattson_collectors::cpu::stat::{CpuTimes, parse_stat};
use wattson_collectors::meter::faults::FaultScript;
use wattson_collectors::meter::line::LineFormat;
use wattson_collectors::meter::{MeterCollector, MeterReading, Protocol, SimulatedMeter};

use super::SourcesError;
use crate::config::MeterConfig;
use crate::sources::simulated_power::{ModelState, PowerModel};

/// Build one collector per serial line ([`crate::config::serial_lines`]): meters that name
/// the same port are polled in turn. The config was validated by the same rules, so this
/// fails only for a config that was not.
pub fn build_collectors(
    meters: &[MeterConfig],
) -> Result<Vec<(MeterCollector, std::time::Duration)>, SourcesError> {
    crate::config::serial_lines(meters)?
        .into_iter()
        .map(|line| {
            let id = line.meter.id.clone();
            let collector = MeterCollector::new(line.meter)
                .map_err(|source| SourcesError::Meter { id, source })?;
            Ok((collector, line.interval))
        })
        .collect()
}

/// Busy CPUs of this machine (1.5 = one and a half CPUs busy), from `/proc/stat` deltas, or
/// of one process, from `/proc/<pid>/stat` CPU time over wall time.
pub struct BusyCpus {
    path: PathBuf,
    prev: Option<CpuTimes>,
    last: f64,
    process: Option<(PathBuf, Option<(f64, std::time::Instant)>)>,
    /// Read the process's on-CPU plus run-queue time (its `task/` directory) instead.
    demand: bool,
    /// With `demand`, only the threads whose name starts with this.
    threads: Option<String>,
}

impl BusyCpus {
    pub fn new(root: &SysRoot) -> BusyCpus {
        BusyCpus {
            path: root.proc_path("stat"),
            prev: None,
            last: 0.0,
            process: None,
            demand: false,
            threads: None,
        }
    }

    /// Follow one process's CPU time instead of the whole machine.
    pub fn for_process(root: &SysRoot, pid: u32) -> BusyCpus {
        BusyCpus {
            process: Some((root.proc_path(format!("{pid}/stat")), None)),
            ..BusyCpus::new(root)
        }
    }

    /// Follow the CPUs one process asks for: the time its threads ran plus the time they
    /// waited in a run queue, so other load on the machine does not slow what is followed.
    /// With `threads`, only the threads whose name starts with it.
    pub fn for_process_demand(root: &SysRoot, pid: u32, threads: Option<String>) -> BusyCpus {
        BusyCpus {
            process: Some((root.proc_path(format!("{pid}/task")), None)),
            demand: true,
            threads,
            ..BusyCpus::new(root)
        }
    }

    /// Seconds on a CPU or waiting for one, summed over the threads in `task_dir` (those
    /// named `prefix...` when given).
    fn demand_seconds(task_dir: &std::path::Path, prefix: Option<&str>) -> Option<f64> {
        let mut ns = 0.0;
        for entry in std::fs::read_dir(task_dir).ok()?.flatten() {
            if let Some(p) = prefix {
                let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
                if !comm.starts_with(p) {
                    continue;
                }
            }
            let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
                continue;
            };
            let mut f = text.split_whitespace().map(str::parse::<f64>);
            if let (Some(Ok(run)), Some(Ok(wait))) = (f.next(), f.next()) {
                ns += run + wait;
            }
        }
        Some(ns / 1e9)
    }

    fn process_sample(&mut self) -> f64 {
        let demand = self.demand;
        let prefix = self.threads.clone();
        let Some((path, prev)) = &mut self.process else {
            return 0.0;
        };
        // Fields after the parenthesised command: state is field 3, utime 14, stime 15 (ticks).
        let cpu_s = if demand {
            Self::demand_seconds(path, prefix.as_deref())
        } else {
            std::fs::read_to_string(&*path).ok().and_then(|t| {
                let rest = t.rsplit_once(')')?.1;
                let f: Vec<&str> = rest.split_whitespace().collect();
                let ticks: f64 =
                    f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
                let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
                    .ok()
                    .flatten()
                    .unwrap_or(100) as f64;
                Some(ticks / hz)
            })
        };
        let now = std::time::Instant::now();
        let Some(cpu) = cpu_s else {
            // The process is gone: it asks for no CPU (not what it asked for last).
            self.last = 0.0;
            return 0.0;
        };
        if let Some((prev_cpu, prev_t)) = *prev {
            let wall = now.duration_since(prev_t).as_secs_f64();
            if wall > 0.05 {
                self.last = ((cpu - prev_cpu) / wall).max(0.0);
                *prev = Some((cpu, now));
            }
        } else {
            *prev = Some((cpu, now));
        }
        self.last
    }

    /// Busy CPUs since the previous call (0 on the first call or when unreadable).
    pub fn sample(&mut self) -> f64 {
        if self.process.is_some() {
            return self.process_sample();
        }
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return self.last;
        };
        let mut total = None;
        let mut cpus = 0usize;
        let _ = parse_stat(&text, |cpu, times| match cpu {
            None => total = Some(times),
            Some(_) => cpus += 1,
        });
        let Some(now) = total else { return self.last };
        if let Some(prev) = &self.prev
            && let Some(shares) = now.shares_since(prev)
        {
            self.last = shares.busy * cpus.max(1) as f64;
        }
        self.prev = Some(now);
        self.last
    }
}

/// A simulated meter serving on a new pseudo-terminal, in a background thread.
pub struct SimHandle {
    /// The path of the pseudo-terminal a reader opens (like /dev/ttyUSB0).
    pub path: PathBuf,
    stop: Arc<AtomicBool>,
    follow: Arc<AtomicU32>,
    thread: Option<JoinHandle<()>>,
}

impl SimHandle {
    /// With `follow_cpu`, follow process `pid`'s CPU time from now on (a test that starts
    /// the meter before the process whose loops it measures: a `wattson sweep` reading it
    /// through a daemon); with `follow_demand`, the CPUs its threads (those of
    /// `follow_threads`) ask for. Once the process has exited it asks for none.
    pub fn follow_process(&self, pid: u32) {
        self.follow.store(pid, Ordering::Relaxed);
    }

    /// Stop serving and close the pseudo-terminal (the reader sees the device vanish).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A pseudo-terminal pair (master, slave) in raw mode whose descriptors close on exec, so
/// a process that `wattson demo`, a sweep's workload or a test starts while a simulated
/// meter runs does not inherit the meter's line (`TTYPort::pair` opens both without
/// `O_CLOEXEC`).
pub fn pty_pair() -> std::io::Result<(serialport::TTYPort, serialport::TTYPort)> {
    let (master, slave) = serialport::TTYPort::pair()?;
    set_cloexec(&master)?;
    set_cloexec(&slave)?;
    Ok((master, slave))
}

#[allow(unsafe_code)]
fn set_cloexec(port: &impl std::os::fd::AsRawFd) -> std::io::Result<()> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    // SAFETY: the descriptor belongs to `port`, which outlives this borrow; serialport
    // implements `AsRawFd` but not `AsFd`.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(port.as_raw_fd()) };
    let flags = FdFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFD)?);
    fcntl(fd, FcntlArg::F_SETFD(flags | FdFlag::FD_CLOEXEC))?;
    Ok(())
}

/// Start a simulated meter of `protocol` whose watts follow `model` (and this machine's
/// CPU load when the model says so, read from `root`).
pub fn simulate(
    protocol: Protocol,
    addresses: &[u8],
    model: PowerModel,
    root: &SysRoot,
    seed: u64,
) -> Result<SimHandle, SourcesError> {
    simulate_with(
        protocol,
        addresses,
        model,
        root,
        seed,
        None,
        FaultScript::default(),
    )
}

/// As [`simulate`], with a line format for `protocol = line`, playing `faults` over the
/// frames it sends.
pub fn simulate_with(
    protocol: Protocol,
    addresses: &[u8],
    model: PowerModel,
    root: &SysRoot,
    seed: u64,
    line: Option<LineFormat>,
    faults: FaultScript,
) -> Result<SimHandle, SourcesError> {
    let (master, slave) = pty_pair().map_err(SourcesError::Pty)?;
    let path = slave
        .name()
        .map(PathBuf::from)
        .ok_or(SourcesError::PtyName)?;
    let follow = model.follow_cpu;
    let follow_pid = model.follow_pid;
    let follow_demand = model.follow_demand;
    let follow_threads = model.follow_threads.clone();
    let threads_later = follow_threads.clone();
    let volts = model.volts;
    let pf = model.power_factor;
    let mut energy_wh = model.energy_wh;
    let mut state = ModelState::new(model, seed);
    let mut busy = match follow_pid {
        Some(pid) if follow_demand => BusyCpus::for_process_demand(root, pid, follow_threads),
        Some(pid) => BusyCpus::for_process(root, pid),
        None => BusyCpus::new(root),
    };
    let follow_later = Arc::new(AtomicU32::new(0));
    let (later, mut following, root_later) = (follow_later.clone(), 0u32, root.clone());
    let mut last_ms: Option<i64> = None;
    let mut last_busy_ms = 0i64;
    let mut busy_now = 0.0;
    let reading_model = Box::new(move |now_ms: i64, _address: u8| {
        // Several addresses may ask within one poll round: sample the load at most every 500 ms.
        if follow && now_ms - last_busy_ms >= 200 {
            let pid = later.load(Ordering::Relaxed);
            if pid != following {
                following = pid;
                busy = if follow_demand {
                    BusyCpus::for_process_demand(&root_later, pid, threads_later.clone())
                } else {
                    BusyCpus::for_process(&root_later, pid)
                };
            }
            busy_now = busy.sample();
            last_busy_ms = now_ms;
        }
        let w = state.watts(now_ms, busy_now);
        if let Some(prev) = last_ms {
            energy_wh += w * ((now_ms - prev).max(0) as f64) / 3_600_000.0;
        }
        last_ms = Some(now_ms);
        let amps = w / (volts * pf);
        MeterReading {
            power_w: Some(w),
            voltage_v: Some(volts),
            current_a: Some(amps),
            power_factor: Some(pf),
            frequency_hz: Some(50.0),
            energy_wh: Some(energy_wh.floor()),
        }
    });
    let mut sim = SimulatedMeter::new(protocol, addresses, reading_model).with_faults(faults);
    if let Some(f) = line {
        sim = sim.with_line_format(f);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let thread = std::thread::Builder::new()
        .name(format!("sim-{}", protocol.as_str()))
        .spawn(move || {
            // Keep the slave side open so the device exists until we stop.
            let _slave = slave;
            if let Err(e) = sim.serve(master, &stop2) {
                tracing::debug!(
                    "simulated meter stopped: {}",
                    wattson_collectors::ErrorChain(&e)
                );
            }
        })
        .map_err(SourcesError::SimThread)?;
    Ok(SimHandle {
        path,
        stop,
        follow: follow_later,
        thread: Some(thread),
    })
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd as _;

    use super::*;

    /// `fcntl(F_GETFD)` of a descriptor: whether it closes on exec.
    #[allow(unsafe_code)]
    fn closes_on_exec(port: &serialport::TTYPort) -> bool {
        use nix::fcntl::{FcntlArg, FdFlag, fcntl};
        // SAFETY: `port` owns the descriptor for the duration of this call.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(port.as_raw_fd()) };
        FdFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFD).unwrap())
            .contains(FdFlag::FD_CLOEXEC)
    }

    /// Regression: the simulated meter's pty descriptors were inherited by every process
    /// started while it ran (a sweep's workload, a child in a test).
    #[test]
    fn simulated_meter_pty_descriptors_close_on_exec() {
        let (master, slave) = pty_pair().unwrap();
        assert!(closes_on_exec(&master), "master inherited across exec");
        assert!(closes_on_exec(&slave), "slave inherited across exec");
    }

    /// The same seen from a child: no descriptor of the running simulated meter's line is
    /// open in a process started while it runs.
    #[test]
    fn a_child_started_while_a_meter_is_simulated_does_not_hold_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let sim = simulate(Protocol::Pzem004t, &[1], PowerModel::default(), &root, 1).unwrap();
        let out = std::process::Command::new("sh")
            .args(["-c", "for f in /proc/$$/fd/*; do readlink \"$f\"; done"])
            .output()
            .unwrap();
        let fds = String::from_utf8_lossy(&out.stdout);
        let line = sim.path.display().to_string();
        assert!(
            !fds.lines().any(|l| l == line),
            "the child holds {line}: {fds}"
        );
    }
}
