#!/usr/bin/env bash
# The year report over a fleet collector's database, end to end through the real binary:
# 10 synthetic hosts x 2025 at 1 Hz, as `wattson collect` leaves them after a year (the last
# 30 days raw, 3 days for per-core CPU series, hourly rollups before that; built by the store
# benchmark's generator, daemon/benches/store/fleet.rs), then `wattson report --db FILE
# --host HOST --since 2025-01-01 --until 2025-12-31` in the default format (table) and with
# `--format html`, each timed from exec to exit, the database in the page cache (one
# untimed run first).
#
# Usage: tests/bench/fleet-report.sh [RUNS]     (default 11 timed runs per command)
# Env:   WATTSON_BIN  the binary to time (default: $CARGO_TARGET_DIR or target, release;
#                     built with `cargo build --release -p wattson` when missing)
#        FLEET_DB     the database (default: $target/fleet-bench/fleet-10x2025.db); built
#                     once when missing (`WATTSON_BENCH_FLEET=PATH cargo bench -p wattson
#                     --bench store`, a few minutes), reused after that; REBUILD=1 builds it
#                     again
#        HOSTS        the hosts to report, separated by spaces (default "host-03"); a fleet
#                     database is reported one host at a time (`--host`): there is no
#                     all-hosts report
#        KEEP=1       keep the temp directory (config, the last outputs)
#
# Timing: hyperfine when installed (its median), else RUNS runs timed with `date +%s%N` and
# their median; min and max beside it.
set -euo pipefail

RUNS="${1:-11}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$here/target}"
if [[ -z "${WATTSON_BIN:-}" ]]; then
    WATTSON_BIN="$target/release/wattson"
    [[ -x "$WATTSON_BIN" ]] || (cd "$here" && cargo build --release -p wattson)
fi
[[ -x "$WATTSON_BIN" ]] || { echo "no wattson binary at $WATTSON_BIN: cargo build --release -p wattson" >&2; exit 1; }
FLEET_DB="${FLEET_DB:-$target/fleet-bench/fleet-10x2025.db}"
HOSTS="${HOSTS:-host-03}"

if [[ "${REBUILD:-0}" == 1 ]]; then rm -f "$FLEET_DB" "$FLEET_DB-wal" "$FLEET_DB-shm"; fi
if [[ ! -f "$FLEET_DB" ]]; then
    mkdir -p "$(dirname "$FLEET_DB")"
    echo "building $FLEET_DB (once) ..." >&2
    partial="$FLEET_DB.partial"
    rm -f "$partial" "$partial-wal" "$partial-shm"
    (cd "$here" && WATTSON_BENCH_FLEET="$partial" cargo bench -q -p wattson --bench store)
    mv "$partial" "$FLEET_DB"
fi

tmp="$(mktemp -d /tmp/wattson-fleet-report.XXXXXX)"
cleanup() { if [[ "${KEEP:-0}" == 1 ]]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi; }
trap cleanup EXIT

# The collector's config: its own name, the database, the time-of-use tariff of
# docs/configuration.md and two machines measured by hand (the old box and its replacement),
# so the report compares.
cat >"$tmp/wattson.toml" <<EOF
[host]
name = "collector"
[storage]
path = "$FLEET_DB"
[tariff]
currency = "GBP"
price_per_kwh = 0.245
standing_charge_per_day = 0.5
timezone = "Europe/London"
[[tariff.period]]
start = "00:30"
end = "07:30"
price_per_kwh = 0.07
[[config]]
name = "Athlon 64 1.8 GHz, 3 disks"
modes = { standby = 4.0, idle = 78.0, "1 loop" = 111.0, "2 loops" = 111.0 }
[[config]]
name = "N100 mini PC, 1 SSD"
modes = { standby = 1.0, idle = 9.0, "1 loop" = 17.0, "2 loops" = 22.0 }
upgrade_cost = 180.0
EOF

median() { sort -n | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f ms (min %.1f, max %.1f, %d runs)", m, v[1], v[NR], NR }'; }

# time_it NAME ARGS...: `wattson ARGS`, stdout to a file, RUNS timed runs.
time_it() {
    local name=$1 out="$tmp/$1.out"
    shift
    local cmd=("$WATTSON_BIN" "$@")
    "${cmd[@]}" >"$out" # untimed: warms the page cache, and fails the script on an error
    [[ -s "$out" ]] || { echo "$name: the report is empty" >&2; exit 1; }
    if command -v hyperfine >/dev/null; then
        hyperfine -N --runs "$RUNS" --warmup 1 --export-json "$tmp/$name.json" --output null \
            "$(printf '%q ' "${cmd[@]}")" >/dev/null
        printf '| %s | %s |\n' "$name" "$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("%.1f ms (min %.1f, max %.1f, %d runs, hyperfine)" % (r["median"]*1e3, r["min"]*1e3, r["max"]*1e3, len(r["times"])))' "$tmp/$name.json")"
    else
        for _ in $(seq "$RUNS"); do
            local t0 t1
            t0=$(date +%s%N)
            "${cmd[@]}" >"$out"
            t1=$(date +%s%N)
            echo $(((t1 - t0) / 1000))
        done | awk '{ print $1 / 1000 }' | median | sed "s/^/| $name | /; s/\$/ |/"
        echo
    fi
}

echo "wattson: $WATTSON_BIN; $("$WATTSON_BIN" --version)"
echo "database: $FLEET_DB, $(stat -c %s "$FLEET_DB") bytes"
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
echo
echo "| report (2025-01-01 .. 2025-12-31) | median wall time, exec to exit |"
echo "|---|---|"
for host in $HOSTS; do
    args=(--config "$tmp/wattson.toml" report --db "$FLEET_DB" --host "$host" --since 2025-01-01 --until 2025-12-31)
    time_it "$host, table" "${args[@]}"
    time_it "$host, html" "${args[@]}" --format html
done
time_it "the binary alone (wattson --version)" --version
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
first="${HOSTS%% *}"
echo "$first, the table's measured figures:"
grep -E '^  measured' "$tmp/$first, table.out" | sed 's/^/  /' || true
