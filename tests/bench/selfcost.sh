#!/usr/bin/env bash
# Daemon self-cost at 1 Hz: `wattson run` (simulated PZEM-004T meter + CPU collectors +
# SQLite + MQTT to a local mosquitto when installed) against collectd (cpu, cpufreq, csv or
# mqtt plugins at Interval 1), measured side by side over the same window.
#
# Usage: tests/bench/selfcost.sh [MINUTES]        (default 10; decimals such as 0.5 accepted)
# Env:   WATTSON_BIN  the binary to measure (default: $CARGO_TARGET_DIR or target, release
#                     if built, else debug)
#        WARMUP_S     seconds to let both settle before the window (default 30)
#        KEEP=1       keep the temp directory (databases, logs, configs)
#        SIMULATOR_BIN  the binary the simulated meter runs from (default: a copy of
#                     WATTSON_BIN in the temp directory; never WATTSON_BIN itself, whose pages
#                     it would share with the daemon and halve in the daemon's PSS)
#        FIXTURE_DIR  where the CPUS and CGROUPS fixture trees go (default /dev/shm, tmpfs
#                     like the sysfs and cgroupfs they stand in for; the temp directory when
#                     it is not writable)
#        CGROUPS=N    point [host] sysfs at a copy of /sys (symlinks) whose fs/cgroup is a
#                     fixture cgroup v2 tree of N services in nested slices, so that the
#                     services collector runs (every 10 s, its default) on a machine without
#                     cgroup v2; unset: the real /sys (on cgroup v1 the collector is off)
#        CPUS=N       point [host] sysfs and procfs at copies of /sys and /proc (symlinks)
#                     whose devices/system/cpu and stat are a fixture machine of N CPUs
#                     (cpufreq, the intel_idle states POLL C1 C1E C6, /proc/stat's N cpu
#                     lines: tests/bench/cpu_fixture.py), advanced every second by a writer
#                     that is not measured; unset: this machine's CPUs
#        HTTP=1       also serve [http] and let a real Prometheus (`prometheus` on the PATH,
#                     not measured) scrape /metrics every 15 s
#        METERS=N     N PZEM-004T meters on the one simulated bus (Modbus addresses 1..N), each
#                     polled at 1 s (default 1)
#        ALL=1        everything on: HTTP=1, CGROUPS=100 (unless set), [mqtt] when mosquitto
#                     is installed: the configuration the self-cost budget is stated for
#        REMOTE_WRITE=1  also run a second `wattson run`, the same but its own host name,
#                     database and simulated meter, with [prometheus] remote_write every 30 s
#                     (the default) to a real Prometheus receiver (not measured), measured
#                     side by side: what remote write adds is the difference of the two rows
#        METERLESS=1  also run a second `wattson run`, the same but its own host name and
#                     database and no meter: it estimates the wall live from a calibration over
#                     the CPUs' busy share, imported from a file that CALIBRATION_FILE_BIN (default
#                     the release `examples/calibration_file` beside WATTSON_BIN; `cargo build
#                     --release -p wattson --example calibration_file`) writes for its [host];
#                     measured side by side: what a machine the meter has moved on from costs
#        PAGE=1       also run a second `wattson run`, the same (HTTP=1 is implied) but its own
#                     host name, database, simulated meter and port, scraped by the same
#                     Prometheus, with its live page `/` kept open by a headless Chromium
#                     (`chromium`, `chromium-browser` or `google-chrome`; at nice 19, not
#                     measured: a browser runs elsewhere) from before the warm-up to the end;
#                     measured side by side: what a watched page costs is the difference of
#                     the two rows. The page's requests in the window are counted from the
#                     browser's net log (`--log-net-log`, tests/bench/netlog_requests.py)
#        REMOTE_WRITE_INTERVAL  its remote_write_interval instead of the default (e.g. 1s: thirty
#                     times the requests, to measure what one costs above the noise)
#        TASKS=N      point [host] procfs at a copy of /proc (symlinks) whose processes are N
#                     fixture processes (comm, cgroup, task/<tid>/schedstat, spread over 100
#                     services and some sessions) and whose interrupts file has IRQS device
#                     lines (default 100), advanced every 10 s by a writer that is not
#                     measured (tests/bench/task_fixture.py): the wake-ups scan's cost at that
#                     size; unset: /proc's own processes (none with CPUS=N)
#        NODE_EXPORTER=0  leave out Prometheus' node_exporter (default: measured beside
#                     wattson when `prometheus-node-exporter` or `node_exporter` is on the
#                     PATH, with only its cpu, cpufreq, hwmon, rapl and meminfo collectors,
#                     scraped every 1 s by a Prometheus that is not measured, since it reads
#                     on scrape)
#
# For each process, from /proc at the window's start and end:
#   CPU    utime+stime of /proc/<pid>/stat (clock ticks), and the sum of the first field of
#          /proc/<pid>/task/*/schedstat (ns on CPU, finer than ticks), as % of one core
#   cs/s   voluntary+nonvoluntary ctxt switches summed over /proc/<pid>/task/*/status, and
#          of them the voluntary ones (the process's own wake-ups)
#   memory at the end of the window: RssAnon of /proc/<pid>/status (private, anonymous: what
#          the page cache cannot reclaim, and what the budget is stated in), Pss, Pss_Anon
#          and Pss_File of /proc/<pid>/smaps_rollup (each page shared with N processes counted
#          1/N), and VmRSS for reference (its file-backed part is page cache)
#   faults minor and major page faults per second (fields 10 and 12 of /proc/<pid>/stat): a
#          page of the binary the kernel reclaimed between two uses is read back by a major
#          fault, and fresh heap pages are touched in by minor ones
# The simulated meter runs in its own process, from a copy of the binary so that it shares
# no page with the daemon's PSS, and is not counted. wattson prices what it stores under a
# time-of-use tariff in Europe/London, as a home server's would be.
set -euo pipefail

