#!/usr/bin/env bash
# Several builds of the daemon measured at once: one `selfcost.sh` per binary (each with its
# own simulated meter, broker, collectd and Prometheus), started together, in an order that
# rotates each round, every binary dropped from the page cache before the round; then each
# build's medians [min-max] over the rounds. How BENCHMARKS.md's comparisons against an
# older build are made (run 15): on a shared machine only figures taken side by side compare.
#
# Usage: tests/bench/side-by-side.sh MINUTES ROUNDS NAME=BINARY...
#   e.g. tests/bench/side-by-side.sh 5 3 old=/tmp/old/wattson new=target/release/wattson
# Env:   passed to every selfcost.sh (default ALL=1 NODE_EXPORTER=0 WARMUP_S=70); OUT the
#        directory the per-run reports go to (default a new temp directory, kept)
set -euo pipefail

(($# >= 4)) || { sed -n '2,12p' "$0" >&2; exit 2; }
minutes="$1" rounds="$2"
shift 2
names=() bins=()
for arg in "$@"; do
    [[ "$arg" == *=* ]] || { echo "not NAME=BINARY: $arg" >&2; exit 2; }
    names+=("${arg%%=*}")
    bins+=("$(realpath "${arg#*=}")")
    [[ -x "${bins[-1]}" ]] || { echo "not an executable: ${arg#*=}" >&2; exit 2; }
done
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-$(mktemp -d /tmp/wattson-side-by-side.XXXXXX)}"
mkdir -p "$out"
export ALL="${ALL:-1}" NODE_EXPORTER="${NODE_EXPORTER:-0}" WARMUP_S="${WARMUP_S:-70}"
n=${#names[@]}

for ((round = 1; round <= rounds; round++)); do
    python3 - "${bins[@]}" <<'EOF'
import os, sys
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
EOF
    pids=()
    for ((i = 0; i < n; i++)); do
        k=$(((i + round) % n))
        WATTSON_BIN="${bins[$k]}" "$here/selfcost.sh" "$minutes" >"$out/$round.${names[$k]}" 2>&1 &
        pids+=($!)
    done
    failed=0
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
    ((failed == 0)) || { echo "round $round: a selfcost.sh failed; its report is in $out" >&2; exit 1; }
    echo "round $round of $rounds done $(date -u +%H:%M:%S) UTC" >&2
done

python3 - "$out" "$rounds" "${names[@]}" <<'EOF'
"""Each build's `wattson run` row over the rounds: medians [min-max]."""
import re, statistics, sys

out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
columns = ["CPU (schedstat) %", "voluntary switches/s", "RssAnon MB", "PSS MB", "Pss_File MB", "RSS MB",
           "page faults/s", "major faults/s"]
print("| build | " + " | ".join(columns) + " |")
print("|---" * (len(columns) + 1) + "|")
for name in names:
    values = [[] for _ in columns]
    for r in range(1, rounds + 1):
        text = open(f"{out}/{r}.{name}").read()
        row = next(l for l in text.splitlines() if l.startswith("| wattson run |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        number = lambda c: float(re.match(r"[-\d.]+", c).group())
        voluntary = float(re.search(r"\(([\d.]+)\)", cells[3]).group(1))
        major = float(re.search(r"\(([\d.]+)\)", cells[9]).group(1))
        for i, v in enumerate([number(cells[2]), voluntary, number(cells[4]), number(cells[5]), number(cells[7]),
                               number(cells[8]), number(cells[9]), major]):
            values[i].append(v)
    print(f"| {name} | " + " | ".join(
        f"{statistics.median(v):.3g} [{min(v):.3g}-{max(v):.3g}]" for v in values) + " |")
print(f"\nreports: {out}")
EOF
