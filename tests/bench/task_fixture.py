#!/usr/bin/env python3
"""A fixture process table for tests/bench/selfcost.sh (TASKS=N, IRQS=M), kept changing.

Usage: task_fixture.py ROOT TASKS IRQS CPUS

Writes, under ROOT (to become entries of <procfs>): TASKS processes with one thread each,
pids 1000 up, each with its `comm`, its cgroup v2 line (spread over 100 services in
system.slice, with every tenth process in a user session) and `task/<tid>/schedstat`; and
`interrupts` with CPUS columns, IRQS device lines (MSI vectors named as NICs, NVMe queues
and xhci) and the LOC, RES, CAL and TLB lines. Then creates ROOT/ready and, every 10 s until
killed, advances the timeslice count of every process (a few for most, hundreds for the
busiest) and every interrupt line, rewriting each file whole (the daemon opens them anew for
each scan).
"""

import os
import random
import sys
import time


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def schedstat(count):
    return f"{count * 20000} {count * 3000} {count}\n"


def interrupts(cpus, irqs, counts):
    lines = ["           " + "".join(f"CPU{c:<8}" for c in range(cpus)).rstrip()]
    kinds = ["eth0-TxRx", "nvme0q", "xhci_hcd", "ahci"]
    for i in range(irqs):
        cols = "".join(f"{counts[i] if c == 0 else 0:>11}" for c in range(cpus))
        name = f"{kinds[i % len(kinds)]}-{i // len(kinds)}"
        lines.append(f"{i + 24:>4}:{cols}  IR-PCI-MSI {524288 + i}-edge      {name}")
    for j, (kind, text) in enumerate([("LOC", "Local timer interrupts"),
                                       ("RES", "Rescheduling interrupts"),
                                       ("CAL", "Function call interrupts"),
                                       ("TLB", "TLB shootdowns")]):
        cols = "".join(f"{counts[irqs + j]:>11}" for _ in range(cpus))
        lines.append(f"{kind:>4}:{cols}   {text}")
    return "\n".join(lines) + "\n"


def main():
    root, tasks, irqs, cpus = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(tasks)
    pids = list(range(1000, 1000 + tasks))
    counts = {}
    for i, pid in enumerate(pids):
        d = os.path.join(root, str(pid))
        os.makedirs(os.path.join(d, "task", str(pid)), exist_ok=True)
        write(os.path.join(d, "comm"), f"worker-{i}\n")
        if i % 10 == 9:
            group = f"/user.slice/user-1000.slice/session-{i % 7}.scope"
        else:
            group = f"/system.slice/svc-{i % 100}.service"
        write(os.path.join(d, "cgroup"), f"0::{group}\n")
        counts[pid] = rng.randrange(1000, 100000)
        write(os.path.join(d, "task", str(pid), "schedstat"), schedstat(counts[pid]))
    irq_counts = [rng.randrange(1000, 1000000) for _ in range(irqs + 4)]
    write(os.path.join(root, "interrupts"), interrupts(cpus, irqs, irq_counts))
    write(os.path.join(root, "ready"), "")
    # The busiest tenth wake often, the rest now and then.
    rates = {pid: (rng.randrange(50, 500) if rng.random() < 0.1 else rng.randrange(0, 5))
             for pid in pids}
    while True:
        time.sleep(10)
        for pid in pids:
            counts[pid] += rates[pid] * 10
            write(os.path.join(root, str(pid), "task", str(pid), "schedstat"),
                  schedstat(counts[pid]))
        irq_counts = [c + rng.randrange(0, 200) for c in irq_counts]
        write(os.path.join(root, "interrupts"), interrupts(cpus, irqs, irq_counts))


if __name__ == "__main__":
    main()
