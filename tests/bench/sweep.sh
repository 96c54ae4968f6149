#!/usr/bin/env bash
# Sweep speed at the DESIGN's accuracy: the real `wattson sweep --levels 0,1` against
# `wattson meter simulate` (PZEM-004T on a pseudo-terminal, 40 W idle + 15 W per busy CPU of
# the sweep's own process, Gaussian noise sd 2 W, 1 s ramp), read at 1 Hz, with the default
# stopping target (+/- max(0.5 W, 1 %) per level), repeated REPS times with seeds
# SEED0+1..SEED0+REPS.
#
# Usage: tests/bench/sweep.sh [REPS]        (default 3)
# Env:   WATTSON_BIN  the binary to run (default: $CARGO_TARGET_DIR or target, debug)
#        LEVELS       levels to sweep (default 0,1: one CPU is left to the meter and the rest)
#        SEED0=N      seeds are N+1..N+REPS (default 0)
#        KEEP=1       keep the temp directory (databases, outputs)
#
# The meter follows the CPUs the sweep's process asks for (--follow-pid: the sweep is exec'd
# from a shell whose pid is known before the meter starts; --follow-demand: time on a CPU
# plus time waiting for one; --follow-threads wattson-spin: of its loop threads only), so
# neither other load on the machine nor the CPU it takes from the loops changes the watts:
# the benchmark measures the sweep's statistics, not the VM.
# --idle-wait 1s: on a machine shared with builds the idle guard would otherwise wait its
# full 30 s at every run.
#
# Per run: seconds per level (the run's wall time / levels, idle guard included), each
# level's settle and measure seconds (from the run's stored settings where the binary stores
# them, else "settled in N s" from its summary), the fitted idle and watts per loop and their
# errors against 40 W and 15 W. Last line: medians over the runs.
set -euo pipefail

REPS="${1:-3}"
LEVELS="${LEVELS:-0,1}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$here/target}"
WATTSON_BIN="${WATTSON_BIN:-$target/debug/wattson}"
[[ -x "$WATTSON_BIN" ]] || { echo "no wattson binary at $WATTSON_BIN: cargo build -p wattson --bin wattson" >&2; exit 1; }

tmp="$(mktemp -d)"
sim_pid=""
cleanup() {
    [[ -n "$sim_pid" ]] && kill "$sim_pid" 2>/dev/null || true
    if [[ "${KEEP:-}" == 1 ]]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

echo "binary: $WATTSON_BIN; levels $LEVELS; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for rep in $(seq 1 "$REPS"); do
    dir="$tmp/run$rep"
    mkdir -p "$dir"
    mkfifo "$dir/go"
    # The sweep's shell: writes its pid, waits for the meter, then becomes the sweep.
    (
        echo "$BASHPID" >"$dir/pid"
        read -r _ <"$dir/go"
        exec "$WATTSON_BIN" -c "$dir/wattson.toml" sweep --name bench --levels "$LEVELS" \
            --idle-wait 1s --db "$dir/sweep.db" >"$dir/out" 2>"$dir/err"
    ) &
    sweep_pid=$!
    while [[ ! -s "$dir/pid" ]]; do sleep 0.05; done
    "$WATTSON_BIN" meter simulate --protocol pzem004t --follow-cpu --follow-pid "$(cat "$dir/pid")" --follow-demand --follow-threads wattson-spin \
        --watts 40 --per-cpu 15 --noise 2 --ramp 1 --seed "$((rep + ${SEED0:-0}))" >"$dir/sim" 2>"$dir/sim.err" &
    sim_pid=$!
    while [[ ! -s "$dir/sim" ]]; do sleep 0.05; done
    cat >"$dir/wattson.toml" <<EOF
[storage]
path = "$dir/sweep.db"

[[meter]]
id = "wall"
protocol = "pzem004t"
port = "$(head -n1 "$dir/sim")"
address = 1
interval = "1s"
EOF
    echo go >"$dir/go"
    wait "$sweep_pid" || { echo "sweep failed:" >&2; cat "$dir/err" >&2; exit 1; }
    kill "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
    sim_pid=""
    "$WATTSON_BIN" -c "$dir/wattson.toml" sweep --show bench --json --db "$dir/sweep.db" >"$dir/show.json"
    echo "load average after run $rep: $(cut -d' ' -f1-3 /proc/loadavg)" >"$dir/load"
done

python3 - "$tmp" "$REPS" <<'EOF'
import json, re, statistics, sys
tmp, reps = sys.argv[1], int(sys.argv[2])
rows = []
for rep in range(1, reps + 1):
    d = f"{tmp}/run{rep}"
    s = json.load(open(f"{d}/show.json"))
    s = s[0] if isinstance(s, list) else s
    out = open(f"{d}/out").read()
    levels = s["levels"]
    per_level = (s["ended_ms"] - s["started_ms"]) / 1000 / len(levels)
    timing = (s.get("settings") or {}).get("level_timing")
    if timing:
        split = [(t["settle_s"], t["measure_s"]) for t in timing]
    else:
        settled = [float(x) for x in re.findall(r"settled in ([0-9.]+) s", out)]
        split = [(a, None) for a in settled]
    fit = s["fit"][0]["loops"]
    idle, slope = fit["intercept"], fit["slope"]
    rows.append((per_level, split, idle - 40.0, (slope - 15.0) / 15.0 * 100, [l["n"] for l in levels]))
    print(f"run {rep}: {per_level:.1f} s per level; settle/measure s per level "
          + ", ".join(f"{a:.1f}/{'?' if b is None else f'{b:.1f}'}" for a, b in split)
          + f"; n {rows[-1][4]}; idle {idle:.3f} W ({idle - 40:+.3f}); slope {slope:.3f} W ({rows[-1][3]:+.2f} %)"
          + "; " + open(f"{d}/load").read().strip())
med = statistics.median
settle = [a for r in rows for a, _ in r[1]]
measure = [b for r in rows for _, b in r[1] if b is not None]
print(f"median of {reps}: {med(r[0] for r in rows):.1f} s per level "
      f"(settle {med(settle):.1f} s" + (f", measure {med(measure):.1f} s" if measure else "") + "), "
      f"|idle error| {med(abs(r[2]) for r in rows):.3f} W (max {max(abs(r[2]) for r in rows):.3f}), "
      f"|slope error| {med(abs(r[3]) for r in rows):.2f} % (max {max(abs(r[3]) for r in rows):.2f})")
EOF