if [[ "${ALL:-0}" == 1 ]]; then
    HTTP=1
    CGROUPS="${CGROUPS:-100}"
fi
[[ "${PAGE:-0}" == 1 ]] && HTTP=1

MINUTES="${1:-10}"
WARMUP_S="${WARMUP_S:-30}"
WINDOW_S=$(awk -v m="$MINUTES" 'BEGIN { s = int(m * 60 + 0.5); if (s < 10) s = 10; print s }')

here="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$here/target}"
if [[ -z "${WATTSON_BIN:-}" ]]; then
    if [[ -x "$target/release/wattson" ]]; then
        WATTSON_BIN="$target/release/wattson"
    else
        WATTSON_BIN="$target/debug/wattson"
    fi
fi
[[ -x "$WATTSON_BIN" ]] || { echo "no wattson binary at $WATTSON_BIN: cargo build -p wattson" >&2; exit 1; }
browser=""
if [[ "${PAGE:-0}" == 1 ]]; then
    for b in chromium chromium-browser google-chrome; do
        browser="$(command -v "$b" || true)"
        [[ -n "$browser" ]] && break
    done
    [[ -n "$browser" ]] || { echo "PAGE=1 needs a headless browser: chromium, chromium-browser or google-chrome on the PATH (apt-get install chromium)" >&2; exit 1; }
fi

