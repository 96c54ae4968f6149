#!/usr/bin/env bash
# Writes daemon/symbol-order.txt: the functions of the release `wattson` binary that
# `wattson run` executes in its steady state, most called first. daemon/build.rs hands the
# file to the linker (`--symbol-ordering-file`) for release builds, so those functions lie
# together at the start of the text instead of in most of its 64 KB windows, and the
# kernel's fault-around maps in about 1 MB of code rather than 3.5 MB (BENCHMARKS.md,
# "Daemon self-cost").
#
# Usage: tests/bench/symbol-order.sh [MINUTES]   (default 4: the steady state recorded)
#        tests/bench/symbol-order.sh --check     (how many of the file's names the release
#                                                 binary still holds; exits 1 under 90 %)
#
# It runs tests/bench/selfcost.sh with ALL=1 (everything on) and the daemon under
# valgrind's callgrind, zeroes the counts after the warm-up (start-up code is not the
# steady state: `runtime::resident` lets it go), and keeps every function of the binary
# that was called or ran after that. Needs valgrind (apt-get install valgrind), python3 and
# nm, and what selfcost.sh needs. The names are the binary's mangled symbols, which change
# with the toolchain and the dependencies; a stale name is skipped by the linker, so a
# stale file costs memory, never a failed build. `--check` says how stale it is (a name
# changes when its function is renamed or moved, or its crate's dependencies or the
# toolchain change); regenerate under 90 %, and after large changes:
#
#   cargo build --release -p wattson && tests/bench/symbol-order.sh
#   cargo build --release -p wattson    # relinked with the new order
set -euo pipefail

minutes="${1:-4}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${WATTSON_BIN:-$root/target/release/wattson}"
out="$root/daemon/symbol-order.txt"

if [[ "${1:-}" == --check ]]; then
    [[ -x "$bin" ]] || { echo "no binary at $bin: cargo build --release -p wattson" >&2; exit 1; }
    total="$(grep -c . "$out")"
    held="$(comm -12 <(sort -u "$out") \
        <(nm --defined-only "$bin" | awk 'NF == 3 && $2 ~ /^[tTwW]$/ { print $3 }' | sort -u) | wc -l)"
    pct=$(( held * 100 / total ))
    echo "$out: $held of $total names are functions of $bin ($pct %)"
    (( pct >= 90 )) || { echo "stale: regenerate it (tests/bench/symbol-order.sh)" >&2; exit 1; }
    exit 0
fi
warmup=80

command -v valgrind >/dev/null || { echo "valgrind is needed: apt-get install valgrind" >&2; exit 1; }
command -v callgrind_control >/dev/null || { echo "callgrind_control is needed (valgrind's)" >&2; exit 1; }
[[ -x "$bin" ]] || { echo "no binary at $bin: cargo build --release -p wattson" >&2; exit 1; }

tmp="$(mktemp -d /tmp/wattson-symbol-order.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
# The daemon under callgrind; every other use of the binary (the simulated meter) as is.
cat >"$tmp/wattson" <<EOF
#!/usr/bin/env bash
for a in "\$@"; do
    if [[ "\$a" == run ]]; then
        exec valgrind --tool=callgrind --demangle=no --callgrind-out-file="$tmp/callgrind.out" "$bin" "\$@"
    fi
done
exec "$bin" "\$@"
EOF
chmod +x "$tmp/wattson"

ALL=1 WARMUP_S="$warmup" WATTSON_BIN="$tmp/wattson" "$here/selfcost.sh" "$minutes" >"$tmp/selfcost.log" 2>&1 &
selfcost=$!
sleep $((warmup - 5))
pid="$(pgrep -f "valgrind.*callgrind-out-file=$tmp/callgrind.out" | head -1 || true)"
[[ -n "$pid" ]] || { echo "the daemon did not start under callgrind:" >&2; cat "$tmp/selfcost.log" >&2; exit 1; }
callgrind_control -z "$pid" >/dev/null 2>&1
echo "recording the steady state of pid $pid for $minutes min ..." >&2
wait "$selfcost" || { echo "selfcost.sh failed:" >&2; cat "$tmp/selfcost.log" >&2; exit 1; }

python3 - "$bin" "$out" "$tmp"/callgrind.out* <<'EOF'
"""Functions of BIN called or run in the callgrind dumps, most called first."""
import re
import subprocess
import sys
from collections import Counter

binary, out, dumps = sys.argv[1], sys.argv[2], sys.argv[3:]
obj = binary.rsplit("/", 1)[-1]
calls = Counter()
for dump in dumps:
    names, objs = {}, {}
    ob = fn = cob = cfn = None
    after_calls = False
    with open(dump, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = re.match(r"^(ob|cob|fn|cfn)=\((\d+)\)(?: (.*))?$", line)
            if m:
                kind, idx, name = m.groups()
                table = objs if kind in ("ob", "cob") else names
                if name is not None:
                    table[idx] = name
                value = table.get(idx)
                if kind == "ob":
                    ob, cob = value, None
                elif kind == "cob":
                    cob = value
                elif kind == "fn":
                    fn, cob = value, None
                else:
                    cfn = value
                continue
            if line.startswith("calls="):
                if (cob or ob or "").endswith(obj) and cfn:
                    calls[cfn] += int(line.split("=")[1].split()[0])
                after_calls = True
                continue
            if line[:1].isdigit() or line[:1] in "+-*":
                if after_calls:
                    after_calls, cob = False, None
                elif (ob or "").endswith(obj) and fn:
                    calls[fn] += 0
symbols = set()
for line in subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[1] in "tTwW":
        symbols.add(parts[2])
hot = sorted((s for s in calls if s in symbols), key=lambda s: (-calls[s], s))
with open(out, "w") as f:
    f.write("\n".join(hot) + "\n")
print(f"{out}: {len(hot)} functions ({len(calls) - len(hot)} names not in the symbol table)", file=sys.stderr)
EOF
