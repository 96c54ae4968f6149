#!/usr/bin/env python3
"""A fixture machine of N CPUs for tests/bench/selfcost.sh (CPUS=N), kept changing.

Usage: cpu_fixture.py ROOT N

Writes ROOT/cpu (to become <sysfs>/devices/system/cpu) and ROOT/stat (to become
<procfs>/stat): N online CPUs, each with a cpufreq policy (scaling_cur_freq in kHz), the
intel_idle states POLL, C1, C1E and C6 (name, desc, latency, residency, disable, usage, time
in microseconds) and a topology (one core each, one package); /proc/stat with the `cpu`
line, N `cpuN` lines and the usual trailing lines. Then creates ROOT/ready and, once a
second until killed, advances what the daemon reads (/proc/stat's ticks, every state's
usage and time, every CPU's frequency) as a machine idling with the odd busy second would,
in place (the daemon keeps these files open and reads them with pread, so a rename would
not be seen) and at fixed width, so a read never meets a shorter file.
"""

import os
import random
import sys
import time

STATES = [("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("C1", "MWAIT 0x00", 1, 1),
          ("C1E", "MWAIT 0x01", 2, 4), ("C6", "MWAIT 0x20", 170, 600)]
FREQS_KHZ = [1200000, 1600000, 2200000, 2800000, 3400000, 4100000]  # all 7 digits
USER_HZ = 100


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def main():
    root, n = sys.argv[1], int(sys.argv[2])
    rng = random.Random(n)
    cpu_dir = os.path.join(root, "cpu")
    cpus = "0" if n == 1 else f"0-{n - 1}"
    os.makedirs(os.path.join(cpu_dir, "cpuidle"), exist_ok=True)
    for name in ("online", "present", "possible"):
        write(os.path.join(cpu_dir, name), cpus + "\n")
    write(os.path.join(cpu_dir, "offline"), "\n")
    write(os.path.join(cpu_dir, "cpuidle", "current_driver"), "intel_idle\n")
    write(os.path.join(cpu_dir, "cpuidle", "current_governor_ro"), "menu\n")
    freq_fds, state_fds = [], []
    for c in range(n):
        d = os.path.join(cpu_dir, f"cpu{c}")
        os.makedirs(os.path.join(d, "topology"), exist_ok=True)
        write(os.path.join(d, "topology", "core_id"), f"{c}\n")
        write(os.path.join(d, "topology", "physical_package_id"), "0\n")
        write(os.path.join(d, "topology", "thread_siblings_list"), f"{c}\n")
        os.makedirs(os.path.join(d, "cpufreq"), exist_ok=True)
        for name, value in (("scaling_governor", "powersave"), ("scaling_driver", "intel_pstate"),
                            ("cpuinfo_min_freq", "800000"), ("cpuinfo_max_freq", "4100000"),
                            ("scaling_min_freq", "800000"), ("scaling_max_freq", "4100000")):
            write(os.path.join(d, "cpufreq", name), value + "\n")
        path = os.path.join(d, "cpufreq", "scaling_cur_freq")
        write(path, f"{FREQS_KHZ[0]}\n")
        freq_fds.append(os.open(path, os.O_WRONLY))
        for i, (name, desc, latency, residency) in enumerate(STATES):
            s = os.path.join(d, "cpuidle", f"state{i}")
            os.makedirs(s, exist_ok=True)
            for f, v in (("name", name), ("desc", desc), ("latency", latency),
                         ("residency", residency), ("disable", 0), ("default_status", "enabled"),
                         ("above", 0), ("below", 0), ("rejected", 0)):
                write(os.path.join(s, f), f"{v}\n")
            fds = []
            for f in ("usage", "time"):
                write(os.path.join(s, f), f"{0:012d}\n")
                fds.append(os.open(os.path.join(s, f), os.O_WRONLY))
            state_fds.append(fds)
    stat_path = os.path.join(root, "stat")
    ticks = [[0] * 10 for _ in range(n)]  # user nice system idle iowait irq softirq steal guest guest_nice
    usage = [0] * (n * len(STATES))
    times = [0] * (n * len(STATES))

    def stat_text():
        total = [sum(t[i] for t in ticks) for i in range(10)]
        line = lambda name, t: name + " " + " ".join(f"{v:012d}" for v in t) + "\n"
        return (line("cpu ", total) + "".join(line(f"cpu{c}", t) for c, t in enumerate(ticks))
                + "intr 0\nctxt 0\nbtime 1700000000\nprocesses 1\nprocs_running 1\n"
                  "procs_blocked 0\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n")

    write(stat_path, stat_text())
    stat_fd = os.open(stat_path, os.O_WRONLY)
    write(os.path.join(root, "ready"), "")
    while True:
        time.sleep(1.0 - time.time() % 1.0)
        for c in range(n):
            busy = rng.choice((0.02, 0.03, 0.05, 0.8)) if rng.random() < 0.1 else 0.02
            b = int(busy * USER_HZ)
            ticks[c][0] += b - b // 4
            ticks[c][2] += b // 4
            ticks[c][3] += USER_HZ - b
            idle_us = int((1.0 - busy) * 1e6)
            shares = (0.01, 0.09, 0.15, 0.75)
            for i, share in enumerate(shares):
                k = c * len(STATES) + i
                times[k] += int(idle_us * share)
                usage[k] += 1 + rng.randrange(40)
                os.pwrite(state_fds[k][0], f"{usage[k]:012d}\n".encode(), 0)
                os.pwrite(state_fds[k][1], f"{times[k]:012d}\n".encode(), 0)
            freq = FREQS_KHZ[rng.randrange(3, 6) if busy > 0.5 else rng.randrange(0, 3)]
            os.pwrite(freq_fds[c], f"{freq}\n".encode(), 0)
        os.pwrite(stat_fd, stat_text().encode(), 0)


if __name__ == "__main__":
    main()