# Under CI=true (.ci/run's smoke) a peer or tool that is missing fails the run instead of
# being left out, so the smoke measures what the benchmark does.
if [[ "${CI:-}" == true ]]; then
    missing=()
    for tool in python3 mosquitto ss; do command -v "$tool" >/dev/null || missing+=("$tool"); done
    command -v collectd >/dev/null || [[ -x /usr/sbin/collectd ]] || missing+=(collectd)
    if [[ "${NODE_EXPORTER:-1}" == 1 ]]; then
        command -v prometheus-node-exporter >/dev/null || command -v node_exporter >/dev/null \
            || missing+=(prometheus-node-exporter)
        command -v prometheus >/dev/null || missing+=(prometheus)
    fi
    if ((${#missing[@]})); then
        echo "CI=true and missing: ${missing[*]} (apt-get install mosquitto collectd-core prometheus prometheus-node-exporter python3 iproute2; .ci/run does)" >&2
        exit 1
    fi
fi

tmp="$(mktemp -d /tmp/wattson-selfcost.XXXXXX)"
# The fixture trees stand in for sysfs, procfs and cgroupfs, which live in memory: on tmpfs
# (/dev/shm, where writable) their reads never wait for the page writeback of a disk file
# system, which a freshly written tree on /tmp makes the sampler do. The database stays in
# $tmp, on the disk.
fix="$(mktemp -d "${FIXTURE_DIR:-/dev/shm}/wattson-fixture.XXXXXX" 2>/dev/null || mktemp -d "$tmp/fixture.XXXXXX")"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    if [[ "${KEEP:-0}" != 1 ]]; then rm -rf "$tmp" "$fix"; else echo "kept $tmp and $fix" >&2; fi
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# The port a daemon serves [http] on: each listens on 127.0.0.1:0 and says where in its log, so
# that several selfcost.sh side by side never pick the same port (a port found free and bound
# later can be taken in between, as an outgoing connection's ephemeral port is).
served_port() { # log pid
    for _ in $(seq 300); do
        local port
        port="$(sed -n 's|.*http: serving.* on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$1" | head -n1)"
        [[ -n "$port" ]] && { echo "$port"; return; }
        kill -0 "$2" 2>/dev/null || break
        sleep 0.1
    done
    echo "wattson never said where it serves [http]: $(tail -n 5 "$1")" >&2
    return 1
}

# --- the simulated meter (not measured) --------------------------------------------------
METERS="${METERS:-1}"
# At nice 19: a real meter is a UART, not a process on the same CPUs whose wake-ups (one per
# request) would preempt the daemon being measured.
sim_bin="${SIMULATOR_BIN:-$tmp/wattson-simulator}"
[[ -n "${SIMULATOR_BIN:-}" ]] || cp "$WATTSON_BIN" "$sim_bin"
# One simulated meter for one daemon (its output in $tmp/NAME.out and .err): its pty in $sim_pty.
start_simulator() { # name
    nice -n 19 "$sim_bin" meter simulate --protocol pzem004t --follow-cpu --address "$(seq -s, 1 "$METERS")" \
        >"$tmp/$1.out" 2>"$tmp/$1.err" &
    pids+=($!)
    for _ in $(seq 100); do [[ -s "$tmp/$1.out" ]] && break; sleep 0.1; done
    sim_pty="$(head -n1 "$tmp/$1.out")"
    [[ -e "$sim_pty" ]] || { echo "simulator $1 gave no pty: $(cat "$tmp/$1.err")" >&2; exit 1; }
}
start_simulator sim # the first in pids: its being alive at the end is reported
pty="$sim_pty"

# --- mosquitto (not measured) ------------------------------------------------------------
mqtt_port=""
if command -v mosquitto >/dev/null; then
    mqtt_port="$(free_port)"
    cat >"$tmp/mosquitto.conf" <<EOF
listener $mqtt_port 127.0.0.1
allow_anonymous true
persistence false
log_dest stdout
log_type all
EOF
    # stdout, not a log file: mosquitto drops to its own user and cannot write into $tmp.
    mosquitto -c "$tmp/mosquitto.conf" >"$tmp/mosquitto.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 50); do ss -ltn "sport = :$mqtt_port" | grep -q LISTEN && break; sleep 0.1; done
fi

# --- fixture trees -----------------------------------------------------------------------
# shadow DIR REAL NAME...: DIR holds a symlink to every entry of REAL but the NAMEs (and, under
# /proc, but the processes), which the caller fills with fixtures.
shadow() {
    local dir=$1 real=$2 e name
    shift 2
    mkdir -p "$dir"
    for e in "$real"/*; do
        name="$(basename "$e")"
        [[ "$real" == /proc && "$name" =~ ^[0-9]+$ ]] && continue
        [[ " $* " == *" $name "* ]] || ln -s "$e" "$dir/"
    done
}
sysfs_line=""
procfs_line=""
if [[ -n "${CGROUPS:-}" || -n "${CPUS:-}" ]]; then
    shadow "$fix/sys" /sys ${CGROUPS:+fs} ${CPUS:+devices}
    sysfs_line="sysfs = \"$fix/sys\""
fi
if [[ -n "${CPUS:-}" ]]; then
    # A machine of CPUS CPUs, its counters advanced every second by a writer (not measured).
    [[ "$CPUS" =~ ^[1-9][0-9]*$ ]] || { echo "CPUS=$CPUS: give a number of CPUs, 1 or more" >&2; exit 1; }
    shadow "$fix/sys/devices" /sys/devices system
    shadow "$fix/sys/devices/system" /sys/devices/system cpu
    python3 "$here/tests/bench/cpu_fixture.py" "$fix/cpus" "$CPUS" 2>"$tmp/cpu_fixture.err" &
    pids+=($!)
    for _ in $(seq 300); do [[ -e "$fix/cpus/ready" ]] && break; sleep 0.1; done
    [[ -e "$fix/cpus/ready" ]] || { echo "the CPU fixture was not written: $(cat "$tmp/cpu_fixture.err")" >&2; exit 1; }
    ln -s "$fix/cpus/cpu" "$fix/sys/devices/system/cpu"
fi
if [[ -n "${TASKS:-}" ]]; then
    # TASKS processes and IRQS interrupt lines, their counts advanced every 10 s (not measured).
    [[ "$TASKS" =~ ^[1-9][0-9]*$ ]] || { echo "TASKS=$TASKS: give a number of processes, 1 or more" >&2; exit 1; }
    IRQS="${IRQS:-100}"
    python3 "$here/tests/bench/task_fixture.py" "$fix/tasks" "$TASKS" "$IRQS" "${CPUS:-$(nproc)}" \
        2>"$tmp/task_fixture.err" &
    pids+=($!)
    for _ in $(seq 600); do [[ -e "$fix/tasks/ready" ]] && break; sleep 0.1; done
    [[ -e "$fix/tasks/ready" ]] || { echo "the task fixture was not written: $(cat "$tmp/task_fixture.err")" >&2; exit 1; }
fi
if [[ -n "${CPUS:-}" || -n "${TASKS:-}" ]]; then
    # /proc's processes are never shadowed: with TASKS the fixture's are the only ones seen.
    shadow "$fix/proc" /proc ${CPUS:+stat} ${TASKS:+interrupts}
    [[ -n "${CPUS:-}" ]] && ln -s "$fix/cpus/stat" "$fix/proc/stat"
    if [[ -n "${TASKS:-}" ]]; then
        ln -s "$fix/tasks/interrupts" "$fix/proc/interrupts"
        for d in "$fix/tasks"/[0-9]*; do ln -s "$d" "$fix/proc/"; done
    fi
    procfs_line="procfs = \"$fix/proc\""
fi
if [[ -n "${CGROUPS:-}" ]]; then
    mkdir -p "$fix/sys/fs/cgroup"
    cg="$fix/sys/fs/cgroup"
    echo "cpuset cpu io memory pids" >"$cg/cgroup.controllers"
    printf 'usage_usec 0\n' >"$cg/cpu.stat"
    for i in $(seq 0 $((CGROUPS - 1))); do
        d="$cg/system.slice/group-$((i % 10)).slice/svc-$i.service"
        mkdir -p "$d"
        printf 'usage_usec %d\nuser_usec 0\nsystem_usec 0\n' $((i * 1000)) >"$d/cpu.stat"
    done
fi

# --- wattson -----------------------------------------------------------------------------
# wattson_config NAME PTY: $tmp/NAME.toml, storing in $tmp/NAME.db, reading the meters on PTY.
wattson_config() {
    local name=$1 pty=$2 conf="$tmp/$1.toml"
cat >"$conf" <<EOF
[host]
name = "$name"
$sysfs_line
$procfs_line
[storage]
path = "$tmp/$name.db"
[cpu]
interval = "1s"
[tariff]
currency = "GBP"
price_per_kwh = 0.245
timezone = "Europe/London"
[[tariff.period]]
start = "00:30"
end = "07:30"
price_per_kwh = 0.07
EOF
    # No pty: no meter (METERLESS=1's daemon, which estimates the wall instead).
    for m in $(seq 1 "$METERS"); do
        [[ -n "$pty" ]] || break
        id=wall; [[ "$METERS" == 1 ]] || id="m$m"
        printf '[[meter]]\nid = "%s"\nprotocol = "pzem004t"\nport = "%s"\naddress = %d\ninterval = "1s"\n' \
            "$id" "$pty" "$m" >>"$conf"
    done
    if [[ -n "$mqtt_port" ]]; then
        printf '[mqtt]\nurl = "mqtt://127.0.0.1:%s"\n' "$mqtt_port" >>"$conf"
    fi
    if [[ "${HTTP:-0}" == 1 ]]; then
        printf '[http]\nlisten = "127.0.0.1:0"\n' >>"$conf"
    fi
}
http_port=""
if [[ "${HTTP:-0}" == 1 ]]; then
    command -v prometheus >/dev/null || { echo "HTTP=1 needs prometheus (apt-get install prometheus)" >&2; exit 1; }
fi
wattson_config selfcost "$pty"
cp "$tmp/selfcost.toml" "$tmp/wattson.toml"
"$WATTSON_BIN" --config "$tmp/wattson.toml" run >"$tmp/wattson.log" 2>&1 &
wattson_pid=$!
pids+=("$wattson_pid")
[[ "${HTTP:-0}" == 1 ]] && http_port="$(served_port "$tmp/wattson.log" "$wattson_pid")"

# --- the same with remote write (REMOTE_WRITE=1), to a receiver that is not measured -------
rw_pid=""
if [[ "${REMOTE_WRITE:-0}" == 1 ]]; then
    command -v prometheus >/dev/null || { echo "REMOTE_WRITE=1 needs prometheus (apt-get install prometheus)" >&2; exit 1; }
    start_simulator sim-rw
    rw_pty="$sim_pty"
    receiver_port="$(free_port)"
    printf 'global:\n  scrape_interval: 1m\n' >"$tmp/prometheus-receiver.yml"
    prometheus --config.file="$tmp/prometheus-receiver.yml" --storage.tsdb.path="$tmp/prometheus-receiver" \
        --web.listen-address="127.0.0.1:$receiver_port" --web.enable-remote-write-receiver \
        >"$tmp/prometheus-receiver.log" 2>&1 &
    pids+=($!)
    wattson_config selfcost-rw "$rw_pty"
    printf '[prometheus]\nremote_write = "http://127.0.0.1:%s/api/v1/write"\n' "$receiver_port" \
        >>"$tmp/selfcost-rw.toml"
    if [[ -n "${REMOTE_WRITE_INTERVAL:-}" ]]; then
        printf 'remote_write_interval = "%s"\n' "$REMOTE_WRITE_INTERVAL" >>"$tmp/selfcost-rw.toml"
    fi
    rw_start="$(date +%s.%N)"
    "$WATTSON_BIN" --config "$tmp/selfcost-rw.toml" run >"$tmp/wattson-rw.log" 2>&1 &
    rw_pid=$!
    pids+=("$rw_pid")
fi

# --- the same without a meter (METERLESS=1), estimating the wall from a calibration ----------
est_pid=""
if [[ "${METERLESS:-0}" == 1 ]]; then
    cal_bin="${CALIBRATION_FILE_BIN:-$(dirname "$WATTSON_BIN")/examples/calibration_file}"
    [[ -x "$cal_bin" ]] || { echo "METERLESS=1 needs $cal_bin: cargo build --release -p wattson --example calibration_file" >&2; exit 1; }
    wattson_config selfcost-est ""
    "$cal_bin" "$tmp/selfcost-est.toml" "$tmp/est.calibration.json" \
        || { echo "writing the calibration file failed" >&2; exit 1; }
    "$WATTSON_BIN" --config "$tmp/selfcost-est.toml" calibration import "$tmp/est.calibration.json" \
        >"$tmp/est-import.out" 2>&1 || { cat "$tmp/est-import.out" >&2; exit 1; }
    "$WATTSON_BIN" --config "$tmp/selfcost-est.toml" run >"$tmp/wattson-est.log" 2>&1 &
    est_pid=$!
    pids+=("$est_pid")
fi

# --- the same, its live page watched (PAGE=1) by a browser that is not measured -------------
page_pid=""
browser_pid=""
if [[ "${PAGE:-0}" == 1 ]]; then
    start_simulator sim-page
    page_pty="$sim_pty"
    wattson_config selfcost-page "$page_pty"
    "$WATTSON_BIN" --config "$tmp/selfcost-page.toml" run >"$tmp/wattson-page.log" 2>&1 &
    page_pid=$!
    pids+=("$page_pid")
    page_port="$(served_port "$tmp/wattson-page.log" "$page_pid")"
    for _ in $(seq 300); do
        [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$page_port/healthz" || true)" != 000 ]] && break
        sleep 0.1
    done
    kill -0 "$page_pid" || { echo "wattson for the page exited: $(tail -n 5 "$tmp/wattson-page.log")" >&2; exit 1; }
    # The page as a visible tab shows it: its timers never throttled for being in the
    # background. At nice 19, as the browser runs on the viewer's machine, not the server.
    nice -n 19 "$browser" --headless=new --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --disable-background-timer-throttling --disable-renderer-backgrounding \
        --disable-backgrounding-occluded-windows --window-size=1280,2000 \
        --user-data-dir="$tmp/browser-profile" --log-net-log="$tmp/page-netlog.json" \
        "http://127.0.0.1:$page_port/" >"$tmp/browser.log" 2>&1 &
    browser_pid=$!
    pids+=("$browser_pid")
fi

# --- Prometheus scraping wattson every 15 s (not measured) -----------------------------------
if [[ -n "$http_port" ]]; then
    prom_port="$(free_port)"
    printf 'scrape_configs:\n  - job_name: wattson\n    scrape_interval: 15s\n    static_configs:\n      - targets: ["127.0.0.1:%s"%s]\n' \
        "$http_port" "${page_pid:+, \"127.0.0.1:$page_port\"}" >"$tmp/prometheus.yml"
    prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/prometheus" \
        --web.listen-address="127.0.0.1:$prom_port" >"$tmp/prometheus.log" 2>&1 &
    pids+=($!)
fi

# --- collectd ----------------------------------------------------------------------------
collectd_pid=""
collectd_output=""
if command -v collectd >/dev/null || [[ -x /usr/sbin/collectd ]]; then
    plugdir=/usr/lib/collectd
    {
        echo "Interval 1"
        echo "BaseDir \"$tmp/collectd\""
        echo "PIDFile \"$tmp/collectd.pid\""
        echo "PluginDir \"$plugdir\""
        echo "FQDNLookup false"
        echo "LoadPlugin cpu"
        echo "LoadPlugin cpufreq"
        if [[ -n "$mqtt_port" && -e "$plugdir/mqtt.so" ]]; then
            collectd_output="mqtt"
            echo "LoadPlugin mqtt"
            echo "<Plugin mqtt>"
            echo "  <Publish \"local\">"
            echo "    Host \"127.0.0.1\""
            echo "    Port $mqtt_port"
            echo "    ClientId \"collectd-selfcost\""
            echo "  </Publish>"
            echo "</Plugin>"
        fi
        collectd_output="${collectd_output:+$collectd_output+}csv"
        echo "LoadPlugin csv"
        echo "<Plugin csv>"
        echo "  DataDir \"$tmp/collectd/csv\""
        echo "</Plugin>"
    } >"$tmp/collectd.conf"
    mkdir -p "$tmp/collectd/csv"
    "$(command -v collectd || echo /usr/sbin/collectd)" -f -C "$tmp/collectd.conf" >"$tmp/collectd.log" 2>&1 &
    collectd_pid=$!
    pids+=("$collectd_pid")
fi

# --- node_exporter, scraped every 1 s (the exporter measured, its scraper not) -------------
node_pid=""
node_bin="$(command -v prometheus-node-exporter || command -v node_exporter || true)"
if [[ "${NODE_EXPORTER:-1}" == 1 && -n "$node_bin" ]]; then
    command -v prometheus >/dev/null || { echo "node_exporter needs a scraper: prometheus on the PATH (or NODE_EXPORTER=0)" >&2; exit 1; }
    node_port="$(free_port)"
    "$node_bin" --collector.disable-defaults --collector.cpu --collector.cpufreq \
        --collector.hwmon --collector.rapl --collector.meminfo \
        --web.listen-address="127.0.0.1:$node_port" >"$tmp/node_exporter.log" 2>&1 &
    node_pid=$!
    pids+=("$node_pid")
    node_prom_port="$(free_port)"
    printf 'scrape_configs:\n  - job_name: node\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    static_configs:\n      - targets: ["127.0.0.1:%s"]\n' \
        "$node_port" >"$tmp/prometheus-node.yml"
    prometheus --config.file="$tmp/prometheus-node.yml" --storage.tsdb.path="$tmp/prometheus-node" \
        --web.listen-address="127.0.0.1:$node_prom_port" >"$tmp/prometheus-node.log" 2>&1 &
    pids+=($!)
fi

# --- measurement -------------------------------------------------------------------------
hz="$(getconf CLK_TCK)"
# ticks ns_on_cpu ctxt_switches rss_kb anon_kb pss_kb pss_anon_kb pss_file_kb voluntary_switches
# minor_faults major_faults
snapshot() {
    local pid=$1 stat ticks faults ns=0 cs=0 vcs=0 rss anon pss
    stat="$(cat "/proc/$pid/stat")"
    stat="${stat##*) }"
    ticks=$(awk '{ print $12 + $13 }' <<<"$stat") # fields 14, 15 counted from pid
    faults=$(awk '{ print $8, $10 }' <<<"$stat")  # fields 10 (minflt), 12 (majflt)
    for t in /proc/"$pid"/task/*; do
        ns=$((ns + $(awk '{ print $1 }' "$t/schedstat" 2>/dev/null || echo 0)))
        cs=$((cs + $(awk '/^(non)?voluntary_ctxt_switches/ { s += $2 } END { print s + 0 }' "$t/status" 2>/dev/null || echo 0)))
        vcs=$((vcs + $(awk '/^voluntary_ctxt_switches/ { s += $2 } END { print s + 0 }' "$t/status" 2>/dev/null || echo 0)))
    done
    rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")
    anon=$(awk '/^RssAnon/ { print $2 }' "/proc/$pid/status")
    # smaps_rollup (Linux 4.14; Pss_Anon and Pss_File since 5.7): -1 where a field is missing.
    pss=$(awk '$1 == "Pss:" { p = $2 } $1 == "Pss_Anon:" { a = $2 } $1 == "Pss_File:" { f = $2 }
        END { printf "%s %s %s", p == "" ? -1 : p, a == "" ? -1 : a, f == "" ? -1 : f }' \
        "/proc/$pid/smaps_rollup" 2>/dev/null || echo "-1 -1 -1")
    echo "$ticks $ns $cs $rss $anon $pss $vcs $faults"
}

echo "warming up ${WARMUP_S}s, then measuring ${WINDOW_S}s ..." >&2
sleep "$WARMUP_S"
kill -0 "$wattson_pid" || { echo "wattson exited: $(cat "$tmp/wattson.log")" >&2; exit 1; }
threads() { # tid name switches ns_on_cpu voluntary_switches, per thread of wattson
    for t in /proc/"$wattson_pid"/task/*; do
        printf '%s %s %s %s %s\n' "$(basename "$t")" "$(tr ' ' '_' <"$t/comm")" \
            "$(awk '/^(non)?voluntary_ctxt_switches/ { s += $2 } END { print s + 0 }' "$t/status")" \
            "$(awk '{ print $1 }' "$t/schedstat")" \
            "$(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status")"
    done
}
threads >"$tmp/threads0"
w0="$(snapshot "$wattson_pid")"
[[ -n "$rw_pid" ]] && r0="$(snapshot "$rw_pid")"
[[ -n "$est_pid" ]] && e0="$(snapshot "$est_pid")"
[[ -n "$page_pid" ]] && p0="$(snapshot "$page_pid")"
[[ -n "$collectd_pid" ]] && c0="$(snapshot "$collectd_pid")"
[[ -n "$node_pid" ]] && n0="$(snapshot "$node_pid")"
t0=$(date +%s.%N)
sleep "$WINDOW_S"
w1="$(snapshot "$wattson_pid")"
[[ -n "$rw_pid" ]] && r1="$(snapshot "$rw_pid")"
[[ -n "$est_pid" ]] && e1="$(snapshot "$est_pid")"
[[ -n "$page_pid" ]] && p1="$(snapshot "$page_pid")"
threads >"$tmp/threads1"
[[ -n "$collectd_pid" ]] && c1="$(snapshot "$collectd_pid")"
[[ -n "$node_pid" ]] && n1="$(snapshot "$node_pid")"
t1=$(date +%s.%N)

row() { # name start end
    awk -v name="$1" -v hz="$hz" -v t0="$t0" -v t1="$t1" -v a="$2" -v b="$3" '
    function mb(kb) { return kb < 0 ? "n/a" : sprintf("%.2f MB", kb / 1024) }
    BEGIN {
        split(a, s, " "); split(b, e, " "); w = t1 - t0
        printf "| %s | %.3f %% | %.3f %% | %.2f (%.2f) | %s | %s | %s | %s | %s | %.2f (%.3f) |\n", name,
            (e[1] - s[1]) / hz / w * 100, (e[2] - s[2]) / 1e9 / w * 100,
            (e[3] - s[3]) / w, (e[9] - s[9]) / w,
            mb(e[5]), mb(e[6]), mb(e[7]), mb(e[8]), mb(e[4]),
            (e[10] - s[10]) / w, (e[11] - s[11]) / w
    }'
}

publishes="no [mqtt] (mosquitto not installed)"
if [[ -n "$mqtt_port" ]]; then
    if grep -q "New client connected.* as wattson-" "$tmp/mosquitto.log" 2>/dev/null; then
        publishes="yes: wattson connected to mosquitto on 127.0.0.1:$mqtt_port"
    else
        publishes="no: [mqtt] configured (127.0.0.1:$mqtt_port) but this build never connected to the broker"
    fi
fi

echo
echo "wattson: $WATTSON_BIN ($(file -b "$WATTSON_BIN" 2>/dev/null | grep -q 'not stripped' && echo 'not stripped' || echo 'stripped')); $("$WATTSON_BIN" --version)"
echo "machine: $(nproc) CPUs, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), kernel $(uname -r)"
echo "window: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s after ${WARMUP_S} s warm-up; CLK_TCK $hz"
echo "wattson MQTT: $publishes"
if [[ -n "$http_port" ]]; then
    instance="%7Binstance%3D%22127.0.0.1%3A$http_port%22%7D"
    up="$(curl -s "http://127.0.0.1:$prom_port/api/v1/query?query=up$instance" | grep -o '"value":\[[^]]*\]' || true)"
    scrapes="$(curl -s "http://127.0.0.1:$prom_port/api/v1/query?query=count_over_time(up$instance%5B${WINDOW_S}s%5D)" | grep -o '"value":\[[^]]*\]' || true)"
    echo "wattson HTTP: [http] on 127.0.0.1:$http_port, Prometheus scraping every 15 s: up $up, scrapes in the window $scrapes"
fi
[[ -n "$collectd_pid" ]] && echo "collectd: $(collectd -h 2>&1 | awk '/^collectd/ { print $2; exit }') plugins cpu, cpufreq, $collectd_output at Interval 1"
if [[ -n "$node_pid" ]]; then
    node_scrapes="$(curl -s "http://127.0.0.1:$node_prom_port/api/v1/query?query=count_over_time(up%5B${WINDOW_S}s%5D)" | grep -o '"value":\[[^]]*\]' || true)"
    echo "node_exporter: $("$node_bin" --version 2>&1 | head -n1) with cpu, cpufreq, hwmon, rapl, meminfo; scraped every 1 s: scrapes in the window $node_scrapes"
fi
[[ "$METERS" == 1 ]] || echo "meters: $METERS PZEM-004T on one bus (addresses 1-$METERS), each at 1 s"
[[ -n "${CGROUPS:-}" ]] && echo "services collector: on, a fixture cgroup v2 tree of $CGROUPS services"
[[ -n "${CPUS:-}" ]] && echo "CPUs: a fixture machine of $CPUS CPUs (4 idle states each), its counters advanced every second"
[[ -n "${TASKS:-}" ]] && echo "processes: a fixture process table of $TASKS processes and $IRQS interrupt lines, advanced every 10 s; wake-ups scanned every 5 minutes ([wakeups] default)"
echo
echo "| process | CPU (utime+stime) | CPU (schedstat) | context switches/s (voluntary) | RssAnon | PSS | Pss_Anon | Pss_File | RSS | page faults/s (major) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
row "wattson run" "$w0" "$w1"
[[ -n "$rw_pid" ]] && row "wattson run + remote write" "$r0" "$r1"
[[ -n "$est_pid" ]] && row "wattson run, no meter (estimated)" "$e0" "$e1"
[[ -n "$page_pid" ]] && row "wattson run, its live page watched" "$p0" "$p1"
[[ -n "$collectd_pid" ]] && row "collectd" "$c0" "$c1"
[[ -n "$node_pid" ]] && row "node_exporter" "$n0" "$n1"
echo "| budget (wattson) | <= 0.05 % | <= 0.05 % | <= 2 | <= 3 MB | reported | | | reported | reported |"
echo
for p in "$wattson_pid" ${collectd_pid:+"$collectd_pid"} ${node_pid:+"$node_pid"}; do
    echo "RSS of $(cat "/proc/$p/comm"): $(awk '/^Rss(Anon|File|Shmem)/ { printf "%s %.1f MB  ", $1, $2 / 1024 }' "/proc/$p/status")"
done
echo "wattson threads: context switches per second (of them voluntary: the thread slept; the"
echo "rest are preemptions by other work on the machine) and CPU (schedstat) in the window"
awk -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" '
    NR == FNR { start[$1] = $3; ns[$1] = $4; vol[$1] = $5; next }
    { cs = ($3 - ($1 in start ? start[$1] : 0)) / w; v = ($5 - ($1 in vol ? vol[$1] : 0)) / w
      tcs += cs; tv += v
      printf "  %s: %.2f/s (voluntary %.2f/s), %.3f %%%s\n", $2, cs, v,
        ($4 - ($1 in ns ? ns[$1] : 0)) / 1e9 / w * 100, ($1 in start ? "" : " (started in the window)") }
    END { printf "  all threads: %.2f/s (voluntary %.2f/s)\n", tcs, tv }
' "$tmp/threads0" "$tmp/threads1"
# What wattson stored: it must have stored the meter's power, and with CPUS=N every CPU's
# series, or the figures above are not the cost of doing so.
stored="$(python3 - "$tmp/selfcost.db" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
rows = db.execute("""
    SELECT s.metric, s.channel GLOB 'cpu[0-9]*', count(DISTINCT s.id), sum(c.n)
    FROM series s JOIN (SELECT series_id, n FROM raw_chunk UNION ALL
                        SELECT series_id, n FROM raw_detail_chunk UNION ALL
                        SELECT series_id, n FROM raw_open) c ON c.series_id = s.id
    WHERE c.n > 0 GROUP BY 1, 2""").fetchall()
power = sum(n for m, _, _, n in rows if m == "power")
per_core = {m: k for m, core, k, _ in rows if core}
print(power, per_core.get("cpu_busy", 0), per_core.get("core_frequency", 0),
      per_core.get("idle_residency", 0), sum(n for *_, n in rows))
EOF
)" || { echo "reading what wattson stored in $tmp/selfcost.db failed" >&2; exit 1; }
read -r power_n busy_series freq_series residency_series samples_n <<<"$stored"
echo "stored: $samples_n samples, $power_n of power; per-CPU series with samples: cpu_busy $busy_series, core_frequency $freq_series, idle_residency $residency_series"
((power_n > 0)) || { echo "wattson stored no power samples: $(tail -n 5 "$tmp/wattson.log")" >&2; exit 1; }
if [[ -n "${CPUS:-}" ]] && ((busy_series != CPUS || freq_series != CPUS || residency_series != 4 * CPUS)); then
    echo "CPUS=$CPUS, but wattson stored per-CPU series for $busy_series CPUs (busy), $freq_series (frequency), $residency_series idle states (expected $((4 * CPUS)))" >&2
    exit 1
fi
if [[ -n "$rw_pid" ]]; then
    kill -0 "$rw_pid" || { echo "wattson with remote write exited: $(tail -n 5 "$tmp/wattson-rw.log")" >&2; exit 1; }
    series="$(curl -s "http://127.0.0.1:$receiver_port/api/v1/series?match%5B%5D=%7Bhost%3D%22selfcost-rw%22%7D" | grep -o '"__name__"' | wc -l)"
    totals="$(python3 - "$tmp/selfcost-rw.db" <<'EOF2'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
row = db.execute("SELECT samples_sent, samples_rejected, failed_requests FROM remote_write_endpoint").fetchone()
print(*(row or (0, 0, 0)))
EOF2
)"
    read -r rw_sent rw_rejected rw_failed <<<"$totals"
    echo "remote write: $rw_sent samples taken by the receiver since the start ($rw_rejected refused, $rw_failed failed requests), $series series of the host in it; what it adds is the difference of the two wattson rows"
    ((rw_sent > 0)) || { echo "remote write sent nothing: $(tail -n 5 "$tmp/wattson-rw.log")" >&2; exit 1; }
    if [[ "${HTTP:-0}" == 1 ]]; then
        rw_http="$(served_port "$tmp/wattson-rw.log" "$rw_pid")"
        rw_bytes="$(curl -s "http://127.0.0.1:$rw_http/metrics" | awk '/^wattson_remote_write_sent_bytes_total/ { print $NF }')"
        up_s="$(awk -v a="$rw_start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')"
        awk -v b="${rw_bytes:-0}" -v n="$rw_sent" -v s="$up_s" 'BEGIN {
            printf "remote write on the wire: %d bytes for %d samples in %.0f s (%.2f bytes a sample), %.2f MB a host-day at this rate\n",
                b, n, s, (n > 0 ? b / n : 0), b / s * 86400 / 1e6 }'
    fi
    echo "remote write log warnings+errors: $(grep -cE " (WARN|ERROR) " "$tmp/wattson-rw.log" || true)"
fi
if [[ -n "$est_pid" ]]; then
    kill -0 "$est_pid" || { echo "wattson without a meter exited: $(tail -n 5 "$tmp/wattson-est.log")" >&2; exit 1; }
    estimated="$(python3 - "$tmp/selfcost-est.db" <<'EOF2'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
n = db.execute("SELECT coalesce(sum(n), 0) FROM (SELECT series_id, n FROM raw_chunk UNION ALL "
               "SELECT series_id, n FROM raw_open) c JOIN series s ON s.id = c.series_id "
               "WHERE s.source LIKE 'estimate%' AND s.metric = 'power' AND s.channel = ''").fetchone()[0]
print(n)
EOF2
)"
    echo "no meter: $(grep -m1 '^imported' "$tmp/est-import.out"); $estimated estimated power samples stored"
    ((estimated > 0)) || { echo "the meterless daemon stored no estimate: $(tail -n 5 "$tmp/wattson-est.log")" >&2; exit 1; }
    echo "no-meter log warnings+errors: $(grep -cE " (WARN|ERROR) " "$tmp/wattson-est.log" || true)"
fi
if [[ -n "$page_pid" ]]; then
    kill -0 "$page_pid" || { echo "wattson for the page exited: $(tail -n 5 "$tmp/wattson-page.log")" >&2; exit 1; }
    kill -0 "$browser_pid" || { echo "the browser exited before the window's end: the page was not watched: $(tail -n 5 "$tmp/browser.log")" >&2; exit 1; }
    # The page's requests in the window, from the browser's net log.
    requests="$(python3 "$here/tests/bench/netlog_requests.py" "$tmp/page-netlog.json" \
        "http://127.0.0.1:$page_port" "$t0" "$t1")" \
        || { echo "counting the page's requests in $tmp/page-netlog.json failed" >&2; exit 1; }
    read -r n_live n_history n_report n_other <<<"$requests"
    page_scrapes="$(curl -s "http://127.0.0.1:$prom_port/api/v1/query?query=count_over_time(up%7Binstance%3D%22127.0.0.1%3A$page_port%22%7D%5B${WINDOW_S}s%5D)" | grep -o '"value":\[[^]]*\]' || true)"
    echo "live page: $("$browser" --version 2>/dev/null | head -n1) headless, http://127.0.0.1:$page_port/ open from before the warm-up; Prometheus scrapes of that daemon in the window $page_scrapes"
    awk -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" -v l="$n_live" -v h="$n_history" \
        -v r="$n_report" -v o="$n_other" -v a="$w0" -v b="$w1" -v c="$p0" -v d="$p1" 'BEGIN {
        split(a, ws, " "); split(b, we, " "); split(c, ps, " "); split(d, pe, " ")
        printf "live page requests in the window (the net log of the browser): %d /live.json (%.1f a minute), %d /history.json, %d /report.html, other: %s\n",
            l, l / w * 60, h, r, o
        printf "what they cost (watched minus unwatched): %+.3f %% of a core (schedstat), %+.2f voluntary switches/s, RssAnon %+.2f MB, PSS %+.2f MB\n",
            ((pe[2] - ps[2]) - (we[2] - ws[2])) / 1e9 / w * 100, ((pe[9] - ps[9]) - (we[9] - ws[9])) / w,
            (pe[5] - we[5]) / 1024, (pe[6] - we[6]) / 1024
    }'
    ((n_live > 0)) || { echo "the page made no /live.json request in the window: $(tail -n 5 "$tmp/browser.log")" >&2; exit 1; }
    page_power="$(python3 - "$tmp/selfcost-page.db" <<'EOF2'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
print(db.execute("SELECT coalesce(sum(n), 0) FROM (SELECT series_id, n FROM raw_chunk UNION ALL "
                 "SELECT series_id, n FROM raw_open) c JOIN series s ON s.id = c.series_id "
                 "WHERE s.metric = 'power'").fetchone()[0])
EOF2
)"
    ((page_power > 0)) || { echo "the watched daemon stored no power: $(tail -n 5 "$tmp/wattson-page.log")" >&2; exit 1; }
    echo "watched daemon: $page_power power samples stored; log warnings+errors: $(grep -cE " (WARN|ERROR) " "$tmp/wattson-page.log" || true)"
fi
if [[ -n "${TASKS:-}" ]]; then
    woke="$(python3 - "$tmp/selfcost.db" <<'EOF2'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
w = db.execute("SELECT count(*), coalesce(sum(seconds), 0), coalesce(sum(task_wakeups), 0), "
               "coalesce(sum(interrupts), 0) FROM wakeup_host_hour").fetchone()
names = db.execute("SELECT kind, count(DISTINCT name) FROM wakeup_hour GROUP BY kind").fetchall()
print(*w, dict(names).get("task", 0), dict(names).get("interrupt", 0))
EOF2
)"
    read -r wh_rows wh_seconds wh_tasks wh_irqs wh_task_names wh_irq_names <<<"$woke"
    echo "wake-ups stored: $wh_seconds s of windows in $wh_rows hours, $wh_tasks task wake-ups over $wh_task_names groups, $wh_irqs interrupts over $wh_irq_names lines"
    ((wh_rows > 0)) || echo "warning: no wake-ups window stored in the run: the scan's cost is not in the figures" >&2
fi
echo "simulated meter alive at the end: $(kill -0 "${pids[0]}" 2>/dev/null && echo yes || echo NO: figures are without a meter)"
echo "meter losses in the wattson log: $(grep -c "device gone" "$tmp/wattson.log" || true)"
echo "wattson log warnings+errors: $(grep -cE " (WARN|ERROR) " "$tmp/wattson.log" || true)"
grep -E " (WARN|ERROR) " "$tmp/wattson.log" | head -n 5 | sed 's/^/  /' || true
