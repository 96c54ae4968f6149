#!/usr/bin/env bash
# Each test's wall time, slowest first, and each test binary's: the figures CONTRIBUTING.md
# quotes. Builds the test binaries as `cargo test --workspace` does, then runs each from
# its package's directory (as cargo does) with libtest's per-test timing, which stable Rust
# enables for the test binaries only (RUSTC_BOOTSTRAP=1 in their environment, not cargo's,
# so nothing is rebuilt).
#
#   tests/bench/test-times.sh                 # the whole suite, RUST_TEST_THREADS as set
#   tests/bench/test-times.sh control::       # arguments go to every test binary
#
# Output: target/test-times/<binary>.log for each binary, and a table on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${CARGO_TARGET_DIR:-target}
# Absolute: each binary runs from its package's directory.
out="$(realpath -m "$target")/test-times"
mkdir -p "$out"
mapfile -t bins < <(cargo test --workspace --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"], m["manifest_path"].rsplit("/", 1)[0])
')
for entry in "${bins[@]}"; do
  bin=${entry%% *} dir=${entry#* }
  name=$(basename "$bin")
  start=$(date +%s.%N)
  (cd "$dir" && RUSTC_BOOTSTRAP=1 "$bin" -Zunstable-options --report-time "$@" >"$out/$name.log" 2>&1) || true
  printf '%8.1f s  %s  %s\n' "$(awk "BEGIN { print $(date +%s.%N) - $start }")" "$name" \
    "$(grep -E '^test result' "$out/$name.log" | tail -1)"
done
echo
echo "slowest tests (s):"
cat "$out"/*.log | sed -nE 's/^test (.*) \.\.\. .* <([0-9.]+)s>$/\2 \1/p' | sort -rn | head -25
