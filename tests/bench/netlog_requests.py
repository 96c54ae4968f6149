#!/usr/bin/env python3
"""The requests a page made to one origin in a window, from Chromium's net log.

Usage: netlog_requests.py NETLOG ORIGIN T0 T1

NETLOG is the file of `--log-net-log`, read while the browser still writes it (the last line
may be half written); ORIGIN such as http://127.0.0.1:8080; T0 and T1 the window, Unix
seconds. A request is its URL_REQUEST_START_JOB event (one a request, redirects aside); an
event's wall-clock time is its `time` (monotonic ms) plus the log's timeTickOffset. The
browser writes the log in batches, so it is read again until it holds an event after T1,
within 30 s; without one it fails.

Prints: /live.json's count, /history.json's, /report.html's, and the other paths as
PATH=N,... (or "none").
"""
import json
import sys
import time


def count(path, origin, t0_ms, t1_ms):
    start_job, offset, last, counts = None, 0.0, 0.0, {}
    with open(path) as f:
        for line in f:
            line = line.rstrip().rstrip(",")
            if line.startswith('{"constants":'):
                constants = json.loads(line[len('{"constants":'):])
                start_job = constants["logEventTypes"]["URL_REQUEST_START_JOB"]
                offset = float(constants["timeTickOffset"])
                continue
            if not line.startswith("{") or start_job is None:
                continue
            try:
                e = json.loads(line)
            except ValueError:
                continue  # the last line, half written
            at = float(e.get("time", 0)) + offset
            last = max(last, at)
            url = e.get("params", {}).get("url", "")
            if e.get("type") == start_job and t0_ms <= at <= t1_ms and url.startswith(origin + "/"):
                p = url[len(origin):].split("?")[0]
                counts[p] = counts.get(p, 0) + 1
    return last, counts


def main():
    path, origin = sys.argv[1], sys.argv[2]
    t0_ms, t1_ms = float(sys.argv[3]) * 1000, float(sys.argv[4]) * 1000
    deadline = time.monotonic() + 30
    while True:
        last, counts = count(path, origin, t0_ms, t1_ms)
        if last > t1_ms or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if last <= t1_ms:
        sys.exit(f"{path}: the net log ends before the window does")
    print(counts.pop("/live.json", 0), counts.pop("/history.json", 0), counts.pop("/report.html", 0),
          ",".join(f"{p}={n}" for p, n in sorted(counts.items())) or "none")


if __name__ == "__main__":
    main()
